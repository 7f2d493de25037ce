/**
 * Promise-shaped storage adapters, as the documented API has them, and the bridge
 * both ways between them and the `StorageAdapter` service.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import { Io, StorageError } from "../Errors.ts"
import * as FileStorage from "../layers/FileStorage.ts"
import * as PostgresStorage from "../layers/PostgresStorage.ts"
import * as SqliteStorage from "../layers/SqliteStorage.ts"
import { roots } from "../NoeticHome.ts"
import {
  closedError,
  make as makeStorage,
  makeMemory,
  type StorageAdapterShape,
  whileOpen
} from "../services/StorageAdapter.ts"
import * as Bridge from "./bridge.ts"
import { unwrapExit } from "./errors.ts"

/** The documented storage adapter shape; `getMany` is optional. */
export interface StorageAdapter {
  get<T = unknown>(key: string): Promise<T | null>
  set<T = unknown>(key: string, value: T): Promise<void>
  delete(key: string): Promise<void>
  list(prefix: string): Promise<Array<string>>
  getMany?<T = unknown>(keys: ReadonlyArray<string>): Promise<Map<string, T>>
}

/** A storage made by this module: `close()` (and `await using`) releases what it holds. */
export interface ClosableStorageAdapter extends StorageAdapter {
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** Wraps an engine storage (built lazily, once) as a Promise adapter. */
const fromEngine = (build: Effect.Effect<StorageAdapterShape, StorageError>): ClosableStorageAdapter => {
  const cached = Effect.runSync(Effect.cached(build))
  const use = <A>(f: (storage: StorageAdapterShape) => Effect.Effect<A, StorageError>) => runForFacade(Effect.flatMap(cached, f))
  return Bridge.storage.attach({
    get: <T>(key: string) => use((s) => Effect.map(s.get(key), (value) => Option.getOrNull(value) as T | null)),
    set: (key, value) => use((s) => s.set(key, value)),
    delete: (key) => use((s) => s.delete(key)),
    list: (prefix) => use((s) => Effect.map(s.list(prefix), (keys) => [...keys])),
    getMany: <T>(keys: ReadonlyArray<string>) =>
      use((s) => Effect.map(s.getMany(keys), (found) => new Map(found) as Map<string, T>)),
    // File and memory storages hold nothing between calls; Postgres and SQLite override both.
    close: () => Promise.resolve(),
    [Symbol.asyncDispose]: () => Promise.resolve()
  } satisfies ClosableStorageAdapter, cached)
}

/**
 * A storage that holds what `open` acquires (a connection pool, a database handle) in
 * a scope of its own, opened on first use, until `close()` closes the scope. Once
 * closed, every operation fails with `StorageError` reason `Io` ("the <kind> storage is
 * closed"), whether called through the returned adapter or through an engine that took
 * the storage with `toEngineStorage`: the check sits in the engine shape itself.
 */
const scopedStorage = (
  kind: string,
  location: string,
  open: Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope>
): ClosableStorageAdapter => {
  const scope = Scope.makeUnsafe()
  let closed = false
  const isClosed = () => closed
  // The engine's guard (`whileOpen` in services/StorageAdapter.ts) on every operation of the opened storage.
  const opened = Effect.suspend(() =>
    closed
      ? Effect.fail(closedError(kind, "open", location))
      : Effect.map(Scope.provide(open, scope), (storage) => whileOpen(storage, kind, isClosed))
  )
  const adapter = fromEngine(opened)
  const close = () =>
    runForFacade(Effect.suspend(() => {
      closed = true
      return Scope.close(scope, Exit.void)
    }))
  return Object.assign(adapter, { close, [Symbol.asyncDispose]: close })
}

/** An in-memory storage: it stores a JSON copy of each value, like a disk would. */
export const createInMemoryStorage = (): ClosableStorageAdapter => fromEngine(makeMemory)

/**
 * Reads many keys at once, as noetic's `storageGetMany`: the storage's `getMany` when it
 * has one, else a parallel `get` of each key. Keys with no value are absent from the map.
 */
export const storageGetMany = async <T>(
  storage: Pick<StorageAdapter, "get" | "getMany">,
  keys: ReadonlyArray<string>
): Promise<Map<string, T>> => {
  if (keys.length === 0) return new Map()
  if (storage.getMany !== undefined) return storage.getMany<T>([...keys])
  const values = await Promise.all(keys.map((key) => storage.get<T>(key)))
  const found = new Map<string, T>()
  keys.forEach((key, i) => {
    const value = values[i]
    if (value !== null && value !== undefined) found.set(key, value)
  })
  return found
}

/**
 * A durable storage under `root`: one fsynced file per key, created 0600 in a 0700
 * directory. Without `root` it is `$NOETIC_HOME/checkpoints`, else `~/.noetic/checkpoints`.
 */
export const createFileStorage = (options: { readonly root?: string | undefined } = {}): ClosableStorageAdapter => {
  const root = Path.resolve(options.root ?? roots().checkpoints)
  // The local subprocess adapter's children open the same directory themselves.
  return Bridge.fileStorageRoot.attach(fromEngine(FileStorage.make({ root })), root)
}

/** The directory of a storage made by `createFileStorage`; undefined for any other storage. */
export const fileStorageRoot = (adapter: StorageAdapter): string | undefined => Bridge.fileStorageRoot.get(adapter)

/** A Postgres storage of the facade; it owns a connection pool that `close()` releases. */
export interface PostgresStorageAdapter extends ClosableStorageAdapter {
  /** Releases the connection pool; later calls reject with a `STORAGE_IO` error. */
  close(): Promise<void>
}

/**
 * A durable storage in a Postgres table (default `noetic_storage`, created when
 * missing). It connects on first use and lets its pool go once it has had nothing to
 * do for `idleCloseMs` (it connects again at the next operation), so a process that
 * forgets `close()` still exits; `close()` releases the pool at once.
 */
export const createPostgresStorage = (options: {
  readonly url: string
  readonly table?: string
  readonly maxConnections?: number
  /**
   * How long the pool stays open with nothing to do, in ms (default 1,000): it opens
   * again at the next operation. Idle, it holds nothing that keeps the process alive.
   */
  readonly idleCloseMs?: number
}): PostgresStorageAdapter =>
  scopedStorage(
    "Postgres",
    options.table ?? PostgresStorage.DEFAULT_TABLE,
    PostgresStorage.makeFromUrlOpenWhileUsed(options.url, {
      ...options,
      idleMs: Math.max(0, options.idleCloseMs ?? DEFAULT_POSTGRES_IDLE_CLOSE_MS)
    })
  )

/** How long the Promise API's Postgres pool stays open with nothing to do. */
const DEFAULT_POSTGRES_IDLE_CLOSE_MS = 1_000

/** A SQLite storage of the facade; it holds the database open until `close()`. */
export interface SqliteStorageAdapter extends StorageAdapter, AsyncDisposable {
  /** Commits the writes in flight and closes the database; later calls reject with a `STORAGE_IO` error. */
  close(): Promise<void>
}

/**
 * A durable storage in one SQLite database file (WAL, `synchronous=FULL`), created
 * with its directory (0700, file 0600) when missing. It opens the file on first use;
 * call `close()` when done. Several processes may share the file.
 */
export const createSqliteStorage = (options: {
  readonly path: string
  readonly lockTimeoutMs?: number
  /** Whether the first opener grows a new write-ahead log to its steady size (default true; see `SqliteStorage`). */
  readonly reserveLog?: boolean
}): SqliteStorageAdapter => {
  const adapter = scopedStorage("SQLite", options.path, SqliteStorage.make(options))
  // The local subprocess adapter's children open the same database file themselves.
  return Bridge.sqliteStoragePath.attach(adapter, options.path)
}

/**
 * The default storage of a Noetic home (`home`, else `$NOETIC_HOME`, else `~/.noetic`):
 * `checkpoints/checkpoints.db` for snapshots and step ledgers, `subprocess/subprocess.db`
 * for subprocess manifests and IPC queues. Removing the home discards all recovery data.
 */
export const createHomeStorage = (
  which: "checkpoints" | "subprocess",
  options: { readonly home?: string } = {}
): SqliteStorageAdapter => {
  const home = roots(options.home)
  return createSqliteStorage({ path: which === "checkpoints" ? home.checkpointsDatabase : home.subprocessDatabase })
}

/** The database file of a storage made by `createSqliteStorage`; undefined for any other storage. */
export const sqliteStoragePath = (adapter: StorageAdapter): string | undefined => Bridge.sqliteStoragePath.get(adapter)

const hostFailure = (operation: string, key: string) => (cause: unknown) =>
  new StorageError({
    operation,
    reason: new Io({ key, message: cause instanceof Error ? cause.message : String(cause), cause })
  })

/**
 * The engine view of a Promise adapter. Adapters made by this module hand back the
 * engine storage they wrap; any other adapter (one a host wrote) is called through
 * its Promises, and its rejections become `StorageError` with reason `Io`.
 */
export const toEngineStorage = (adapter: StorageAdapter): Effect.Effect<StorageAdapterShape, StorageError> => {
  const engine = Bridge.storage.get(adapter)
  if (engine !== undefined) return engine
  const shape: StorageAdapterShape = makeStorage({
    get: (key) =>
      Effect.tryPromise({ try: () => adapter.get(key), catch: hostFailure("get", key) }).pipe(
        Effect.map((value) => (value === null || value === undefined ? Option.none() : Option.some(value)))
      ),
    set: (key, value) => Effect.tryPromise({ try: () => adapter.set(key, value), catch: hostFailure("set", key) }),
    delete: (key) => Effect.tryPromise({ try: () => adapter.delete(key), catch: hostFailure("delete", key) }),
    list: (prefix) =>
      Effect.tryPromise({ try: () => adapter.list(prefix), catch: hostFailure("list", prefix) }).pipe(
        Effect.map((keys) => [...keys].sort())
      ),
    ...(adapter.getMany === undefined ? {} : {
      getMany: (keys: ReadonlyArray<string>) =>
        Effect.tryPromise({ try: () => adapter.getMany!(keys), catch: hostFailure("getMany", keys.join(",")) })
    })
  })
  return Effect.succeed(shape)
}

/** Runs an effect for a facade caller: resolves with its value or rejects with a facade error. */
export const runForFacade = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit: Exit.Exit<A, E>) => unwrapExit(exit))
