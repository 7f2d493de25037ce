/**
 * The harness's checkpoint policy: how a context becomes a snapshot, and how saves
 * land (one at a time per context, newest last, under the execution's lease when
 * the harness has leases, never failing the run).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Semaphore from "effect/Semaphore"
import { CHECKPOINT_SCHEMA_VERSION, type CheckpointSnapshot, type RunFailed, runFailedKey } from "../schema/CheckpointSnapshot.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { CheckpointStoreShape } from "../services/CheckpointStore.ts"
import type { AgentContext, ContextStore } from "./AgentContext.ts"
import type { LeasedRuns } from "./LeasedRuns.ts"
import { logWarning } from "../internal/diagnostics.ts"

/** A frontier input that a snapshot can hold: the input itself when JSON can carry it. */
const persistableInput = (input: unknown): { readonly input: unknown; readonly serializable: boolean } => {
  try {
    return JSON.stringify(input) === undefined && input !== undefined
      ? { input: null, serializable: false }
      : { input, serializable: true }
  } catch {
    return { input: null, serializable: false }
  }
}

/** The snapshot of a context at `capturedAt`. */
export const toSnapshot = (ctx: AgentContext, capturedAt: string): CheckpointSnapshot => ({
  schemaVersion: CHECKPOINT_SCHEMA_VERSION,
  executionId: ctx.id,
  ...(ctx.threadId === undefined ? {} : { threadId: ctx.threadId }),
  ...(ctx.resourceId === undefined ? {} : { resourceId: ctx.resourceId }),
  frontier: ctx.frontier.map((entry) => {
    const { input, serializable } = persistableInput(entry.input)
    return serializable ? entry : { ...entry, input, state: { ...(entry.state as object), inputUnserializable: true } }
  }),
  layers: ctx.layers,
  cwd: ctx.cwd,
  askUser: ctx.pendingAskUser,
  itemLog: { items: [...ctx.items] },
  capturedAt
})

/** What the policy needs of its harness. */
export interface CheckpointingOptions {
  /** The harness's name, for log annotations. */
  readonly harness: string
  /** Where snapshots go; none makes every save a no-op. */
  readonly store: Option.Option<CheckpointStoreShape>
  readonly leases: LeasedRuns
}

/** The saves of one harness. */
export interface Checkpointing {
  /** Saves a snapshot of `ctx`. Never fails: a failing save is logged. */
  readonly checkpoint: (ctx: AgentContext) => Effect.Effect<void>
  /** Saves `ctx` unless the last snapshot that landed is of its current version. */
  readonly checkpointIfChanged: (ctx: AgentContext) => Effect.Effect<void>
}

/** The checkpoint policy of a harness over `store`. */
export const make = ({ harness, leases, store }: CheckpointingOptions): Checkpointing => {
  const { storeOf, withLease } = leases
  // Keyed by the context's shared state, not the object: every step's view of a
  // context (parallel branches each have one) must queue on the same lock.
  const checkpointLocks = new WeakMap<ContextStore, Semaphore.Semaphore>()
  /** The context version the last snapshot that landed was taken at. */
  const savedVersions = new WeakMap<ContextStore, number>()

  const checkpoint = (ctx: AgentContext): Effect.Effect<void> =>
    Option.isNone(store) ? Effect.void : saveCheckpoint(ctx).pipe(
      Effect.withSpan("AgentHarness.checkpoint", { attributes: { executionId: ctx.id, harness } })
    )

  const saveCheckpoint = (ctx: AgentContext): Effect.Effect<void> => {
    if (Option.isNone(store)) return Effect.void
    if (leases.enabled && !leases.holds(ctx.id)) {
      // Outside a leased run (a detached child settling after its parent returned, a
      // context of harness.run): the save takes the lease for its own duration.
      return withLease(ctx.id, Effect.suspend(() => saveCheckpoint(ctx)), "join").pipe(
        Effect.catchCause((cause) =>
          logWarning("checkpoint not saved: the execution's lease could not be taken", cause).pipe(
            Effect.annotateLogs({ executionId: ctx.id, harness })
          )
        )
      )
    }
    const target = Option.getOrElse(storeOf(ctx.id), () => store.value)
    let lock = checkpointLocks.get(ctx.store)
    if (lock === undefined) {
      lock = Semaphore.makeUnsafe(1)
      checkpointLocks.set(ctx.store, lock)
    }
    // The snapshot is taken inside the lock so a slower, older save never lands last.
    return lock.withPermit(
      Effect.gen(function*() {
        const capturedAt = DateTime.formatIso(yield* DateTime.now)
        const version = ctx.version
        // A child agent names its parent, so clearing the parent finds it (CheckpointStore.clear).
        yield* target.save(
          toSnapshot(ctx, capturedAt),
          ctx.parent === undefined ? undefined : { parentExecutionId: ctx.parent.id }
        )
        savedVersions.set(ctx.store, version)
      })
    ).pipe(
      Effect.catchCause((cause) =>
        // A save refused because the lease was taken over interrupts the run (see
        // withLease); only ordinary failures are logged and swallowed.
        leases.holds(ctx.id) && Cause.hasInterruptsOnly(cause) ? Effect.interrupt : logWarning("checkpoint save failed; the run continues", cause).pipe(
          Effect.annotateLogs({ executionId: ctx.id, harness })
        )
      )
    )
  }

  const checkpointIfChanged = (ctx: AgentContext): Effect.Effect<void> =>
    Effect.suspend(() => savedVersions.get(ctx.store) === ctx.version ? Effect.void : checkpoint(ctx))

  return { checkpoint, checkpointIfChanged }
}

/**
 * Leaves the mark of a failed root run (`runFailedKey`) for an operator's tools, so a
 * run that failed reads `failed` rather than `interrupted` (docs/cli.md#execution-status).
 * Best effort: a mark that cannot be written leaves the run `interrupted`, as before.
 */
export const markRunFailed = (storage: StorageAdapterShape, executionId: string, error: string): Effect.Effect<void> =>
  Effect.flatMap(DateTime.now, (now) =>
    storage.set(runFailedKey(executionId), {
      version: 1,
      at: DateTime.formatIso(now),
      error: error.split("\n")[0] ?? error
    } satisfies RunFailed)).pipe(Effect.ignore)
