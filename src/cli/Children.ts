/**
 * What the CLI reads and does with subprocess children: their manifests, liveness
 * checked as `reattach` checks it (pid plus the start time from `/proc`, so a recycled
 * pid never counts), results a child persisted while no host was running, and stop.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StorageError } from "../Errors.ts"
import { isAlive } from "../internal/procStat.ts"
import { MANIFEST_PREFIX, resultKey, type SubprocessManifest, watermarkKey } from "../schema/SubprocessManifest.ts"
import { Stopped } from "../services/SubprocessAdapter.ts"
import { clearChild, loadManifest, saveResult, SubprocessResult } from "../services/SubprocessRecords.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { Progress } from "./Render.ts"
import { CliFailure } from "./Storages.ts"

/**
 * - `running`: its process (pid and start time) is alive;
 * - `starting`: no pid recorded yet, within the grace a booting child has to record it;
 * - `finished`: it persisted its result (it may still linger for the acknowledgement);
 * - `exited`: its process is gone without a result (the next host clears it);
 * - `in-process`: a child of the in-memory adapter, a fiber of its host, re-run when the host restarts;
 * - `unreadable`: its manifest does not decode.
 */
export type ChildStatus = "running" | "starting" | "finished" | "exited" | "in-process" | "unreadable"

/** One child, as `children list` prints it. */
export interface ChildRow {
  readonly handleId: string
  readonly status: ChildStatus
  readonly adapter: string | null
  /** Whether its process is alive; null where there is no process to check (in-process, no pid). */
  readonly alive: boolean | null
  readonly pid: number | null
  readonly stepId: string | null
  readonly executionId: string | null
  readonly parentExecutionId: string | null
  /** When it was spawned, ISO text. */
  readonly createdAt: string | null
  readonly ageMs: number | null
  /** The outcome it persisted: `{ _tag: "Success", value }` or `{ _tag: "Failure", error }`. */
  readonly result: unknown
  readonly problem?: string
}

/** How long a pid-less manifest may be a booting child (the local adapter's start grace). */
const START_GRACE_MS = 30_000

const decodeResult = Schema.decodeUnknownExit(SubprocessResult)

/** The persisted result of a child, as stored (JSON), when there is a valid one. */
const storedResult = (storage: StorageAdapterShape, handleId: string) =>
  Effect.map(storage.get(resultKey(handleId)), (stored) => {
    if (Option.isNone(stored)) return Option.none<unknown>()
    const decoded = decodeResult(stored.value)
    return Exit.isSuccess(decoded) ? Option.some((stored.value as { readonly outcome: unknown }).outcome) : Option.none<unknown>()
  })

/** The liveness of a manifest's process, as reattach decides it. */
const liveness = (manifest: SubprocessManifest) =>
  manifest.pid === null ? Effect.succeed(false) : isAlive(manifest.pid, manifest.pidStarttime)

/** The row of one child. */
export const childRow = (
  storage: StorageAdapterShape,
  handleId: string,
  now: number
): Effect.Effect<ChildRow, StorageError> =>
  Effect.gen(function*() {
    const manifest = yield* Effect.exit(loadManifest(storage, handleId))
    if (Exit.isFailure(manifest) || Option.isNone(manifest.value)) {
      const error = Exit.isFailure(manifest) ? manifest.cause.reasons.find((reason) => reason._tag === "Fail") : undefined
      if (error !== undefined && error.error.reason._tag !== "Corrupt") return yield* Effect.fail(error.error)
      return {
        handleId,
        status: "unreadable",
        adapter: null,
        alive: null,
        pid: null,
        stepId: null,
        executionId: null,
        parentExecutionId: null,
        createdAt: null,
        ageMs: null,
        result: null,
        problem: error === undefined ? "the manifest vanished while it was read" : error.error.message
      } satisfies ChildRow
    }
    const m = manifest.value.value
    const result = yield* storedResult(storage, handleId)
    const inProcess = m.adapter === "memory"
    const alive = inProcess || m.pid === null ? null : yield* liveness(m)
    const status: ChildStatus = Option.isSome(result)
      ? "finished"
      : inProcess
      ? "in-process"
      : m.pid === null
      ? (now < m.createdAt + START_GRACE_MS ? "starting" : "exited")
      : alive === true
      ? "running"
      : "exited"
    return {
      handleId,
      status,
      adapter: m.adapter,
      alive,
      pid: m.pid,
      stepId: m.stepId,
      executionId: m.executionId,
      parentExecutionId: m.parentExecutionId,
      createdAt: new Date(m.createdAt).toISOString(),
      ageMs: Math.max(0, now - m.createdAt),
      result: Option.getOrNull(result)
    }
  })

/** Every recorded child, oldest first. */
export const listChildren = (
  storage: StorageAdapterShape,
  progress: Progress,
  now: number
): Effect.Effect<ReadonlyArray<ChildRow>, StorageError> =>
  Effect.gen(function*() {
    progress.update("listing children")
    const ids = (yield* storage.list(MANIFEST_PREFIX)).map((key) => key.slice(MANIFEST_PREFIX.length))
    let done = 0
    const rows = yield* Effect.forEach(ids, (id) =>
      Effect.tap(childRow(storage, id, now), () =>
        Effect.sync(() => progress.update("checking children", ++done, ids.length))), { concurrency: 16 })
    return [...rows].sort((a, b) => (a.ageMs ?? 0) === (b.ageMs ?? 0) ? (a.handleId < b.handleId ? -1 : 1) : (b.ageMs ?? 0) - (a.ageMs ?? 0))
  })

/** The manifest and records of one child, for `children show`. */
export const childDetail = (storage: StorageAdapterShape, handleId: string, now: number) =>
  Effect.gen(function*() {
    const row = yield* childRow(storage, handleId, now)
    const manifest = yield* Effect.orElseSucceed(loadManifest(storage, handleId), () => Option.none<SubprocessManifest>())
    const watermark = yield* storage.get(watermarkKey(handleId))
    return { row, manifest: Option.getOrNull(manifest), watermark: Option.getOrNull(watermark) }
  })

/** Whether a manifest is recorded for `handleId`. */
export const hasChild = (storage: StorageAdapterShape, handleId: string): Effect.Effect<boolean, StorageError> =>
  Effect.map(storage.get(`${MANIFEST_PREFIX}${handleId}`), Option.isSome)

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    // A local child leads its own process group: -pid reaches it and what it started.
    process.kill(-pid, signal)
  } catch {
    // Already gone.
  }
}

/** What `children stop` did. */
export interface StopOutcome {
  readonly handleId: string
  /** The strongest signal sent, or null when none was (the process was gone, or in-process). */
  readonly signal: "SIGTERM" | "SIGKILL" | null
  /** What it did besides signalling. */
  readonly action: "stopped" | "already-finished" | "already-exited" | "manifest-removed"
  /** The result the child is left with (for `finished`, what it produced). */
  readonly result: unknown
}

/**
 * Stops a child. A local child whose process (pid and start time) is alive gets
 * SIGTERM to its process group, then SIGKILL after `graceMs`; unless it persisted a
 * result first, a `Stopped` result is recorded, so its host (or the next one, on
 * reattach) settles it as stopped rather than as a crash, its handle's `stopReason`
 * being `reason` when given. An in-process child has no
 * process of its own: its manifest is removed, so no restarted host re-runs it.
 */
export const stopChild = (
  storage: StorageAdapterShape,
  handleId: string,
  graceMs: number,
  reason?: string
): Effect.Effect<StopOutcome, StorageError | CliFailure> =>
  Effect.gen(function*() {
    const manifest = yield* loadManifest(storage, handleId).pipe(
      Effect.mapError((error) => new CliFailure({ message: `child ${handleId}: ${error.message}` }))
    )
    if (Option.isNone(manifest)) return yield* new CliFailure({ message: `unknown child handle ${handleId}` })
    const m = manifest.value
    if (m.adapter === "memory") {
      yield* clearChild(storage, handleId)
      return { handleId, signal: null, action: "manifest-removed", result: null }
    }
    if (m.pid === null) {
      return yield* new CliFailure({
        message: `child ${handleId} has not recorded its pid yet (it is starting); try again in a moment`
      })
    }
    let signal: StopOutcome["signal"] = null
    const waitDead = (ms: number) =>
      Effect.gen(function*() {
        const deadline = (yield* Clock.currentTimeMillis) + ms
        while ((yield* Clock.currentTimeMillis) < deadline) {
          if (!(yield* liveness(m))) return true
          yield* Effect.sleep(Duration.millis(25))
        }
        return !(yield* liveness(m))
      })
    if (yield* liveness(m)) {
      signalGroup(m.pid, "SIGTERM")
      signal = "SIGTERM"
      if (!(yield* waitDead(graceMs))) {
        signalGroup(m.pid, "SIGKILL")
        signal = "SIGKILL"
        if (!(yield* waitDead(5_000))) {
          return yield* new CliFailure({ message: `child ${handleId} (pid ${m.pid}) is still alive after SIGKILL` })
        }
      }
    }
    const existing = yield* storedResult(storage, handleId)
    if (Option.isSome(existing)) {
      return { handleId, signal, action: signal === null ? "already-finished" : "stopped", result: existing.value }
    }
    yield* saveResult(storage, handleId, {
      _tag: "Failure",
      error: new Stopped({
        handleId,
        message: `child ${handleId} was stopped by an operator`,
        ...(reason === undefined ? {} : { stopReason: reason })
      })
    })
    const result = yield* storedResult(storage, handleId)
    return { handleId, signal, action: signal === null ? "already-exited" : "stopped", result: Option.getOrNull(result) }
  })
