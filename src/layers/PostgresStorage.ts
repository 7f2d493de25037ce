/**
 * A `StorageAdapter` on a PostgreSQL table, through `@effect/sql-pg`.
 *
 * The table (default `noetic_storage`) is created when missing:
 * `key text COLLATE "C" PRIMARY KEY, value text NOT NULL`. Values are kept as the
 * exact JSON text `JSON.stringify` produced, not `jsonb`, which would reorder object
 * keys and normalise numbers; text also lets a damaged row be reported as `Corrupt`.
 *
 * Postgres text cannot hold U+0000, so keys are stored with an injective escape
 * that leaves every other key readable in `psql`: U+0001 is the escape character,
 * U+0000 is stored as U+0001 "0" and U+0001 as U+0001 "1".
 *
 * @since 0.1.0
 */
import type * as SqlPg from "@effect/sql-pg"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import type * as Reactivity from "effect/reactivity/Reactivity"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import type * as Statement from "effect/sql/Statement"
import { Corrupt, Io, Permission, StorageError } from "../Errors.ts"
import {
  decodeJson,
  encodeExpected,
  encodeJson,
  type Fence,
  fenceRefused,
  sortKeys,
  StorageAdapter,
  type StorageAdapterShape,
  validateKey
} from "../services/StorageAdapter.ts"

/** Where a Postgres storage keeps its rows. */
export interface PostgresStorageOptions {
  /** The table, optionally schema-qualified (`app.storage`); created when missing. */
  readonly table?: string | undefined
  /**
   * Reads issued together (a `get` and a `scanText` started in the same tick, as a
   * resume's snapshot and ledger reads are) go to the database as one statement. Only
   * for a pool the storage owns (`makeFromUrl`): the statement runs outside the
   * callers' fibers, so it would escape a transaction an application's client is in.
   */
  readonly coalesceReads?: boolean | undefined
}

/** How a Postgres storage that owns its connection pool connects. */
export interface PostgresStorageUrlOptions extends PostgresStorageOptions {
  /** The most connections the pool opens (the driver's default when unset). */
  readonly maxConnections?: number | undefined
}

/** The table a Postgres storage uses when none is named. */
export const DEFAULT_TABLE = "noetic_storage"

const KEY_ESCAPE = "\u0001"

const encodeStoredKey = (key: string): string =>
  key.replace(/[\u0000\u0001]/g, (char) => (char === "\u0000" ? `${KEY_ESCAPE}0` : `${KEY_ESCAPE}1`))

/** The key a stored key stands for, or undefined when its escapes are malformed (a foreign row). */
const decodeStoredKey = (stored: string): string | undefined => {
  if (!stored.includes(KEY_ESCAPE)) return stored
  let key = ""
  for (let i = 0; i < stored.length; i++) {
    const char = stored[i]
    if (char !== KEY_ESCAPE) {
      key += char
      continue
    }
    const code = stored[++i]
    if (code === "0") key += "\u0000"
    else if (code === "1") key += KEY_ESCAPE
    else return undefined
  }
  return key
}

/**
 * The least string above every string that starts with `prefix`, in code point order
 * (the order of the C collation); undefined when there is none (an empty prefix, or
 * one made only of U+10FFFF).
 */
const prefixUpperBound = (prefix: string): string | undefined => {
  const points = Array.from(prefix)
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!
    if (last < 0x10ffff) return points.join("") + String.fromCodePoint(last + 1 === 0xd800 ? 0xe000 : last + 1)
  }
  return undefined
}

/**
 * The longest well-formed head of `prefix`. A prefix may end inside a surrogate pair
 * (`"a\ud83d"` is a prefix of `"a😀"` by code unit), which the database cannot be
 * asked about; the query uses this head and the rows are filtered exactly in JS.
 */
const wellFormedHead = (prefix: string): string => {
  if (prefix.isWellFormed()) return prefix
  for (let i = 0; i < prefix.length; i++) {
    const code = prefix.charCodeAt(i)
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = prefix.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++
        continue
      }
      return prefix.slice(0, i)
    }
    if (code >= 0xdc00 && code <= 0xdfff) return prefix.slice(0, i)
  }
  return prefix
}

/** The table name quoted as the SQL compiler quotes it: each dot-separated part an identifier. */
const quoteTableName = (name: string): string =>
  name.split(".").map((part) => `"${part.replaceAll("\"", "\"\"")}"`).join(".")

const PERMISSION_REASONS = new Set(["AuthorizationError", "AuthenticationError"])

const fromSqlError = (operation: string, key: string) => (error: SqlError.SqlError): StorageError =>
  new StorageError({
    operation,
    reason: PERMISSION_REASONS.has(error.reason._tag)
      ? new Permission({ key, message: error.message, cause: error })
      : new Io({ key, message: error.message, cause: error })
  })

/** The key check every backend shares: see validateKey. */
const checkKey = validateKey

const corrupt = (operation: string, key: string, message: string) =>
  new StorageError({ operation, reason: new Corrupt({ key, message }) })

// The SQL modules load when a Postgres storage is made: a program that imports the
// library and never talks to Postgres (a child agent on file storage) does not pay for them.
const loadSqlClient = Effect.promise((): Promise<typeof SqlClient> => import("effect/sql/SqlClient"))
const loadReactivity = Effect.promise((): Promise<typeof Reactivity> => import("effect/reactivity/Reactivity"))

/** A read `readCoalescer` may merge: one key's row, or the rows in a key range (`upper` undefined: unbounded). */
type CoalescedRead =
  | { readonly _tag: "Key"; readonly key: string }
  | {
    readonly _tag: "Range"
    readonly lower: string
    readonly upper: string | undefined
    /** A listing: alone, its statement reads no values. */
    readonly keysOnly?: true
  }

type StoredRow = { readonly key: string; readonly value: unknown }

/**
 * Whether `key` (as stored) answers `read`, compared as the C collation compares (code
 * point order). `plain`: neither `key` nor the read's bounds has a code unit at or above
 * U+D800, so the engine's own string order (by code unit) is that order.
 */
const answers = (read: CoalescedRead, key: string, plain: boolean): boolean => {
  if (read._tag === "Key") return key === read.key
  if (plain) return key >= read.lower && (read.upper === undefined || key < read.upper)
  return comparePoints(key, read.lower) >= 0 && (read.upper === undefined || comparePoints(key, read.upper) < 0)
}

/** A code unit at or above U+D800 (a surrogate, or U+E000-U+FFFF): there code unit and code point order part. */
const HIGH_UNIT = /[\ud800-\uffff]/

/** Whether `read`'s bounds are below U+D800 throughout (see `answers`). */
const plainBounds = (read: CoalescedRead): boolean =>
  read._tag === "Key" || (!HIGH_UNIT.test(read.lower) && (read.upper === undefined || !HIGH_UNIT.test(read.upper)))

/** Code point order: code unit order but for surrogates, which sort above U+E000-U+FFFF. */
const comparePoints = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    const xs = x >= 0xd800 && x <= 0xdfff
    const ys = y >= 0xd800 && y <= 0xdfff
    if (xs !== ys) return xs ? 1 : -1
    return x - y
  }
  return a.length - b.length
}

/**
 * Merges the reads started in one tick into one statement (a resume's snapshot `get`
 * and ledger `scanText`: one round trip, both read from one database snapshot). A
 * read alone runs its own statement. Each caller gets the rows its read selects.
 */
const readCoalescer = (sql: SqlClient.SqlClient, table: Statement.Identifier) => {
  type Pending = {
    readonly read: CoalescedRead
    readonly resume: (effect: Effect.Effect<ReadonlyArray<StoredRow>, SqlError.SqlError>) => void
  }
  let pending: Array<Pending> | undefined
  const clause = (read: CoalescedRead) =>
    read._tag === "Key"
      ? sql`key = ${read.key}`
      : read.upper === undefined
      ? sql`key COLLATE "C" >= ${read.lower}`
      : sql`(key COLLATE "C" >= ${read.lower} AND key COLLATE "C" < ${read.upper})`
  const flush = () => {
    const batch = pending!
    pending = undefined
    const alone = batch.length === 1 ? batch[0]!.read : undefined
    const statement = alone === undefined
      ? sql<StoredRow>`SELECT key, value FROM ${table} WHERE ${sql.or(batch.map((one) => clause(one.read)))}`
      : alone._tag === "Range" && alone.keysOnly === true
      ? sql<StoredRow>`SELECT key FROM ${table} WHERE ${clause(alone)}`
      : sql<StoredRow>`SELECT key, value FROM ${table} WHERE ${clause(alone)}`
    Effect.runCallback(statement, {
      onExit: (exit) => {
        if (Exit.isFailure(exit) || batch.length === 1) {
          for (const one of batch) one.resume(exit)
          return
        }
        // Each row checked once for code units where the orders part, then against each read.
        const plain = batch.map((one) => plainBounds(one.read))
        const answered = batch.map((): Array<StoredRow> => [])
        for (const row of exit.value) {
          const plainKey = !HIGH_UNIT.test(row.key)
          for (let i = 0; i < batch.length; i++) {
            if (answers(batch[i]!.read, row.key, plainKey && plain[i]!)) answered[i]!.push(row)
          }
        }
        batch.forEach((one, i) => one.resume(Effect.succeed(answered[i]!)))
      }
    })
  }
  return {
    read: (read: CoalescedRead): Effect.Effect<ReadonlyArray<StoredRow>, SqlError.SqlError> =>
      Effect.callback((resume) => {
        if (pending === undefined) {
          pending = []
          queueMicrotask(flush)
        }
        pending.push({ read, resume })
      })
  }
}

/**
 * Builds a Postgres storage on the `SqlClient` in context, creating its table when
 * missing. Result-name transforms of the client are bypassed, so an application's
 * client can be shared as it is.
 */
export const make = Effect.fnUntraced(function*(options: PostgresStorageOptions = {}) {
  const { SqlClient: SqlClientService } = yield* loadSqlClient
  const sql = (yield* SqlClientService).withoutTransforms()
  const tableName = options.table ?? DEFAULT_TABLE
  const table = sql(tableName)

  // CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the table is
  // there, so a role limited to reading and writing an existing table looks first.
  const existing = yield* sql<{ oid: unknown }>`SELECT to_regclass(${quoteTableName(tableName)}) AS oid`.pipe(
    Effect.mapError(fromSqlError("open", tableName))
  )
  if (existing[0]?.oid === null || existing[0]?.oid === undefined) {
    // Two hosts starting together can both miss the table; the loser of that race sees
    // a unique violation on the catalog, and a second IF NOT EXISTS then finds the table.
    yield* sql`CREATE TABLE IF NOT EXISTS ${table} (
      key text COLLATE "C" PRIMARY KEY,
      value text NOT NULL
    )`.pipe(
      Effect.retry({ times: 1, while: (error) => error.reason._tag === "UniqueViolation" }),
      Effect.mapError(fromSqlError("open", tableName))
    )
  }

  // The stored JSON text of a row (the column is text; anything else is damage).
  const storedText = (operation: string, key: string, value: unknown): Effect.Effect<string, StorageError> =>
    typeof value === "string"
      ? Effect.succeed(value)
      : Effect.fail(corrupt(operation, key, `the stored value is a ${typeof value}, not JSON text`))

  const decodeValue = (operation: string, key: string, value: unknown) =>
    Effect.flatMap(storedText(operation, key, value), (text) => decodeJson(operation, key, text))

  const coalesce = options.coalesceReads === true ? readCoalescer(sql, table) : undefined

  const get = Effect.fnUntraced(function*(key: string) {
    yield* checkKey("get", key)
    const storedKey = encodeStoredKey(key)
    const rows = yield* (coalesce === undefined
      ? sql<{ value: unknown }>`SELECT value FROM ${table} WHERE key = ${storedKey}`
      : coalesce.read({ _tag: "Key", key: storedKey })).pipe(Effect.mapError(fromSqlError("get", key)))
    const row = rows[0]
    if (row === undefined) return Option.none<unknown>()
    return Option.some(yield* decodeValue("get", key, row.value))
  })

  const set = Effect.fnUntraced(function*(key: string, value: unknown) {
    yield* checkKey("set", key)
    const text = yield* encodeJson("set", key, value)
    yield* sql`INSERT INTO ${table} (key, value) VALUES (${encodeStoredKey(key)}, ${text})
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`.pipe(Effect.mapError(fromSqlError("set", key)))
  })

  const remove = Effect.fnUntraced(function*(key: string) {
    yield* checkKey("delete", key)
    yield* sql`DELETE FROM ${table} WHERE key = ${encodeStoredKey(key)}`.pipe(
      Effect.mapError(fromSqlError("delete", key))
    )
  })

  // A prefix is a range in code point order, which the primary key index scans even
  // in the generic plan of a prepared statement (a parameterised LIKE does not), and
  // no character of the prefix is special. COLLATE "C" keeps the range exact on a
  // table someone created with another collation. The order comes from sortKeys:
  // C sorts by code point, list promises UTF-16 code units, and the two differ once
  // astral characters are involved.
  const list = Effect.fnUntraced(function*(prefix: string) {
    const lower = encodeStoredKey(wellFormedHead(prefix))
    const upper = prefixUpperBound(lower)
    const rows = yield* (coalesce !== undefined
      ? coalesce.read({ _tag: "Range", lower, upper, keysOnly: true })
      : upper === undefined
      ? sql<{ key: string }>`SELECT key FROM ${table} WHERE key COLLATE "C" >= ${lower}`
      : sql<{ key: string }>`SELECT key FROM ${table} WHERE key COLLATE "C" >= ${lower} AND key COLLATE "C" < ${upper}`)
      .pipe(Effect.mapError(fromSqlError("list", prefix)))
    const keys: Array<string> = []
    for (const row of rows) {
      const key = decodeStoredKey(row.key)
      if (key === undefined) return yield* corrupt("list", row.key, "the stored key has a malformed escape")
      if (key.startsWith(prefix)) keys.push(key)
    }
    return sortKeys(keys)
  })

  // The same range as list, with the values: a ledger load is this one query.
  const scanRows = (prefix: string, together = false) => {
    const lower = encodeStoredKey(wellFormedHead(prefix))
    const upper = prefixUpperBound(lower)
    if (together && coalesce !== undefined) {
      return coalesce.read({ _tag: "Range", lower, upper }).pipe(Effect.mapError(fromSqlError("scan", prefix)))
    }
    return (upper === undefined
      ? sql<{ key: string; value: unknown }>`SELECT key, value FROM ${table} WHERE key COLLATE "C" >= ${lower}`
      : sql<{ key: string; value: unknown }>`SELECT key, value FROM ${table}
          WHERE key COLLATE "C" >= ${lower} AND key COLLATE "C" < ${upper}`)
      .pipe(Effect.mapError(fromSqlError("scan", prefix)))
  }

  // The rows under `prefix` (their keys decoded, sorted) with each value read by `read`.
  const scanWith = <A>(prefix: string, read: (key: string, value: unknown) => Effect.Effect<A, StorageError>) =>
    Effect.gen(function*() {
      const rows = yield* scanRows(prefix)
      const values = new Map<string, A>()
      for (const row of rows) {
        const key = decodeStoredKey(row.key)
        if (key === undefined) return yield* corrupt("scan", row.key, "the stored key has a malformed escape")
        if (key.startsWith(prefix)) values.set(key, yield* read(key, row.value))
      }
      return sortKeys([...values.keys()]).map((key) => [key, values.get(key) as A] as const)
    })

  const scan = (prefix: string) => scanWith(prefix, (key, value) => decodeValue("scan", key, value))

  // scan's rows with each value the JSON text as stored, unparsed: a ledger load reads
  // thousands, so each row costs a check and a map write, no effect of its own, and the
  // rows are sorted only when they did not come back in order.
  const scanText = (prefix: string) =>
    Effect.flatMap(scanRows(prefix, true), (rows): Effect.Effect<ReadonlyArray<readonly [string, string]>, StorageError> => {
      let found: Array<readonly [string, string]> = []
      let ordered = true
      for (const row of rows) {
        const key = decodeStoredKey(row.key)
        if (key === undefined) return Effect.fail(corrupt("scan", row.key, "the stored key has a malformed escape"))
        if (!key.startsWith(prefix)) continue
        if (typeof row.value !== "string") {
          return Effect.fail(corrupt("scan", key, `the stored value is a ${typeof row.value}, not JSON text`))
        }
        if (found.length > 0 && found[found.length - 1]![0] >= key) ordered = false
        found.push([key, row.value])
      }
      if (!ordered) {
        // Keys are unique in the table; were one listed twice, the later row wins, as in scan.
        found.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        found = found.filter(([key], i) => i + 1 === found.length || found[i + 1]![0] !== key)
      }
      return Effect.succeed(found)
    })

  const getMany = Effect.fnUntraced(function*(keys: ReadonlyArray<string>) {
    const found = new Map<string, unknown>()
    if (keys.length === 0) return found as ReadonlyMap<string, unknown>
    for (const key of keys) yield* checkKey("getMany", key)
    const stored = keys.map(encodeStoredKey)
    const rows = yield* sql<{ key: string; value: unknown }>`SELECT key, value FROM ${table} WHERE key = ANY(${stored})`
      .pipe(Effect.mapError(fromSqlError("getMany", keys.join(","))))
    for (const row of rows) {
      const key = decodeStoredKey(row.key)
      if (key === undefined) return yield* corrupt("getMany", row.key, "the stored key has a malformed escape")
      found.set(key, yield* decodeValue("getMany", key, row.value))
    }
    return found as ReadonlyMap<string, unknown>
  })

  // One statement each way. Under READ COMMITTED a concurrent UPDATE of the row makes
  // this one wait and re-check its WHERE against the new value, and ON CONFLICT DO
  // NOTHING makes exactly one of several inserts of an absent key win.
  const compareAndSet = Effect.fnUntraced(function*(key: string, expected: Option.Option<unknown>, next: unknown) {
    yield* checkKey("compareAndSet", key)
    const expectedText = yield* encodeExpected(key, expected)
    const nextText = yield* encodeJson("compareAndSet", key, next)
    const storedKey = encodeStoredKey(key)
    const rows = yield* (expectedText === undefined
      ? sql`INSERT INTO ${table} (key, value) VALUES (${storedKey}, ${nextText})
          ON CONFLICT (key) DO NOTHING RETURNING 1 AS done`
      : sql`UPDATE ${table} SET value = ${nextText} WHERE key = ${storedKey} AND value = ${expectedText}
          RETURNING 1 AS done`).pipe(Effect.mapError(fromSqlError("compareAndSet", key)))
    return rows.length === 1
  })

  // A fenced write is one statement: a CTE takes a share lock on the fence row while
  // checking its token, and the write happens only when that row qualified. A lease
  // compareAndSet (an UPDATE of that row) and a fenced write therefore serialise: a
  // takeover waits for the write in flight, and a write that waited for a takeover
  // re-checks the new row under READ COMMITTED and finds the token gone.
  const fenceRow = (fence: Fence) =>
    sql`SELECT 1 FROM ${table}
      WHERE key = ${encodeStoredKey(fence.key)} AND value::jsonb ->> 'token' = ${String(fence.token)}
      FOR SHARE`

  const setFenced = Effect.fnUntraced(function*(key: string, value: unknown, fence: Fence) {
    yield* checkKey("setFenced", key)
    yield* checkKey("setFenced", fence.key)
    const text = yield* encodeJson("setFenced", key, value)
    const rows = yield* sql`WITH fence AS (${fenceRow(fence)})
      INSERT INTO ${table} (key, value) SELECT ${encodeStoredKey(key)}, ${text} FROM fence
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
      RETURNING 1 AS done`.pipe(Effect.mapError(fromSqlError("setFenced", key)))
    if (rows.length !== 1) return yield* fenceRefused("setFenced", key, fence)
  })

  const deleteFenced = Effect.fnUntraced(function*(key: string, fence: Fence) {
    yield* checkKey("deleteFenced", key)
    yield* checkKey("deleteFenced", fence.key)
    const rows = yield* sql`WITH fence AS (${fenceRow(fence)}),
      gone AS (DELETE FROM ${table} WHERE key = ${encodeStoredKey(key)} AND EXISTS (SELECT 1 FROM fence))
      SELECT 1 AS held FROM fence`.pipe(Effect.mapError(fromSqlError("deleteFenced", key)))
    if (rows.length !== 1) return yield* fenceRefused("deleteFenced", key, fence)
  })

  return StorageAdapter.of({
    takesJsonText: true, get, set, delete: remove, list, scan, scanText, getMany, compareAndSet, setFenced, deleteFenced
  }) satisfies
    StorageAdapterShape
})

/**
 * Builds a Postgres storage with its own connection pool to `url`; the pool lives
 * as long as the scope.
 */
export const makeFromUrl = (
  url: string | Redacted.Redacted,
  options: PostgresStorageUrlOptions = {}
): Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope> =>
  Effect.gen(function*() {
    // The driver loads only when a pool is made: a process that never talks to
    // Postgres (a child agent on file storage) never pays for it.
    const { PgClient } = yield* Effect.promise((): Promise<typeof SqlPg> => import("@effect/sql-pg"))
    const { SqlClient: SqlClientService } = yield* loadSqlClient
    const { Reactivity: ReactivityService, make: makeReactivity } = yield* loadReactivity
    const client = yield* PgClient.make({
      url: Redacted.isRedacted(url) ? url : Redacted.make(url),
      ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections })
    }).pipe(
      Effect.provideServiceEffect(ReactivityService, makeReactivity),
      Effect.mapError(fromSqlError("connect", options.table ?? DEFAULT_TABLE))
    )
    // The pool is this storage's own: no caller's transaction is on it, so reads may merge.
    return yield* Effect.provideService(make({ ...options, coalesceReads: true }), SqlClientService, client)
  })

/**
 * A Postgres storage with a pool to `url` that is open only while it is used: the
 * first operation opens it, and once none has run for `idleMs` it is closed (the next
 * operation opens another). Its timer never holds the event loop, so a process that
 * forgets to close the storage still exits once it is idle, as `pg`'s
 * `allowExitOnIdle` lets a pool's process exit. Closing the scope closes the pool in
 * use. The Promise API's `createPostgresStorage` is built on it.
 */
export const makeFromUrlOpenWhileUsed = (
  url: string | Redacted.Redacted,
  options: PostgresStorageUrlOptions & { readonly idleMs: number }
): Effect.Effect<StorageAdapterShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    let current: { readonly scope: Scope.Closeable; readonly ready: Deferred.Deferred<StorageAdapterShape, StorageError> } | undefined
    let inFlight = 0
    let idleTimer: ReturnType<typeof setTimeout> | undefined
    let released = false
    const closeCurrent = Effect.suspend(() => {
      const open = current
      current = undefined
      return open === undefined ? Effect.void : Scope.close(open.scope, Exit.void)
    })
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        released = true
        clearTimeout(idleTimer)
        return closeCurrent
      })
    )
    /** The pool's storage, opened by the first caller that finds none; the others wait for it. */
    const storage = Effect.suspend((): Effect.Effect<StorageAdapterShape, StorageError> => {
      if (current !== undefined) return Deferred.await(current.ready)
      const opening = { scope: Scope.makeUnsafe(), ready: Deferred.makeUnsafe<StorageAdapterShape, StorageError>() }
      current = opening
      return Scope.provide(makeFromUrl(url, options), opening.scope).pipe(
        Effect.exit,
        Effect.flatMap((exit) => {
          // A pool that failed to open is not kept: the next operation tries again.
          if (Exit.isFailure(exit) && current === opening) current = undefined
          return Effect.andThen(
            Exit.isFailure(exit) ? Scope.close(opening.scope, Exit.void) : Effect.void,
            Deferred.done(opening.ready, exit)
          )
        }),
        Effect.uninterruptible,
        Effect.andThen(Deferred.await(opening.ready))
      )
    })
    const idle = () => {
      if (inFlight === 0 && !released) Effect.runFork(closeCurrent)
    }
    const use = <A>(operation: (open: StorageAdapterShape) => Effect.Effect<A, StorageError>) =>
      Effect.suspend(() => {
        clearTimeout(idleTimer)
        inFlight++
        return Effect.flatMap(storage, operation).pipe(
          Effect.ensuring(Effect.sync(() => {
            if (--inFlight === 0 && !released) {
              idleTimer = setTimeout(idle, options.idleMs)
              idleTimer.unref()
            }
          }))
        )
      })
    return {
      takesJsonText: true,
      get: (key) => use((open) => open.get(key)),
      set: (key, value) => use((open) => open.set(key, value)),
      delete: (key) => use((open) => open.delete(key)),
      list: (prefix) => use((open) => open.list(prefix)),
      getMany: (keys) => use((open) => open.getMany!(keys)),
      scan: (prefix) => use((open) => open.scan!(prefix)),
      scanText: (prefix) => use((open) => open.scanText!(prefix)),
      compareAndSet: (key, expected, next) => use((open) => open.compareAndSet!(key, expected, next)),
      setFenced: (key, value, fence) => use((open) => open.setFenced!(key, value, fence)),
      deleteFenced: (key, fence) => use((open) => open.deleteFenced!(key, fence))
    } satisfies StorageAdapterShape
  })

/** A Postgres storage on the application's `SqlClient`, for the life of the layer. */
export const layer = (
  options: PostgresStorageOptions = {}
): Layer.Layer<StorageAdapter, StorageError, SqlClient.SqlClient> => Layer.effect(StorageAdapter, make(options))

/** A Postgres storage with its own connection pool to `url`, closed when the layer is released. */
export const layerFromUrl = (
  url: string | Redacted.Redacted,
  options: PostgresStorageUrlOptions = {}
): Layer.Layer<StorageAdapter, StorageError> => Layer.effect(StorageAdapter, makeFromUrl(url, options))
