/**
 * What the subprocess adapters that keep manifests share: one adoption per handle at
 * a time, a `listLive` that one unrecoverable manifest cannot spoil, the wait for a
 * child's own pid, and the manifest of a spawn request. (Running a recorded step
 * under a harness is the harness's `StepLoader.runManifestStep`.)
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StorageError } from "../Errors.ts"
import { MANIFEST_PREFIX, type SubprocessManifest } from "../schema/SubprocessManifest.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { SpawnRequest, SubprocessError, SubprocessHandle } from "../services/SubprocessAdapter.ts"
import { logWarning } from "./diagnostics.ts"

type Reattached = Effect.Effect<Option.Option<SubprocessHandle>, StorageError | SubprocessError>

/**
 * Wraps an adoption so concurrent reattaches of one handle share it (one watcher, one
 * client, one re-run) instead of each adopting the child again.
 */
export const sharedReattach = (adopt: (handleId: string) => Reattached) => {
  const attaching = new Map<string, Deferred.Deferred<Option.Option<SubprocessHandle>, StorageError | SubprocessError>>()
  return (handleId: string): Reattached =>
    Effect.suspend(() => {
      const inFlight = attaching.get(handleId)
      if (inFlight !== undefined) return Deferred.await(inFlight)
      const done = Deferred.makeUnsafe<Option.Option<SubprocessHandle>, StorageError | SubprocessError>()
      attaching.set(handleId, done)
      return adopt(handleId).pipe(
        Effect.exit,
        Effect.tap((exit) => Deferred.done(done, exit)),
        Effect.ensuring(Effect.sync(() => attaching.delete(handleId))),
        Effect.flatten
      )
    })
}

/**
 * Reattaches every recorded child. One that cannot come back (a corrupt manifest, a
 * step this build no longer exports) is skipped with a warning and its manifest stays,
 * for an operator or a later build; it never keeps the others from being reattached.
 */
export const listLiveFrom = (
  storage: StorageAdapterShape,
  reattach: (handleId: string) => Reattached
): Effect.Effect<ReadonlyArray<SubprocessHandle>, StorageError | SubprocessError> =>
  Effect.gen(function*() {
    const keys = yield* storage.list(MANIFEST_PREFIX)
    const found = yield* Effect.forEach(keys, (key) => {
      const handleId = key.slice(MANIFEST_PREFIX.length)
      return reattach(handleId).pipe(
        Effect.catchIf(
          (error) =>
            (error._tag === "StorageError" && error.reason._tag === "Corrupt") ||
            (error._tag === "SubprocessError" && error.reason._tag === "StepUnavailable"),
          (error) => Effect.as(logWarning(`subprocess ${handleId}: manifest skipped`, error), Option.none())
        )
      )
    }, { concurrency: 16 })
    return found.flatMap((handle) => (Option.isSome(handle) ? [handle.value] : []))
  })

/** How long a child may take to boot and record its own pid. */
export const START_GRACE_MS = 30_000

/**
 * A manifest without a pid is a child whose host died between starting it and
 * recording the pid; the child records it itself once it boots. So a young pid-less
 * manifest is polled (through `reload`) until it has a pid, is gone, or is `graceMs`
 * old. The wait is bounded from now whatever `createdAt` says: a `createdAt` in the
 * future (the wall clock stepped back, or another host's clock runs ahead) counts as
 * written just now, so the wait never exceeds `graceMs` and never holds up a
 * `listLive` for longer.
 */
export const awaitRecordedPid = <E>(
  manifest: SubprocessManifest,
  reload: (handleId: string) => Effect.Effect<Option.Option<SubprocessManifest>, E>,
  options: { readonly pollMs: number; readonly graceMs?: number }
): Effect.Effect<SubprocessManifest, E> =>
  Effect.gen(function*() {
    if (manifest.pid !== null) return manifest
    const graceMs = options.graceMs ?? START_GRACE_MS
    const now = yield* Clock.currentTimeMillis
    const rawAge = now - manifest.createdAt
    const age = Number.isFinite(rawAge) ? Math.min(Math.max(rawAge, 0), graceMs) : 0
    const deadline = now + graceMs - age
    let current = manifest
    while (current.pid === null && (yield* Clock.currentTimeMillis) < deadline) {
      yield* Effect.sleep(Duration.millis(options.pollMs))
      const reloaded = yield* reload(current.handleId)
      if (Option.isNone(reloaded)) return current
      current = reloaded.value
    }
    return current
  })

/** What an adapter records of a spawn besides the request: where and how the child runs. */
export type ManifestPlacement = Pick<
  SubprocessManifest,
  "adapter" | "module" | "entry" | "socketPath" | "checkpointRoot" | "lingerMs"
>

/** The manifest of a spawn request, before the child has a pid. */
export const manifestOf = (
  request: SpawnRequest,
  handleId: string,
  serializedInput: string,
  placement: ManifestPlacement
): Effect.Effect<SubprocessManifest> =>
  Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), (createdAt) => ({
    version: 1,
    handleId,
    stepId: request.stepId,
    serializedInput,
    executionId: request.executionId,
    parentExecutionId: request.parentExecutionId ?? null,
    threadId: request.threadId ?? null,
    resourceId: request.resourceId ?? null,
    cwdInit: request.cwdInit ?? null,
    pid: null,
    pidStarttime: null,
    metadata: { ...request.metadata },
    createdAt,
    ...placement
  }))
