/**
 * The documented `createCheckpointStore` and step-ledger retention settings, for
 * plain TypeScript, and the bridge from them to the engine services.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { CheckpointSchemaMismatch, Io, StorageError } from "../Errors.ts"
import {
  AskUserPrompt,
  CHECKPOINT_SCHEMA_VERSION,
  CheckpointSnapshot as CheckpointSnapshotEffectSchema,
  Cwd,
  FrontierEntry
} from "../schema/CheckpointSnapshot.ts"
import type { CheckpointSnapshot } from "../schema/CheckpointSnapshot.ts"
import { type CheckpointStoreShape, decodeLoadedSnapshot, makeWith } from "../services/CheckpointStore.ts"
import { makeMemory } from "../services/StorageAdapter.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import {
  DEFAULT_STEP_LEDGER_RETENTION as ENGINE_DEFAULT_RETENTION,
  type StepLedgerRetention,
  validateRetention
} from "../services/StepLedger.ts"
import { isNoeticConfigError, unwrapExit } from "./errors.ts"
import * as Bridge from "./bridge.ts"
import { runForFacade, type StorageAdapter, toEngineStorage } from "./storage.ts"

export type { CheckpointSnapshot } from "../schema/CheckpointSnapshot.ts"

/** The snapshot schema version this library reads and writes (noetic's `CheckpointSchemaVersion`). */
export const CheckpointSchemaVersion: 2 = CHECKPOINT_SCHEMA_VERSION

/** One frame of a snapshot's frontier: a step in flight and its input. */
export type FrontierFrame = FrontierEntry

/** The cwd of a snapshot: current and previous. */
export type CwdSnapshot = Cwd

/** An ask-user prompt pending in a snapshot. */
export type PendingAskUserSnapshot = AskUserPrompt

/** The result of `CheckpointSnapshotSchema.safeParse`, shaped as zod's. */
export type SnapshotParseResult =
  | { readonly success: true; readonly data: CheckpointSnapshot }
  | { readonly success: false; readonly error: Error }

const decodeSnapshotExit = Schema.decodeUnknownExit(CheckpointSnapshotEffectSchema)

/**
 * Validates snapshots, as noetic's zod `CheckpointSnapshotSchema` does: `parse(u)`
 * returns the snapshot or throws, `safeParse(u)` returns `{ success, data | error }`.
 * `schema` is the Effect `Schema` underneath.
 */
export const CheckpointSnapshotSchema = {
  schema: CheckpointSnapshotEffectSchema,
  safeParse(u: unknown): SnapshotParseResult {
    const exit = decodeSnapshotExit(u)
    return Exit.isSuccess(exit)
      ? { success: true, data: exit.value }
      : { success: false, error: new Error(`not a schemaVersion ${CHECKPOINT_SCHEMA_VERSION} checkpoint snapshot: ${String(exit.cause)}`) }
  },
  parse(u: unknown): CheckpointSnapshot {
    const result = CheckpointSnapshotSchema.safeParse(u)
    if (result.success) return result.data
    throw result.error
  }
}
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
  /** The executions that have a snapshot. */
  list(): Promise<ReadonlyArray<{ readonly executionId: string }>>
  /** Removes an execution's snapshot and every step-ledger key it has. */
  clear(executionId: string): Promise<void>
}

/**
 * noetic's checkpoint key parts. A snapshot is at `ExecPrefix + id + SnapshotSuffix`
 * here too; this library keeps its other records of an execution under
 * `execution:<id>:items:<n>` and `execution:<id>:ledger:<seq>`, and never writes the
 * other suffixes (noetic's own, kept for code that names them).
 */
export const CheckpointKeys = {
  ExecPrefix: "execution:",
  SnapshotSuffix: ":snapshot",
  FrontierSuffix: ":frontier",
  LayersSuffix: ":layers:",
  CwdSuffix: ":cwd",
  AskUserSuffix: ":askUser",
  ItemLogSuffix: ":itemLog"
} as const

/** Checkpoint stores over one of this library's storages, which can hold an execution lease. */
const leaseCapable = new WeakSet<CheckpointStore>()

/** Whether leased runs can fence their writes in `store`'s storage (one of this library's, not a host's). */
export const holdsExecutionLeases = (store: CheckpointStore): boolean => leaseCapable.has(store)

/** A checkpoint store over `storage`; its step ledgers live in the same storage. */
export const createCheckpointStore = (options: { readonly storage: StorageAdapter }): CheckpointStore => {
  // Built once and shared, so the store's per-process state (which executions it
  // has indexed) is the same for the facade and for a harness that reaches the engine.
  const engine = Effect.runSync(Effect.cached(Effect.flatMap(toEngineStorage(options.storage), makeWith)))
  const use = <A, E>(f: (store: CheckpointStoreShape) => Effect.Effect<A, E>) =>
    runForFacade(Effect.flatMap(engine, f))
  const store: CheckpointStore = {
    save: (snapshot) => use((s) => s.save(snapshot)),
    load: (executionId) => use((s) => Effect.map(s.load(executionId), Option.getOrNull)),
    list: () => use((s) => Effect.map(s.list, (ids) => ids.map((executionId) => ({ executionId })))),
    clear: (executionId) => use((s) => s.clear(executionId))
  }
  // Every storage of this library compares and sets; one a host wrote has only the four methods.
  if (Bridge.storage.has(options.storage)) leaseCapable.add(store)
  return Bridge.checkpointStore.attach(store, engine)
}

const hostFailure = (operation: string, key: string) => (cause: unknown) =>
  new StorageError({
    operation,
    reason: new Io({ key, message: cause instanceof Error ? cause.message : String(cause), cause })
  })

/**
 * The engine store behind a facade checkpoint store, for the harness facade. A store
 * made by `createCheckpointStore` hands back the engine store it wraps (its step
 * ledgers live in its storage); any other object (one a host wrote) is called through
 * its Promises, what it loads is validated as a snapshot, and its step ledgers live
 * in `ledgerStorage` (noetic's `environment.storage.adapter`, else in memory, as in noetic).
 */
export const toEngineCheckpointStore = (
  store: CheckpointStore,
  ledgerStorage?: Effect.Effect<StorageAdapterShape, StorageError>
): Effect.Effect<CheckpointStoreShape, StorageError> => {
  const engine = Bridge.checkpointStore.get(store)
  if (engine !== undefined) return engine
  return Effect.map(ledgerStorage ?? makeMemory, (storage): CheckpointStoreShape => ({
    storage,
    save: (snapshot) =>
      Effect.tryPromise({ try: () => store.save(snapshot), catch: hostFailure("save", snapshot.executionId) }),
    load: (executionId) =>
      Effect.tryPromise({
        try: () => store.load(executionId),
        catch: (cause) =>
          isNoeticConfigError(cause) && cause.code === "CHECKPOINT_SCHEMA_MISMATCH"
            ? new CheckpointSchemaMismatch({ executionId, seenVersion: null, message: cause.message, hint: cause.hint })
            : hostFailure("load", executionId)(cause)
      }).pipe(
        // The engine's check of what a host's store loaded (a snapshot, else a schema mismatch).
        Effect.flatMap((snapshot) => decodeLoadedSnapshot(executionId, snapshot))
      ),
    list: Effect.map(
      Effect.tryPromise({ try: () => store.list(), catch: hostFailure("list", "") }),
      (entries) =>
        (entries as ReadonlyArray<unknown>).map((entry) =>
          typeof entry === "string" ? entry : String((entry as { executionId: unknown }).executionId)
        )
    ),
    // The ledger in `storage` is cleared by the engine's harness.clearCheckpoint (StepLedger.clear).
    clear: (executionId) =>
      Effect.tryPromise({ try: () => store.clear(executionId), catch: hostFailure("clear", executionId) })
  }))
}

/** Whether a checkpoint store was made by `createCheckpointStore`. */
export const isEngineBackedCheckpointStore = (store: CheckpointStore): boolean => Bridge.checkpointStore.has(store)

/**
 * Fills in and checks step-ledger caps for a facade constructor, synchronously:
 * throws `NoeticConfigError` code `STEP_LEDGER_RETENTION_INVALID` for a cap the
 * engine's `validateRetention` refuses (below 1 or NaN).
 */
export const resolveStepLedgerRetention = (retention?: Partial<StepLedgerRetention>): StepLedgerRetention =>
  unwrapExit(Effect.runSyncExit(validateRetention(retention)))
