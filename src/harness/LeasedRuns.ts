/**
 * The execution leases of one harness (docs/architecture.md#execution-leases): with `lease` on a durable harness,
 * each run holds its execution's lease, and its snapshots and ledger records go
 * through storage fenced by the lease's token. Without `lease` every run goes
 * unleased and nothing here writes.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type { StorageError } from "../Errors.ts"
import { type CheckpointStoreShape, makeWith as makeCheckpointStore } from "../services/CheckpointStore.ts"
import {
  type ExecutionLeaseError,
  ExecutionLeaseHeld,
  ExecutionLeaseLost,
  ExecutionLeaseUnsupported,
  fencedStorage,
  makeWith as makeExecutionLease,
  supportsLeases
} from "../services/ExecutionLease.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { makeWith as makeStepLedger, type StepLedgerShape } from "../services/StepLedger.ts"
import { logWarning } from "../internal/diagnostics.ts"

/** How a harness leases the executions it runs. */
export interface HarnessLeaseOptions {
  /** This host incarnation; it may take over its own leases (after a restart) without waiting for expiry. */
  readonly owner: string
  /** How long a lease lasts unless renewed; renewed every third of it. Default {@link DEFAULT_LEASE_TTL}. */
  readonly ttl?: Duration.Input
}

/** The lease ttl of a harness that names none. */
export const DEFAULT_LEASE_TTL: Duration.Input = "30 seconds"

/** A harness's lease ttl is not a positive, finite duration (a configuration error). */
export class LeaseTtlInvalid extends Schema.TaggedError<LeaseTtlInvalid>("noetic-effect/LeaseTtlInvalid")(
  "LeaseTtlInvalid",
  { ttl: Schema.String, message: Schema.String, hint: Schema.String }
) {
  /** The documented error code. */
  get code(): "LEASE_TTL_INVALID" {
    return "LEASE_TTL_INVALID"
  }
}

/** The millis of a ttl, NaN for what is not a duration. */
const ttlMillis = (ttl: Duration.Input): number => {
  if (typeof ttl === "number" && Number.isNaN(ttl)) return Number.NaN
  try {
    return Duration.toMillis(Duration.fromInputUnsafe(ttl))
  } catch {
    return Number.NaN
  }
}

/** Checks lease options before anything runs: a ttl that never expires, or is over at once, is refused. */
export const validateLeaseOptions = (options: HarnessLeaseOptions | undefined): Effect.Effect<void, LeaseTtlInvalid> =>
  Effect.suspend(() => {
    if (options?.ttl === undefined) return Effect.void
    const millis = ttlMillis(options.ttl)
    if (millis > 0 && Number.isFinite(millis)) return Effect.void
    return Effect.fail(
      new LeaseTtlInvalid({
        ttl: String(options.ttl),
        message: `the lease ttl must be a positive, finite duration, got ${String(options.ttl)}`,
        hint:
          "Pass a ttl longer than the longest pause you expect a live host to take (default 30 seconds), or leave it out."
      })
    )
  })

/** The leases a harness holds, and how it runs under one. */
export interface LeasedRuns {
  /** Whether the harness leases its executions at all. */
  readonly enabled: boolean
  /** Whether the harness holds the lease of `executionId` right now. */
  readonly holds: (executionId: string) => boolean
  /** The checkpoint store of a leased execution: its writes are fenced. */
  readonly storeOf: (executionId: string) => Option.Option<CheckpointStoreShape>
  /** The step ledger of a leased execution: its writes are fenced. */
  readonly ledgerOf: (executionId: string) => StepLedgerShape | undefined
  /** Runs `body` holding the lease of `executionId` (see the doc of the implementation). */
  readonly withLease: <A, E, R>(
    executionId: string,
    body: Effect.Effect<A, E, R>,
    mode: "exclusive" | "join"
  ) => Effect.Effect<A, E | ExecutionLeaseError | StorageError, R>
}

/** The leases of a harness with these options, store and ledger. */
export const make = Effect.fnUntraced(function*(
  options: HarnessLeaseOptions | undefined,
  store: Option.Option<CheckpointStoreShape>,
  ledgerService: Option.Option<StepLedgerShape>
): Effect.fn.Return<LeasedRuns> {
  const lease = options === undefined || Option.isNone(store) ? undefined : {
    owner: options.owner,
    ttl: options.ttl ?? DEFAULT_LEASE_TTL,
    renewEvery: Duration.divideUnsafe(Duration.fromInputUnsafe(options.ttl ?? DEFAULT_LEASE_TTL), 3),
    service: yield* makeExecutionLease(store.value.storage)
  }
  /** Executions this harness holds the lease of, with their fenced store and ledger. */
  const leasedRuns = new Map<string, { readonly store: CheckpointStoreShape; readonly ledger: StepLedgerShape }>()
  /** Executions whose lease a run of this harness is taking; done once it is held (or could not be). */
  const taking = new Map<string, Deferred.Deferred<void>>()

  /**
   * Runs `body` holding the lease of `executionId`, with a checkpoint store and a
   * ledger over storage fenced by the lease's token, renewing it every third of its
   * ttl and releasing it at the end. A fenced write that is refused, or a renewal
   * that finds the token gone, means another host took the execution over: the write
   * interrupts its own fiber (so no catch-and-log lets the run go on), the run is
   * interrupted, and `body` fails with `ExecutionLeaseLost`. A harness running the
   * execution already fails with `ExecutionLeaseHeld` (`mode: "exclusive"`, execute
   * and resume) or joins that run (`"join"`, a checkpoint outside a run).
   */
  const withLease = <A, E, R>(
    executionId: string,
    body: Effect.Effect<A, E, R>,
    mode: "exclusive" | "join"
  ): Effect.Effect<A, E | ExecutionLeaseError | StorageError, R> =>
    Effect.suspend(() => {
      if (lease === undefined || Option.isNone(store) || Option.isNone(ledgerService)) return body
      const pending = taking.get(executionId)
      if (leasedRuns.has(executionId) || pending !== undefined) {
        // A run still taking the lease is joined once it holds it, or taken over if it could not.
        if (mode === "join") {
          return pending === undefined ? body : Effect.andThen(Deferred.await(pending), withLease(executionId, body, mode))
        }
        return Effect.flatMap(lease.service.current(executionId), (current) =>
          Effect.fail(
            new ExecutionLeaseHeld({
              executionId,
              owner: lease.owner,
              expiresAt: Option.isSome(current) ? current.value.expiresAt : 0
            })
          ))
      }
      const storage = store.value.storage
      if (!supportsLeases(storage)) return Effect.fail(new ExecutionLeaseUnsupported({ executionId }))
      const ledgerRetention = ledgerService.value.retention
      // Claimed before the first await, so a second run started meanwhile sees this one.
      const taken = Deferred.makeUnsafe<void>()
      taking.set(executionId, taken)
      const doneTaking = Effect.sync(() => {
        if (taking.get(executionId) === taken) taking.delete(executionId)
        Deferred.doneUnsafe(taken, Exit.void)
      })
      const hold = Effect.gen(function*() {
        const held = yield* Effect.acquireRelease(
          lease.service.acquire(executionId, { owner: lease.owner, ttl: lease.ttl }),
          (held) =>
            Effect.catchCause(
              lease.service.release(held),
              (cause) => logWarning("execution lease release failed", cause)
            )
        )
        const lost = yield* Deferred.make<never, ExecutionLeaseLost>()
        const lostError = new ExecutionLeaseLost({ executionId, owner: held.owner, token: held.token })
        const fenced = fencedStorage(storage, held)
        const stopIfTakenOver = (error: StorageError) =>
          error.reason._tag === "Conflict"
            ? Effect.andThen(Deferred.fail(lost, lostError), Effect.interrupt)
            : Effect.fail(error)
        const guarded: StorageAdapterShape = {
          ...fenced,
          set: (key, value) => Effect.catch(fenced.set(key, value), stopIfTakenOver),
          delete: (key) => Effect.catch(fenced.delete(key), stopIfTakenOver)
        }
        const runStore = yield* makeCheckpointStore(guarded)
        // The retention was validated when the harness's ledger was built.
        const runLedger = yield* Effect.orDie(makeStepLedger(runStore, { retention: ledgerRetention }))
        leasedRuns.set(executionId, { store: runStore, ledger: runLedger })
        yield* Effect.addFinalizer(() => Effect.sync(() => leasedRuns.delete(executionId)))
        const keepRenewing: Effect.Effect<void> = Effect.suspend(() =>
          Effect.sleep(lease.renewEvery).pipe(
            // Uninterruptible so a renewal that landed is not mistaken for a takeover.
            Effect.andThen(Effect.uninterruptible(lease.service.renew(held, lease.ttl))),
            Effect.matchEffect({
              onSuccess: () => keepRenewing,
              onFailure: (error) =>
                error._tag === "ExecutionLeaseLost"
                  ? Deferred.fail(lost, error)
                  : Effect.andThen(logWarning("execution lease renewal failed; retrying", error), keepRenewing)
            })
          )
        )
        yield* Effect.forkScoped(keepRenewing)
        return lost
      })
      return Effect.gen(function*() {
        const runScope = yield* Scope.make()
        return yield* Effect.gen(function*() {
          const lost = yield* Scope.provide(hold, runScope).pipe(Effect.ensuring(doneTaking))
          const exit = yield* Effect.exit(Effect.raceFirst(body, Deferred.await(lost)))
          // A run cut short once the lease was lost failed because of the loss.
          if (Exit.isFailure(exit) && (yield* Deferred.isDone(lost))) return yield* Deferred.await(lost)
          return yield* exit
        }).pipe(Effect.onExit((exit) => Scope.close(runScope, exit)))
      }).pipe(Effect.ensuring(doneTaking))
    })

  return {
    enabled: lease !== undefined,
    holds: (executionId) => leasedRuns.has(executionId),
    storeOf: (executionId) => Option.fromUndefinedOr(leasedRuns.get(executionId)?.store),
    ledgerOf: (executionId) => leasedRuns.get(executionId)?.ledger,
    withLease
  }
})
