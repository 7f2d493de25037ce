/**
 * The opening of a durable outbound queue (`services/DurableOutboundQueue.ts`): what
 * its meta record and its keys say, repaired after a crash. Records wholly at or
 * below the watermark (an interrupted compaction's leftovers) are deleted; numbering
 * goes on at the head + 1 while the stored records are intact, above the reserved
 * high-water mark when the tail is damaged or missing.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Corrupt, StorageError } from "../../Errors.ts"
import { decodeBatch, decodeFrameRecord, decodeMeta, keyPrefix, metaKey } from "../../schema/DurableQueueRecord.ts"
import type { StorageAdapterShape } from "../../services/StorageAdapter.ts"
import { logWarning } from "../diagnostics.ts"

/** How many records are deleted at once. */
export const DELETE_CONCURRENCY = 64

/** A storage error for a record that cannot be read. */
export const corrupt = (operation: string, key: string, message: string) =>
  new StorageError({ operation, reason: new Corrupt({ key, message }) })

/** One stored record, as the in-memory index knows it. */
export interface IndexEntry {
  readonly first: number
  readonly last: number
  readonly key: string
  readonly legacy: boolean
  /** The frames' size, for the window (0 for records found on open). */
  readonly bytes: number
}

/**
 * What the queues of this process committed, per storage and socket: a queue opened
 * again on the same storage (another instance, the first never closed) finds a tail
 * record missing when its records end below it.
 */
const processHeads = new WeakMap<StorageAdapterShape, Map<string, { committed: number }>>()

export const sharedHeadOf = (storage: StorageAdapterShape, socketId: string): { committed: number } => {
  let heads = processHeads.get(storage)
  if (heads === undefined) {
    heads = new Map()
    processHeads.set(storage, heads)
  }
  let head = heads.get(socketId)
  if (head === undefined) {
    head = { committed: 0 }
    heads.set(socketId, head)
  }
  return head
}

/** The position in `index` of the first record whose range ends at or after `seq`. */
export const firstRecordFrom = (index: ReadonlyArray<IndexEntry>, seq: number): number => {
  let low = 0
  let highIndex = index.length
  while (low < highIndex) {
    const mid = (low + highIndex) >> 1
    if (index[mid]!.last < seq) low = mid + 1
    else highIndex = mid
  }
  return low
}

/** What a queue starts from. */
export interface Recovered {
  /** The acked watermark. */
  readonly acked: number
  /** The high-water mark: every seq up to it may have been issued. */
  readonly high: number
  /** Every record above the watermark, by seq. */
  readonly index: Array<IndexEntry>
  /** What the queues of this process committed on this storage and socket. */
  readonly shared: { committed: number }
  /** The head: numbering goes on above it. */
  readonly committed: number
  /** The highest seq a written frame holds. */
  readonly lastFrame: number
}

/** Reads the queue `socketId` on `storage` and repairs what a crash left behind. */
export const recover = Effect.fnUntraced(function*(
  storage: StorageAdapterShape,
  socketId: string,
  startAfter: number | undefined
) {
  const meta = metaKey(socketId)
  const prefix = keyPrefix(socketId)
  const batchPrefix = `${prefix}batch:`
  const framePrefix = `${prefix}frame:`

  const storedMeta = yield* storage.get(meta)
  let acked = 0
  let high = 0
  if (Option.isSome(storedMeta)) {
    const decoded = yield* decodeMeta(storedMeta.value).pipe(
      Effect.mapError((error) => corrupt("open", meta, `not a queue meta record: ${error.message}`))
    )
    acked = decoded.acked
    high = decoded.version === 2 ? Math.max(decoded.high, decoded.acked) : decoded.acked
  }

  // The index: every record above the watermark, by seq. Keys name their range, so
  // opening lists keys and reads no record.
  const found: Array<IndexEntry> = []
  for (const key of yield* storage.list(batchPrefix)) {
    const match = /^(\d{16})-(\d{16})$/.exec(key.slice(batchPrefix.length))
    if (match === null) continue
    const first = Number(match[1])
    const last = Number(match[2])
    if (first >= 1 && last >= first) found.push({ first, last, key, legacy: false, bytes: 0 })
  }
  for (const key of yield* storage.list(framePrefix)) {
    const seq = Number(key.slice(framePrefix.length))
    if (Number.isSafeInteger(seq) && seq > 0) found.push({ first: seq, last: seq, key, legacy: true, bytes: 0 })
  }
  found.sort((a, b) => a.first - b.first)
  // Only a queue storage knows nothing of starts after `startAfter`.
  if (Option.isNone(storedMeta) && found.length === 0) {
    acked = Math.max(0, Math.floor(startAfter ?? 0))
    high = acked
  }
  // Records wholly at or below the watermark are an interrupted compaction's leftovers.
  const debris = found.filter((entry) => entry.last <= acked)
  const index: Array<IndexEntry> = found.filter((entry) => entry.last > acked)
  yield* Effect.forEach(debris, (entry) => storage.delete(entry.key), { concurrency: DELETE_CONCURRENCY, discard: true })

  const recordsHead = index.length === 0 ? 0 : index[index.length - 1]!.last
  // Numbering goes on at the head + 1 while the stored records are intact: a frame
  // reaches a client only once its record is durable, so no seq above the last record
  // was seen. Past the reserved high-water mark (a seq once issued is never issued
  // again, whatever record is lost) only when the tail is found damaged or missing:
  // its record unreadable, or below what a queue of this process committed on this
  // storage (`processHeads`).
  const shared = sharedHeadOf(storage, socketId)
  const tail = index.length === 0 ? undefined : index[index.length - 1]!
  const tailDamaged = tail === undefined ? false : yield* storage.get(tail.key).pipe(
    Effect.flatMap((value) =>
      Option.isNone(value)
        ? Effect.succeed(true)
        : Effect.map(Effect.result(tail.legacy ? Effect.asVoid(decodeFrameRecord(value.value)) : Effect.asVoid(decodeBatch(value.value))), (r) => r._tag === "Failure")
    ),
    Effect.catchIf((error) => error.reason._tag === "Corrupt", () => Effect.succeed(true))
  )
  const tailMissing = shared.committed > Math.max(acked, recordsHead)
  if (tailDamaged || tailMissing) {
    yield* logWarning(
      `DurableOutboundQueue ${socketId}: the last record ${tailDamaged ? `${tail!.key} cannot be read` : "is missing"}; ` +
        `numbering goes on above the reserved high-water mark (${Math.max(high, shared.committed)}), so no seq is issued twice`
    )
  }
  // Numbering goes on above everything that may have been issued.
  const committed = tailDamaged || tailMissing
    ? Math.max(acked, high, recordsHead, shared.committed)
    : Math.max(acked, recordsHead)
  // The highest seq a written frame holds: after a crash the numbering goes on above the
  // reserved mark, but no frame holds the seqs in between.
  const lastFrame = Math.max(acked, recordsHead)
  return { acked, high, index, shared, committed, lastFrame } satisfies Recovered
})
