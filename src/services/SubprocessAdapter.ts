/**
 * Runs detached child steps and, with storage, rediscovers them after a host restart.
 *
 * `layerMemory` is the zero-config default: children run as fibers of this process.
 * Without storage `listLive()` is empty and `reattach()` is none.
 *
 * @since 0.1.0
 */
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Schema, Scope } from "effect"
import type { StorageError } from "../Errors.ts"
import { randomId } from "../harness/AgentContext.ts"
import type { AnyStep } from "../harness/Step.ts"

/** The child's step failed; `error` is what it failed with (JSON-safe). */
export class ChildFailed extends Schema.TaggedError<ChildFailed>("noetic-effect/SubprocessError/ChildFailed")(
  "ChildFailed",
  { handleId: Schema.String, message: Schema.String, error: Schema.Defect() }
) {}

/** No child with this handle id is known to the adapter. */
export class UnknownHandle extends Schema.TaggedError<UnknownHandle>("noetic-effect/SubprocessError/UnknownHandle")(
  "UnknownHandle",
  { handleId: Schema.String, message: Schema.String }
) {}

/** The child was stopped before it settled. */
export class Stopped extends Schema.TaggedError<Stopped>("noetic-effect/SubprocessError/Stopped")("Stopped", {
  handleId: Schema.String,
  message: Schema.String
}) {}

/** The child could not be started. */
export class SpawnFailed extends Schema.TaggedError<SpawnFailed>("noetic-effect/SubprocessError/SpawnFailed")(
  "SpawnFailed",
  { handleId: Schema.String, message: Schema.String, cause: Schema.Defect() }
) {}

/** Why a subprocess operation failed. */
export const SubprocessErrorReason = Schema.Union([ChildFailed, UnknownHandle, Stopped, SpawnFailed])

/** Why a subprocess operation failed. */
export type SubprocessErrorReason = typeof SubprocessErrorReason.Type

/** A subprocess operation failed; `reason` says how. */
export class SubprocessError extends Schema.TaggedError<SubprocessError>("noetic-effect/SubprocessError")(
  "SubprocessError",
  { reason: SubprocessErrorReason }
) {
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
  readonly status: Effect.Effect<HandleStatus>
  /** The child's output, once it settles. */
  readonly await: Effect.Effect<unknown, SubprocessError>
}

/** What the harness asks an adapter to run. */
export interface SpawnRequest {
  /** The handle id to use; the adapter makes one when absent. */
  readonly handleId?: string | undefined
  readonly step: AnyStep
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

/** The operations of a subprocess adapter. */
export interface SubprocessAdapterShape {
  readonly spawn: (request: SpawnRequest) => Effect.Effect<SubprocessHandle, SubprocessError>
  readonly get: (handleId: string) => Effect.Effect<Option.Option<SubprocessHandle>>
  /** Stops a child; stopping a settled child does nothing. */
  readonly stop: (handleId: string) => Effect.Effect<void, SubprocessError>
  /** The children still running, as recorded in storage (empty without storage). */
  readonly listLive: Effect.Effect<ReadonlyArray<SubprocessHandle>, StorageError | SubprocessError>
  /** Rebinds a recorded child after a restart; none without storage or when it is gone. */
  readonly reattach: (handleId: string) => Effect.Effect<Option.Option<SubprocessHandle>, StorageError | SubprocessError>
}

/** Runs detached child steps. */
export class SubprocessAdapter extends Context.Service<SubprocessAdapter, SubprocessAdapterShape>()(
  "noetic-effect/SubprocessAdapter"
) {}

const unknownHandle = (handleId: string) =>
  new SubprocessError({ reason: new UnknownHandle({ handleId, message: `no child with handle ${handleId}` }) })

/** Turns any failure of a child into a JSON-safe `ChildFailed`. */
export const childFailed = (handleId: string, error: unknown): SubprocessError =>
  new SubprocessError({
    reason: new ChildFailed({
      handleId,
      message: error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error),
      error
    })
  })

/**
 * An in-process adapter: each child runs as a fiber in the layer's scope (so it ends
 * with the layer). It keeps no manifests: `listLive` is empty and `reattach` none.
 */
export const makeMemory: Effect.Effect<SubprocessAdapterShape, never, Scope.Scope> = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const handles = new Map<string, { handle: SubprocessHandle; fiber: Fiber.Fiber<unknown, unknown> }>()

  const spawn = Effect.fn("SubprocessAdapter.spawn")(function*(request: SpawnRequest) {
    const handleId = request.handleId ?? (yield* randomId)
    const result = yield* Deferred.make<unknown, SubprocessError>()
    let status: HandleStatus = "running"
    const fiber = yield* request.runInProcess.pipe(
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) {
          status = "succeeded"
          return Deferred.succeed(result, exit.value)
        }
        const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
        if (failure === undefined && exit.cause.reasons.every((reason) => reason._tag === "Interrupt")) {
          status = "stopped"
          return Deferred.fail(
            result,
            new SubprocessError({ reason: new Stopped({ handleId, message: `child ${handleId} was stopped` }) })
          )
        }
        status = "failed"
        return Deferred.fail(result, childFailed(handleId, failure !== undefined ? failure.error : exit.cause))
      }),
      Effect.forkIn(scope)
    )
    const handle: SubprocessHandle = {
      handleId,
      stepId: request.step.id,
      executionId: request.executionId,
      parentExecutionId: request.parentExecutionId,
      metadata: request.metadata ?? {},
      status: Effect.sync(() => status),
      await: Deferred.await(result)
    }
    handles.set(handleId, { handle, fiber })
    return handle
  })

  return SubprocessAdapter.of({
    spawn,
    get: (handleId) => Effect.sync(() => Option.map(Option.fromUndefinedOr(handles.get(handleId)), (e) => e.handle)),
    stop: (handleId) =>
      Effect.suspend(() => {
        const entry = handles.get(handleId)
        return entry === undefined ? Effect.fail(unknownHandle(handleId)) : Effect.asVoid(Fiber.interrupt(entry.fiber))
      }),
    listLive: Effect.succeed([]),
    reattach: () => Effect.succeedNone
  })
})

/** The in-process adapter for the life of the layer. */
export const layerMemory: Layer.Layer<SubprocessAdapter> = Layer.effect(SubprocessAdapter, makeMemory)
