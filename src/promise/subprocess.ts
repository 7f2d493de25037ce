/**
 * Promise-shaped subprocess adapters and handles, over the `SubprocessAdapter` service.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import { nodeFs as Fs } from "../internal/builtins.ts"
import * as InMemorySubprocessAdapter from "../layers/InMemorySubprocessAdapter.ts"
import * as LocalSubprocessAdapter from "../layers/LocalSubprocessAdapter.ts"
import type { V1ServerFrame } from "../schema/IpcFrame.ts"
import {
  type HandleStatus,
  type ProcessRequest,
  SpawnFailed,
  type SpawnRequest,
  type SubprocessAdapterShape,
  SubprocessError,
  type SubprocessHandle as EngineHandle
} from "../services/SubprocessAdapter.ts"
import { makeDirectorySync } from "../internal/makeDirectory.ts"
import * as Bridge from "./bridge.ts"
import { type CheckpointStore, toEngineCheckpointStore } from "./checkpoint.ts"
import { childError, childFailedReason, isNoeticError, NoeticConfigError, NoeticError, toFacadeError } from "./errors.ts"
import { fileStorageRoot, runForFacade, sqliteStoragePath, type StorageAdapter, toEngineStorage } from "./storage.ts"

/** noetic's lifecycle states of a subprocess handle. */
export type SubprocessStatus = "starting" | "running" | "paused" | "completed" | "failed" | "stopped" | "stale"

/** An error as a plain object, carried on `handle.metadata.error`. */
export interface SerializedError {
  readonly message: string
  readonly name?: string | undefined
  readonly stack?: string | undefined
  readonly noeticError?: unknown
}

/** The well-known keys of `SubprocessHandle.metadata`, beside the caller's own. */
export interface SubprocessHandleMetadata extends Record<string, unknown> {
  /** The step's output, once it completed. */
  readonly result?: unknown
  /** Why it failed or was stopped. */
  readonly error?: SerializedError | undefined
  /** The execution id the child runs under. */
  readonly executionId?: string | undefined
}

/** noetic's handle: a durable reference to a child. A host-written adapter returns these. */
export interface SubprocessHandle {
  readonly id: string
  readonly status: SubprocessStatus
  /** ISO-8601. */
  readonly startedAt: string
  readonly updatedAt?: string | undefined
  readonly metadata?: SubprocessHandleMetadata | undefined
}

/** A handle of an adapter made by this library: noetic's fields, read live, plus the engine's. */
export interface LiveSubprocessHandle extends SubprocessHandle {
  readonly metadata: SubprocessHandleMetadata
  /** The same as `id`. */
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string | undefined
  /** The child's output; rejects with `NoeticError` when it failed or was stopped. */
  await(): Promise<unknown>
}

/** noetic's request to run an operating-system command (`kind` may be omitted). */
export interface ProcessSubprocessRequest {
  readonly kind?: "process" | undefined
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  readonly cwd?: string | undefined
  readonly env?: Record<string, string | undefined> | undefined
  readonly detached?: boolean | undefined
  readonly stdin?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
}

/** Child-context overrides of a step request. */
export interface StepSubprocessOverrides {
  readonly threadId?: string | undefined
  readonly resourceId?: string | undefined
  readonly cwdInit?: string | undefined
}

/** noetic's request to run a step, as the harness hands it to an adapter. */
export interface StepSubprocessRequest {
  readonly kind: "step"
  readonly stepId: string
  /** The step's input (JSON-safe). */
  readonly serializedInput: unknown
  readonly executionId: string
  readonly overrides: StepSubprocessOverrides
  readonly metadata?: Record<string, unknown> | undefined
  /** Runs the step in this process; an adapter that crosses a process boundary ignores it. */
  readonly _localExecutor?: (() => Promise<unknown>) | undefined
}

/** Every request `SubprocessAdapter.spawn` accepts. */
export type SubprocessRequest = ProcessSubprocessRequest | StepSubprocessRequest

/** What `stop` resolves with. */
export interface SubprocessStopResult {
  readonly kind: "stopped" | "not_found"
  readonly handleId: string
  readonly handle?: SubprocessHandle | undefined
}

/** What `pause` and `resume` resolve with. */
export type SubprocessControlResult =
  | { readonly kind: "ok"; readonly handle: SubprocessHandle }
  | { readonly kind: "unsupported"; readonly handle: SubprocessHandle; readonly message: string }
  | { readonly kind: "not_found"; readonly handleId: string }

/**
 * noetic's `SubprocessAdapter`. A host may pass its own object with these methods as
 * `environment.subprocess`, a `detachedSpawn` override or a step's `subprocess`: it is
 * used for that dispatch (see `subprocessBridge`).
 */
export interface SubprocessAdapter {
  spawn(request: SubprocessRequest): Promise<SubprocessHandle>
  get(handleId: string): Promise<SubprocessHandle | null>
  /** Never rejects for an unknown id: resolves `{ kind: 'not_found' }`. */
  stop(handleId: string, reason?: string): Promise<SubprocessStopResult>
  pause(handleId: string): Promise<SubprocessControlResult>
  resume(handleId: string): Promise<SubprocessControlResult>
  isAlive(handle: SubprocessHandle): Promise<boolean>
  reattach(handleId: string): Promise<SubprocessHandle | null>
  listLive(): Promise<ReadonlyArray<SubprocessHandle>>
}

/** An adapter made by this library: its handles are live ones. */
export interface EngineSubprocessAdapter extends SubprocessAdapter {
  spawn(request: SubprocessRequest): Promise<LiveSubprocessHandle>
  get(handleId: string): Promise<LiveSubprocessHandle | null>
  reattach(handleId: string): Promise<LiveSubprocessHandle | null>
  listLive(): Promise<ReadonlyArray<LiveSubprocessHandle>>
}

const facadeStatus = (status: HandleStatus): SubprocessStatus =>
  status === "succeeded" ? "completed" : status

const iso = (millis: number) => new Date(millis).toISOString()

/** A failure as noetic carries it on `metadata.error` (a `NoeticError` with its `noeticError` payload). */
export const serializeError = (error: unknown): SerializedError => {
  if (error instanceof Error) {
    return {
      message: error.message,
      name: error.name,
      ...(error.stack === undefined ? {} : { stack: error.stack }),
      ...(isNoeticError(error) ? { noeticError: error.noeticError } : {})
    }
  }
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    const name = "name" in error && typeof error.name === "string" ? error.name : undefined
    return { message: error.message, ...(name === undefined ? {} : { name }) }
  }
  return { message: String(error) }
}

const views = new WeakMap<EngineHandle, LiveSubprocessHandle>()

/** noetic's `metadata.stopReason`: the reason the engine keeps with a stopped child. */
const stopReasonOf = (handle: EngineHandle): { readonly stopReason?: string } => {
  const reason = handle.stopReason === undefined ? undefined : Effect.runSync(handle.stopReason)
  return reason === undefined ? {} : { stopReason: reason }
}
/** Resolves once a view shows everything the engine knows (a settled child's result or error). */
const ready = new WeakMap<LiveSubprocessHandle, () => Promise<void>>()

/**
 * The Promise view of an engine handle (one per handle): noetic's fields read live,
 * `metadata.result` / `metadata.error` once it settled.
 */
export const toFacadeHandle = (handle: EngineHandle): LiveSubprocessHandle => {
  const known = views.get(handle)
  if (known !== undefined) return known
  const startedAt = iso(handle.startedAt ?? Date.now())
  let updatedAt = startedAt
  let settled: { readonly status: SubprocessStatus; readonly result?: unknown; readonly error?: SerializedError } | undefined
  // One observer per handle: what await() resolves with is recorded on the view first,
  // so whoever saw await() settle sees the same outcome in status and metadata.
  let outcome: Promise<unknown> | undefined
  let failure: unknown
  /** Records how the engine handle settled on the view; returns the facade error of a failure. */
  const record = (exit: Exit.Exit<unknown, SubprocessError>): unknown => {
    updatedAt = new Date().toISOString()
    if (Exit.isSuccess(exit)) {
      settled = { status: "completed", result: exit.value }
      return undefined
    }
    const error = Cause.findErrorOption(exit.cause)
    const stoppedChild = Option.isSome(error) && error.value.reason._tag === "Stopped"
    const facadeError = toFacadeError(Option.isSome(error) ? error.value : Cause.squash(exit.cause))
    // A child's own failure is recorded as the child's error (noetic's metadata.error), not the adapter's wrapper.
    const child = Option.isSome(error) ? childFailedReason(error.value) : undefined
    settled = {
      status: stoppedChild ? "stopped" : "failed",
      error: serializeError(child === undefined ? facadeError : childError(child.error))
    }
    failure = facadeError
    return facadeError
  }
  const observe = () => {
    outcome ??= settled !== undefined
      ? (settled.status === "completed" ? Promise.resolve(settled.result) : Promise.reject(failure))
      : Effect.runPromiseExit(handle.await).then((exit) => {
        const failed = record(exit)
        if (Exit.isSuccess(exit)) return exit.value
        throw failed
      })
    return outcome
  }
  const currentStatus = (): SubprocessStatus => {
    // A settled child stopped afterwards reports `stopped` (its outcome stays on the metadata).
    if (settled !== undefined) {
      return settled.status !== "stopped" && Effect.runSync(handle.status) === "stopped" ? "stopped" : settled.status
    }
    const status = facadeStatus(Effect.runSync(handle.status))
    if (status === "running" && handle.paused !== undefined && Effect.runSync(handle.paused)) return "paused"
    if (status !== "running") {
      // Settled in the engine: its outcome is already there, so it is read at once and
      // put on the metadata before a terminal status shows.
      const exit = Effect.runSyncExit(handle.await)
      if (Exit.isSuccess(exit) || Option.isSome(Cause.findErrorOption(exit.cause))) {
        record(exit)
        return settled!.status
      }
      // Not readable synchronously: it reads as running until it has been observed.
      observe().catch(() => {})
      return "running"
    }
    return status
  }
  const view: LiveSubprocessHandle = {
    id: handle.handleId,
    handleId: handle.handleId,
    stepId: handle.stepId,
    executionId: handle.executionId,
    parentExecutionId: handle.parentExecutionId,
    startedAt,
    get status() {
      return currentStatus()
    },
    get updatedAt() {
      return updatedAt
    },
    get metadata(): SubprocessHandleMetadata {
      return {
        ...handle.metadata,
        kind: handle.stepId.startsWith("process:") ? "process" : "step",
        stepId: handle.stepId,
        executionId: handle.executionId,
        ...(settled === undefined ? {} : settled.status === "completed" ? { result: settled.result } : { error: settled.error }),
        ...stopReasonOf(handle)
      }
    },
    await: observe
  }
  views.set(handle, view)
  ready.set(view, () => {
    const status = Effect.runSync(handle.status)
    return status === "running" || settled !== undefined ? Promise.resolve() : observe().then(() => {}, () => {})
  })
  return view
}

/** The view of `handle`, once it shows a settled child's outcome. */
const readyView = (handle: EngineHandle): Promise<LiveSubprocessHandle> => {
  const view = toFacadeHandle(handle)
  return ready.get(view)!().then(() => view)
}

const notFound = (handleId: string) => ({ kind: "not_found" as const, handleId })

const isUnknownHandle = (error: unknown) =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "SubprocessError" &&
  (error as SubprocessError).reason._tag === "UnknownHandle"

/** The engine request of a noetic step request made to one of this library's adapters. */
const engineStepRequest = (
  request: StepSubprocessRequest,
  stepRunner: FacadeSpawnOptions["stepRunner"]
): SpawnRequest => ({
  stepId: request.stepId,
  module: undefined,
  input: request.serializedInput,
  executionId: request.executionId,
  parentExecutionId: undefined,
  threadId: request.overrides?.threadId,
  resourceId: request.overrides?.resourceId,
  cwdInit: request.overrides?.cwdInit,
  metadata: request.metadata,
  runInProcess: request._localExecutor !== undefined
    ? Effect.tryPromise({ try: request._localExecutor, catch: (error) => error })
    : stepRunner !== undefined
    ? Effect.tryPromise({
      try: () => stepRunner(request, stubHandle(request.executionId, request.metadata)),
      catch: (error) => error
    })
    : Effect.fail(new Error(`step ${request.stepId} has no in-process executor and the adapter no stepRunner`))
})

/** The engine request of a noetic process request. */
export const engineProcessRequest = (request: ProcessSubprocessRequest): ProcessRequest => ({
  command: request.command,
  args: request.args ?? [],
  cwd: request.cwd,
  env: request.env,
  detached: request.detached ?? false,
  stdin: request.stdin,
  metadata: request.metadata
})

/** How `adapter.spawn` runs a step request that carries no in-process executor. */
interface FacadeSpawnOptions {
  readonly stepRunner?: ((request: StepSubprocessRequest, handle: SubprocessHandle) => Promise<unknown>) | undefined
}

/**
 * Spawns started (by a harness's `detachedSpawn`) but not finished: `listLive`, `get`
 * and `reattach` wait for them, so a child is listed from the moment `detachedSpawn`
 * returned.
 */
export class SpawnsInFlight {
  readonly #pending = new Set<Promise<unknown>>()

  /** Records a spawn until it settles (either way). */
  track(spawn: Promise<unknown>): void {
    const settled = spawn.then(() => {}, () => {})
    this.#pending.add(settled)
    void settled.then(() => this.#pending.delete(settled))
  }

  /** Resolves once every spawn tracked so far has settled. */
  drain(): Promise<void> {
    return this.#pending.size === 0 ? Promise.resolve() : Promise.all(this.#pending).then(() => {})
  }
}

const adapterSpawns = new WeakMap<object, SpawnsInFlight>()

/**
 * The spawns in flight through `adapter`, for this library's adapters, which wait for
 * them in `listLive`, `get` and `reattach`; none for a host-written adapter, called as it is.
 */
export const spawnsThrough = (adapter: object): SpawnsInFlight | undefined => adapterSpawns.get(adapter)

/** Wraps an engine adapter (built lazily, once) as noetic's Promise adapter. */
export const fromEngineSubprocessAdapter = (
  build: Effect.Effect<SubprocessAdapterShape>,
  options: FacadeSpawnOptions = {}
): EngineSubprocessAdapter => {
  const engine = Effect.runSync(Effect.cached(build))
  const use = <A, E>(f: (adapter: SubprocessAdapterShape) => Effect.Effect<A, E>) =>
    runForFacade(Effect.flatMap(engine, f))
  // The spawns harnesses start through this adapter (registered for it below): reads wait for them.
  const spawns = new SpawnsInFlight()
  const afterSpawns = <A>(read: () => Promise<A>): Promise<A> => spawns.drain().then(read)
  const get = (handleId: string) =>
    afterSpawns(() => use((a) => a.get(handleId))).then((h) => (Option.isSome(h) ? readyView(h.value) : null))
  const control = (handleId: string, what: "pause" | "resume"): Promise<SubprocessControlResult> =>
    use((a) => {
      const operation = a[what]
      return operation === undefined
        ? Effect.succeed(undefined)
        : Effect.catchIf(operation(handleId), isUnknownHandle, () => Effect.succeed(null))
    }).then(async (done): Promise<SubprocessControlResult> => {
      const handle = await get(handleId)
      if (handle === null || done === null) return notFound(handleId)
      if (done === undefined) return { kind: "unsupported", handle, message: `this adapter's children cannot ${what}` }
      if (!done) return { kind: "unsupported", handle, message: `child ${handleId} has settled: it cannot ${what}` }
      return { kind: "ok", handle }
    })
  const adapter = Bridge.subprocessAdapter.attach({
    spawn: (request) =>
      use((a) => {
        if (request.kind === "step") return a.spawn(engineStepRequest(request, options.stepRunner))
        if (a.spawnProcess === undefined) {
          return Effect.fail(spawnFailedError(`this adapter runs steps only; it cannot run ${request.command}`))
        }
        return a.spawnProcess(engineProcessRequest(request))
      }).then(readyView),
    get,
    stop: (handleId, reason) =>
      use((a) => a.stop(handleId, reason)).then(
        () => get(handleId).then((handle) => ({ kind: "stopped" as const, handleId, ...(handle === null ? {} : { handle }) })),
        (error: unknown) => {
          if (error instanceof NoeticError && isUnknownHandle(error.cause)) return notFound(handleId)
          throw error
        }
      ),
    pause: (handleId) => control(handleId, "pause"),
    resume: (handleId) => control(handleId, "resume"),
    isAlive: (handle) => get(handle.id).then((live) => live !== null && (live.status === "running" || live.status === "paused")),
    listLive: () => afterSpawns(() => use((a) => a.listLive)).then((handles) => Promise.all(handles.map(readyView))),
    reattach: (handleId) =>
      afterSpawns(() => use((a) => a.reattach(handleId))).then((h) => (Option.isSome(h) ? readyView(h.value) : null))
  } satisfies EngineSubprocessAdapter, engine)
  adapterSpawns.set(adapter, spawns)
  return adapter
}

const spawnFailedError = (message: string) =>
  new SubprocessError({ reason: new SpawnFailed({ handleId: "", message, cause: null }) })

/** The engine adapter behind a facade adapter, or undefined for one not made by this library. */
export const toEngineSubprocessAdapter = (
  adapter: SubprocessAdapter
): Effect.Effect<SubprocessAdapterShape> | undefined => Bridge.subprocessAdapter.get(adapter)

// -----------------------------------------------------------------------------
// Adapters and host restart
// -----------------------------------------------------------------------------

/** A subprocess adapter made by this facade: `close()` ends the children it owns (see `outliveHost`). */
export interface OwnedSubprocessAdapter extends EngineSubprocessAdapter {
  /** Closes the adapter's scope: stops its children unless they were spawned to outlive the host. */
  close(): Promise<void>
  /** The same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void>
}

const owned = (
  build: (scope: Scope.Scope) => Effect.Effect<SubprocessAdapterShape>,
  options: FacadeSpawnOptions = {}
): OwnedSubprocessAdapter => {
  const scope = Scope.makeUnsafe()
  const adapter = fromEngineSubprocessAdapter(build(scope), options)
  const close = () => runForFacade(Scope.close(scope, Exit.void))
  return Object.assign(adapter, { close, [Symbol.asyncDispose]: close })
}

/** Options of `createLocalSubprocessAdapter`; see `LocalSubprocessAdapter` for each default. */
export interface LocalSubprocessAdapterOptions
  extends Omit<LocalSubprocessAdapter.LocalSubprocessAdapterOptions, "root" | "checkpointRoot" | "onFrame">
{
  /**
   * Sees every frame a child streams (items, events, `askUserRequest`, `askUserCleared`);
   * answer a prompt with the adapter's `answerAskUser`. What it throws is logged.
   */
  readonly onFrame?: (handle: LiveSubprocessHandle, frame: V1ServerFrame) => void | Promise<void>
  /**
   * Where manifests are kept. A `createFileStorage` or `createSqliteStorage` storage is
   * the subprocess root itself (children open it); any other storage (Postgres, memory, a
   * host's own) keeps the host's manifests, which `listLive` and `reattach` read,
   * while the children exchange their records under `root` (default
   * `$NOETIC_HOME/subprocess`). One without `get`, `set`, `delete` and `list` is
   * refused with `NoeticConfigError` `SUBPROCESS_STORAGE_UNSUPPORTED`. Without
   * `storage` (or `root`), `listLive()` is empty and `reattach()` is null: every restart
   * is a fresh start, while the children still exchange their records under the home.
   */
  readonly storage?: StorageAdapter
  /** The subprocess root as a directory, instead of `storage`. */
  readonly root?: string
  /**
   * Where children checkpoint: a `createFileStorage` or `createSqliteStorage` storage.
   * Default: `checkpoints/` beside a subprocess root directory, else the home's
   * `checkpoints/checkpoints.db`.
   */
  readonly checkpointStorage?: StorageAdapter
  /** noetic's name for `entry`: the module (path or URL) that defines the steps children run. */
  readonly registryEntry?: string
}

/** A host-written storage must have the four methods manifests need. */
const checkStorage = (storage: StorageAdapter): void => {
  const missing = (["get", "set", "delete", "list"] as const).filter((method) => typeof storage[method] !== "function")
  if (missing.length === 0) return
  throw new NoeticConfigError({
    code: "SUBPROCESS_STORAGE_UNSUPPORTED",
    message: `createLocalSubprocessAdapter: storage has no ${missing.map((method) => `${method}()`).join(", ")}`,
    hint: "pass a StorageAdapter (get, set, delete, list), e.g. createFileStorage() or createPostgresStorage()"
  })
}

const rootOf = (storage: StorageAdapter | undefined, what: string): string | undefined => {
  if (storage === undefined) return undefined
  const root = fileStorageRoot(storage)
  if (root !== undefined) return root
  const database = sqliteStoragePath(storage)
  if (database === undefined) {
    throw new NoeticConfigError({
      code: "SUBPROCESS_STORAGE_UNSUPPORTED",
      message: `createLocalSubprocessAdapter: ${what} is not a createFileStorage or createSqliteStorage storage, and ` +
        "child processes open their checkpoint storage themselves, from their own process",
      hint: `pass ${what} made by createFileStorage({ root }) or createSqliteStorage({ path }), or leave it out`
    })
  }
  // The children tell a database from a directory by what is on disk, so the file
  // exists before they look (an empty file is an empty SQLite database).
  makeDirectorySync(Path.dirname(Path.resolve(database)), 0o700)
  Fs.closeSync(Fs.openSync(database, "a", 0o600))
  return database
}

/**
 * The local adapter: each detached child runs in its own `node` process and process
 * group, survives a host crash, and is reattached by `reattachLiveChildren` on the next
 * boot. Steps must be exported by modules without top-level side effects (the child
 * imports them), or give `entry` (noetic: `registryEntry`). `spawn` also runs noetic's
 * process requests (an OS command) as durable children.
 */
export const createLocalSubprocessAdapter = (
  options: LocalSubprocessAdapterOptions = {}
): LocalSubprocessAdapterFacade => {
  const { checkpointStorage, onFrame, registryEntry, root, storage, ...rest } = options
  // A file or SQLite storage is the subprocess root itself: the children open it too.
  const storageRoot = storage === undefined || (fileStorageRoot(storage) === undefined && sqliteStoragePath(storage) === undefined)
    ? undefined
    : rootOf(storage, "storage")
  if (storage !== undefined && storageRoot === undefined) checkStorage(storage)
  const manifestStorage = storage !== undefined && storageRoot === undefined ? storage : undefined
  const subprocessRoot = storageRoot ?? root
  const checkpointRoot = rootOf(checkpointStorage, "checkpointStorage")
  const entry = rest.entry ?? registryEntry
  let local: LocalSubprocessAdapter.LocalSubprocessAdapterShape | undefined
  const adapter = owned((scope) =>
    Effect.flatMap(
      manifestStorage === undefined ? Effect.succeed(undefined) : toEngineStorage(manifestStorage),
      (manifests) =>
    LocalSubprocessAdapter.make({
      ...rest,
      ...(manifests === undefined ? {} : { manifestStorage: manifests }),
      ...(entry === undefined ? {} : { entry }),
      ...(subprocessRoot === undefined ? {} : { root: subprocessRoot }),
      ...(checkpointRoot === undefined ? {} : { checkpointRoot }),
      ...(onFrame === undefined ? {} : {
        onFrame: (handle, frame) => Effect.tryPromise(() => Promise.resolve(onFrame(toFacadeHandle(handle), frame))).pipe(Effect.ignore)
      })
    })).pipe(Scope.provide(scope), Effect.orDie, Effect.tap((built) => Effect.sync(() => void (local = built))))
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

/** Options of `createInMemorySubprocessAdapter`: noetic's, plus a checkpoint store for re-runs. */
export interface InMemorySubprocessAdapterOptions {
  /** Where manifests go: with it, `reattach` after a restart re-runs a step (`metadata.reattachMode: 'replay'`). */
  readonly storage?: StorageAdapter
  /** The checkpoint store a re-run child resumes under, so its completed steps replay. */
  readonly checkpointStore?: CheckpointStore
  /** Runs a process request; without it a process handle completes at once. */
  readonly run?: (request: SubprocessRequest, handle: SubprocessHandle) => Promise<void>
  /** Runs a step request that carries no in-process executor (one made by `adapter.spawn`). */
  readonly stepRunner?: (request: StepSubprocessRequest, handle: SubprocessHandle) => Promise<unknown>
  /** The module that defines the steps, for a re-run whose manifest records none (an imported one). */
  readonly registryEntry?: string
  /** Merged over each handle's metadata at spawn (its keys win). */
  readonly metadataInjector?: (request: SubprocessRequest) => Partial<SubprocessHandleMetadata>
}

/** noetic's view of an engine step request, as a `metadataInjector` or a host-written adapter sees it. */
export const noeticStepRequest = (
  request: Pick<SpawnRequest, "stepId" | "input" | "executionId" | "threadId" | "resourceId" | "cwdInit" | "metadata">
): StepSubprocessRequest => ({
  kind: "step",
  stepId: request.stepId,
  serializedInput: request.input,
  executionId: request.executionId,
  overrides: {
    ...(request.threadId === undefined ? {} : { threadId: request.threadId }),
    ...(request.resourceId === undefined ? {} : { resourceId: request.resourceId }),
    ...(request.cwdInit === undefined ? {} : { cwdInit: request.cwdInit })
  },
  ...(request.metadata === undefined ? {} : { metadata: { ...request.metadata } })
})

const noeticProcessRequest = (request: ProcessRequest): ProcessSubprocessRequest => ({
  kind: "process",
  command: request.command,
  args: request.args,
  detached: request.detached,
  ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
  ...(request.env === undefined ? {} : { env: { ...request.env } }),
  ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
  ...(request.metadata === undefined ? {} : { metadata: { ...request.metadata } })
})

/** A handle as a host hook sees it at spawn: running, with the request's metadata. */
const stubHandle = (handleId: string, metadata: Readonly<Record<string, unknown>> | undefined): SubprocessHandle => {
  const now = new Date().toISOString()
  return { id: handleId, status: "running", startedAt: now, updatedAt: now, metadata: { ...metadata } }
}

const injecting = (
  shape: SubprocessAdapterShape,
  inject: ((request: SubprocessRequest) => Partial<SubprocessHandleMetadata>) | undefined
): SubprocessAdapterShape => {
  if (inject === undefined) return shape
  const spawnProcess = shape.spawnProcess
  return {
    ...shape,
    spawn: (request) =>
      Effect.suspend(() => shape.spawn({ ...request, metadata: { ...request.metadata, ...inject(noeticStepRequest(request)) } })),
    ...(spawnProcess === undefined ? {} : {
      spawnProcess: (request: ProcessRequest) =>
        Effect.suspend(() =>
          spawnProcess({ ...request, metadata: { ...request.metadata, ...inject(noeticProcessRequest(request)) } })
        )
    })
  }
}

/**
 * The in-memory adapter: children run in this process. With `storage` every spawn
 * writes a manifest, and after a restart `reattach` re-runs the step from its
 * persisted input (its completed steps replay when `checkpointStore` is given); the
 * re-run handle's `metadata.reattachMode` is `'replay'`.
 */
export const createInMemorySubprocessAdapter = (options: InMemorySubprocessAdapterOptions = {}): OwnedSubprocessAdapter => {
  const { run, stepRunner } = options
  return owned(
    (scope) =>
      Effect.gen(function*() {
        const storage = options.storage === undefined ? undefined : yield* toEngineStorage(options.storage)
        const store = options.checkpointStore === undefined ? undefined : toEngineCheckpointStore(options.checkpointStore)
        const checkpointStore = store === undefined ? undefined : yield* store
        const shape = yield* InMemorySubprocessAdapter.make({
          storage,
          checkpointStore,
          entry: options.registryEntry,
          // A recorded child whose step this process cannot load is re-run by the stepRunner, as noetic runs it.
          ...(stepRunner === undefined ? {} : {
            rerun: (manifest, input, handleId) =>
              Effect.tryPromise({
                try: () =>
                  stepRunner(
                    noeticStepRequest({
                      stepId: manifest.stepId,
                      input,
                      executionId: manifest.executionId,
                      threadId: manifest.threadId ?? undefined,
                      resourceId: manifest.resourceId ?? undefined,
                      cwdInit: manifest.cwdInit ?? undefined,
                      metadata: manifest.metadata
                    }),
                    stubHandle(handleId, manifest.metadata)
                  ),
                catch: (error) => error
              })
          }),
          // Without `run` a process child has nothing to run: complete when spawn returns, as in noetic.
          ...(run === undefined ? {} : {
            runProcess: (request, handleId) =>
              Effect.tryPromise({
                try: () => run(noeticProcessRequest(request), stubHandle(handleId, request.metadata)),
                catch: (error) => error
              })
          })
        })
        return injecting(shape, options.metadataInjector)
      }).pipe(Scope.provide(scope), Effect.orDie),
    stepRunner === undefined ? {} : { stepRunner }
  )
}
