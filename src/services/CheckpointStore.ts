/**
 * Saves and loads per-execution snapshots (schema v2).
 *
 * A snapshot lives at `execution:<id>:snapshot` and each save overwrites it. `list`
 * must not read the step ledger (thousands of keys per execution share the
 * `execution:<id>:` prefix, and a file storage lists by reading its whole directory),
 * so every execution also has a small index key `checkpoints:<id>`, written before its
 * first snapshot in each process and removed last by `clear`. A crash between the two
 * writes of a first save can leave an id that lists while `load` finds nothing;
 * `clear` removes it.
 *
 * @since 0.1.0
 */
import { Cause, Context, Effect, Exit, Layer, Option, Schema } from "effect"
import { CheckpointSchemaMismatch, type StorageError } from "../Errors.ts"
import { CHECKPOINT_SCHEMA_VERSION, CheckpointSnapshot, snapshotKey } from "../schema/CheckpointSnapshot.ts"
import { ledgerPrefix, parseLedgerSeq } from "../schema/LedgerEntry.ts"
import { layerMemory as storageLayerMemory, StorageAdapter, type StorageAdapterShape } from "./StorageAdapter.ts"

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

/** The prefix of the index keys `list` reads: one key per execution, outside `execution:`. */
export const INDEX_PREFIX = "checkpoints:"

/** The index key of an execution. */
export const indexKey = (executionId: string): string => INDEX_PREFIX + executionId

/** How many ledger keys `clear` deletes at once. */
const CLEAR_CONCURRENCY = 64

/** The ledger keys of exactly this execution, in seq order. */
export const ledgerKeysOf = (
  storage: StorageAdapterShape,
  executionId: string
): Effect.Effect<Array<{ readonly key: string; readonly seq: number }>, StorageError> => {
  const prefix = ledgerPrefix(executionId)
  return Effect.map(storage.list(prefix), (keys) => {
    const own: Array<{ key: string; seq: number }> = []
    for (const key of keys) {
      const seq = parseLedgerSeq(prefix, key)
      if (seq !== undefined) own.push({ key, seq })
    }
    return own.sort((a, b) => a.seq - b.seq)
  })
}

const decodeSnapshot = Schema.decodeUnknownExit(CheckpointSnapshot)

const discardHint = (executionId: string): string =>
  `Discard it with checkpointStore.clear(${JSON.stringify(executionId)}) ` +
  `(harness.clearCheckpoint) and start fresh; there is no migration path.`

/**
 * Validates a stored record as a v2 snapshot of `executionId`. Any other version, a
 * malformed record, or the record of another execution is a `CheckpointSchemaMismatch`.
 */
export const decodeStoredSnapshot = (
  executionId: string,
  record: unknown
): Effect.Effect<CheckpointSnapshot, CheckpointSchemaMismatch> => {
  const seenVersion = typeof record === "object" && record !== null && "schemaVersion" in record
    ? record.schemaVersion
    : null
  const mismatch = (message: string) =>
    Effect.fail(new CheckpointSchemaMismatch({ executionId, seenVersion, message, hint: discardHint(executionId) }))
  if (seenVersion !== CHECKPOINT_SCHEMA_VERSION) {
    return mismatch(
      `The snapshot of execution ${JSON.stringify(executionId)} has schemaVersion ${
        seenVersion === null ? "(none)" : JSON.stringify(seenVersion)
      }; only schemaVersion ${CHECKPOINT_SCHEMA_VERSION} can be restored.`
    )
  }
  const decoded = decodeSnapshot(record)
  if (Exit.isFailure(decoded)) {
    const issue = decoded.cause.reasons.filter(Cause.isFailReason).map((reason) => reason.error.message).join("; ")
    return mismatch(
      `The snapshot of execution ${
        JSON.stringify(executionId)
      } does not match the schemaVersion ${CHECKPOINT_SCHEMA_VERSION} schema: ${issue}`
    )
  }
  if (decoded.value.executionId !== executionId) {
    return mismatch(
      `The snapshot stored for execution ${JSON.stringify(executionId)} belongs to execution ${
        JSON.stringify(decoded.value.executionId)
      }.`
    )
  }
  return Effect.succeed(decoded.value)
}

/** A checkpoint store over the given storage; the dependency is explicit for the Promise facade. */
export const makeWith = (storage: StorageAdapterShape): Effect.Effect<CheckpointStoreShape> =>
  Effect.sync(() => {
    // Executions whose index key this process has written; saves after the first are one write.
    const indexed = new Set<string>()

    const save = Effect.fn("CheckpointStore.save")(function*(snapshot: CheckpointSnapshot) {
      const executionId = snapshot.executionId
      if (!indexed.has(executionId)) {
        yield* storage.set(indexKey(executionId), { version: 1, executionId })
        indexed.add(executionId)
      }
      // The snapshot is typed already; storage serialises it once, so a save costs what
      // a raw write of the same bytes costs.
      yield* storage.set(snapshotKey(executionId), snapshot)
    })

    const load = Effect.fn("CheckpointStore.load")(function*(executionId: string) {
      const record = yield* storage.get(snapshotKey(executionId))
      if (Option.isNone(record)) return Option.none<CheckpointSnapshot>()
      return Option.some(yield* decodeStoredSnapshot(executionId, record.value))
    })

    const list = Effect.map(
      storage.list(INDEX_PREFIX),
      (keys) => keys.map((key) => key.slice(INDEX_PREFIX.length))
    ).pipe(Effect.withSpan("CheckpointStore.list"))

    const clear = Effect.fn("CheckpointStore.clear")(function*(executionId: string) {
      const ledger = yield* ledgerKeysOf(storage, executionId)
      yield* Effect.forEach(ledger, ({ key }) => storage.delete(key), {
        concurrency: CLEAR_CONCURRENCY,
        discard: true
      })
      yield* storage.delete(snapshotKey(executionId))
      // The index goes last, so an interrupted clear still lists and can be repeated.
      yield* storage.delete(indexKey(executionId))
      indexed.delete(executionId)
    })

    return CheckpointStore.of({ storage, save, load, list, clear })
  })

/** The checkpoint store over the `StorageAdapter` in context. */
export const make: Effect.Effect<CheckpointStoreShape, never, StorageAdapter> = Effect.gen(function*() {
  return yield* makeWith(yield* StorageAdapter)
})

/** A checkpoint store over the `StorageAdapter` the layer is given. */
export const layer: Layer.Layer<CheckpointStore, never, StorageAdapter> = Layer.effect(CheckpointStore, make)

/** A checkpoint store over a fresh in-memory storage, for tests and zero-config use. */
export const layerMemory: Layer.Layer<CheckpointStore> = Layer.provide(layer, storageLayerMemory)
