/**
 * The implementation of `DurableStreams` over a `StorageAdapter`; see model.ts for the
 * records and docs/architecture.md#http-durable-streams for where each rule lives.
 *
 * Appends to one path are serialised in this process by a lock; across processes the
 * compare-and-set of the next chunk key decides (the loser re-reads the head and
 * validates again), so producer and `Stream-Seq` checks hold for several servers on one
 * Postgres too.
 */
import { Buffer } from "node:buffer"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import type { StorageError } from "../../Errors.ts"
import {
  type AppendInput,
  type AppendResult,
  type CreateInput,
  type CreateResult,
  type DurableStreamsOptions,
  type ReadResult,
  StreamError,
  type StreamInfo
} from "./types.ts"
import type { StorageAdapterShape } from "../../services/StorageAdapter.ts"
import { randomId } from "../randomId.ts"
import { bodyData, makeQueues, parseProducer, type PendingAppend, planGroup } from "./appends.ts"
import * as ChunkCache from "./chunkCache.ts"
import * as Reads from "./reads.ts"
import {
  appendEndAfter,
  type ChunkRecord,
  chunkBytes,
  chunkKey,
  chunkMessages,
  chunkPrefix,
  emptyHead,
  formatOffset,
  type Head,
  headAfter,
  isJson,
  jsonChunkData,
  mediaType,
  messagesWithin,
  ownerOf,
  parseDecimal,
  parseOffset,
  parseTimestamp,
  type PathRecord,
  pathKey,
  type Position,
} from "./model.ts"

const DEFAULT_CONTENT_TYPE = "application/octet-stream"
const MAX_CACHED_HEADS = 10_000
const DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
/** The most offset units the appends of one group commit put in one chunk (one larger append is a chunk alone). */
const MAX_CHUNK_UNITS = 64 * 1024
const EMPTY = Buffer.alloc(0)

const fail = (reason: StreamError["reason"], message: string, extra: Partial<StreamError> = {}) =>
  Effect.fail(new StreamError({ reason, message, ...extra }))

const storageFailed = (error: StorageError) => new StreamError({ reason: "Storage", message: error.message })

/** Builds the service's operations. */
export const make = Effect.fnUntraced(function*(storage: StorageAdapterShape, options: DurableStreamsOptions) {
  if (storage.compareAndSet === undefined) {
    return yield* Effect.die(new Error("DurableStreams needs a storage with compareAndSet"))
  }
  const cas = storage.compareAndSet
  const maxReadBytes = options.maxReadBytes ?? 1024 * 1024
  const cache = ChunkCache.make(options.cacheBytes ?? DEFAULT_CACHE_BYTES)
  const { chunksFrom, joinBytes } = Reads.make(storage, cache, maxReadBytes)
  const pollMillis = options.pollMillis ?? (options.signals === undefined ? 1_000 : 30_000)
  /** The last head seen per stream id: a hint, always checked against the next chunk key. */
  const heads = new Map<string, Head>()
  /** Keeps a head, the most recent last; the oldest is forgotten past MAX_CACHED_HEADS (it is only a hint). */
  const rememberHead = (id: string, head: Head) => {
    heads.delete(id)
    heads.set(id, head)
    if (heads.size > MAX_CACHED_HEADS) heads.delete(heads.keys().next().value!)
  }
  const waiters = new Map<string, Set<() => void>>()
  const locks = new Map<string, { readonly lock: Semaphore.Semaphore; users: number }>()

  const wake = (id: string) => {
    const set = waiters.get(id)
    if (set === undefined) return
    waiters.delete(id)
    for (const resume of set) resume()
  }

  if (options.signals !== undefined) {
    yield* options.signals.changes.pipe(
      Stream.runForEach((id) => Effect.sync(() => wake(id))),
      Effect.forkScoped
    )
  }

  const announce = (id: string) =>
    Effect.andThen(Effect.sync(() => wake(id)), options.signals === undefined ? Effect.void : options.signals.publish(id))

  const withLock = <A, E>(path: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      let entry = locks.get(path)
      if (entry === undefined) {
        entry = { lock: Semaphore.makeUnsafe(1), users: 0 }
        locks.set(path, entry)
      }
      const held = entry
      held.users++
      return held.lock.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          held.users--
          if (held.users === 0) locks.delete(path)
        }))
      )
    })

  const getValue = (key: string) => Effect.mapError(storage.get(key), storageFailed)

  const loadRecord = (path: string) =>
    Effect.map(getValue(pathKey(path)), (value) => Option.getOrUndefined(value) as PathRecord | undefined)

  const isExpired = (record: PathRecord, now: number): boolean => {
    if (record.exp !== undefined && (parseTimestamp(record.exp) ?? Infinity) <= now) return true
    return record.ttl !== undefined && record.t + record.ttl * 1000 <= now
  }

  /** The record at `path` that a client may use: none (404), soft-deleted (410), expired (removed, 404). */
  const liveRecord = (path: string): Effect.Effect<PathRecord, StreamError> =>
    Effect.gen(function*() {
      const record = yield* loadRecord(path)
      if (record === undefined) return yield* fail("NotFound", `no stream at ${path}`)
      if (record.gone === 1) return yield* fail("Gone", `the stream at ${path} was deleted`)
      const now = yield* Clock.currentTimeMillis
      if (isExpired(record, now)) {
        yield* removeRecord(path, record)
        return yield* fail("NotFound", `the stream at ${path} expired`)
      }
      return record
    })

  /** Resets a sliding TTL (stored, so every process sees it); at most a few writes a second. */
  const touch = (path: string, record: PathRecord) =>
    record.ttl === undefined ? Effect.void : Effect.gen(function*() {
      if (record.ttl === undefined) return
      const now = yield* Clock.currentTimeMillis
      if (now - record.t < Math.min(1_000, record.ttl * 250)) return
      yield* Effect.ignore(cas(pathKey(path), Option.some(record), { ...record, t: now }))
    })

  const readChunk = (id: string, index: number) =>
    Effect.map(getValue(chunkKey(id, index)), (value) => Option.getOrUndefined(value) as ChunkRecord | undefined)

  /**
   * The head of a stream: the cached one moved on past every chunk that exists since.
   * A writer may `trustCache`: its compare-and-set of the next chunk key fails anyway
   * when another process wrote it, and then it looks again.
   */
  const currentHead = (record: PathRecord, trustCache = false): Effect.Effect<Head, StreamError> =>
    Effect.gen(function*() {
      let head = heads.get(record.id)
      if (head !== undefined && trustCache) return head
      if (head === undefined) head = yield* discoverHead(record)
      for (;;) {
        const next = yield* readChunk(record.id, head.index)
        if (next === undefined) break
        head = headAfter(head.index, next)
      }
      rememberHead(record.id, head)
      return head
    })

  /** Finds the tail of a stream this process has not seen: doubling probes, then a binary search. */
  const discoverHead = (record: PathRecord): Effect.Effect<Head, StreamError> =>
    Effect.gen(function*() {
      const start = record.base.index
      if ((yield* readChunk(record.id, start)) === undefined) return emptyHead(record.base)
      let low = start
      let step = 1
      let high = start + step
      while ((yield* readChunk(record.id, high)) !== undefined) {
        low = high
        step *= 2
        high = start + step
      }
      while (high - low > 1) {
        const mid = Math.floor((low + high) / 2)
        if ((yield* readChunk(record.id, mid)) !== undefined) low = mid
        else high = mid
      }
      const last = yield* readChunk(record.id, low)
      return last === undefined ? emptyHead(record.base) : headAfter(low, last)
    })

  const infoOf = (record: PathRecord, head: Head): StreamInfo => ({
    contentType: record.ct,
    nextOffset: formatOffset(head),
    closed: head.closed,
    ttlSeconds: record.ttl,
    expiresAt: record.exp
  })

  /** Commits `chunk` at the head's index; fails with none when another writer took the index. */
  const commit = (record: PathRecord, index: number, chunk: ChunkRecord) =>
    Effect.mapError(cas(chunkKey(record.id, index), Option.none(), chunk), storageFailed)

  // ---------------------------------------------------------------- delete / GC

  const deleteChunks = (id: string) =>
    Effect.gen(function*() {
      const keys = yield* Effect.mapError(storage.list(chunkPrefix(id)), storageFailed)
      if (storage.writeAll !== undefined && keys.length > 0) {
        yield* Effect.mapError(storage.writeAll(keys.map((key) => ({ op: "delete" as const, key }))), storageFailed)
      } else {
        yield* Effect.forEach(keys, (key) => Effect.mapError(storage.delete(key), storageFailed), { discard: true })
      }
      heads.delete(id)
      cache.drop(id)
    })

  /** Changes a record by compare-and-set until it holds; none when the record is gone. */
  const updateRecord = (path: string, change: (record: PathRecord) => PathRecord | undefined) =>
    Effect.gen(function*() {
      for (;;) {
        const record = yield* loadRecord(path)
        if (record === undefined) return undefined
        const next = change(record)
        if (next === undefined) return record
        if (yield* Effect.mapError(cas(pathKey(path), Option.some(record), next), storageFailed)) return next
      }
    })

  /** Drops one fork's reference to the stream at `path`, collecting it when it was deleted and unread. */
  const releaseSource = (path: string, sourceId: string): Effect.Effect<void, StreamError> =>
    Effect.gen(function*() {
      const after = yield* updateRecord(
        path,
        (record) => record.id === sourceId ? { ...record, forks: Math.max(0, record.forks - 1) } : undefined
      )
      if (after !== undefined && after.id === sourceId && after.gone === 1 && after.forks === 0) {
        yield* purge(path, after)
      }
    })

  /** Removes a record and its chunks for good, then releases what it forked from. */
  const purge = (path: string, record: PathRecord): Effect.Effect<void, StreamError> =>
    Effect.gen(function*() {
      const removed = yield* Effect.mapError(
        storage.writeAll !== undefined
          ? Effect.as(storage.writeAll([{ op: "delete", key: pathKey(path) }]), true)
          : Effect.as(storage.delete(pathKey(path)), true),
        storageFailed
      )
      if (!removed) return
      yield* deleteChunks(record.id)
      yield* announce(record.id)
      if (record.fork !== undefined && record.anc.length > 0) yield* releaseSource(record.fork.path, record.anc[0]![0])
    })

  /** Deletes the stream `record` at `path`: soft while forks read it, else for good. */
  const removeRecord = (path: string, record: PathRecord): Effect.Effect<void, StreamError> =>
    record.forks > 0
      ? Effect.asVoid(updateRecord(path, (current) => current.id === record.id ? { ...current, gone: 1 } : undefined))
      : Effect.gen(function*() {
        const swapped = yield* Effect.mapError(cas(pathKey(path), Option.some(record), { ...record, gone: 1 }), storageFailed)
        if (!swapped) return
        yield* purge(path, { ...record, gone: 1 })
      })

  // ---------------------------------------------------------------- reads

  const chunkAt = (record: PathRecord, index: number) => readChunk(ownerOf(record, index), index)

  /** Where a read offset points: -1 / absent is the start, `now` the tail; a token must be at or before the tail. */
  const resolveOffset = (record: PathRecord, head: Head, offset: string | undefined) =>
    Effect.suspend((): Effect.Effect<Position, StreamError> => {
      if (offset === undefined || offset === "-1") return Effect.succeed({ index: 0, bytes: 0 })
      if (offset === "now") return Effect.succeed({ index: head.index, bytes: head.bytes })
      const position = parseOffset(offset)
      if (position === undefined) return fail("BadRequest", `malformed offset ${JSON.stringify(offset)}`)
      if (position.index > head.index || (position.index === head.index && position.bytes !== head.bytes)) {
        return fail("BadRequest", `offset ${offset} is beyond the tail of ${formatOffset(head)}`)
      }
      return Effect.succeed(position)
    })

  const read = (path: string, offset: string | undefined): Effect.Effect<ReadResult, StreamError> =>
    Effect.gen(function*() {
      const record = yield* liveRecord(path)
      yield* touch(path, record)
      const head = yield* currentHead(record)
      const start = yield* resolveOffset(record, head, offset)
      const json = isJson(record.ct)
      const chunks = offset === "now" ? [] : yield* chunksFrom(record, start, head, json)
      const messages: Array<string> = []
      if (json) for (const chunk of chunks) for (const message of chunk.messages!) messages.push(message)
      const last = chunks[chunks.length - 1]
      const next: Position = last === undefined ? start : { index: start.index + chunks.length, bytes: last.a + last.z }
      const upToDate = next.index === head.index
      return {
        contentType: record.ct,
        json,
        bytes: json ? EMPTY : joinBytes(record, start.index, chunks),
        messages,
        startOffset: formatOffset(start),
        nextOffset: formatOffset(next),
        upToDate,
        closed: upToDate && head.closed,
        streamId: record.id
      }
    })

  const head = (path: string) =>
    Effect.gen(function*() {
      const record = yield* liveRecord(path)
      return infoOf(record, yield* currentHead(record))
    })

  /** Registers a wake-up for appends to and deletes of the stream `id`; the returned function removes it. */
  const listen = (id: string, notify: () => void) => {
    let set = waiters.get(id)
    if (set === undefined) waiters.set(id, set = new Set())
    set.add(notify)
    return () => {
      const current = waiters.get(id)
      current?.delete(notify)
      if (current?.size === 0) waiters.delete(id)
    }
  }

  /**
   * Waits for the stream to move past `position` (or close), a wake-up, or `millis`:
   * true when it moved or may have, undefined when the time passed. The wake-up is
   * registered before the head is looked at, so an append in between is never missed.
   */
  const waitOnce = (record: PathRecord, position: Position, millis: () => number | undefined) =>
    Effect.suspend(() => {
      let woken = false
      let resume: (() => void) | undefined
      const stop = listen(record.id, () => {
        woken = true
        resume?.()
      })
      return Effect.gen(function*() {
        // What this process committed or read is enough to know the stream moved on.
        const cached = heads.get(record.id)
        if (cached !== undefined && (cached.index > position.index || cached.closed)) return true
        const current = yield* currentHead(record)
        if (current.index > position.index || current.closed || woken) return true
        const wait = millis()
        if (wait === undefined) return false
        // One callback with a timer (not a race of two fibers): a live reader waits here once per wake-up.
        yield* Effect.callback<void>((done) => {
          if (woken) return done(Effect.void)
          const timer = setTimeout(() => {
            resume = undefined
            done(Effect.void)
          }, wait)
          resume = () => {
            resume = undefined
            clearTimeout(timer)
            done(Effect.void)
          }
          return Effect.sync(() => clearTimeout(timer))
        })
        return woken ? true : undefined
      }).pipe(Effect.ensuring(Effect.sync(stop)))
    })

  const awaitChange = (path: string, offset: string, timeout: Duration.Input) =>
    Effect.gen(function*() {
      const position = parseOffset(offset)
      if (position === undefined) return yield* fail("BadRequest", `malformed offset ${JSON.stringify(offset)}`)
      const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(Duration.fromInputUnsafe(timeout))
      for (;;) {
        const record = yield* liveRecord(path)
        const now = yield* Clock.currentTimeMillis
        // Woken by an append or a delete (here, or announced by another process): the
        // caller's read finds out which, without this wait reading the stream again.
        const changed = yield* waitOnce(record, position, () => now >= deadline ? undefined : Math.min(pollMillis, deadline - now))
        if (changed !== undefined) return changed
      }
    })

  // ---------------------------------------------------------------- appends

  /** The data of a create's body for a stream of `contentType`, or why it is refused. */
  const bodyChunk = (contentType: string, body: Uint8Array, forCreate: boolean) =>
    Effect.suspend(() => {
      const data = bodyData(contentType, body, forCreate)
      return data instanceof StreamError ? Effect.fail(data) : Effect.succeed(data)
    })

  const append = (input: AppendInput): Effect.Effect<AppendResult, StreamError> =>
    Effect.suspend(() => {
      const producer = parseProducer(input)
      if (producer instanceof StreamError) return Effect.fail(producer)
      const close = input.close === true
      if (input.body.byteLength === 0 && !close) return fail("BadRequest", "an append needs a body")
      return queues.submit(input.path, input, producer, close)
    })

  /**
   * Commits a batch of appends to one path in their order, under the path's lock: the
   * record and the head are loaded once, each append is checked against the head the
   * ones before it left, and the data of a group of them is one chunk committed by one
   * compare-and-set (`planGroup`). When another process took the index, the record and
   * head are read again and the group is decided again. Readers are woken once, after
   * the batch.
   */
  const appendBatch = (path: string, batch: ReadonlyArray<PendingAppend>): Effect.Effect<void> =>
    withLock(
      path,
      Effect.gen(function*() {
        let todo = batch
        let woken: string | undefined
        let touched: PathRecord | undefined
        const settle = (items: ReadonlyArray<PendingAppend>, exit: Exit.Exit<AppendResult, StreamError>) => {
          for (const item of items) item.exit = exit
        }
        load: while (todo.length > 0) {
          if (touched !== undefined) yield* touch(path, touched)
          touched = undefined
          const loaded = yield* Effect.exit(liveRecord(path))
          if (loaded._tag === "Failure") {
            settle(todo, Exit.failCause(loaded.cause))
            break
          }
          const record = loaded.value
          const cached = yield* Effect.exit(currentHead(record, true))
          if (cached._tag === "Failure") {
            settle(todo, Exit.failCause(cached.cause))
            break
          }
          let head = cached.value
          while (todo.length > 0) {
            const plan = planGroup(record, head, todo, MAX_CHUNK_UNITS)
            const group = todo.slice(0, plan.taken)
            if (plan.chunk === undefined) {
              if (plan.refused) {
                // A refusal is checked against storage first: another process may have moved the head.
                const fresh = yield* Effect.exit(currentHead(record))
                if (fresh._tag === "Failure") {
                  settle(group, Exit.failCause(fresh.cause))
                  todo = todo.slice(plan.taken)
                  continue
                }
                if (fresh.value.index !== head.index) continue load
              }
              group.forEach((item, k) => (item.exit = plan.exits[k]))
              if (plan.exits.some(Exit.isSuccess)) touched = record
              todo = todo.slice(plan.taken)
              continue
            }
            const won = yield* Effect.exit(commit(record, head.index, plan.chunk))
            if (won._tag === "Success" && won.value) {
              cache.put(record.id, head.index, plan.entry!)
              head = plan.after
              rememberHead(record.id, head)
              woken = record.id
              touched = record
              group.forEach((item, k) => (item.exit = plan.exits[k]))
              todo = todo.slice(plan.taken)
              continue
            }
            // Another process committed this index first (or the write's fate is unknown):
            // read again, and decide the group again, but for the writers of a failed write.
            heads.delete(record.id)
            if (won._tag === "Failure") {
              group.forEach((item, k) => {
                if (plan.writes[k]) item.exit = Exit.failCause(won.cause)
              })
              todo = todo.filter((item) => item.exit === undefined)
            }
            continue load
          }
        }
        if (touched !== undefined) yield* touch(path, touched)
        if (woken !== undefined) yield* announce(woken)
      })
    )

  const queues = makeQueues(appendBatch)

  // ---------------------------------------------------------------- create

  interface CreateConfig {
    readonly ct: string
    readonly ttl: number | undefined
    readonly exp: string | undefined
    readonly closed: boolean
    readonly fork: PathRecord["fork"]
  }

  const parseCreate = (input: CreateInput) =>
    Effect.gen(function*() {
      const ttl = input.ttl === undefined ? undefined : parseDecimal(input.ttl.trim())
      if (input.ttl !== undefined && ttl === undefined) {
        return yield* fail("BadRequest", `Stream-TTL must be a non-negative integer of seconds, not ${JSON.stringify(input.ttl)}`)
      }
      if (input.expiresAt !== undefined && parseTimestamp(input.expiresAt.trim()) === undefined) {
        return yield* fail("BadRequest", `Stream-Expires-At must be an RFC 3339 timestamp, not ${JSON.stringify(input.expiresAt)}`)
      }
      if (ttl !== undefined && input.expiresAt !== undefined) {
        return yield* fail("BadRequest", "give Stream-TTL or Stream-Expires-At, not both")
      }
      if (input.forkedFrom === undefined && (input.forkOffset !== undefined || input.forkSubOffset !== undefined)) {
        return yield* fail("BadRequest", "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From")
      }
      const sub = input.forkSubOffset === undefined ? 0 : parseDecimal(input.forkSubOffset.trim())
      if (sub === undefined) return yield* fail("BadRequest", "Stream-Fork-Sub-Offset must be a non-negative integer")
      if (input.forkOffset !== undefined && parseOffset(input.forkOffset) === undefined) {
        return yield* fail("BadRequest", `malformed Stream-Fork-Offset ${JSON.stringify(input.forkOffset)}`)
      }
      const contentType = input.contentType === undefined || input.contentType.trim() === ""
        ? undefined
        : input.contentType.trim()
      return { ttl, exp: input.expiresAt?.trim(), sub, contentType }
    })

  const create = (input: CreateInput): Effect.Effect<CreateResult, StreamError> =>
    Effect.gen(function*() {
      const parsed = yield* parseCreate(input)
      return yield* withLock(input.path, createLocked(input, parsed))
    })

  const sameConfig = (record: PathRecord, head: Head, wanted: CreateConfig): boolean =>
    mediaType(record.ct) === mediaType(wanted.ct) &&
    record.ttl === wanted.ttl &&
    (record.exp === undefined ? wanted.exp === undefined : wanted.exp !== undefined &&
      parseTimestamp(record.exp) === parseTimestamp(wanted.exp)) &&
    head.closed === wanted.closed &&
    JSON.stringify(record.fork ?? null) === JSON.stringify(wanted.fork ?? null)

  const createLocked = (
    input: CreateInput,
    parsed: Effect.Success<ReturnType<typeof parseCreate>>
  ): Effect.Effect<CreateResult, StreamError> =>
    Effect.gen(function*() {
      const existing = yield* existingRecord(input.path)
      const now = yield* Clock.currentTimeMillis
      const id = yield* randomId
      let base: Position = { index: 0, bytes: 0 }
      let anc: ReadonlyArray<readonly [string, number]> = []
      let ct = parsed.contentType ?? DEFAULT_CONTENT_TYPE
      let ttl = parsed.ttl
      let exp = parsed.exp
      let prefix: { readonly d: string; readonly z: number; readonly n?: number } | undefined
      let fork: PathRecord["fork"]
      let source: PathRecord | undefined
      if (input.forkedFrom !== undefined) {
        source = yield* liveRecord(input.forkedFrom).pipe(
          Effect.catchIf((error) => error.reason === "Gone", () => fail("Conflict", `the source ${input.forkedFrom} was deleted`))
        )
        if (parsed.contentType !== undefined && mediaType(parsed.contentType) !== mediaType(source.ct)) {
          return yield* fail("Conflict", `a fork has its source's content type ${source.ct}`)
        }
        ct = parsed.contentType ?? source.ct
        if (ttl === undefined && exp === undefined) {
          ttl = source.ttl
          exp = source.exp
        }
        const sourceHead = yield* currentHead(source)
        const at = input.forkOffset === undefined ? sourceHead : parseOffset(input.forkOffset)!
        if (at.index > sourceHead.index) {
          return yield* fail("BadRequest", `Stream-Fork-Offset ${input.forkOffset} is beyond the source's tail`)
        }
        base = { index: at.index, bytes: at.bytes }
        if (at.index === sourceHead.index) base = { index: sourceHead.index, bytes: sourceHead.bytes }
        anc = [[source.id, source.base.index], ...source.anc]
        fork = { path: input.forkedFrom, offset: formatOffset(base), sub: parsed.sub }
        const cut = base.index < sourceHead.index ? yield* chunkAt(source, base.index) : undefined
        // An offset inside a chunk (where one of its appends ended) or a sub-offset: the
        // fork's first chunk of its own holds that chunk's data up to there.
        const skip = cut === undefined ? 0 : base.bytes - cut.a
        if (cut !== undefined && skip !== 0 && !(skip > 0 && skip < cut.z && (cut.e?.includes(skip) ?? false))) {
          return yield* fail("BadRequest", `Stream-Fork-Offset ${input.forkOffset} is not a position of the source`)
        }
        if (parsed.sub > 0 || skip > 0) {
          prefix = cut === undefined ? undefined : subPrefix(source.ct, cut, skip, parsed.sub)
          if (prefix === undefined) {
            return yield* fail("BadRequest", `Stream-Fork-Sub-Offset ${parsed.sub} is past the next data boundary`)
          }
          base = { index: base.index, bytes: cut!.a }
        }
      }
      const wanted: CreateConfig = { ct, ttl, exp, closed: input.closed === true, fork }
      if (existing !== undefined) {
        if (existing.gone === 1) return yield* fail("Conflict", `the stream at ${input.path} was deleted; its path is kept for its forks`)
        const existingHead = yield* currentHead(existing)
        if (!sameConfig(existing, existingHead, wanted)) {
          return yield* fail("Conflict", `a stream with another configuration exists at ${input.path}`)
        }
        return { ...infoOf(existing, existingHead), created: false }
      }
      const body = yield* bodyChunk(ct, input.body ?? new Uint8Array(0), true)
      const record: PathRecord = {
        v: 1,
        id,
        ct,
        ...(ttl === undefined ? {} : { ttl }),
        ...(exp === undefined ? {} : { exp }),
        t: now,
        ...(input.closed === true ? { cc: 1 as const } : {}),
        base,
        anc,
        ...(fork === undefined ? {} : { fork }),
        forks: 0
      }
      let head = emptyHead(base)
      const data = mergeData(ct, prefix, body)
      if (data.z > 0 || input.closed === true) {
        const chunk: ChunkRecord = { a: base.bytes, ...data, ...(input.closed === true ? { c: 1 as const } : {}) }
        yield* commit(record, base.index, chunk)
        head = headAfter(base.index, chunk)
      }
      if (source !== undefined) {
        const sourceId = source.id
        yield* updateRecord(input.forkedFrom!, (current) => current.id === sourceId ? { ...current, forks: current.forks + 1 } : undefined)
      }
      const created = yield* Effect.mapError(cas(pathKey(input.path), Option.none(), record), storageFailed)
      if (!created) {
        // Another process created it in between: drop ours and answer as for an existing stream.
        yield* deleteChunks(id)
        if (source !== undefined) yield* releaseSource(input.forkedFrom!, source.id)
        return yield* createLocked(input, parsed)
      }
      rememberHead(id, head)
      return { ...infoOf(record, head), created: true }
    })

  /** The record at a path as a create sees it: an expired one is removed first. */
  const existingRecord = (path: string) =>
    Effect.gen(function*() {
      const record = yield* loadRecord(path)
      if (record === undefined || record.gone === 1) return record
      if (isExpired(record, yield* Clock.currentTimeMillis)) {
        yield* removeRecord(path, record)
        return yield* loadRecord(path)
      }
      return record
    })

  const remove = (path: string) =>
    withLock(
      path,
      Effect.gen(function*() {
        const record = yield* liveRecord(path)
        yield* removeRecord(path, record)
        yield* announce(record.id)
      })
    )

  return { create, append, read, head, remove, awaitChange }
})

/**
 * The data of `chunk` up to `sub` bytes (or JSON messages) past its first `skip` offset
 * units (an append's end), or undefined when that is past the end of the append there.
 */
const subPrefix = (contentType: string, chunk: ChunkRecord, skip: number, sub: number) => {
  const boundary = appendEndAfter(chunk, skip)
  if (isJson(contentType)) {
    const messages = chunkMessages(chunk)
    const from = messagesWithin(messages, skip)
    const to = messagesWithin(messages, boundary)
    if (from === undefined || to === undefined || from + sub > to) return undefined
    const taken = messages.slice(0, from + sub)
    return { ...jsonChunkData(taken), n: taken.length }
  }
  if (skip + sub > boundary) return undefined
  const taken = chunkBytes(chunk).subarray(0, skip + sub)
  return { d: taken.toString("base64"), z: taken.byteLength }
}

/** A fork's inherited prefix followed by its initial body, as one chunk's data. */
const mergeData = (
  contentType: string,
  prefix: { readonly d: string; readonly z: number; readonly n?: number } | undefined,
  body: { readonly d: string; readonly z: number; readonly n?: number }
): { readonly d: string; readonly z: number; readonly n?: number } => {
  if (prefix === undefined || prefix.z === 0) return body
  if (body.z === 0) return prefix
  if (isJson(contentType)) {
    const messages = [...chunkMessages({ a: 0, ...prefix }), ...chunkMessages({ a: 0, ...body })]
    return { ...jsonChunkData(messages), n: messages.length }
  }
  const bytes = Buffer.concat([Buffer.from(prefix.d, "base64"), Buffer.from(body.d, "base64")])
  return { d: bytes.toString("base64"), z: bytes.byteLength }
}
