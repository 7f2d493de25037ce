/**
 * Saves and loads per-execution snapshots (schema v2).
 *
 * A snapshot lives at `execution:<id>:snapshot` (its older items in write-once chunks
 * at `execution:<id>:items:<n>`, see `makeWith`) and each save overwrites it. `list`
 * must not read the step ledger (thousands of keys per execution share the
 * `execution:<id>:` prefix, and a file storage lists by reading its whole directory),
 * so every execution also has a small index key `checkpoints:<id>`, written before its
 * first snapshot in each process and removed last by `clear`. A crash between the two
 * writes of a first save can leave an id that lists while `load` finds nothing;
 * `clear` removes it.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { CheckpointSchemaMismatch, Corrupt, StorageError } from "../Errors.ts"
import {
  CHECKPOINT_SCHEMA_VERSION,
  CheckpointSnapshot,
  ITEM_CHUNK_SIZE,
  ItemChunk,
  itemChunkKey,
  itemChunkPrefix,
  runFailedKey,
  snapshotKey,
  StoredSnapshotHead
} from "../schema/CheckpointSnapshot.ts"
import { ledgerPrefix, ledgerStatsKey, parseLedgerSeq } from "../schema/LedgerEntry.ts"
import {
  getMany,
  layerMemory as storageLayerMemory,
  StorageAdapter,
  type StorageAdapterShape
} from "./StorageAdapter.ts"

/** The operations of a checkpoint store. */
export interface CheckpointStoreShape {
  /** The storage the snapshots live in; the step ledger of each execution lives there too. */
  readonly storage: StorageAdapterShape
  /**
   * Writes the snapshot of `snapshot.executionId`, replacing the previous one. A child
   * agent's context (a `spawn` step's) names its parent in `options`, which the store
   * records so `clear` of the parent removes the child too.
   */
  readonly save: (snapshot: CheckpointSnapshot, options?: SaveOptions) => Effect.Effect<void, StorageError>
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
  /**
   * Removes an execution's snapshot and every ledger key it has, with the snapshots of
   * its in-process child agents (`spawn` steps): the executions under its id that were
   * saved naming it as their parent, and theirs in turn. An execution whose id merely
   * looks like a child's (`acme/issue#42` beside `acme`) is someone else's and stays.
   */
  readonly clear: (executionId: string) => Effect.Effect<void, StorageError>
}

/** What a save knows beyond the snapshot. */
export interface SaveOptions {
  /** The execution whose `spawn` step this context is the child agent of. */
  readonly parentExecutionId?: string | undefined
}

/** Saves and loads per-execution snapshots. */
export class CheckpointStore extends Context.Service<CheckpointStore, CheckpointStoreShape>()(
  "noetic-effect/CheckpointStore"
) {}

/** The prefix of the index keys `list` reads: one key per execution, outside `execution:`. */
export const INDEX_PREFIX = "checkpoints:"

/** The index key of an execution. */
export const indexKey = (executionId: string): string => INDEX_PREFIX + executionId

/** The index record of a child agent's execution names its parent; a top-level one does not. */
const parentOf = (record: unknown): string | undefined =>
  typeof record === "object" && record !== null && "parent" in record && typeof record.parent === "string"
    ? record.parent
    : undefined

/** How many item-log chunks `load` reads in one `getMany`. */
const CHUNK_READ_BATCH = 256

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

/** Every key of an execution's ledger to delete when it is cleared: its entries, then its count. */
export const ledgerKeysToClear = (
  storage: StorageAdapterShape,
  executionId: string
): Effect.Effect<Array<string>, StorageError> =>
  Effect.map(ledgerKeysOf(storage, executionId), (keys) => [...keys.map(({ key }) => key), ledgerStatsKey(executionId)])

/** Deletes `keys`, {@link CLEAR_CONCURRENCY} at a time. */
export const deleteKeys = (storage: StorageAdapterShape, keys: ReadonlyArray<string>): Effect.Effect<void, StorageError> =>
  Effect.forEach(keys, (key) => storage.delete(key), { concurrency: CLEAR_CONCURRENCY, discard: true })

const decodeSnapshot = Schema.decodeUnknownExit(StoredSnapshotHead)
const decodeChunk = Schema.decodeUnknownExit(ItemChunk)

const discardHint = (executionId: string): string =>
  `Discard it with checkpointStore.clear(${JSON.stringify(executionId)}) ` +
  `(harness.clearCheckpoint) and start fresh; there is no migration path.`

/**
 * Validates a stored record as a v2 snapshot head of `executionId` (its items inline
 * or in chunks). Any other version, a malformed record, or the record of another
 * execution is a `CheckpointSchemaMismatch`.
 */
export const decodeStoredSnapshot = (
  executionId: string,
  record: unknown
): Effect.Effect<StoredSnapshotHead, CheckpointSchemaMismatch> => {
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

const decodeFullSnapshot = Schema.decodeUnknownExit(CheckpointSnapshot)

/**
 * Validates what a host's own checkpoint store loaded for `executionId` as a whole
 * snapshot (items inline): null or undefined is none; anything that is not a
 * `schemaVersion` 2 snapshot is a `CheckpointSchemaMismatch` naming the version seen and
 * how to discard it. What both doors run a host-written store's `load` through.
 */
export const decodeLoadedSnapshot = (
  executionId: string,
  loaded: unknown
): Effect.Effect<Option.Option<CheckpointSnapshot>, CheckpointSchemaMismatch> => {
  if (loaded === null || loaded === undefined) return Effect.succeedNone
  const decoded = decodeFullSnapshot(loaded)
  if (Exit.isSuccess(decoded)) return Effect.succeedSome(decoded.value)
  const seen = typeof loaded === "object" && "schemaVersion" in loaded ? loaded.schemaVersion : null
  return Effect.fail(
    new CheckpointSchemaMismatch({
      executionId,
      seenVersion: seen ?? null,
      message: `The checkpoint store loaded a record for execution ${JSON.stringify(executionId)} that is not a schemaVersion ${CHECKPOINT_SCHEMA_VERSION} snapshot.`,
      hint: `Discard it with harness.clearCheckpoint(${JSON.stringify(executionId)}) and start the execution fresh.`
    })
  )
}

/** What this process wrote of one full chunk: enough to tell it is the chunk of this log. */
interface WrittenChunk {
  readonly first: unknown
  readonly last: unknown
}

/** How many executions' chunk marks a store remembers (the oldest are forgotten first). */
const REMEMBERED_EXECUTIONS = 1024

/** The item-log chunk keys of exactly this execution. */
const itemChunkKeysOf = (storage: StorageAdapterShape, executionId: string) => {
  const prefix = itemChunkPrefix(executionId)
  return Effect.map(storage.list(prefix), (keys) => keys.filter((key) => /^\d{8}$/.test(key.slice(prefix.length))))
}

/**
 * A checkpoint store over the given storage; the dependency is explicit for the Promise facade.
 *
 * The item log is stored as full chunks of `ITEM_CHUNK_SIZE` items under
 * `execution:<id>:items:<n>`, written once, plus the items after the last full chunk,
 * inline in the record at the snapshot key (the head). A save writes the chunks that
 * filled since the last save (usually none) and then the head, so its cost follows the
 * change, not the length of the log. A chunk lands before the first head that
 * references it, so a crash between the two leaves the previous head valid.
 */
export const makeWith = (storage: StorageAdapterShape): Effect.Effect<CheckpointStoreShape> =>
  Effect.sync(() => {
    // Executions whose index key this process has written, with the parent it names
    // (null: none); saves after the first are one write.
    const indexed = new Map<string, string | null>()
    // Per execution, the full chunks this process wrote. Items are immutable and a log
    // only grows, so a chunk whose first and last objects are the same is the chunk
    // already stored.
    const written = new Map<string, ReadonlyArray<WrittenChunk>>()

    const remember = (executionId: string, chunks: ReadonlyArray<WrittenChunk>) => {
      written.delete(executionId)
      written.set(executionId, chunks)
      if (written.size > REMEMBERED_EXECUTIONS) written.delete(written.keys().next().value!)
    }

    const save = Effect.fn("CheckpointStore.save")(function*(snapshot: CheckpointSnapshot, options?: SaveOptions) {
      const executionId = snapshot.executionId
      const parent = options?.parentExecutionId
      if (indexed.get(executionId) !== (parent ?? null)) {
        yield* storage.set(indexKey(executionId), {
          version: 1,
          executionId,
          ...(parent === undefined ? {} : { parent })
        })
        indexed.set(executionId, parent ?? null)
      }
      const items = snapshot.itemLog.items
      const fullChunks = Math.floor(items.length / ITEM_CHUNK_SIZE)
      const previous = written.get(executionId) ?? []
      const chunks: Array<WrittenChunk> = []
      const writes: Array<Effect.Effect<void, StorageError>> = []
      for (let index = 0; index < fullChunks; index++) {
        const slice = items.slice(index * ITEM_CHUNK_SIZE, (index + 1) * ITEM_CHUNK_SIZE)
        const chunk: WrittenChunk = { first: slice[0], last: slice[slice.length - 1] }
        chunks.push(chunk)
        const before = previous[index]
        if (before !== undefined && before.first === chunk.first && before.last === chunk.last) continue
        writes.push(storage.set(itemChunkKey(executionId, index), { version: 1, items: slice }))
      }
      // Concurrent chunk writes share the storage's directory fsync.
      yield* Effect.all(writes, { concurrency: "unbounded", discard: true })
      yield* storage.set(snapshotKey(executionId), {
        ...snapshot,
        itemLog: {
          items: items.slice(fullChunks * ITEM_CHUNK_SIZE),
          chunks: { size: ITEM_CHUNK_SIZE, count: fullChunks }
        }
      })
      remember(executionId, chunks)
    })

    /**
     * The items of a head's chunks, read in batches (one `getMany` each). The count
     * comes from a record that may be corrupt, so nothing is sized by it: a batch past
     * the chunks that exist finds one missing and fails `Corrupt`, and memory follows
     * the chunks actually stored.
     */
    const loadChunks = Effect.fnUntraced(function*(executionId: string, size: number, count: number) {
      if (!Number.isSafeInteger(count) || count < 0 || !Number.isSafeInteger(size) || size <= 0) {
        return yield* new StorageError({
          operation: "load",
          reason: new Corrupt({
            key: snapshotKey(executionId),
            message: `the snapshot head names ${count} item-log chunks of ${size} items, which no save writes`
          })
        })
      }
      const items: Array<unknown> = []
      for (let start = 0; start < count; start += CHUNK_READ_BATCH) {
        const keys: Array<string> = []
        for (let index = start; index < Math.min(count, start + CHUNK_READ_BATCH); index++) {
          keys.push(itemChunkKey(executionId, index))
        }
        const found = yield* getMany(storage, keys)
        for (const key of keys) {
          const chunk = found.has(key) ? decodeChunk(found.get(key)) : undefined
          if (chunk === undefined || Exit.isFailure(chunk) || chunk.value.items.length !== size) {
            return yield* new StorageError({
              operation: "load",
              reason: new Corrupt({
                key,
                message: chunk === undefined
                  ? `the snapshot head needs this item-log chunk and it is missing`
                  : `the snapshot head needs a chunk of ${size} items and this record is not one`
              })
            })
          }
          for (const item of chunk.value.items) items.push(item)
        }
      }
      return items
    })

    const load = Effect.fn("CheckpointStore.load")(function*(executionId: string) {
      const record = yield* storage.get(snapshotKey(executionId))
      if (Option.isNone(record)) return Option.none<CheckpointSnapshot>()
      const head = yield* decodeStoredSnapshot(executionId, record.value)
      const { chunks, items: tail } = head.itemLog
      const items = chunks === undefined || chunks.count === 0
        ? tail
        : [...(yield* loadChunks(executionId, chunks.size, chunks.count)), ...tail]
      // A context restored from this snapshot holds these very item objects, so its
      // first save finds its chunks already stored. What this process saved itself is
      // known better (the objects of its live contexts), so it is kept.
      if (chunks !== undefined && chunks.size === ITEM_CHUNK_SIZE && !written.has(executionId)) {
        remember(
          executionId,
          Array.from({ length: chunks.count }, (_, index) => ({
            first: items[index * ITEM_CHUNK_SIZE],
            last: items[(index + 1) * ITEM_CHUNK_SIZE - 1]
          }))
        )
      }
      const snapshot: CheckpointSnapshot = { ...head, itemLog: { items } }
      return Option.some(snapshot)
    })

    const list = Effect.map(
      storage.list(INDEX_PREFIX),
      (keys) => keys.map((key) => key.slice(INDEX_PREFIX.length))
    ).pipe(Effect.withSpan("CheckpointStore.list"))

    const clearOne = Effect.fnUntraced(function*(executionId: string) {
      const ledger = yield* ledgerKeysToClear(storage, executionId)
      const chunks = yield* itemChunkKeysOf(storage, executionId)
      yield* deleteKeys(storage, [...ledger, runFailedKey(executionId), ...chunks])
      written.delete(executionId)
      yield* storage.delete(snapshotKey(executionId))
      // The index goes last, so an interrupted clear still lists and can be repeated.
      yield* storage.delete(indexKey(executionId))
      indexed.delete(executionId)
    })

    // A spawn step's child agent checkpoints as an execution of its own, named by the
    // parent's id and the spawn's path; it is part of the parent's run. Which ids are
    // children is read from their index records (each names its parent), never guessed
    // from the id's shape: users name their executions freely.
    const childrenOf = Effect.fnUntraced(function*(executionId: string) {
      const keys = yield* storage.list(indexKey(`${executionId}/`))
      // An unreadable index record is not taken for a child: clear never removes what
      // it cannot show belongs to this execution.
      const parents = yield* Effect.forEach(keys, (key) =>
        storage.get(key).pipe(
          Effect.map((record) => (Option.isSome(record) ? parentOf(record.value) : undefined)),
          Effect.catchIf((error) => error.reason._tag === "Corrupt", () => Effect.succeed(undefined))
        ), { concurrency: CLEAR_CONCURRENCY })
      return keys.filter((_, i) => parents[i] === executionId).map((key) => key.slice(INDEX_PREFIX.length))
    })

    const clearTree = (executionId: string): Effect.Effect<void, StorageError> =>
      Effect.gen(function*() {
        // The children go first, so an interrupted clear still lists the parent and can be repeated.
        yield* Effect.forEach(yield* childrenOf(executionId), clearTree, { discard: true })
        yield* clearOne(executionId)
      })

    const clear = Effect.fn("CheckpointStore.clear")(clearTree)

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
