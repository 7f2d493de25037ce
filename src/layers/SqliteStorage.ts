/**
 * A `StorageAdapter` in one SQLite database file, through Node's built-in `node:sqlite`.
 *
 * The database runs in WAL mode with `synchronous=FULL`: a write is durable once its
 * transaction commits, at the cost of one append and one fsync of the log. Writes
 * issued together (parallel branches, a ledger append and a checkpoint, a burst of
 * queue records) are committed as one transaction with one fsync (group commit).
 * Several processes may share the file: SQLite's locks serialise their writers, and a
 * process killed mid-transaction leaves nothing behind but a log tail SQLite ignores.
 *
 * A commit's fsync is cheap only while the log does not grow: growing, the file system
 * also journals the log's new size. SQLite deletes the log when the last connection
 * closes, so the first process to open the database grows a new log to its steady size
 * (the checkpoint threshold, 1,000 pages, ~4 MB) at once, with a transaction it rolls
 * back (see `reserveLog`): the database gains nothing. This costs the first opener
 * ~10-15 ms once, on the event loop (4 MB written and flushed; measured on a Linux ext4
 * disk, where opening a new database otherwise takes ~3-5 ms; later openers, and a
 * reader passing `reserveLog: false`, pay nothing), and makes each later single-write
 * commit cost about what a `write` + `fdatasync` of the same record to a file costs,
 * rather than ~1.5x that while the log grows.
 *
 * Rows live in one table, `noetic_storage (key BLOB PRIMARY KEY, value TEXT NOT NULL)`.
 * A key is stored as its UTF-16 code units, big-endian: SQLite compares blobs bytewise,
 * so the primary key orders keys exactly as `list` promises (by UTF-16 code unit; text
 * in SQLite would compare UTF-8 bytes, which puts U+E000..U+FFFF after astral
 * characters), and a prefix is a contiguous key range no matter which characters it
 * holds. A value is the exact JSON text `JSON.stringify` produced.
 *
 * The table has a rowid: the primary key is an index of keys beside the rows, so a
 * search by key compares keys only. A `WITHOUT ROWID` table keeps each whole row in its
 * key's b-tree, and SQLite compares a probe against a row whose value spills to overflow
 * pages by reading the whole row: with large values (a queue's batch records, ~100 KB)
 * every insert, update or delete read several of them in full. A database created
 * `WITHOUT ROWID` by an earlier version is used as it is: the statements are the same
 * for both layouts.
 *
 * `node:sqlite` is loaded when the first database is opened, so importing this library
 * loads nothing of it: on Node 22, where `node:sqlite` is experimental, opening a
 * database prints Node's one-time `ExperimentalWarning`; Node 24 prints none.
 *
 * @since 0.1.0
 */
import * as NodePath from "node:path"
import type * as NodeSqlite from "node:sqlite"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { Io, StorageError } from "../Errors.ts"
import { nodeFs as Fs } from "../internal/builtins.ts"
import { makeDirectorySync } from "../internal/makeDirectory.ts"
import { corrupt, encodeStoredKey, isBusy, messageOf, type RangeKeys, rangeKeysOf, SQLITE_FULL, SQLITE_PERM, SQLITE_READONLY, sqliteCode, storageFailure, upperBoundOf, WHOLE_KEYS } from "../internal/sqliteKeys.ts"
import {
  decodeJson,
  encodeExpected,
  encodeJson,
  type Fence,
  fenceHolds,
  fenceRefused,
  jsonText,
  keyError,
  StorageAdapter,
  type StorageAdapterShape,
  type StorageWrite,
  validateKey,
  writeTexts
} from "../services/StorageAdapter.ts"

/** Where a SQLite storage keeps its data. */
export interface SqliteStorageOptions {
  /** The database file; it and its directory are created (0600, 0700) when missing. */
  readonly path: string
  /**
   * How long, in milliseconds, an operation waits for another process holding the
   * database's write lock before it fails with reason `Io`. Default 10,000.
   */
  readonly lockTimeoutMs?: number | undefined
  /**
   * Whether the first process to open the database grows its write-ahead log to its
   * steady size up front (~4 MB written and flushed, ~10-15 ms), so that later commits
   * overwrite log space instead of growing the file. Default true; a short-lived
   * reader that writes little (a listing) passes false.
   */
  readonly reserveLog?: boolean | undefined
}

/** The table a SQLite storage keeps its rows in. */
export const TABLE = "noetic_storage"

const DIR_MODE = 0o700
const FILE_MODE = 0o600
const DEFAULT_LOCK_TIMEOUT_MS = 10_000
/** The page cache of a connection, as `PRAGMA cache_size` takes it: negative, in KiB (8 MiB). */
const CACHE_SIZE = -8192
/**
 * How long SQLite itself waits (sleeping on the event loop) for a lock before it
 * reports busy; longer waits are retried from a timer, so a writer of another process
 * never stalls this process's other fibers for more than this at a time.
 */
const SYNC_BUSY_TIMEOUT_MS = 5
const RETRY_MIN_MS = 1
const RETRY_MAX_MS = 50

/**
 * A row as `node:sqlite` hands it back, as an array (key, then value; cheaper for it
 * to build than an object per row); a row someone else wrote may hold anything.
 */
type StoredRow = readonly [key: unknown, value?: unknown]

/** One write of a group commit: run inside the shared transaction, then told its outcome. */
interface PendingWrite {
  /** Runs the write's statements; returns its result or a typed failure that wrote nothing. */
  readonly apply: () => unknown
  /** `apply` runs one statement, which SQLite makes a transaction of its own when it runs alone. */
  readonly oneStatement: boolean
  readonly operation: string
  readonly key: string
  readonly resume: (effect: Effect.Effect<unknown, StorageError>) => void
  /** Set once the write ran or was withdrawn. */
  settled: boolean
}

/** A typed failure an `apply` returns after writing nothing; the batch goes on. */
class Refusal {
  constructor(readonly error: StorageError) {}
}

/** `node:sqlite`, loaded on first use so importing this module prints no warning. */
const loadSqlite = (): typeof NodeSqlite => process.getBuiltinModule("node:sqlite") as typeof NodeSqlite

/**
 * The statements a SQLite storage runs, exported so tests can check their query plans
 * (a prefix is a range scan of the primary key; getMany and scan are one query each).
 *
 * @internal
 */
export const SQL = {
  get: `SELECT value FROM ${TABLE} WHERE key = ?`,
  set: `INSERT INTO ${TABLE} (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  insertIfAbsent: `INSERT INTO ${TABLE} (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
  delete: `DELETE FROM ${TABLE} WHERE key = ?`,
  listAll: `SELECT key FROM ${TABLE} ORDER BY key`,
  // Under a prefix (?1, its stored bytes) a key reads as the hex of its bytes after the
  // prefix: a short string, where the whole key would be a buffer per row.
  listFrom: `SELECT hex(substr(key, length(?1) + 1)) FROM ${TABLE} WHERE key >= ?1 ORDER BY key`,
  listRange: `SELECT hex(substr(key, length(?1) + 1)) FROM ${TABLE} WHERE key >= ?1 AND key < ?2 ORDER BY key`,
  scanAll: `SELECT key, value FROM ${TABLE} ORDER BY key`,
  scanFrom: `SELECT hex(substr(key, length(?1) + 1)), value FROM ${TABLE} WHERE key >= ?1 ORDER BY key`,
  scanRange: `SELECT hex(substr(key, length(?1) + 1)), value FROM ${TABLE} WHERE key >= ?1 AND key < ?2 ORDER BY key`,
  // Keys under the prefix ?1 from ?2 up to ?3 (both under it): one index range scan.
  scanBetween: `SELECT hex(substr(key, length(?1) + 1)), value FROM ${TABLE} WHERE key >= ?2 AND key < ?3 ORDER BY key`,
  // One statement for any number of keys: the keys travel as one JSON array of hex.
  getMany: `SELECT key, value FROM ${TABLE} WHERE key IN (SELECT unhex(value) FROM json_each(?))`
} as const

/** `statement`, set to return each row as an array (see {@link StoredRow}). */
const rowsAsArrays = (statement: NodeSqlite.StatementSync): NodeSqlite.StatementSync => {
  statement.setReturnArrays(true)
  return statement
}

/** Creates the database's directory (0700) and file (0600) when missing. */
const prepareFile = (path: string) => {
  makeDirectorySync(NodePath.dirname(path), DIR_MODE)
  try {
    Fs.closeSync(Fs.openSync(path, Fs.constants.O_CREAT | Fs.constants.O_EXCL | Fs.constants.O_WRONLY, FILE_MODE))
  } catch (cause) {
    if ((cause as { code?: unknown }).code !== "EEXIST") throw cause
  }
}

/** The size of the file at `path` in bytes, 0 when it does not exist. */
const fileSize = (path: string): number => Fs.statSync(path, { throwIfNoEntry: false })?.size ?? 0

/** The table a log reservation writes into, inside a transaction it rolls back. */
const RESERVE_TABLE = "noetic_log_reserve"

/** How many pages the connection caches while it reserves the log: so few that the rest spills to the log. */
const RESERVE_CACHE_PAGES = 16

/** A write-ahead log starts with a header of this many bytes; each page in it has a frame header of 24. */
const WAL_HEADER_BYTES = 32
const WAL_FRAME_HEADER_BYTES = 24

/**
 * Grows the write-ahead log of `db` to its steady size unless it is that large already.
 *
 * A commit appends to the log and fsyncs it. While the log grows, that fsync also has to
 * journal the file's new size and blocks, which costs about half as much again; once
 * the log is as large as its checkpoint threshold, commits overwrite it from its start
 * after each checkpoint and never grow it. SQLite deletes the log when the last
 * connection closes, so the first process to open the database meets a new log. It
 * grows it at once: a transaction writes that many pages (a blob into a scratch table)
 * with a page cache so small that they spill into the log, then rolls back, and the
 * log is flushed to disk once. The log file keeps its size, and the database gains
 * nothing: the rolled-back frames are never committed, and the next commit writes over
 * them.
 *
 * The size is checked again under the write lock, so of several first openers only
 * one grows it. A rolled-back transaction is as safe against crashes and other
 * processes as SQLite makes any (a crash leaves frames recovery ignores). It only saves
 * time: a busy lock, a full disk or a read-only file leave the log as it is.
 */
const reserveLog = (db: NodeSqlite.DatabaseSync, path: string): void => {
  const walPath = `${path}-wal`
  const { page_size } = db.prepare("PRAGMA page_size").get() as { page_size: number }
  const { wal_autocheckpoint } = db.prepare("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number }
  // The log holds this much when a commit takes it to the checkpoint threshold.
  const steadySize = WAL_HEADER_BYTES + wal_autocheckpoint * (page_size + WAL_FRAME_HEADER_BYTES)
  if (fileSize(walPath) >= steadySize) return
  const { cache_size } = db.prepare("PRAGMA cache_size").get() as { cache_size: number }
  db.exec(`PRAGMA cache_size = ${RESERVE_CACHE_PAGES}`)
  try {
    db.exec("BEGIN IMMEDIATE")
    try {
      if (fileSize(walPath) < steadySize) {
        db.exec(`CREATE TABLE ${RESERVE_TABLE} (filler BLOB)`)
        // The pages still cached at the rollback never reach the log: a few more make up for them.
        db.prepare(`INSERT INTO ${RESERVE_TABLE} VALUES (zeroblob(?))`).run((wal_autocheckpoint + 2 * RESERVE_CACHE_PAGES) * page_size)
      }
    } finally {
      if (db.isTransaction) db.exec("ROLLBACK")
    }
    // The spilled pages are written but not yet on disk: flushed here, or the first
    // commit's fsync would flush them all (~5 ms). SQLite locks no byte of the log
    // file, so opening and closing it here releases no lock of this process.
    const log = Fs.openSync(walPath, "r")
    try {
      Fs.fdatasyncSync(log)
    } finally {
      Fs.closeSync(log)
    }
  } catch (cause) {
    const code = sqliteCode(cause)
    if (!isBusy(cause) && code !== SQLITE_FULL && code !== SQLITE_READONLY && code !== SQLITE_PERM) throw cause
  } finally {
    db.exec(`PRAGMA cache_size = ${cache_size}`)
  }
}

/** Runs `f` on the event loop, retrying from a timer while another process holds the lock. */
const whenUnlocked = <A>(
  operation: string,
  key: string,
  lockTimeoutMs: number,
  f: () => A
): Effect.Effect<A, StorageError> =>
  Effect.callback<A, StorageError>((resume) => {
    const deadline = Date.now() + lockTimeoutMs
    let timer: ReturnType<typeof setTimeout> | undefined
    const attempt = (delay: number) => {
      let result: A
      try {
        result = f()
      } catch (cause) {
        if (isBusy(cause) && Date.now() < deadline) {
          timer = setTimeout(() => attempt(Math.min(delay * 2, RETRY_MAX_MS)), delay)
        } else resume(Effect.fail(storageFailure(operation, key, cause)))
        return
      }
      // Outside the try: resuming may run the caller's continuation right here.
      resume(Effect.succeed(result))
    }
    attempt(RETRY_MIN_MS)
    return Effect.sync(() => clearTimeout(timer))
  })

/**
 * Opens (creating when missing) a SQLite storage at `options.path`; the database is
 * closed when the scope closes, after the writes in flight commit.
 */
export const make = (options: SqliteStorageOptions): Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope> =>
  Effect.gen(function*() {
    const path = NodePath.resolve(options.path)
    const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS
    // The group commit's state (see flush), declared first: closing flushes it.
    let pending: Array<PendingWrite> = []
    let scheduled = false
    let lockWaitSince: number | undefined
    let closed = false

    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          prepareFile(path)
          const { DatabaseSync } = loadSqlite()
          return new DatabaseSync(path, { enableForeignKeyConstraints: false })
        },
        catch: (cause) => storageFailure("open", path, cause)
      }),
      (db) =>
        Effect.sync(() => {
          flushNow()
          closed = true
          db.close()
        })
    )

    // Preparing reads the schema, so it may meet a lock too, and a table of that name
    // with other columns fails here, typed, rather than on first use.
    const statements = yield* whenUnlocked("open", path, lockTimeoutMs, () => {
      db.exec(`PRAGMA busy_timeout = ${SYNC_BUSY_TIMEOUT_MS}`)
      // Switching to WAL needs a moment without other connections; once the file is in
      // WAL mode (the first opener did it) this is a read of the mode.
      const mode = db.prepare("PRAGMA journal_mode = WAL").get() as { journal_mode?: unknown } | undefined
      if (mode?.journal_mode !== "wal") throw new Error(`the database stays in journal mode ${String(mode?.journal_mode)}`)
      db.exec("PRAGMA synchronous = FULL")
      // The log is rewritten in place once checkpointed (cheaper to fsync than growing
      // it); after a burst that grew it past 64 MiB it is cut back to that.
      db.exec("PRAGMA journal_size_limit = 67108864")
      // Pages cached per connection: 8 MiB rather than SQLite's 2 MiB. Deleting a row
      // reads its whole overflow chain (each page names the next), and a queue deletes
      // its batch records (~100 KB each) once acked, a few MB of writes after writing
      // them: with 2 MiB they are gone from the cache by then and read back from disk.
      db.exec(`PRAGMA cache_size = ${CACHE_SIZE}`)
      // With a rowid (see the module's comment); an existing table keeps its layout.
      db.exec(`CREATE TABLE IF NOT EXISTS ${TABLE} (key BLOB PRIMARY KEY, value TEXT NOT NULL)`)
      if (options.reserveLog !== false) reserveLog(db, path)
      return {
        get: db.prepare(SQL.get),
        set: db.prepare(SQL.set),
        insertIfAbsent: db.prepare(SQL.insertIfAbsent),
        delete: db.prepare(SQL.delete),
        listAll: rowsAsArrays(db.prepare(SQL.listAll)),
        listFrom: rowsAsArrays(db.prepare(SQL.listFrom)),
        listRange: rowsAsArrays(db.prepare(SQL.listRange)),
        scanAll: rowsAsArrays(db.prepare(SQL.scanAll)),
        scanFrom: rowsAsArrays(db.prepare(SQL.scanFrom)),
        scanRange: rowsAsArrays(db.prepare(SQL.scanRange)),
        scanBetween: rowsAsArrays(db.prepare(SQL.scanBetween)),
        getMany: rowsAsArrays(db.prepare(SQL.getMany)),
        begin: db.prepare("BEGIN IMMEDIATE"),
        commit: db.prepare("COMMIT"),
        rollback: db.prepare("ROLLBACK")
      }
    })
    const {
      begin,
      commit,
      get: getStatement,
      getMany: getManyStatement,
      insertIfAbsent: insertIfAbsentStatement,
      listAll,
      listFrom,
      listRange,
      rollback,
      scanAll,
      scanFrom,
      scanRange,
      scanBetween: scanBetweenStatement,
      set: setStatement
    } = statements
    const deleteStatement = statements.delete

    const guard = (operation: string, key: string) =>
      closed
        ? Effect.fail(new StorageError({ operation, reason: new Io({ key, message: "the SQLite storage is closed", cause: null }) }))
        : undefined

    const decodeValue = (operation: string, key: string, value: unknown) =>
      typeof value === "string"
        ? decodeJson(operation, key, value)
        : Effect.fail(corrupt(operation, key, `the stored value is ${value === null ? "null" : `a ${typeof value}`}, not JSON text`))

    /**
     * The rows as key-value pairs, or the `Corrupt` failure of the first damaged one.
     * Plain code, not an effect per row: a ledger restore decodes thousands of rows.
     */
    const decodeRows = (
      operation: string,
      rows: ReadonlyArray<StoredRow>,
      keys: RangeKeys
    ): Array<readonly [string, unknown]> | StorageError => {
      const entries = new Array<readonly [string, unknown]>(rows.length)
      for (let i = 0; i < rows.length; i++) {
        const [stored, value] = rows[i]!
        const key = keys.keyOf(stored)
        if (key === undefined) return corrupt(operation, keys.describe(stored), "the stored key is not UTF-16 text")
        if (typeof value !== "string") {
          return corrupt(operation, key, `the stored value is ${value === null ? "null" : `a ${typeof value}`}, not JSON text`)
        }
        try {
          entries[i] = [key, JSON.parse(value)]
        } catch (cause) {
          return corrupt(operation, key, `not valid JSON: ${messageOf(cause)}`)
        }
      }
      return entries
    }

    // Group commit. A write joins the pending batch; the batch runs at the next turn of
    // the event loop, so every write issued in this turn joins it, in one transaction
    // with one fsync. The transaction runs synchronously: no other fiber of this
    // process sees it half done, and other processes are held off by SQLite's lock.

    const settle = (write: PendingWrite, effect: Effect.Effect<unknown, StorageError>) => {
      write.settled = true
      write.resume(effect)
    }

    const runBatch = (batch: ReadonlyArray<PendingWrite>): "busy" | "done" => {
      // One write of one statement (a step's ledger append, most often) commits on
      // its own: the same single fsync, without running BEGIN and COMMIT around it.
      if (batch.length === 1 && batch[0]!.oneStatement) {
        const write = batch[0]!
        let outcome: unknown
        try {
          outcome = write.apply()
        } catch (cause) {
          if (db.isTransaction) {
            try {
              rollback.run()
            } catch {
              // Already gone.
            }
          }
          if (isBusy(cause)) return "busy"
          settle(write, Effect.fail(storageFailure(write.operation, write.key, cause)))
          return "done"
        }
        settle(write, Effect.succeed(outcome))
        return "done"
      }
      try {
        begin.run()
      } catch (cause) {
        if (isBusy(cause)) return "busy"
        for (const write of batch) settle(write, Effect.fail(storageFailure(write.operation, write.key, cause)))
        return "done"
      }
      const outcomes: Array<unknown> = []
      try {
        for (const write of batch) outcomes.push(write.apply())
        commit.run()
      } catch (cause) {
        try {
          rollback.run()
        } catch {
          // The transaction is already gone (SQLite rolled it back on the error).
        }
        if (isBusy(cause)) return "busy"
        for (const write of batch) settle(write, Effect.fail(storageFailure(write.operation, write.key, cause)))
        return "done"
      }
      batch.forEach((write, i) => {
        const outcome = outcomes[i]
        settle(write, outcome instanceof Refusal ? Effect.fail(outcome.error) : Effect.succeed(outcome))
      })
      return "done"
    }

    const flush = (delay: number) => {
      scheduled = false
      const batch = pending.filter((write) => !write.settled)
      pending = []
      if (batch.length === 0) return
      if (runBatch(batch) === "done") {
        lockWaitSince = undefined
        return
      }
      // Another process holds the write lock: wait from a timer, not on the loop, and
      // let the writes that arrive meanwhile join this batch.
      lockWaitSince ??= Date.now()
      if (Date.now() - lockWaitSince >= lockTimeoutMs) {
        lockWaitSince = undefined
        for (const write of batch) {
          settle(write, Effect.fail(storageFailure(write.operation, write.key, new Error("the database is locked by another process"))))
        }
        return
      }
      pending = batch.concat(pending)
      scheduled = true
      setTimeout(() => flush(Math.min(delay * 2, RETRY_MAX_MS)), delay)
    }

    /** Commits what is pending at once: on close, so no acknowledged write is lost. */
    function flushNow() {
      for (let tries = 0; pending.some((write) => !write.settled) && tries < 1000; tries++) flush(RETRY_MIN_MS)
    }

    const enqueue = <A>(
      operation: string,
      key: string,
      apply: () => A | Refusal,
      oneStatement = false
    ): Effect.Effect<A, StorageError> =>
      guard(operation, key) ??
        Effect.callback<A, StorageError>((resume) => {
          const write: PendingWrite = {
            apply,
            oneStatement,
            operation,
            key,
            resume: resume as PendingWrite["resume"],
            settled: false
          }
          pending.push(write)
          if (!scheduled) {
            scheduled = true
            setImmediate(() => flush(RETRY_MIN_MS))
          }
          // Interrupted before its batch ran: it never happens.
          return Effect.sync(() => {
            write.settled = true
          })
        })

    const read = <A>(operation: string, key: string, f: () => A): Effect.Effect<A, StorageError> =>
      guard(operation, key) ?? whenUnlocked(operation, key, lockTimeoutMs, f)

    const get = Effect.fnUntraced(function*(key: string) {
      yield* validateKey("get", key)
      const row = yield* read("get", key, () => getStatement.get(encodeStoredKey(key)) as { value: unknown } | undefined)
      if (row === undefined) return Option.none<unknown>()
      return Option.some(yield* decodeValue("get", key, row.value))
    })

    // `set` and `delete` are what every durable step runs: plain code up to the enqueue.
    const set = (key: string, value: unknown): Effect.Effect<void, StorageError> => {
      const refused = keyError("set", key)
      if (refused !== undefined) return Effect.fail(refused)
      const text = jsonText("set", key, value)
      if (typeof text !== "string") return Effect.fail(text)
      const stored = encodeStoredKey(key)
      return enqueue("set", key, () => void setStatement.run(stored, text), true)
    }

    const remove = (key: string): Effect.Effect<void, StorageError> => {
      const refused = keyError("delete", key)
      if (refused !== undefined) return Effect.fail(refused)
      const stored = encodeStoredKey(key)
      return enqueue("delete", key, () => void deleteStatement.run(stored), true)
    }

    /** The rows whose keys start with `prefix`, by an index range scan in key order. */
    const range = (
      operation: string,
      prefix: string,
      all: NodeSqlite.StatementSync,
      from: NodeSqlite.StatementSync,
      between: NodeSqlite.StatementSync
    ) =>
      read(operation, prefix, () => {
        if (prefix.length === 0) return all.all()
        const lower = encodeStoredKey(prefix)
        const upper = upperBoundOf(lower)
        return upper === undefined ? from.all(lower) : between.all(lower, upper)
      }) as unknown as Effect.Effect<ReadonlyArray<StoredRow>, StorageError>

    const list = Effect.fnUntraced(function*(prefix: string) {
      const rows = yield* range("list", prefix, listAll, listFrom, listRange)
      const rangeKeys = rangeKeysOf(prefix)
      const keys = new Array<string>(rows.length)
      for (let i = 0; i < rows.length; i++) {
        const stored = rows[i]![0]
        const key = rangeKeys.keyOf(stored)
        if (key === undefined) return yield* corrupt("list", rangeKeys.describe(stored), "the stored key is not UTF-16 text")
        keys[i] = key
      }
      return keys
    })

    const scan = Effect.fnUntraced(function*(prefix: string) {
      const rows = yield* range("scan", prefix, scanAll, scanFrom, scanRange)
      const entries = decodeRows("scan", rows, rangeKeysOf(prefix))
      if (entries instanceof StorageError) return yield* entries
      return entries as ReadonlyArray<readonly [string, unknown]>
    })

    // The rows as scan reads them, each value the JSON text as stored (unparsed). The
    // driver's rows are fresh arrays of (key, value): each becomes its pair in place.
    const scanText = Effect.fnUntraced(function*(prefix: string) {
      const rows = (yield* range("scan", prefix, scanAll, scanFrom, scanRange)) as unknown as ReadonlyArray<Array<unknown>>
      const rangeKeys = rangeKeysOf(prefix)
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!
        const stored = row[0]
        const key = rangeKeys.keyOf(stored)
        if (key === undefined) return yield* corrupt("scan", rangeKeys.describe(stored), "the stored key is not UTF-16 text")
        const value = row[1]
        if (typeof value !== "string") {
          return yield* corrupt("scan", key, `the stored value is ${value === null ? "null" : `a ${typeof value}`}, not JSON text`)
        }
        row[0] = key
      }
      return rows as ReadonlyArray<unknown> as ReadonlyArray<readonly [string, string]>
    })

    const scanBetween = Effect.fnUntraced(function*(prefix: string, from: string, to: string) {
      if (!from.startsWith(prefix) || !to.startsWith(prefix)) {
        return yield* Effect.die(new Error("scanBetween: the bounds must start with the prefix"))
      }
      if (to <= from) return [] as ReadonlyArray<readonly [string, unknown]>
      yield* validateKey("scanBetween", from)
      const lower = encodeStoredKey(prefix)
      const rows = yield* read(
        "scanBetween",
        from,
        () => scanBetweenStatement.all(lower, encodeStoredKey(from), encodeStoredKey(to)) as unknown as ReadonlyArray<StoredRow>
      )
      const entries = decodeRows("scanBetween", rows, rangeKeysOf(prefix))
      if (entries instanceof StorageError) return yield* entries
      return entries as ReadonlyArray<readonly [string, unknown]>
    })

    const getMany = Effect.fnUntraced(function*(keys: ReadonlyArray<string>) {
      if (keys.length === 0) return new Map() as ReadonlyMap<string, unknown>
      for (const key of keys) yield* validateKey("getMany", key)
      const hex = JSON.stringify(keys.map((key) => Buffer.from(encodeStoredKey(key)).toString("hex")))
      const rows = yield* read(
        "getMany",
        keys.join(","),
        () => getManyStatement.all(hex) as unknown as ReadonlyArray<StoredRow>
      )
      const entries = decodeRows("getMany", rows, WHOLE_KEYS)
      if (entries instanceof StorageError) return yield* entries
      return new Map(entries) as ReadonlyMap<string, unknown>
    })

    // The check and the write run inside the batch's transaction, which holds SQLite's
    // write lock: no writer of this or any other process comes between them.
    const compareAndSet = Effect.fnUntraced(function*(key: string, expected: Option.Option<unknown>, next: unknown) {
      yield* validateKey("compareAndSet", key)
      const expectedText = yield* encodeExpected(key, expected)
      const nextText = yield* encodeJson("compareAndSet", key, next)
      const stored = encodeStoredKey(key)
      return yield* enqueue("compareAndSet", key, () => {
        if (expectedText === undefined) return insertIfAbsentStatement.run(stored, nextText).changes === 1
        const row = getStatement.get(stored) as { value: unknown } | undefined
        if (row?.value !== expectedText) return false
        setStatement.run(stored, nextText)
        return true
      })
    })

    /** Undefined when the record at `fence.key` holds `fence.token`, else why the write is refused. */
    const fenceRefusal = (operation: string, key: string, fence: Fence): Refusal | undefined => {
      const row = getStatement.get(encodeStoredKey(fence.key)) as { value: unknown } | undefined
      if (row === undefined) return new Refusal(fenceRefused(operation, key, fence))
      let record: unknown
      try {
        record = typeof row.value === "string" ? JSON.parse(row.value) : undefined
      } catch (cause) {
        return new Refusal(corrupt(operation, fence.key, `not valid JSON: ${messageOf(cause)}`))
      }
      if (typeof row.value !== "string") return new Refusal(corrupt(operation, fence.key, "the stored value is not JSON text"))
      return fenceHolds(record, fence.token) ? undefined : new Refusal(fenceRefused(operation, key, fence))
    }

    const setFenced = Effect.fnUntraced(function*(key: string, value: unknown, fence: Fence) {
      yield* validateKey("setFenced", key)
      yield* validateKey("setFenced", fence.key)
      const text = yield* encodeJson("setFenced", key, value)
      const stored = encodeStoredKey(key)
      yield* enqueue("setFenced", key, () => {
        const refused = fenceRefusal("setFenced", key, fence)
        if (refused !== undefined) return refused
        setStatement.run(stored, text)
      })
    })

    const deleteFenced = Effect.fnUntraced(function*(key: string, fence: Fence) {
      yield* validateKey("deleteFenced", key)
      yield* validateKey("deleteFenced", fence.key)
      const stored = encodeStoredKey(key)
      yield* enqueue("deleteFenced", key, () => {
        const refused = fenceRefusal("deleteFenced", key, fence)
        if (refused !== undefined) return refused
        deleteStatement.run(stored)
      })
    })

    // One write of the group commit: its statements run inside the batch's transaction,
    // so they commit together, and a failure of any rolls back all.
    const writeAll = (writes: ReadonlyArray<StorageWrite>): Effect.Effect<void, StorageError> => {
      const texts = writeTexts(writes)
      if (texts instanceof StorageError) return Effect.fail(texts)
      const rows = writes.map((write, i) => [encodeStoredKey(write.key), texts[i]] as const)
      if (rows.length === 0) return Effect.void
      return enqueue("writeAll", writes[0]!.key, () => {
        for (const [stored, text] of rows) {
          if (text === undefined) deleteStatement.run(stored)
          else setStatement.run(stored, text)
        }
      }, rows.length === 1)
    }

    return StorageAdapter.of({
      takesJsonText: true,
      get,
      set,
      delete: remove,
      list,
      scan,
      scanText,
      scanBetween,
      getMany,
      compareAndSet,
      setFenced,
      deleteFenced,
      writeAll
    }) satisfies
      StorageAdapterShape
  })

/** A SQLite storage in the database file at `options.path`, closed when the layer is released. */
export const layer = (options: SqliteStorageOptions): Layer.Layer<StorageAdapter, StorageError> =>
  Layer.effect(StorageAdapter, make(options))
