/**
 * Testing a workflow's recovery: run it, crash the "host" at a chosen storage
 * operation (before or after it), and resume it on a fresh harness over the same
 * storage, as a restarted process would; or try every crash point in turn.
 *
 * A {@link Workflow} says how to open its storage as a fresh process would (for a file
 * storage: `FileStorage.make` over the same root, which also sweeps torn temp files),
 * how to start the run on a storage, and how to resume it there. Each attempt runs
 * in its own scope, closed when the attempt ends, like a process exiting.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type { StorageError } from "../Errors.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { type FaultPoint, isHostCrash, make as makeFaulty, type Operation } from "./FaultyStorage.ts"

/**
 * Whether the simulated host still runs. A step body with side effects a test counts
 * can ask it: what a crashed attempt's other fibers do between the crash and their
 * interruption would not have happened in a dead process.
 */
export interface Host {
  readonly alive: () => boolean
}

/** A durable workflow under test: how a process opens its storage, starts it and resumes it. */
export interface Workflow<A, E = unknown, R = never> {
  /** Opens the storage as a freshly started process would (a new handle on the same data). */
  readonly open: Effect.Effect<StorageAdapterShape, StorageError, R>
  /** Builds a harness over `storage` and runs the workflow from the start. */
  readonly start: (storage: StorageAdapterShape, host: Host) => Effect.Effect<A, E, R | Scope.Scope>
  /** Builds a fresh harness over `storage` and finishes the recorded run (resume, reattach...). */
  readonly resume: (storage: StorageAdapterShape, host: Host) => Effect.Effect<A, E, R | Scope.Scope>
}

const alwaysAlive: Host = { alive: () => true }

/** Where and how the first attempt is stopped. */
export interface CrashPoint extends FaultPoint {
  /** `crash` (default): the host dies there. `fail`: that one operation fails with a typed `Io` error. */
  readonly mode?: "crash" | "fail"
  /** A file storage root where a crash at a write leaves a torn temp file, as a killed writer would. */
  readonly tornTempFileIn?: string
}

/** What one crash-and-resume did. */
export interface CrashOutcome<A> {
  /** Whether the fault struck (false when the run finished in fewer operations). */
  readonly struck: boolean
  /** How the first attempt ended. */
  readonly first: Exit.Exit<A, unknown>
  /** The output the workflow finally produced: the first attempt's, or the resumed one's. */
  readonly output: A
  /** Whether a second attempt (resume) ran. */
  readonly resumed: boolean
  /** The storage operations of the first attempt, in order. */
  readonly operations: ReadonlyArray<Operation>
}

/**
 * Runs `workflow` with its storage failing at `point`; when the first attempt did not
 * finish (a crash, or a failure it did not survive), opens the storage afresh and
 * resumes. Fails with the resume's error when recovery fails.
 */
export const crashAndResume = <A, E, R>(
  workflow: Workflow<A, E, R>,
  point: CrashPoint
): Effect.Effect<CrashOutcome<A>, E | StorageError, R> =>
  Effect.gen(function*() {
    const disk = yield* workflow.open
    const mode = point.mode ?? "crash"
    const faulty = makeFaulty(disk, {
      ...(mode === "crash" ? { crashAt: point } : { failAt: point }),
      ...(point.tornTempFileIn === undefined ? {} : { tornTempFileIn: point.tornTempFileIn })
    })
    // The attempt stops at the crash as a whole (not only at its next storage call), and
    // its scope closes, as the process's resources would go with it.
    const first = yield* Effect.exit(
      Effect.scoped(Effect.raceFirst(workflow.start(faulty.storage, { alive: () => !faulty.crashed() }), faulty.awaitCrash))
    )
    const struck = faulty.operations.some((operation) => operation.injected)
    if (Exit.isSuccess(first) && !faulty.crashed()) {
      return { struck, first, output: first.value, resumed: false, operations: faulty.operations }
    }
    if (Exit.isFailure(first) && !isHostCrash(first) && !struck) {
      // Failed on its own, not by the fault: that is the workflow's answer.
      return yield* Effect.failCause(first.cause)
    }
    const output = yield* Effect.scoped(Effect.flatMap(workflow.open, (storage) => workflow.resume(storage, alwaysAlive)))
    return { struck, first, output, resumed: true, operations: faulty.operations }
  })

/** The output of a run without faults and how many storage operations it took. */
export const dryRun = <A, E, R>(
  workflow: Workflow<A, E, R>
): Effect.Effect<{ readonly output: A; readonly operations: ReadonlyArray<Operation> }, E | StorageError, R> =>
  Effect.gen(function*() {
    const faulty = makeFaulty(yield* workflow.open)
    const output = yield* Effect.scoped(workflow.start(faulty.storage, alwaysAlive))
    return { output, operations: faulty.operations }
  })

/** What {@link exploreCrashPoints} found. */
export interface CrashPointReport {
  /** Crash points tried: every operation index of the crash-free run, before and after. */
  readonly tried: number
  /** Those whose resumed run passed `check`. */
  readonly recovered: number
  /** The points that did not recover, with why. */
  readonly failures: ReadonlyArray<{ readonly point: FaultPoint; readonly error: unknown }>
}

/** How {@link exploreCrashPoints} builds and judges each attempt. */
export interface ExploreOptions<A, E, R> {
  /** A fresh workflow (fresh storage, fresh counters) for each crash point. */
  readonly workflow: () => Effect.Effect<Workflow<A, E, R>, never, R>
  /** Judges a recovered run (compare its output with `expected`, check side effects); fail or throw to reject. */
  readonly check?: (outcome: CrashOutcome<A>, expected: A, point: FaultPoint) => Effect.Effect<void, unknown, R>
  /** Which sides of each operation to try; both by default. */
  readonly when?: ReadonlyArray<"before" | "after">
  /** With a file storage, where a crash at a write leaves a torn temp file (per workflow). */
  readonly tornTempFileIn?: (workflow: Workflow<A, E, R>) => string | undefined
  /** Stops after this many points (the whole run is tried when absent). */
  readonly limit?: number
  /** `crash` (default): the host dies at each point. `fail`: that operation fails with a typed `Io` error. */
  readonly mode?: "crash" | "fail"
}

/**
 * Crashes `workflow` at every storage operation of its crash-free run, before and
 * after each, resuming every time; a point recovers when the resume succeeds and
 * `check` accepts it (by default: the output equals the crash-free one as JSON).
 */
export const exploreCrashPoints = <A, E, R>(
  options: ExploreOptions<A, E, R>
): Effect.Effect<CrashPointReport, E | StorageError, R> =>
  Effect.gen(function*() {
    const baseline = yield* dryRun(yield* options.workflow())
    const sides = options.when ?? ["before", "after"]
    const points: Array<FaultPoint> = []
    for (let index = 0; index < baseline.operations.length; index++) {
      for (const when of sides) points.push({ index, when })
    }
    const chosen = options.limit === undefined ? points : points.slice(0, options.limit)
    const failures: Array<{ point: FaultPoint; error: unknown }> = []
    let recovered = 0
    const check = options.check ?? ((outcome: CrashOutcome<A>, expected: A) =>
      JSON.stringify(outcome.output) === JSON.stringify(expected)
        ? Effect.void
        : Effect.fail(`output ${JSON.stringify(outcome.output)} differs from ${JSON.stringify(expected)}`))
    for (const point of chosen) {
      const workflow = yield* options.workflow()
      const torn = options.tornTempFileIn?.(workflow)
      const exit = yield* Effect.exit(
        Effect.flatMap(
          crashAndResume(workflow, {
            ...point,
            ...(options.mode === undefined ? {} : { mode: options.mode }),
            ...(torn === undefined ? {} : { tornTempFileIn: torn })
          }),
          (outcome) => check(outcome, baseline.output, point)
        )
      )
      if (Exit.isSuccess(exit)) recovered++
      else failures.push({ point, error: exit.cause })
    }
    return { tried: chosen.length, recovered, failures }
  })
