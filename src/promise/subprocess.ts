/**
 * Promise-shaped subprocess adapters and handles, over the `SubprocessAdapter` service.
 *
 * @since 0.1.0
 */
import { Effect, Exit, Option, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as InMemorySubprocessAdapter from "../layers/InMemorySubprocessAdapter.ts"
import * as LocalSubprocessAdapter from "../layers/LocalSubprocessAdapter.ts"
import type { V1ServerFrame } from "../schema/IpcFrame.ts"
import type { HandleStatus, SubprocessAdapterShape, SubprocessHandle as EngineHandle } from "../services/SubprocessAdapter.ts"
import { type CheckpointStore, toEngineCheckpointStore } from "./checkpoint.ts"
import { NoeticError } from "./errors.ts"
import { fileStorageRoot, runForFacade, sqliteStoragePath, type StorageAdapter, toEngineStorage } from "./storage.ts"

/** A running or settled child, with Promises. */
export interface SubprocessHandle {
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string | undefined
  readonly metadata: Readonly<Record<string, unknown>>
  status(): Promise<HandleStatus>
  /** The child's output; rejects with `NoeticError` when it failed or was stopped. */
  await(): Promise<unknown>
}

/** The documented adapter surface: spawn happens through the harness; these find children. */
export interface SubprocessAdapter {
  get(handleId: string): Promise<SubprocessHandle | null>
  stop(handleId: string): Promise<void>
  listLive(): Promise<ReadonlyArray<SubprocessHandle>>
  reattach(handleId: string): Promise<SubprocessHandle | null>
}

const engineSubprocessAdapter = Symbol.for("noetic-effect/promise/engineSubprocessAdapter")

interface EngineBacked {
  readonly [engineSubprocessAdapter]: Effect.Effect<SubprocessAdapterShape>
}

/** The Promise view of an engine handle. */
export const toFacadeHandle = (handle: EngineHandle): SubprocessHandle => ({
  handleId: handle.handleId,
  stepId: handle.stepId,
  executionId: handle.executionId,
  parentExecutionId: handle.parentExecutionId,
  metadata: handle.metadata,
  status: () => runForFacade(handle.status),
  await: () => runForFacade(handle.await)
})

/** Wraps an engine adapter (built lazily, once) as a Promise adapter. */
export const fromEngineSubprocessAdapter = (
  build: Effect.Effect<SubprocessAdapterShape>
): SubprocessAdapter & EngineBacked => {
  const engine = Effect.runSync(Effect.cached(build))
  const use = <A, E>(f: (adapter: SubprocessAdapterShape) => Effect.Effect<A, E>) =>
    runForFacade(Effect.flatMap(engine, f))
  return {
    [engineSubprocessAdapter]: engine,
    get: (handleId) => use((a) => Effect.map(a.get(handleId), (h) => Option.getOrNull(Option.map(h, toFacadeHandle)))),
    stop: (handleId) => use((a) => a.stop(handleId)),
    listLive: () => use((a) => Effect.map(a.listLive, (handles) => handles.map(toFacadeHandle))),
    reattach: (handleId) =>
      use((a) => Effect.map(a.reattach(handleId), (h) => Option.getOrNull(Option.map(h, toFacadeHandle))))
  }
}

/** The engine adapter behind a facade adapter, or undefined for one not made by this library. */
export const toEngineSubprocessAdapter = (
  adapter: SubprocessAdapter
): Effect.Effect<SubprocessAdapterShape> | undefined =>
  engineSubprocessAdapter in adapter ? (adapter as SubprocessAdapter & EngineBacked)[engineSubprocessAdapter] : undefined

// -----------------------------------------------------------------------------
// Adapters and host restart
// -----------------------------------------------------------------------------

/** A subprocess adapter made by this facade: `close()` ends the children it owns (see `outliveHost`). */
export interface OwnedSubprocessAdapter extends SubprocessAdapter {
  /** Closes the adapter's scope: stops its children unless they were spawned to outlive the host. */
  close(): Promise<void>
}

const owned = (
  build: (scope: Scope.Scope) => Effect.Effect<SubprocessAdapterShape>
): OwnedSubprocessAdapter => {
  const scope = Scope.makeUnsafe()
  const adapter = fromEngineSubprocessAdapter(build(scope))
  return Object.assign(adapter, { close: () => runForFacade(Scope.close(scope, Exit.void)) })
}

/** Options of `createLocalSubprocessAdapter`; see `LocalSubprocessAdapter` for each default. */
export interface LocalSubprocessAdapterOptions
  extends Omit<LocalSubprocessAdapter.LocalSubprocessAdapterOptions, "root" | "checkpointRoot" | "onFrame">
{
  /**
   * Sees every frame a child streams (items, events, `askUserRequest`, `askUserCleared`);
   * answer a prompt with the adapter's `answerAskUser`. What it throws is logged.
   */
  readonly onFrame?: (handle: SubprocessHandle, frame: V1ServerFrame) => void | Promise<void>
  /** The subprocess storage: must come from `createFileStorage` or `createSqliteStorage`, since the children open it too. */
  readonly storage?: StorageAdapter
  /** The subprocess root as a directory, instead of `storage`. */
  readonly root?: string
  /**
   * Where children checkpoint: a `createFileStorage` or `createSqliteStorage` storage.
   * Default: `checkpoints/` beside a subprocess root directory, else the home's
   * `checkpoints/checkpoints.db`.
   */
  readonly checkpointStorage?: StorageAdapter
}

const rootOf = (storage: StorageAdapter | undefined, what: string): string | undefined => {
  if (storage === undefined) return undefined
  const root = fileStorageRoot(storage)
  if (root !== undefined) return root
  const database = sqliteStoragePath(storage)
  if (database === undefined) {
    throw new NoeticError({
      code: "SUBPROCESS_STORAGE_NOT_FILE",
      message: `${what} must be made by createFileStorage or createSqliteStorage: child processes open it themselves`
    })
  }
  // The children tell a database from a directory by what is on disk, so the file
  // exists before they look (an empty file is an empty SQLite database).
  Fs.mkdirSync(Path.dirname(Path.resolve(database)), { recursive: true, mode: 0o700 })
  Fs.closeSync(Fs.openSync(database, "a", 0o600))
  return database
}

/**
 * The local adapter: each detached child runs in its own `node` process and process
 * group, survives a host crash, and is reattached by `reattachLiveChildren` on the next
 * boot. Steps must be exported by modules without top-level side effects (the child
 * imports them), or give `entry`.
 */
export const createLocalSubprocessAdapter = (
  options: LocalSubprocessAdapterOptions = {}
): LocalSubprocessAdapterFacade => {
  const { checkpointStorage, onFrame, root, storage, ...rest } = options
  const subprocessRoot = rootOf(storage, "storage") ?? root
  const checkpointRoot = rootOf(checkpointStorage, "checkpointStorage")
  let local: LocalSubprocessAdapter.LocalSubprocessAdapterShape | undefined
  const adapter = owned((scope) =>
    LocalSubprocessAdapter.make({
      ...rest,
      ...(subprocessRoot === undefined ? {} : { root: subprocessRoot }),
      ...(checkpointRoot === undefined ? {} : { checkpointRoot }),
      ...(onFrame === undefined ? {} : {
        onFrame: (handle, frame) => Effect.tryPromise(() => Promise.resolve(onFrame(toFacadeHandle(handle), frame))).pipe(Effect.ignore)
      })
    }).pipe(Scope.provide(scope), Effect.orDie, Effect.tap((built) => Effect.sync(() => void (local = built))))
  )
  // The engine adapter is built lazily, once; `local` is set when it is.
  const built = toEngineSubprocessAdapter(adapter)!
  return Object.assign(adapter, {
    answerAskUser: (handleId: string, promptId: string, output: unknown) =>
      runForFacade(Effect.flatMap(built, () => local!.answerAskUser(handleId, promptId, output)))
  })
}

/** The local adapter of the facade: an owned adapter that also answers its children's prompts. */
export interface LocalSubprocessAdapterFacade extends OwnedSubprocessAdapter {
  /** Answers a child's pending ask-user prompt; the child's `askUser` resolves with `output`. */
  answerAskUser(handleId: string, promptId: string, output: unknown): Promise<void>
}

/**
 * The in-memory adapter: children run in this process. With `storage` every spawn
 * writes a manifest, and after a restart `reattach` re-runs the step from its
 * persisted input (its completed steps replay when `checkpointStore` is given).
 */
export const createInMemorySubprocessAdapter = (
  options: { readonly storage?: StorageAdapter; readonly checkpointStore?: CheckpointStore } = {}
): OwnedSubprocessAdapter =>
  owned((scope) =>
    Effect.gen(function*() {
      const storage = options.storage === undefined ? undefined : yield* toEngineStorage(options.storage)
      const store = options.checkpointStore === undefined ? undefined : toEngineCheckpointStore(options.checkpointStore)
      const checkpointStore = store === undefined ? undefined : yield* store
      return yield* InMemorySubprocessAdapter.make({ storage, checkpointStore })
    }).pipe(Scope.provide(scope), Effect.orDie)
  )

