/**
 * A `StorageAdapter` on a directory: one file per key, except for keys of an
 * append-only class, which go to a log.
 *
 * Each file holds a versioned record `{ version: 1, key, value }`. A write goes to a
 * unique temp file that is fsynced, renamed over the key's file, and made durable by
 * an fsync of the directory; concurrent writers share one directory fsync (group
 * commit). Several processes may share a root (a host and its children do).
 *
 * A key written once and deleted once, whose log `appendOnlyLog` names (by default
 * the batch records of a durable queue, one log per queue), is appended to that log's
 * current segment instead: one write and one fdatasync, shared by concurrent writes.
 * Reads see those keys exactly as files (see `internal/fileLog.ts` for the layout,
 * torn tails and compaction). A file left at such a key by an older version is still
 * read, listed and deleted.
 *
 * @since 0.1.0
 */
import * as NodePath from "node:path"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import { Conflict, Corrupt, Io, Permission, StorageError } from "../Errors.ts"
import { fsPromises, sha256Hex } from "../internal/builtins.ts"
import { decodeKey, encodeKey, encodeKeyPrefix, isLongName, longNameKeyPrefix } from "../internal/fileKey.ts"
import { type Log, LOG_DIR_PREFIX, logAt, LogProblem } from "../internal/fileLog.ts"
import { errorCode, isProcessAlive } from "../internal/processes.ts"
import { appendOnlyLog } from "../schema/DurableQueueRecord.ts"
import {
  decodeJson,
  encodeExpected,
  encodeJson,
  type Fence,
  fenceHolds,
  fenceRefused,
  jsonText,
  keyError,
  make as makeStorage,
  sortKeys,
  StorageAdapter,
  type StorageAdapterShape,
  validateKey,
  validateKeys
} from "../services/StorageAdapter.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { makeDirectory } from "../internal/makeDirectory.ts"

/** Where a file storage keeps its files. */
export interface FileStorageOptions {
  /** The directory; created (mode 0700) when missing. */
  readonly root: string
  /**
   * Which keys are kept in an append-only log rather than a file each: the name of
   * the key's log (a prefix of the key), or undefined for an ordinary key. Only for
   * keys that are written once and then deleted, like the durable queue's batch
   * records: a log's disk space is given back only once every record in a segment
   * is deleted. Default: `appendOnlyLog` of `schema/DurableQueueRecord.ts` (one log per queue).
   */
  readonly appendOnlyLog?: ((key: string) => string | undefined) | undefined
}

/** The record each file holds. */
const FileRecord = Schema.Struct({
  version: Schema.Literal(1),
  key: Schema.String,
  value: Schema.Unknown
})

/**
 * A file noetic's file storage wrote: `<encoded key>.json`. This storage escapes `.` in
 * every name it writes (and its temp files start with one), so no name of its own ends
 * in `.json`.
 */
const NOETIC_FILE = /^[^.].*\.json$/

const TEMP_PREFIX = ".tmp-"
const DIR_MODE = 0o700
const FILE_MODE = 0o600
const READ_CONCURRENCY = 64
const LOCK_PREFIX = ".lock-"
/** A compare-and-set holds its lock for one read and one write; older locks are abandoned. */
const LOCK_STALE_MS = 10_000
const LOCK_RETRY_MS = 2
const LOCK_RETRY_MAX_MS = 50
/** A log segment this long is sealed; the next write starts a new one. */
const SEGMENT_BYTES = 8 * 1024 * 1024
/** A fully acknowledged log keeps its current segment until it is this long. */
const RECLAIM_BYTES = 1024 * 1024

const ioError = (operation: string, key: string, cause: unknown): StorageError => {
  if (cause instanceof LogProblem) {
    return new StorageError({
      operation,
      reason: cause.reason === "Corrupt"
        ? new Corrupt({ key: cause.key, message: cause.message })
        : new Conflict({ key: cause.key, message: cause.message })
    })
  }
  const code = errorCode(cause)
  const message = cause instanceof Error ? cause.message : String(cause)
  return new StorageError({
    operation,
    reason: code === "EACCES" || code === "EPERM"
      ? new Permission({ key, message, cause })
      : new Io({ key, message, cause })
  })
}

/** A promise rejection handler that turns "no such file" into `value` and rethrows the rest. */
const ifMissing = <A>(value: A) => (cause: unknown): A => {
  if (errorCode(cause) === "ENOENT") return value
  throw cause
}

/** Builds a file storage over `root`, removing temp files left by dead writers. */
export const make = Effect.fnUntraced(function*(options: FileStorageOptions) {
  const root = NodePath.resolve(options.root)
  const pathOf = (name: string) => NodePath.join(root, name)

  yield* Effect.tryPromise({
    try: () => makeDirectory(root, DIR_MODE),
    catch: (cause) => ioError("open", root, cause)
  })
  const names = yield* Effect.tryPromise({
    try: () => fsPromises().readdir(root),
    catch: (cause) => ioError("open", root, cause)
  })
  // noetic's own file storage writes `<encodeURIComponent(key) with % as __>.json`: such
  // files are not this storage's records and are not read. Say so, rather than let a
  // restore come back empty without a word.
  const noeticFiles = names.filter((name) => NOETIC_FILE.test(name)).length
  if (noeticFiles > 0) {
    yield* logWarning(
      `FileStorage ${root}: ${noeticFiles} file(s) in noetic's layout (<encoded key>.json) are not read by this ` +
        `storage; bring them over with \`noetic-effect import-noetic ${root}\` or importNoeticData`
    )
  }
  // Temp names carry the writer's pid: another live process sharing this root may be
  // mid-write, so only the leftovers of dead writers are removed. This process counts as
  // live too: another storage over the same root here may be mid-write.
  yield* Effect.forEach(names, (name) => {
    if (!name.startsWith(TEMP_PREFIX)) return Effect.void
    const pid = Number.parseInt(name.slice(TEMP_PREFIX.length), 10)
    if (Number.isInteger(pid) && (pid === process.pid || isProcessAlive(pid))) return Effect.void
    return Effect.tryPromise({ try: () => fsPromises().rm(pathOf(name), { force: true }), catch: (cause) => ioError("open", name, cause) })
  }, { discard: true })

  let tempCounter = 0
  const tempName = () => `${TEMP_PREFIX}${process.pid}-${++tempCounter}-${Math.random().toString(36).slice(2)}`

  // Group commit of directory fsyncs: a writer that asks while a sync is queued but not
  // started rides on it; one that asks once it has started queues the next. Either way
  // the sync it waits for began after its rename.
  const syncLock = Semaphore.makeUnsafe(1)
  let queued: Deferred.Deferred<void, StorageError> | undefined
  const fsyncRoot = Effect.tryPromise({
    try: async () => {
      const handle = await fsPromises().open(root, "r")
      try {
        await handle.sync()
      } finally {
        await handle.close()
      }
    },
    catch: (cause) => ioError("fsync", root, cause)
  })
  const syncDirectory: Effect.Effect<void, StorageError> = Effect.suspend(() => {
    if (queued !== undefined) return Deferred.await(queued)
    const mine = Deferred.makeUnsafe<void, StorageError>()
    queued = mine
    return syncLock.withPermit(
      Effect.suspend(() => {
        if (queued === mine) queued = undefined
        return Effect.exit(fsyncRoot)
      })
    ).pipe(
      Effect.flatMap((exit) => Deferred.done(mine, exit)),
      Effect.uninterruptible,
      Effect.andThen(Deferred.await(mine))
    )
  })

  // One check for every backend: see validateKey.
  const checkKey = validateKey

  const logName = options.appendOnlyLog ?? appendOnlyLog
  const logSettings = {
    segmentBytes: SEGMENT_BYTES,
    reclaimBytes: RECLAIM_BYTES,
    leaseWaitMs: LOCK_STALE_MS,
    tempPath: () => pathOf(tempName())
  }
  // The directory of the log used last: a queue's writer appends to one log batch after batch.
  let lastLog = { name: "", path: "" }
  const logPath = (name: string): string => {
    if (lastLog.name !== name) lastLog = { name, path: pathOf(LOG_DIR_PREFIX + encodeKey(name)) }
    return lastLog.path
  }
  const logNamed = (name: string, dir?: string): Log =>
    logAt(name, dir === undefined ? logPath(name) : pathOf(dir), root, logSettings)
  /** The name of the log `key` is kept in, or undefined for a key kept in a file of its own. */
  const logNameOf = (key: string): string | undefined => {
    const name = logName(key)
    return name !== undefined && name.length > 0 && key.startsWith(name) ? name : undefined
  }
  // Whether the root may hold a file at a log's key, left by an older version (this one
  // writes those keys to their log only). A long name's key is inside its file: maybe.
  const legacyFiles = names.some((name) => {
    if (name.startsWith(".")) return false
    if (isLongName(name)) return true
    const key = decodeKey(name)
    return key !== undefined && logNameOf(key) !== undefined
  })

  /**
   * Appends the record of `key`, its value's JSON `text` (a tombstone when undefined),
   * to the log `name`; succeeds once it is durable. The log is looked up here, in the
   * same synchronous step as the append: an empty log nobody writes is let go by its
   * readers, and this process must never hold two logs of one directory.
   */
  const appendTo = (name: string, operation: string, key: string, text: string | undefined) =>
    Effect.callback<void, StorageError>((resume) => {
      const cancel = logNamed(name).append(key, text, (cause) => {
        resume(cause === undefined ? Effect.void : Effect.fail(ioError(operation, key, cause)))
      })
      return Effect.sync(cancel)
    })

  /** The value at `key`: from its log when it has one (else a file an older version left), else its file. */
  const readValue = (operation: string, key: string): Effect.Effect<Option.Option<unknown>, StorageError> => {
    const fromFile = Effect.map(readRecord(operation, encodeKey(key), key), Option.map((record) => record.value))
    const name = logNameOf(key)
    if (name === undefined) return fromFile
    return Effect.try({ try: () => logNamed(name).read(key), catch: (cause) => ioError(operation, key, cause) }).pipe(
      Effect.flatMap((text) =>
        text === undefined ? fromFile : Effect.map(decodeJson(operation, key, text), Option.some)
      )
    )
  }

  const readRecord = Effect.fnUntraced(function*(operation: string, name: string, expectedKey: string | undefined) {
    const text = yield* Effect.tryPromise({
      try: () => fsPromises().readFile(pathOf(name), "utf8").catch(ifMissing(undefined)),
      catch: (cause) => ioError(operation, expectedKey ?? name, cause)
    })
    if (text === undefined) return Option.none<{ key: string; value: unknown }>()
    const label = expectedKey ?? name
    const json = yield* decodeJson(operation, label, text)
    const record = yield* Schema.decodeUnknownEffect(FileRecord)(json).pipe(
      Effect.mapError((error) =>
        new StorageError({ operation, reason: new Corrupt({ key: label, message: `not a storage record: ${error.message}` }) })
      )
    )
    if (expectedKey !== undefined && record.key !== expectedKey) {
      return yield* new StorageError({
        operation,
        reason: new Corrupt({ key: expectedKey, message: `the file holds the record of another key (${JSON.stringify(record.key)})` })
      })
    }
    return Option.some({ key: record.key, value: record.value })
  })

  const get = (key: string) => checkKey("get", key).pipe(Effect.andThen(readValue("get", key)))

  const set = (key: string, value: unknown): Effect.Effect<void, StorageError> =>
    Effect.suspend(() => {
      const refused = keyError("set", key)
      if (refused !== undefined) return Effect.fail(refused)
      // A value with no JSON form (undefined, a function) is refused before anything is
      // written: the value already stored stays as it was.
      const text = jsonText("set", key, value)
      if (typeof text !== "string") return Effect.fail(text)
      const name = logNameOf(key)
      // A log append is one step: a queue's writer awaits one per batch.
      if (name !== undefined) return appendTo(name, "set", key, text)
      // The record file's text, as `JSON.stringify` writes `{ version, key, value }`.
      return writeFile(key, `{"version":1,"key":${JSON.stringify(key)},"value":${text}}`)
    })

  /** Writes `text`, a whole record file's text, as the file of `key`: temp file, fsync, rename, directory fsync. */
  const writeFile = Effect.fnUntraced(function*(key: string, text: string) {
    const temp = pathOf(tempName())
    yield* Effect.tryPromise({
      try: async () => {
        const handle = await fsPromises().open(temp, "wx", FILE_MODE)
        try {
          await handle.writeFile(text, "utf8")
          await handle.sync()
        } finally {
          await handle.close()
        }
        await fsPromises().rename(temp, pathOf(encodeKey(key)))
      },
      catch: (cause) => ioError("set", key, cause)
    }).pipe(Effect.tapError(() => Effect.promise(() => fsPromises().rm(temp, { force: true }))))
    yield* syncDirectory
  })

  const remove = Effect.fnUntraced(function*(key: string) {
    yield* checkKey("delete", key)
    const name = logNameOf(key)
    if (name !== undefined) {
      const holds = yield* Effect.try({ try: () => logNamed(name).holds(key), catch: (cause) => ioError("delete", key, cause) })
      if (holds) yield* appendTo(name, "delete", key, undefined)
      // This version writes a log's keys to the log only: a file at one is an older
      // version's, and a root that held none of those when opened has none.
      if (!legacyFiles) return
    }
    const removed = yield* Effect.tryPromise({
      try: () => fsPromises().unlink(pathOf(encodeKey(key))).then(() => true, ifMissing(false)),
      catch: (cause) => ioError("delete", key, cause)
    })
    if (removed) yield* syncDirectory
  })

  const list = Effect.fnUntraced(function*(prefix: string) {
    const names = yield* Effect.tryPromise({
      try: () => fsPromises().readdir(root),
      catch: (cause) => ioError("list", prefix, cause)
    })
    const keys: Array<string> = []
    const longNames: Array<string> = []
    const logs: Array<Log> = []
    // A root holds every key of every prefix: most names are skipped by their start.
    const plainPrefix = encodeKeyPrefix(prefix)
    for (const name of names) {
      if (name.startsWith(LOG_DIR_PREFIX)) {
        const encoded = name.slice(LOG_DIR_PREFIX.length)
        const known = isLongName(encoded) ? longNameKeyPrefix(encoded) : decodeKey(encoded)
        if (known === undefined) continue
        if (known.startsWith(prefix) || prefix.startsWith(known)) logs.push(logNamed(known, name))
        continue
      }
      if (name.startsWith(".")) continue
      if (isLongName(name)) {
        const known = longNameKeyPrefix(name)
        if (known.startsWith(prefix) || prefix.startsWith(known)) longNames.push(name)
        continue
      }
      if (!name.startsWith(plainPrefix)) continue
      const key = decodeKey(name)
      if (key !== undefined && key.startsWith(prefix)) keys.push(key)
    }
    yield* Effect.forEach(longNames, (name) =>
      Effect.map(readRecord("list", name, undefined), (record) => {
        if (Option.isSome(record) && record.value.key.startsWith(prefix)) keys.push(record.value.key)
      }), { concurrency: READ_CONCURRENCY, discard: true })
    if (logs.length === 0) return sortKeys(keys)
    const fromLogs = yield* Effect.forEach(logs, (log) =>
      Effect.try({ try: () => log.keys(prefix), catch: (cause) => ioError("list", prefix, cause) }), {
      concurrency: READ_CONCURRENCY
    })
    // A key an older version left as a file may be in its log too.
    return sortKeys([...new Set(keys.concat(...fromLogs))])
  })

  const getMany = Effect.fnUntraced(function*(keys: ReadonlyArray<string>) {
    yield* validateKeys("getMany", keys)
    const found = new Map<string, unknown>()
    yield* Effect.forEach(keys, (key) =>
      Effect.map(get(key), (value) => {
        if (Option.isSome(value)) found.set(key, value.value)
      }), { concurrency: READ_CONCURRENCY, discard: true })
    return found as ReadonlyMap<string, unknown>
  })

  // compareAndSet must hold across processes sharing the root, so it takes a per-key
  // lock file created with O_EXCL (named by a hash of the key, dot-prefixed so list
  // skips it) around its read and write; users of one key in this process queue on
  // a semaphore of that key first. A lock whose holder died, or that is older than LOCK_STALE_MS,
  // is broken. It is atomic against other compareAndSets of the key, not against a
  // plain set, which takes no lock. A fenced write takes the lock of its fence key, so
  // it and a compareAndSet of the lease exclude each other across processes.
  const keyLocks = new Map<string, { readonly semaphore: Semaphore.Semaphore; users: number }>()
  const lockPath = (key: string) => pathOf(`${LOCK_PREFIX}${sha256Hex(key)}`)

  const readLock = (path: string) =>
    fsPromises().readFile(path, "utf8").then(
      (text) => fsPromises().stat(path).then((stat) => ({ text, mtimeMs: stat.mtimeMs }), ifMissing(undefined)),
      ifMissing(undefined)
    )

  // Breaking renames the lock aside first and deletes it only if it is the stale one
  // that was read; a lock taken in between is linked back (link does not overwrite).
  const breakIfStale = async (path: string) => {
    const lock = await readLock(path)
    if (lock === undefined) return
    const pid = Number.parseInt(lock.text, 10)
    // A lock whose holder cannot be read is treated as alive until it is stale by age.
    const holderAlive = !Number.isInteger(pid) || pid === process.pid || isProcessAlive(pid)
    if (holderAlive && Date.now() - lock.mtimeMs < LOCK_STALE_MS) return
    const aside = pathOf(tempName())
    const moved = await fsPromises().rename(path, aside).then(() => true, ifMissing(false))
    if (!moved) return
    const text = await fsPromises().readFile(aside, "utf8")
    if (text !== lock.text) await fsPromises().link(aside, path).catch(() => undefined)
    await fsPromises().rm(aside, { force: true })
  }

  const acquireLock = (operation: string, key: string) =>
    Effect.tryPromise({
      try: async () => {
        const path = lockPath(key)
        const token = `${process.pid} ${Math.random().toString(36).slice(2)}`
        // Real time, not the Effect clock: the wait is for another OS process.
        for (let delay = LOCK_RETRY_MS;; delay = Math.min(delay * 2, LOCK_RETRY_MAX_MS)) {
          // The lock appears with its token already in it (written aside, then linked,
          // and link never overwrites): a lock seen empty would look abandoned.
          const aside = pathOf(tempName())
          await fsPromises().writeFile(aside, token, { flag: "wx", mode: FILE_MODE })
          const created = await fsPromises().link(aside, path).then(
            () => true,
            (cause: unknown) => {
              if (errorCode(cause) === "EEXIST") return false
              throw cause
            }
          ).finally(() => fsPromises().rm(aside, { force: true }))
          if (created) return { path, token }
          await breakIfStale(path)
          await new Promise((resolve) => setTimeout(resolve, delay))
        }
      },
      catch: (cause) => ioError(operation, key, cause)
    })

  const releaseLock = (lock: { readonly path: string; readonly token: string }) =>
    Effect.promise(() =>
      fsPromises().readFile(lock.path, "utf8").then(
        (text) => (text === lock.token ? fsPromises().rm(lock.path, { force: true }) : undefined),
        () => undefined
      )
    )

  /** Runs `use` holding the lock of `key`: first this process's turn, then the lock file. */
  const withKeyLock = <A>(
    operation: string,
    key: string,
    use: Effect.Effect<A, StorageError>
  ): Effect.Effect<A, StorageError> =>
    Effect.suspend(() => {
      let entry = keyLocks.get(key)
      if (entry === undefined) {
        entry = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
        keyLocks.set(key, entry)
      }
      const held = entry
      held.users++
      return held.semaphore.withPermit(Effect.acquireUseRelease(acquireLock(operation, key), () => use, releaseLock))
        .pipe(Effect.ensuring(Effect.sync(() => {
          if (--held.users === 0) keyLocks.delete(key)
        })))
    })

  /** Fails unless the record at `fence.key` holds `fence.token`; run under that key's lock. */
  const checkFence = Effect.fnUntraced(function*(operation: string, key: string, fence: Fence) {
    const current = yield* readValue(operation, fence.key)
    if (Option.isNone(current) || !fenceHolds(current.value, fence.token)) {
      return yield* fenceRefused(operation, key, fence)
    }
  })

  const asOperation = (operation: string) => (error: StorageError) =>
    new StorageError({ operation, reason: error.reason })

  const setFenced = Effect.fnUntraced(function*(key: string, value: unknown, fence: Fence) {
    yield* checkKey("setFenced", key)
    yield* checkKey("setFenced", fence.key)
    yield* encodeJson("setFenced", key, value)
    yield* withKeyLock(
      "setFenced",
      fence.key,
      Effect.andThen(checkFence("setFenced", key, fence), Effect.mapError(set(key, value), asOperation("setFenced")))
    )
  })

  const deleteFenced = Effect.fnUntraced(function*(key: string, fence: Fence) {
    yield* checkKey("deleteFenced", key)
    yield* checkKey("deleteFenced", fence.key)
    yield* withKeyLock(
      "deleteFenced",
      fence.key,
      Effect.andThen(checkFence("deleteFenced", key, fence), Effect.mapError(remove(key), asOperation("deleteFenced")))
    )
  })

  const compareAndSet = Effect.fnUntraced(function*(key: string, expected: Option.Option<unknown>, next: unknown) {
    yield* checkKey("compareAndSet", key)
    const expectedText = yield* encodeExpected(key, expected)
    // Refuse a value JSON cannot hold before taking the lock.
    yield* encodeJson("compareAndSet", key, next)
    return yield* withKeyLock(
      "compareAndSet",
      key,
      Effect.gen(function*() {
        const current = yield* readValue("compareAndSet", key)
        const currentText = Option.isSome(current) ? JSON.stringify(current.value) : undefined
        if (currentText !== expectedText) return false
        yield* set(key, next).pipe(Effect.mapError(asOperation("compareAndSet")))
        return true
      })
    )
  })

  return StorageAdapter.of(
    makeStorage({ takesJsonText: true, get, set, delete: remove, list, getMany, compareAndSet, setFenced, deleteFenced })
  ) satisfies StorageAdapterShape
})

/** A file storage over `options.root` for the life of the layer. */
export const layer = (options: FileStorageOptions): Layer.Layer<StorageAdapter, StorageError> =>
  Layer.effect(StorageAdapter, make(options))
