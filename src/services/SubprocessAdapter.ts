/**
 * Runs detached child steps and, with storage, rediscovers them after a host restart.
 *
 * `layerMemory` is the zero-config default: children run as fibers of this process.
 * Without storage `listLive()` is empty and `reattach()` is none. Backends with
 * storage: `InMemorySubprocessAdapter` (in-process, re-runs a child on reattach) and
 * `LocalSubprocessAdapter` (one `node` process per child, surviving the host).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type { StorageError } from "../Errors.ts"
import { randomId } from "../internal/randomId.ts"
import { settledRetention } from "../internal/settledHandles.ts"

/**
 * The child's step failed. `error` is the failure in JSON form (see `toJsonError`): a
 * tagged error keeps its `_tag` and fields, an `Error` its `name` and `message`, so it
 * survives the trip over IPC and through storage.
 */
export class ChildFailed extends Schema.TaggedError<ChildFailed>("noetic-effect/SubprocessError/ChildFailed")(
  "ChildFailed",
  { handleId: Schema.String, message: Schema.String, error: Schema.Unknown }
) {
  /** The error code. */
  get code(): "CHILD_FAILED" {
    return "CHILD_FAILED"
  }
}

/** The child process ended without recording a result (killed, crashed, or died while the host was down). */
export class ChildExited extends Schema.TaggedError<ChildExited>("noetic-effect/SubprocessError/ChildExited")(
  "ChildExited",
  { handleId: Schema.String, message: Schema.String }
) {
  /** The error code. */
  get code(): "CHILD_EXITED" {
    return "CHILD_EXITED"
  }
}

/** Neither the step's defining module nor the adapter's `entry` exports a step with this id. */
export class StepUnavailable extends Schema.TaggedError<StepUnavailable>(
  "noetic-effect/SubprocessError/StepUnavailable"
)("StepUnavailable", {
  handleId: Schema.String,
  stepId: Schema.String,
  /** The module the step was built in, when it was recorded. */
  module: Schema.NullOr(Schema.String),
  /** The adapter's `entry` module, when one was given. */
  entry: Schema.NullOr(Schema.String),
  message: Schema.String
}) {
  /** The error code. */
  get code(): "STEP_UNAVAILABLE" {
    return "STEP_UNAVAILABLE"
  }
}

/** No child with this handle id is known to the adapter. */
export class UnknownHandle extends Schema.TaggedError<UnknownHandle>("noetic-effect/SubprocessError/UnknownHandle")(
  "UnknownHandle",
  { handleId: Schema.String, message: Schema.String }
) {
  /** The error code. */
  get code(): "UNKNOWN_HANDLE" {
    return "UNKNOWN_HANDLE"
  }
}

/**
 * A host-written adapter's `get` kept answering null for a child that had not settled
 * (noetic's `handle_evicted`): after `gracePeriodMs` the child counts as gone.
 */
export class HandleEvicted extends Schema.TaggedError<HandleEvicted>("noetic-effect/SubprocessError/HandleEvicted")(
  "HandleEvicted",
  { handleId: Schema.String, gracePeriodMs: Schema.Number, message: Schema.String }
) {
  /** The error code. */
  get code(): "HANDLE_EVICTED" {
    return "HANDLE_EVICTED"
  }
}

/**
 * The child was stopped before it settled. `stopReason` is the reason given to `stop`
 * (noetic's `stopReason`); it is kept with the child's persisted result, so a host that
 * reattaches the child reports it too.
 */
export class Stopped extends Schema.TaggedError<Stopped>("noetic-effect/SubprocessError/Stopped")("Stopped", {
  handleId: Schema.String,
  message: Schema.String,
  stopReason: Schema.optional(Schema.String)
}) {
  /** The error code. */
  get code(): "STOPPED" {
    return "STOPPED"
  }
}

/** The child could not be started. */
export class SpawnFailed extends Schema.TaggedError<SpawnFailed>("noetic-effect/SubprocessError/SpawnFailed")(
  "SpawnFailed",
  { handleId: Schema.String, message: Schema.String, cause: Schema.Defect() }
) {
  /** The error code. */
  get code(): "SPAWN_FAILED" {
    return "SPAWN_FAILED"
  }
}

/**
 * A directory for sockets, child logs or compile caches is not this user's alone (a
 * symbolic link, owned by another user, or writable by others): it is refused, never
 * used. `message` names the path and the fix.
 */
export class UnsafeDirectory extends Schema.TaggedError<UnsafeDirectory>("noetic-effect/SubprocessError/UnsafeDirectory")(
  "UnsafeDirectory",
  { path: Schema.String, message: Schema.String }
) {
  /** The error code. */
  get code(): "UNSAFE_DIRECTORY" {
    return "UNSAFE_DIRECTORY"
  }
}

/** Why a subprocess operation failed. */
export const SubprocessErrorReason = Schema.Union([
  ChildFailed,
  ChildExited,
  StepUnavailable,
  UnknownHandle,
  HandleEvicted,
  Stopped,
  SpawnFailed,
  UnsafeDirectory
])

/** Why a subprocess operation failed. */
export type SubprocessErrorReason = typeof SubprocessErrorReason.Type

/** A subprocess operation failed; `reason` says how. */
export class SubprocessError extends Schema.TaggedError<SubprocessError>("noetic-effect/SubprocessError")(
  "SubprocessError",
  { reason: SubprocessErrorReason }
) {
  /** The error code: `SUBPROCESS_` then the reason's code. */
  get code(): `SUBPROCESS_${SubprocessErrorReason["code"]}` {
    return `SUBPROCESS_${this.reason.code}`
  }
  override get message(): string {
    return `${this.reason._tag}: ${this.reason.message}`
  }
}

/** Where a child is in its life. */
export type HandleStatus = "running" | "succeeded" | "failed" | "stopped"

/** A running or settled child. */
export interface SubprocessHandle {
  readonly handleId: string
  readonly stepId: string
  /** The execution id the child runs under. */
  readonly executionId: string
  /** The execution that spawned it, whose context `reattachLiveChildren` restores. */
  readonly parentExecutionId: string | undefined
  readonly metadata: Readonly<Record<string, unknown>>
  /** When the child was spawned (epoch millis), when the adapter knows. */
  readonly startedAt?: number | undefined
  readonly status: Effect.Effect<HandleStatus>
  /**
   * The reason given to the `stop` that stopped the child (noetic's `stopReason`), also
   * when another host stopped it; undefined until then, or when none was given. Absent
   * on a host-written adapter's handle that keeps none.
   */
  readonly stopReason?: Effect.Effect<string | undefined> | undefined
  /** Whether a running child is paused (see the adapter's `pause`); absent where children cannot pause. */
  readonly paused?: Effect.Effect<boolean> | undefined
  /** The child's output, once it settles. */
  readonly await: Effect.Effect<unknown, SubprocessError>
}

/** What the harness asks an adapter to run. */
export interface SpawnRequest {
  /** The handle id to use; the adapter makes one when absent. */
  readonly handleId?: string | undefined
  /** The id of the step to run. */
  readonly stepId: string
  /**
   * The module that defines the step (a file URL): what a child process imports to find
   * the exported step with `stepId`. Undefined when the step recorded none.
   */
  readonly module: string | undefined
  /** The step's input. */
  readonly input: unknown
  /** The execution id the child runs under. */
  readonly executionId: string
  readonly parentExecutionId: string | undefined
  readonly threadId?: string | undefined
  readonly resourceId?: string | undefined
  readonly cwdInit?: string | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
  /** Runs the step in this process under the spawning harness (what in-process adapters do). */
  readonly runInProcess: Effect.Effect<unknown, unknown>
}

/** An operating-system command to run as a child (noetic's process request). */
export interface ProcessRequest {
  /** The handle id to use; the adapter makes one when absent. */
  readonly handleId?: string | undefined
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string | undefined
  /** Added to this process's environment. */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** Whether the command leads its own process group (stop then signals the group). */
  readonly detached: boolean
  /** Written to the command's standard input, which is then closed. */
  readonly stdin?: string | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
}

/** The step id a process child is listed under. */
export const processStepId = (command: string): string => `process:${command}`

/** The operations of a subprocess adapter. */
export interface SubprocessAdapterShape {
  readonly spawn: (request: SpawnRequest) => Effect.Effect<SubprocessHandle, SubprocessError>
  /** Runs an OS command as a child; absent on adapters that only run steps. */
  readonly spawnProcess?: ((request: ProcessRequest) => Effect.Effect<SubprocessHandle, SubprocessError>) | undefined
  readonly get: (handleId: string) => Effect.Effect<Option.Option<SubprocessHandle>>
  /**
   * Suspends a running child (SIGSTOP to its process group) / lets it continue;
   * false for a settled child. Absent on adapters whose children cannot pause.
   */
  readonly pause?: ((handleId: string) => Effect.Effect<boolean, SubprocessError>) | undefined
  readonly resume?: ((handleId: string) => Effect.Effect<boolean, SubprocessError>) | undefined
  /**
   * Stops a child. Stopping a settled child leaves its outcome (`await`) as it was; the
   * in-memory adapter then reports it `stopped`, as noetic's does. `reason` (noetic's
   * `stopReason`) is kept with the child: its handle's `stopReason` and the `Stopped`
   * failure carry it.
   */
  readonly stop: (handleId: string, reason?: string) => Effect.Effect<void, SubprocessError>
  /** The children still running: those recorded in storage, or the running ones of this process without storage. */
  readonly listLive: Effect.Effect<ReadonlyArray<SubprocessHandle>, StorageError | SubprocessError>
  /** Rebinds a recorded child after a restart; none without storage or when it is gone. */
  readonly reattach: (handleId: string) => Effect.Effect<Option.Option<SubprocessHandle>, StorageError | SubprocessError>
  /**
   * As the harness default, whether this adapter runs a nested dispatch in the caller's
   * fiber: a `runCode` or `spawn` step without an adapter of its own, inside a running
   * execution. When true the interpreter runs such a step in place, as if no adapter
   * were configured (this library's adapters: the step is covered by its execution's
   * ledger and checkpoints, its failures stay its own). Otherwise every such dispatch
   * goes to `spawn` (docs/architecture.md#adapter-precedence: a step's own adapter, else the harness default), which
   * is how a host-written adapter sees the steps it is the default for.
   */
  readonly nestedInProcess?: boolean | undefined
}

/** Runs detached child steps. */
export class SubprocessAdapter extends Context.Service<SubprocessAdapter, SubprocessAdapterShape>()(
  "noetic-effect/SubprocessAdapter"
) {}

/** The failure for a handle id no child has. */
export const unknownHandle = (handleId: string): SubprocessError =>
  new SubprocessError({ reason: new UnknownHandle({ handleId, message: `no child with handle ${handleId}` }) })

/** The failure of a child stopped before it settled, with the reason given to `stop` when there was one. */
export const stopped = (handleId: string, stopReason?: string): SubprocessError =>
  new SubprocessError({
    reason: new Stopped({
      handleId,
      message: `child ${handleId} was stopped`,
      ...(stopReason === undefined ? {} : { stopReason })
    })
  })

/** An `Error`'s own fields plus its `name` and `message`, which are not its own enumerable ones. */
const errorFields = (error: Error): Record<string, unknown> => ({ ...error, name: error.name, message: error.message })

/**
 * A failure in a form JSON keeps: an object's own fields (a tagged error's `_tag`
 * among them) plus an `Error`'s `name` and `message`, for the failure and any `Error`
 * inside it (a step failure's cause keeps its `TypeError`); anything JSON cannot hold
 * becomes its string form.
 */
export const toJsonError = (error: unknown): unknown => {
  const value = error instanceof Error ? errorFields(error) : typeof error === "object" && error !== null ? { ...error } : error
  try {
    const text = JSON.stringify(value, (_key, inner: unknown) => (inner instanceof Error ? errorFields(inner) : inner))
    return text === undefined ? null : JSON.parse(text)
  } catch {
    return { name: "Unserializable", message: String(error) }
  }
}

/**
 * A child's failure from how its run ended: what it failed with, else the defect it
 * died of (an `Error`'s name and message kept), else the cause's rendering.
 */
export const childFailedOf = (handleId: string, cause: Cause.Cause<unknown>): SubprocessError => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) return childFailed(handleId, failure.error)
  const defect = cause.reasons.find(Cause.isDieReason)
  return childFailed(handleId, defect !== undefined ? defect.defect : Cause.pretty(cause))
}

const messageOf = (error: unknown): string => {
  if (typeof error === "string") return error
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
    error.message !== "") return error.message
  if (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string") return error._tag
  try {
    return JSON.stringify(error) ?? String(error)
  } catch {
    return String(error)
  }
}

/** Turns any failure of a child into a JSON-safe `ChildFailed`. */
export const childFailed = (handleId: string, error: unknown): SubprocessError =>
  new SubprocessError({ reason: new ChildFailed({ handleId, message: messageOf(error), error: toJsonError(error) }) })

/** Options of {@link makeMemoryWith}. */
export interface MemoryAdapterOptions {
  /**
   * Runs a process request in this process (noetic's `run` hook). Without it a process
   * child has nothing to run: it has completed when `spawnProcess` returns.
   */
  readonly runProcess?: ((request: ProcessRequest, handleId: string) => Effect.Effect<void, unknown>) | undefined
}

/**
 * An in-process adapter (noetic's in-memory one): each child runs as a fiber in the
 * layer's scope (so it ends with the layer), its handle's metadata says `runtime:
 * 'in-memory'`. It keeps no manifests: `listLive` is the children of this process still
 * running, and `reattach` is none.
 */
export const makeMemoryWith = (
  options: MemoryAdapterOptions = {}
): Effect.Effect<SubprocessAdapterShape, never, Scope.Scope> => Effect.gen(function*() {
  const scope = yield* Effect.scope
  const handles = new Map<
    string,
    {
      handle: SubprocessHandle
      /** Interrupts the child (keeping `reason`) and settles it as stopped. */
      stop: (reason: string | undefined) => Effect.Effect<void>
      current: () => HandleStatus
    }
  >()
  const forgetSettled = settledRetention(handles)

  const spawn = Effect.fn("SubprocessAdapter.spawn")(function*(request: SpawnRequest) {
    const handleId = request.handleId !== undefined ? request.handleId : yield* randomId
    const result = yield* Deferred.make<unknown, SubprocessError>()
    let status: HandleStatus = "running"
    let stopReason: string | undefined
    const fiber = yield* request.runInProcess.pipe(
      Effect.onExit((exit) => {
        forgetSettled(handleId)
        if (Exit.isSuccess(exit)) {
          status = "succeeded"
          return Deferred.succeed(result, exit.value)
        }
        const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
        if (failure === undefined && exit.cause.reasons.every((reason) => reason._tag === "Interrupt")) {
          status = "stopped"
          return Deferred.fail(result, stopped(handleId, stopReason))
        }
        status = "failed"
        return Deferred.fail(result, childFailedOf(handleId, exit.cause))
      }),
      Effect.forkIn(scope)
    )
    const handle: SubprocessHandle = {
      handleId,
      stepId: request.stepId,
      executionId: request.executionId,
      parentExecutionId: request.parentExecutionId,
      metadata: { ...request.metadata, runtime: request.metadata?.runtime ?? "in-memory" },
      startedAt: yield* Clock.currentTimeMillis,
      status: Effect.sync(() => status),
      stopReason: Effect.sync(() => stopReason),
      await: Deferred.await(result)
    }
    // A fiber interrupted before it ever ran never runs its onExit: stop settles it then.
    // A child that had settled keeps its outcome (await), and reports `stopped` from
    // then on, as noetic's in-memory adapter does once `stop` answered `stopped`, with
    // the reason given (noetic's `stopReason`).
    const markStopped = Effect.suspend(() => {
      if (status !== "running") return Effect.sync(() => void (status = "stopped"))
      forgetSettled(handleId)
      status = "stopped"
      return Deferred.fail(result, stopped(handleId, stopReason))
    })
    const stop = (reason: string | undefined) =>
      Effect.suspend(() => {
        // The stop that stopped it names the reason; a later one changes nothing.
        if (status !== "stopped") stopReason = reason
        return Effect.andThen(Fiber.interrupt(fiber), markStopped)
      })
    handles.set(handleId, { handle, stop, current: () => status })
    return handle
  })

  const spawnProcess = Effect.fn("SubprocessAdapter.spawnProcess")(function*(request: ProcessRequest) {
    const handleId = request.handleId !== undefined ? request.handleId : yield* randomId
    const handle = yield* spawn({
      handleId,
      stepId: processStepId(request.command),
      module: undefined,
      input: null,
      executionId: handleId,
      parentExecutionId: undefined,
      metadata: {
        ...request.metadata,
        runtime: "in-memory",
        command: request.command,
        args: request.args,
        cwd: request.cwd,
        detached: request.detached
      },
      runInProcess: options.runProcess === undefined ? Effect.void : options.runProcess(request, handleId)
    })
    // Nothing to run: the child is complete by the time its handle is seen, as in noetic.
    if (options.runProcess === undefined) yield* Effect.exit(handle.await)
    return handle
  })

  return SubprocessAdapter.of({
    spawn,
    spawnProcess,
    get: (handleId) => Effect.sync(() => Option.map(Option.fromUndefinedOr(handles.get(handleId)), (e) => e.handle)),
    stop: (handleId, reason) =>
      Effect.suspend(() => {
        const entry = handles.get(handleId)
        return entry === undefined ? Effect.fail(unknownHandle(handleId)) : entry.stop(reason)
      }),
    listLive: Effect.sync(() =>
      Array.from(handles.values()).flatMap((entry) =>
        entry.current() === "running" ? [entry.handle] : []
      )
    ),
    // noetic's in-memory adapter without storage: handles are ephemeral, nothing to rebind.
    reattach: () => Effect.succeedNone,
    nestedInProcess: true
  })
})

/** {@link makeMemoryWith} without options: process children complete at once. */
export const makeMemory: Effect.Effect<SubprocessAdapterShape, never, Scope.Scope> = makeMemoryWith()

/** The in-process adapter for the life of the layer. */
export const layerMemory: Layer.Layer<SubprocessAdapter> = Layer.effect(SubprocessAdapter, makeMemory)
