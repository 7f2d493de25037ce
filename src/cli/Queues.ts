/**
 * What the CLI reads of durable outbound queues: head, acked watermark and the pending
 * frames. Queues are opened through the `DurableOutboundQueue` service, never by
 * reading their keys, so the CLI follows the queue's record layout wherever it goes;
 * only the prefix that names a queue in storage (`keyPrefix`) is used to find them.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StorageError } from "../Errors.ts"
import { keyPrefix, makeWith as openQueue, type QueueEntry } from "../services/DurableOutboundQueue.ts"
import { utf8Length } from "../services/StepLedger.ts"
import { readOnly, type StorageAdapterShape } from "../services/StorageAdapter.ts"

/** The prefix every queue key starts with; a queue's own prefix is this plus its encoded id and `:`. */
const QUEUES_PREFIX = keyPrefix("").slice(0, -1)

/** One queue, as `queues list` prints it. */
export interface QueueRow {
  readonly socketId: string
  /** Which storage holds it: `subprocess`, `checkpoints`, or `postgres`. */
  readonly storage: string
  /** The seq of the last durable frame (0: none was ever appended). */
  readonly headSeq: number
  /** Every frame up to this seq was acknowledged. */
  readonly ackedSeq: number
  /** Frames stored and not acknowledged. */
  readonly pendingFrames: number
  /** The first and last pending seq; null when nothing is pending. */
  readonly pendingSeqs: { readonly from: number; readonly to: number } | null
  /** UTF-8 bytes of the pending frames. */
  readonly pendingBytes: number
  /** Records that could not be read: the last seq each covers, and why. */
  readonly damaged: ReadonlyArray<{ readonly through: number; readonly message: string }>
}

/** A queue and its pending frames. */
export interface QueueDetail extends QueueRow {
  readonly frames: ReadonlyArray<QueueEntry & { readonly bytes: number }>
}

/** The ids of every queue in `storage`, sorted. */
export const listQueueIds = (storage: StorageAdapterShape): Effect.Effect<ReadonlyArray<string>, StorageError> =>
  Effect.map(storage.list(QUEUES_PREFIX), (keys) => {
    const ids = new Set<string>()
    for (const key of keys) {
      const rest = key.slice(QUEUES_PREFIX.length)
      const end = rest.indexOf(":")
      if (end <= 0) continue
      try {
        ids.add(decodeURIComponent(rest.slice(0, end)))
      } catch {
        // Not a key a queue wrote (its ids are percent-encoded): not a queue.
      }
    }
    return [...ids].sort()
  })

/** Opens one queue read-only and reads its state, with its pending frames. */
export const inspectQueue = (
  storage: StorageAdapterShape,
  storageName: string,
  socketId: string
): Effect.Effect<QueueDetail, StorageError> =>
  Effect.gen(function*() {
    const queue = yield* openQueue(readOnly(storage), { socketId, cachedFrames: 0 })
    const headSeq = yield* queue.headSeq
    const ackedSeq = yield* queue.ackedSeq
    // Read past unreadable records, reporting each, so one damaged record does not hide the rest.
    const entries: Array<QueueEntry> = []
    const damaged: Array<{ readonly through: number; readonly message: string }> = []
    let from = ackedSeq + 1
    while (from <= headSeq) {
      const read = yield* queue.readRange(from).pipe(
        // The range is always valid here: seqs from the queue's own watermark.
        Effect.catchTag("InvalidQueueInput", (error) => Effect.die(error))
      )
      for (const entry of read.entries) entries.push(entry)
      if (read.damage !== undefined) damaged.push({ through: read.damage.through, message: read.damage.error.message })
      if (read.through < from) break
      from = read.through + 1
    }
    yield* queue.close
    const frames = entries.map((entry) => ({ ...entry, bytes: utf8Length(entry.frame) }))
    return {
      socketId,
      storage: storageName,
      headSeq,
      ackedSeq,
      pendingFrames: frames.length,
      pendingSeqs: frames.length === 0 ? null : { from: frames[0]!.seq, to: frames[frames.length - 1]!.seq },
      pendingBytes: frames.reduce((sum, frame) => sum + frame.bytes, 0),
      damaged,
      frames
    }
  })

/** Whether `storage` holds any key of the queue `socketId`. */
export const hasQueue = (storage: StorageAdapterShape, socketId: string): Effect.Effect<boolean, StorageError> =>
  Effect.map(storage.list(keyPrefix(socketId)), (keys) => keys.length > 0)

/** The storages to look in, by name, without reading a shared one twice. */
export const queueStorages = (stores: {
  readonly checkpoints: Option.Option<StorageAdapterShape>
  readonly subprocess: Option.Option<StorageAdapterShape>
  readonly shared: boolean
}): ReadonlyArray<readonly [string, StorageAdapterShape]> =>
  stores.shared
    ? Option.match(stores.subprocess, { onNone: () => [], onSome: (storage) => [["postgres", storage] as const] })
    : [
      ...Option.match(stores.subprocess, { onNone: () => [], onSome: (storage) => [["subprocess", storage] as const] }),
      ...Option.match(stores.checkpoints, { onNone: () => [], onSome: (storage) => [["checkpoints", storage] as const] })
    ]
