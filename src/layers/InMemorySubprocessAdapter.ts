/**
 * The in-memory subprocess adapter with optional storage: children run as fibers of
 * this process (the zero-config default, `SubprocessAdapter.makeMemory`), and with a
 * storage every spawn writes a manifest, cleared when the child succeeds, fails or is
 * stopped.
 *
 * An in-process child dies with its host, so after a restart `reattach` (and
 * `listLive`, which reattaches every manifest it finds) re-runs the step from its
 * persisted input, loading the step from the module it was built in. Given a
 * `checkpointStore`, the re-run is a resume of the same execution id: steps the child
 * completed before the crash replay from its ledger instead of running again.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import { Corrupt, StorageError } from "../Errors.ts"
import { make as makeHarness } from "../harness/AgentHarness.ts"
import { loadStep, runManifestStep } from "../harness/StepLoader.ts"
import { listLiveFrom, manifestOf, sharedReattach } from "../internal/manifests.ts"
import { randomId } from "../internal/randomId.ts"
import { manifestKey, type SubprocessManifest } from "../schema/SubprocessManifest.ts"
import { CheckpointStore, type CheckpointStoreShape } from "../services/CheckpointStore.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { clearChild, loadManifest, saveManifest } from "../services/SubprocessRecords.ts"
import {
  makeMemoryWith,
  type ProcessRequest,
  SpawnFailed,
  type SpawnRequest,
  SubprocessAdapter,
  type SubprocessAdapterShape,
  SubprocessError,
  type SubprocessHandle
} from "../services/SubprocessAdapter.ts"
import { logWarning } from "../internal/diagnostics.ts"

/** How the in-memory adapter is built. */
export interface InMemorySubprocessAdapterOptions {
  /** Where manifests go; without it `listLive` is empty and `reattach` none. */
  readonly storage?: StorageAdapterShape | undefined
  /** The checkpoint store a reattached child re-runs under, so its completed steps replay. */
  readonly checkpointStore?: CheckpointStoreShape | undefined
  /** A module (path or URL) to load a re-run step from when its manifest records none (imported ones). */
  readonly entry?: string | undefined
  /**
   * Re-runs a recorded child whose step cannot be loaded in this process (noetic's
   * `stepRunner`), given its manifest, input and handle id. Without it, a child recorded
   * with no module (a request made by id) while the adapter has no `entry` is reattached
   * as a placeholder, as noetic's in-memory adapter reattaches every child: a running
   * handle, `reattachMode: 'replay'`, that settles only when stopped. One whose module no
   * longer exports its step fails to reattach with `StepUnavailable` (`listLive` skips it).
   */
  readonly rerun?: ((manifest: SubprocessManifest, input: unknown, handleId: string) => Effect.Effect<unknown, unknown>) | undefined
  /**
   * Runs a process request in this process (noetic's `run` hook); without it a process
   * child has completed when `spawnProcess` returns. Process children keep no manifest:
   * there is nothing to re-run.
   */
  readonly runProcess?: ((request: ProcessRequest, handleId: string) => Effect.Effect<void, unknown>) | undefined
}

const spawnFailed = (handleId: string, message: string, cause: unknown) =>
  new SubprocessError({ reason: new SpawnFailed({ handleId, message, cause }) })

/** Builds the adapter; its children are fibers of the current scope. */
export const make = Effect.fnUntraced(function*(
  options: InMemorySubprocessAdapterOptions = {}
): Effect.fn.Return<SubprocessAdapterShape, never, Scope.Scope> {
  const base = yield* makeMemoryWith({ runProcess: options.runProcess })
  const storage = options.storage
  if (storage === undefined) return base
  const scope = yield* Effect.scope

  const spawn = Effect.fn("InMemorySubprocessAdapter.spawn")(function*(request: SpawnRequest) {
    const handleId = request.handleId !== undefined ? request.handleId : yield* randomId
    let serializedInput: string
    try {
      serializedInput = JSON.stringify(request.input) ?? "null"
    } catch (cause) {
      // Without its input a recorded child could never be re-run: refuse rather than record a lie.
      return yield* spawnFailed(handleId, `the input of step ${request.stepId} has no JSON form`, cause)
    }
    const manifest = yield* manifestOf(request, handleId, serializedInput, {
      adapter: "memory",
      module: request.module ?? null,
      entry: null,
      socketPath: null,
      checkpointRoot: null,
      lingerMs: 0
    })
    yield* saveManifest(storage, manifest).pipe(Effect.mapError((error) => spawnFailed(handleId, `cannot record the manifest: ${error.message}`, error)))
    // A child that succeeded or failed clears its manifest before its result is seen, so
    // a host that awaited it and shut down never re-runs it; `stop` clears its own. An
    // interrupted child (the host's scope closing) keeps it: it is re-run on restart.
    const clearOnSettle = Effect.onExit(request.runInProcess, (exit) =>
      Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? Effect.void : clearChild(storage, handleId).pipe(
        Effect.catchCause((cause) => logWarning(`subprocess ${handleId}: its manifest was not cleared`, cause))
      ))
    return yield* base.spawn({ ...request, handleId, runInProcess: clearOnSettle })
  })

  const adopt = (handleId: string) =>
    Effect.gen(function*() {
      const live = yield* base.get(handleId)
      if (Option.isSome(live)) return live
      const recorded = yield* loadManifest(storage, handleId)
      if (Option.isNone(recorded) || recorded.value.adapter !== "memory") return Option.none<SubprocessHandle>()
      const manifest = recorded.value
      const input: unknown = yield* Effect.try({
        try: () => JSON.parse(manifest.serializedInput),
        catch: (cause) =>
          new StorageError({
            operation: "reattach",
            reason: new Corrupt({ key: manifestKey(handleId), message: `the recorded input is not JSON: ${String(cause)}` })
          })
      })
      const loaded = yield* Effect.result(loadStep(handleId, manifest.stepId, manifest.module, options.entry ?? null))
      let runInProcess: Effect.Effect<unknown, unknown>
      if (Result.isSuccess(loaded)) {
        const { layer, step } = loaded.success
        const harness = yield* makeHarness({ name: `subprocess:${manifest.stepId}`, agentGraph: step }).pipe(
          options.checkpointStore === undefined ? (e) => e : Effect.provideService(CheckpointStore, options.checkpointStore),
          Effect.orDie,
          Scope.provide(scope)
        )
        // The caller that spawned it is gone; the services come from the step's module.
        runInProcess = runManifestStep(harness, manifest, input, layer)
      } else if (options.rerun !== undefined) {
        runInProcess = options.rerun(manifest, input, handleId)
      } else if (manifest.module !== null || options.entry !== undefined) {
        // A module that no longer exports the step (renamed, removed): say so, and keep
        // the manifest for a build that exports it again.
        return yield* loaded.failure
      } else {
        runInProcess = Effect.andThen(
          logWarning(
            `subprocess ${handleId}: ${loaded.failure.message}; it is reattached as a placeholder that settles ` +
              "only when stopped (give the adapter an entry module or a stepRunner to re-run it)"
          ),
          Effect.never
        )
      }
      return Option.some(yield* spawn({
        handleId,
        stepId: manifest.stepId,
        module: manifest.module ?? undefined,
        input,
        executionId: manifest.executionId,
        parentExecutionId: manifest.parentExecutionId ?? undefined,
        threadId: manifest.threadId ?? undefined,
        resourceId: manifest.resourceId ?? undefined,
        cwdInit: manifest.cwdInit ?? undefined,
        // noetic's word for what a reattach of an in-process child is: a re-run.
        metadata: { ...manifest.metadata, reattachMode: "replay" },
        runInProcess
      }))
    })

  const reattach = sharedReattach((handleId) =>
    adopt(handleId).pipe(Effect.withSpan("InMemorySubprocessAdapter.reattach"))
  )

  const listLive = listLiveFrom(storage, reattach).pipe(Effect.withSpan("InMemorySubprocessAdapter.listLive"))

  return SubprocessAdapter.of({
    spawn,
    spawnProcess: base.spawnProcess,
    get: base.get,
    stop: (handleId, reason) =>
      Effect.andThen(
        base.stop(handleId, reason),
        Effect.ignore(clearChild(storage, handleId))
      ),
    listLive,
    reattach,
    nestedInProcess: true
  })
})

/** The in-memory adapter (with storage when given) for the life of the layer. */
export const layer = (options: InMemorySubprocessAdapterOptions = {}): Layer.Layer<SubprocessAdapter> =>
  Layer.effect(SubprocessAdapter, make(options))
