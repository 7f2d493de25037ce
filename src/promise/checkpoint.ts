/**
 * The documented `createCheckpointStore` and step-ledger retention settings, for
 * plain TypeScript, and the bridge from them to the engine services.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { StorageError } from "../Errors.ts"
import type { CheckpointSnapshot } from "../schema/CheckpointSnapshot.ts"
import { type CheckpointStoreShape, makeWith } from "../services/CheckpointStore.ts"
import {
  DEFAULT_STEP_LEDGER_RETENTION as ENGINE_DEFAULT_RETENTION,
  type StepLedgerRetention,
  validateRetention
} from "../services/StepLedger.ts"
import { unwrapExit } from "./errors.ts"
import { runForFacade, type StorageAdapter, toEngineStorage } from "./storage.ts"

export type { CheckpointSnapshot } from "../schema/CheckpointSnapshot.ts"
export type { StepLedgerRetention } from "../services/StepLedger.ts"

/** The documented default caps of the step ledger: 128 KiB per output, 1000 entries per execution. */
export const DEFAULT_STEP_LEDGER_RETENTION: StepLedgerRetention = ENGINE_DEFAULT_RETENTION

/** Saves and loads per-execution snapshots, with Promises. */
export interface CheckpointStore {
  /** Writes the snapshot of `snapshot.executionId`, replacing the previous one. */
  save(snapshot: CheckpointSnapshot): Promise<void>
  /**
   * The snapshot of an execution, or null when none is recorded. Rejects with
   * `NoeticConfigError` code `CHECKPOINT_SCHEMA_MISMATCH` for a record of another
   * schema version or a malformed one; discard it with `clear`.
   */
  load(executionId: string): Promise<CheckpointSnapshot | null>
  /** The ids of the executions that have a snapshot. */
  list(): Promise<ReadonlyArray<string>>
  /** Removes an execution's snapshot and every step-ledger key it has. */
  clear(executionId: string): Promise<void>
}

const engineCheckpointStore = Symbol.for("noetic-effect/promise/engineCheckpointStore")

interface EngineBacked {
  readonly [engineCheckpointStore]: Effect.Effect<CheckpointStoreShape, StorageError>
}

/** A checkpoint store over `storage`; its step ledgers live in the same storage. */
export const createCheckpointStore = (options: { readonly storage: StorageAdapter }): CheckpointStore => {
  // Built once and shared, so the store's per-process state (which executions it
  // has indexed) is the same for the facade and for a harness that reaches the engine.
  const engine = Effect.runSync(Effect.cached(Effect.flatMap(toEngineStorage(options.storage), makeWith)))
  const use = <A, E>(f: (store: CheckpointStoreShape) => Effect.Effect<A, E>) =>
    runForFacade(Effect.flatMap(engine, f))
  const store: CheckpointStore & EngineBacked = {
    [engineCheckpointStore]: engine,
    save: (snapshot) => use((s) => s.save(snapshot)),
    load: (executionId) => use((s) => Effect.map(s.load(executionId), Option.getOrNull)),
    list: () => use((s) => s.list),
    clear: (executionId) => use((s) => s.clear(executionId))
  }
  return store
}

/**
 * The engine store behind a facade checkpoint store, for the harness facade; undefined
 * for an object not made by `createCheckpointStore` (the engine needs its storage,
 * where the step ledger lives).
 */
export const toEngineCheckpointStore = (
  store: CheckpointStore
): Effect.Effect<CheckpointStoreShape, StorageError> | undefined =>
  engineCheckpointStore in store ? (store as CheckpointStore & EngineBacked)[engineCheckpointStore] : undefined

/**
 * Fills in and checks step-ledger caps for a facade constructor, synchronously:
 * throws `NoeticConfigError` code `STEP_LEDGER_RETENTION_INVALID` for a zero,
 * negative or NaN cap.
 */
export const resolveStepLedgerRetention = (retention?: Partial<StepLedgerRetention>): StepLedgerRetention =>
  unwrapExit(Effect.runSyncExit(validateRetention(retention)))
