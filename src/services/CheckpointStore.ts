/**
 * Saves and loads per-execution snapshots (schema v2).
 *
 * CONTRACT (implementation pending): see the doc comments on each member.
 *
 * @since 0.1.0
 */
import { Context, type Effect, type Option } from "effect"
import type { CheckpointSchemaMismatch, StorageError } from "../Errors.ts"
import type { CheckpointSnapshot } from "../schema/CheckpointSnapshot.ts"
import type { StorageAdapterShape } from "./StorageAdapter.ts"

/** The operations of a checkpoint store. */
export interface CheckpointStoreShape {
  /** The storage the snapshots live in; the step ledger of each execution lives there too. */
  readonly storage: StorageAdapterShape
  /** Writes the snapshot of `snapshot.executionId`, replacing the previous one. */
  readonly save: (snapshot: CheckpointSnapshot) => Effect.Effect<void, StorageError>
  /**
   * The snapshot of an execution, none when nothing is recorded. A record whose
   * `schemaVersion` is not 2, or that does not match the schema, fails with
   * `CheckpointSchemaMismatch` (naming the version seen and how to discard it).
   */
  readonly load: (
    executionId: string
  ) => Effect.Effect<Option.Option<CheckpointSnapshot>, StorageError | CheckpointSchemaMismatch>
  /** The ids of the executions that have a snapshot; never reads ledger keys. */
  readonly list: Effect.Effect<ReadonlyArray<string>, StorageError>
  /** Removes an execution's snapshot and every ledger key it has. */
  readonly clear: (executionId: string) => Effect.Effect<void, StorageError>
}

/** Saves and loads per-execution snapshots. */
export class CheckpointStore extends Context.Service<CheckpointStore, CheckpointStoreShape>()(
  "noetic-effect/CheckpointStore"
) {}
