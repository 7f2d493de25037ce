/**
 * From facade subprocess adapters to the engine's `SubprocessAdapterShape`: an adapter
 * made by this library hands back the engine adapter it wraps; one a host wrote
 * (noetic's interface) is called through its Promises. Each step dispatch becomes
 * noetic's step request, and the handle's settlement is read back the way noetic's
 * `DetachedHandle` reads it: the engine polls `get(handleId)` until a terminal status
 * (`internal/polledHandles.ts`), and this module translates the terminal handle's
 * `metadata.result` or `metadata.error`.
 *
 * Also: the facade harness's `subprocess`, whose `listLive` waits for the spawns in flight.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { Io, StorageError } from "../Errors.ts"
import {
  ChildFailed,
  childFailed,
  type HandleStatus,
  SpawnFailed,
  type SpawnRequest,
  type SubprocessAdapterShape,
  SubprocessError,
  type SubprocessHandle as EngineHandle,
  stopped,
  unknownHandle
} from "../services/SubprocessAdapter.ts"
import { NoeticConfigError } from "./errors.ts"
import { runForFacade } from "./storage.ts"
import {
  noeticStepRequest,
  type SubprocessAdapter,
  type SubprocessHandle,
  type SubprocessStatus,
  toEngineSubprocessAdapter,
  toFacadeHandle
} from "./subprocess.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { makePolledHandles, type PolledChild } from "../internal/polledHandles.ts"

/** The methods the engine calls on an adapter; without one, a host adapter cannot be used. */
const REQUIRED = ["spawn", "get", "stop", "listLive", "reattach"] as const

const engineStatus = (status: SubprocessStatus): HandleStatus =>
  status === "completed" ? "succeeded" : status === "failed" || status === "stale" ? "failed" : status === "stopped" ? "stopped" : "running"

const messageOf = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

const hostStorageError = (operation: string, cause: unknown) =>
  new StorageError({
    operation,
    reason: new Io({ key: "subprocess", message: `the host's subprocess adapter rejected ${operation}: ${messageOf(cause)}`, cause })
  })

/** The reason a host handle's metadata gives for its stop (noetic's `stopReason`). */
const stopReasonOf = (handle: SubprocessHandle): string | undefined => {
  const reason = handle.metadata?.stopReason
  return typeof reason === "string" ? reason : undefined
}

/** noetic's host handle as the engine's poll reads it. */
const polledChild = (handle: SubprocessHandle): PolledChild => ({
  status: engineStatus(handle.status),
  stopReason: stopReasonOf(handle),
  outcome: () => {
    const settled = settleFrom(handle)
    return "value" in settled ? Exit.succeed(settled.value) : Exit.fail(settled.error)
  }
})

/** A handle's outcome as the engine sees it, from a terminal host handle. */
const settleFrom = (handle: SubprocessHandle): { readonly value: unknown } | { readonly error: SubprocessError } => {
  const metadata = handle.metadata ?? {}
  if (handle.status === "completed") return { value: metadata.result }
  if (handle.status === "stopped") return { error: stopped(handle.id, stopReasonOf(handle)) }
  const raw = metadata.error
  const message = typeof raw === "object" && raw !== null && typeof raw.message === "string"
    ? raw.message
    : raw === undefined
    ? `child ${handle.id} ${handle.status} without an error`
    : String(raw)
  return {
    error: new SubprocessError({
      reason: new ChildFailed({ handleId: handle.id, message, error: raw === undefined ? null : raw })
    })
  }
}

/**
 * The engine view of a host-written adapter. `where` names the option it came from,
 * for the `NoeticConfigError` (`SUBPROCESS_ADAPTER_UNSUPPORTED`) thrown when it lacks a
 * method the engine needs.
 */
const fromHostAdapter = (adapter: SubprocessAdapter, where: string): SubprocessAdapterShape => {
  const missing = REQUIRED.filter((method) => typeof (adapter as unknown as Record<string, unknown>)[method] !== "function")
  if (missing.length > 0) {
    throw new NoeticConfigError({
      code: "SUBPROCESS_ADAPTER_UNSUPPORTED",
      message: `${where} has no ${missing.map((method) => `${method}()`).join(", ")}: the harness cannot dispatch ` +
        "children through it or see them settle",
      hint: "implement noetic's SubprocessAdapter (spawn, get, stop, pause, resume, isAlive, reattach, listLive), " +
        "or use createInMemorySubprocessAdapter / createLocalSubprocessAdapter"
    })
  }
  /** Each host handle's engine handle, and the host's latest answer for it (polled, or what `stop` answered). */
  // The engine polls each child's `get` until it settles (internal/polledHandles.ts); this only translates.
  const polled = makePolledHandles((handleId) =>
    Effect.map(Effect.tryPromise(() => adapter.get(handleId)), (handle) => Option.map(Option.fromNullishOr(handle), polledChild))
  )

  /** The engine handle of a host handle (one per id). */
  const bridge = (initial: SubprocessHandle, request?: SpawnRequest): EngineHandle => {
    const metadata = initial.metadata ?? {}
    return polled.handleOf({
      handleId: initial.id,
      stepId: request?.stepId ?? (typeof metadata.stepId === "string" ? metadata.stepId : "unknown"),
      executionId: request?.executionId ?? (typeof metadata.executionId === "string" ? metadata.executionId : initial.id),
      parentExecutionId: request?.parentExecutionId ??
        (typeof metadata.parentExecutionId === "string" ? metadata.parentExecutionId : undefined),
      metadata,
      startedAt: Number.isNaN(Date.parse(initial.startedAt)) ? Date.now() : Date.parse(initial.startedAt)
    }, polledChild(initial))
  }

  const found = (handle: SubprocessHandle | null) => (handle === null ? Option.none() : Option.some(bridge(handle)))

  return {
    spawn: (request) =>
      Effect.tryPromise({
        try: () =>
          adapter.spawn({
            ...noeticStepRequest(request),
            metadata: {
              ...request.metadata,
              ...(request.parentExecutionId === undefined ? {} : { parentExecutionId: request.parentExecutionId })
            },
            // An in-process adapter (noetic's own in-memory one) runs the step under this harness.
            _localExecutor: () => runForFacade(request.runInProcess)
          }),
        catch: (cause) =>
          new SubprocessError({
            reason: new SpawnFailed({
              handleId: request.handleId ?? "",
              message: `the host adapter's spawn() rejected: ${messageOf(cause)}`,
              cause
            })
          })
      }).pipe(Effect.map((handle) => bridge(handle, request))),
    get: (handleId) =>
      Effect.tryPromise(() => adapter.get(handleId)).pipe(
        Effect.map(found),
        Effect.catchCause((cause) =>
          Effect.as(logWarning(`subprocess ${handleId}: the host adapter's get() rejected`, cause), Option.none())
        )
      ),
    stop: (handleId, reason) =>
      Effect.tryPromise({
        try: () => adapter.stop(handleId, reason),
        catch: (cause) => childFailed(handleId, cause)
      }).pipe(
        Effect.flatMap((outcome) => {
          if (outcome.kind === "not_found") return Effect.fail(unknownHandle(handleId))
          // The handle the host answered with is the child's latest (its `stopReason` among it).
          if (outcome.handle !== undefined) polled.update(handleId, polledChild(outcome.handle))
          return Effect.void
        })
      ),
    listLive: Effect.tryPromise({
      try: () => adapter.listLive(),
      catch: (cause) => hostStorageError("listLive", cause)
    }).pipe(Effect.map((handles) => handles.map((handle) => bridge(handle)))),
    reattach: (handleId) =>
      Effect.tryPromise({
        try: () => adapter.reattach(handleId),
        catch: (cause) => hostStorageError("reattach", cause)
      }).pipe(Effect.map(found))
  }
}

/** The engine view of one of this library's adapters, resolving its lazily built engine adapter per call. */
const fromEngineBacked = (engine: Effect.Effect<SubprocessAdapterShape>): SubprocessAdapterShape => ({
  spawn: (request) => Effect.flatMap(engine, (a) => a.spawn(request)),
  spawnProcess: (request) =>
    Effect.flatMap(engine, (a) =>
      a.spawnProcess === undefined
        ? Effect.fail(
          new SubprocessError({
            reason: new SpawnFailed({ handleId: "", message: "this adapter runs steps only", cause: null })
          })
        )
        : a.spawnProcess(request)),
  pause: (handleId) => Effect.flatMap(engine, (a) => (a.pause === undefined ? Effect.succeed(false) : a.pause(handleId))),
  resume: (handleId) => Effect.flatMap(engine, (a) => (a.resume === undefined ? Effect.succeed(false) : a.resume(handleId))),
  get: (handleId) => Effect.flatMap(engine, (a) => a.get(handleId)),
  stop: (handleId, reason) => Effect.flatMap(engine, (a) => a.stop(handleId, reason)),
  listLive: Effect.flatMap(engine, (a) => a.listLive),
  reattach: (handleId) => Effect.flatMap(engine, (a) => a.reattach(handleId)),
  // Only this library's adapters are engine-backed, and each runs nested steps in place.
  nestedInProcess: true
})

const shapes = new WeakMap<SubprocessAdapter, SubprocessAdapterShape>()

/**
 * The engine adapter for a facade adapter given as `where` (`environment.subprocess`,
 * a `detachedSpawn` override, a step's `subprocess`). Throws `NoeticConfigError`
 * `SUBPROCESS_ADAPTER_UNSUPPORTED` at once for a host adapter the engine cannot use.
 */
export const toEngineSubprocessShape = (adapter: SubprocessAdapter, where: string): SubprocessAdapterShape => {
  const known = shapes.get(adapter)
  if (known !== undefined) return known
  if (typeof adapter !== "object" || adapter === null) {
    throw new NoeticConfigError({
      code: "SUBPROCESS_ADAPTER_UNSUPPORTED",
      message: `${where} is not a subprocess adapter object`,
      hint: "pass an object implementing noetic's SubprocessAdapter"
    })
  }
  const engine = toEngineSubprocessAdapter(adapter)
  const shape = engine !== undefined ? fromEngineBacked(engine) : fromHostAdapter(adapter, where)
  shapes.set(adapter, shape)
  return shape
}

/** The facade view of an engine handle (re-exported for the harness). */
export { toFacadeHandle }
