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
  /** Whether a save of `ctx` ever started, landed or not (a restored context starts with none). */
  readonly saveStarted: (ctx: AgentContext) => boolean
}

/** The checkpoint policy of a harness over `store`. */
export const make = ({ harness, leases, store }: CheckpointingOptions): Checkpointing => {
  const { storeOf, withLease } = leases
  // Keyed by the context's shared state, not the object: every step's view of a
  // context (parallel branches each have one) must queue on the same lock.
  const checkpointLocks = new WeakMap<ContextStore, Semaphore.Semaphore>()
  /** The context version the last snapshot that landed was taken at. */
  const savedVersions = new WeakMap<ContextStore, number>()
  /** The contexts a save started for: a save that failed may still have landed. */
  const started = new WeakSet<ContextStore>()

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
        started.add(ctx.store)
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

  return { checkpoint, checkpointIfChanged, saveStarted: (ctx) => started.has(ctx.store) }
}

/**
 * Leaves the mark of a failed root run (`runFailedKey`) for an operator's tools, so a
 * run that failed reads `failed` rather than `interrupted` (docs/cli.md#execution-status).
 * Best effort: a mark that cannot be written leaves the run `interrupted`, as before.
 * Nothing is written when `standing` (the line of a mark that still stands, see
 * `standingFailure`) is this failure's: a resume that fails again as before writes no
 * mark, and the mark's `at` stays the first of those failures.
 */
export const markRunFailed = (
  storage: StorageAdapterShape,
  executionId: string,
  error: string,
  standing?: string
): Effect.Effect<void> => {
  const line = error.split("\n")[0] ?? error
  // The mark already says this (a resume that failed again as before): nothing to write.
  if (line === standing) return Effect.void
  return Effect.flatMap(DateTime.now, (now) =>
    storage.set(runFailedKey(executionId), {
      version: 1,
      at: DateTime.formatIso(now),
      error: line
    } satisfies RunFailed)).pipe(Effect.ignore)
}

/**
 * The failure line of the mark stored for `executionId` when it still stands against
 * the snapshot captured at `capturedAt` (the mark no older than it, as the CLI reads
 * it), else undefined: no mark, a mark a later snapshot outranks, or a row that cannot
 * be read (the next failure then writes the mark afresh). Read beside a resume's
 * snapshot and ledger, in the same round trip on a storage that merges reads.
 */
export const standingFailure = (
  storage: StorageAdapterShape,
  executionId: string
): Effect.Effect<(capturedAt: string) => string | undefined> =>
  storage.get(runFailedKey(executionId)).pipe(
    Effect.map((found) => (capturedAt: string) => {
      if (Option.isNone(found)) return undefined
      const mark = found.value as Partial<RunFailed> | null
      if (typeof mark !== "object" || mark === null || mark.version !== 1) return undefined
      if (typeof mark.at !== "string" || typeof mark.error !== "string") return undefined
      return Date.parse(mark.at) >= Date.parse(capturedAt) ? mark.error : undefined
    }),
    Effect.orElseSucceed(() => () => undefined)
  )

/** What a failed run's stream end and failure mark say of its failure: its message. */
export const failureText = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : String(error)
