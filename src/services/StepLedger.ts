/**
 * The step-completion ledger: one entry per successfully completed step, so a resumed
 * run replays recorded outputs instead of running those steps again.
 *
 * CONTRACT (implementation pending): see the doc comments on each member.
 *
 * @since 0.1.0
 */
import { Context, type Effect, type Option } from "effect"
import type { StorageError } from "../Errors.ts"

/** What a step is at a path: replay happens only when both match. */
export interface StepIdentity {
  readonly stepId: string
  readonly kind: string
}

/** Caps on what the ledger keeps; `Infinity` disables an axis. */
export interface StepLedgerRetention {
  /** Largest output recorded, in UTF-8 bytes of its JSON. */
  readonly maxEntryBytes: number
  /** Entries kept per execution; the oldest are evicted first. */
  readonly maxEntries: number
}

/** What the ledger recorded, dropped and evicted since it was built. */
export interface StepLedgerStats {
  readonly recorded: number
  readonly droppedOversize: number
  readonly droppedUnserializable: number
  readonly evicted: number
}

/** The ledger of one execution, loaded from storage. */
export interface ExecutionLedger {
  readonly executionId: string
  /**
   * The recorded output at `path` when the recorded identity matches; none when
   * nothing is recorded there. When the identity differs, the entry at `path` and
   * every entry below it (paths starting with `path + "/"`) are discarded, durably,
   * and none is returned.
   */
  readonly lookup: (path: string, identity: StepIdentity) => Effect.Effect<Option.Option<unknown>, StorageError>
  /**
   * Records a completed step's output (one storage write). Outputs over the byte cap or
   * that JSON cannot hold are dropped (counted, first drop of each kind logs a
   * warning); past `maxEntries` the oldest entries are evicted. `undefined` is recorded.
   */
  readonly record: (path: string, identity: StepIdentity, output: unknown) => Effect.Effect<void, StorageError>
}

/** The operations of the step ledger. */
export interface StepLedgerShape {
  readonly retention: StepLedgerRetention
  /** Loads an execution's ledger (one `getMany`), ready for lookups and records. */
  readonly open: (executionId: string) => Effect.Effect<ExecutionLedger, StorageError>
  /** Counters since the ledger service was built. */
  readonly stats: Effect.Effect<StepLedgerStats>
}

/** The step-completion ledger, kept in the checkpoint store's storage. */
export class StepLedger extends Context.Service<StepLedger, StepLedgerShape>()("noetic-effect/StepLedger") {}
