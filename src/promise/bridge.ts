/**
 * The one place that links facade objects to the engine objects behind them: a
 * facade context to its engine context, a facade storage, checkpoint store, durable
 * outbound queue or subprocess adapter to the engine service it wraps (and a file or
 * SQLite storage to where it keeps its data, which child processes open themselves),
 * a facade step to the subprocess adapter it was built with.
 *
 * Links are non-enumerable properties under `Symbol.for` keys (for contexts, made per
 * step body, a getter on their prototype), so an object made by one copy of this
 * package (its ESM build) is still recognised by another (its CJS build), and a
 * spread copy of an object does not carry its link.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { StorageError } from "../Errors.ts"
import type { AgentContext as EngineContext } from "../harness/AgentContext.ts"
import type { CheckpointStoreShape } from "../services/CheckpointStore.ts"
import type { DurableOutboundQueueShape } from "../services/DurableOutboundQueue.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { SubprocessAdapterShape } from "../services/SubprocessAdapter.ts"
import type { FileStats } from "../harness/FilesystemLayer.ts"

/** One kind of link, from facade objects to their engine objects. */
export interface Link<E> {
  /** Links `facade` to `engine`, and returns `facade`. */
  readonly attach: <F extends object>(facade: F, engine: E) => F
  /**
   * Links every object made with `prototype` to what `read` finds on it: a getter on the
   * prototype, for a kind of object made too often for a property of its own each.
   */
  readonly attachEach: <F extends object>(prototype: F, read: (facade: F) => E | undefined) => void
  /** The engine object behind `facade`, if it has one. */
  readonly get: (facade: object) => E | undefined
  /** The engine object behind `facade`; an object of this kind without one is a bug of this library. */
  readonly of: (facade: object) => E
  /** Whether `facade` has an engine object of this kind behind it. */
  readonly has: (facade: object) => boolean
}

const makeLink = <E>(kind: string): Link<E> => {
  const key = Symbol.for(`noetic-effect/promise/bridge/${kind}`)
  const get = (facade: object): E | undefined => (facade as Record<symbol, E | undefined>)[key]
  return {
    attach: (facade, engine) => Object.defineProperty(facade, key, { value: engine, enumerable: false }),
    attachEach: (prototype, read) =>
      void Object.defineProperty(prototype, key, {
        get(this: typeof prototype) {
          return read(this)
        },
        enumerable: false
      }),
    get,
    of: (facade) => {
      const engine = get(facade)
      if (engine === undefined) throw new TypeError(`noetic-effect: this object has no engine ${kind} behind it`)
      return engine
    },
    has: (facade) => get(facade) !== undefined
  }
}

/** A facade context (and every step view of it) to its engine context. */
export const context: Link<EngineContext> = makeLink("context")

/** The reads of an `FsAdapter` (`ipc.ts`) the `filesystem()` layer makes. */
export interface FsReads {
  stat(path: string): Promise<FileStats>
  lstat(path: string): Promise<FileStats>
  readFileText(path: string): Promise<string>
}

/** An engine root context to the `environment.fs` of the harness that made it (the `filesystem()` layer reads through it). */
export const environmentFs: Link<FsReads> = makeLink("environmentFs")

/** A storage made by this library's factories to the engine storage it wraps (built once, lazily). */
export const storage: Link<Effect.Effect<StorageAdapterShape, StorageError>> = makeLink("storage")

/** The directory of a storage made by `createFileStorage`. */
export const fileStorageRoot: Link<string> = makeLink("fileStorageRoot")

/** The database file of a storage made by `createSqliteStorage`. */
export const sqliteStoragePath: Link<string> = makeLink("sqliteStoragePath")

/** A checkpoint store made by `createCheckpointStore` to the engine store it wraps (built once, lazily). */
export const checkpointStore: Link<Effect.Effect<CheckpointStoreShape, StorageError>> = makeLink("checkpointStore")

/** A durable outbound queue made by `createDurableOutboundQueue` to the engine queue it wraps. */
export const durableQueue: Link<DurableOutboundQueueShape> = makeLink("durableQueue")

/** A subprocess adapter made by this library to the engine adapter it wraps (built once, lazily). */
export const subprocessAdapter: Link<Effect.Effect<SubprocessAdapterShape>> = makeLink("subprocessAdapter")

/** A facade step to the facade subprocess adapter it was built with (`subprocess` option). */
export const stepSubprocess: Link<unknown> = makeLink("stepSubprocess")
