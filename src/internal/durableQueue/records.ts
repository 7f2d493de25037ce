/**
 * How a durable outbound queue (`services/DurableOutboundQueue.ts`) cuts the batches
 * it writes into records: the batches numbered and waiting for the writer, and the
 * records one group write makes of them.
 *
 * @since 0.1.0
 */
import type * as Deferred from "effect/Deferred"
import type { StorageError } from "../../Errors.ts"
import { pad } from "../../schema/DurableQueueRecord.ts"

/**
 * The most UTF-16 code units of frames one batch record holds (a longer frame gets a
 * record of its own): the record's JSON then stays under V8's large-object size
 * (128 KiB), whose allocation costs several times the same text in smaller strings.
 * A batch larger than this is written as several records in one group.
 */
const RECORD_CHARS = 96 * 1024
/** One record of a batch about to be written. */
export interface BatchRecordPlan {
  readonly first: number
  readonly last: number
  readonly key: string
  readonly frames: ReadonlyArray<string>
  readonly bytes: number
  readonly prev: readonly [number, number] | null
  /** Every frame was offered as `json`. */
  readonly json: boolean
}

/** Frames numbered and waiting for the writer. */
export interface PendingBatch {
  readonly first: number
  readonly frames: Array<string>
  bytes: number
  /** Every frame was offered as `json`. */
  json: boolean
  readonly done: Deferred.Deferred<void, StorageError>
}

/**
 * The records of a group of consecutive batches: their frames in runs of at most
 * `batchFrames` frames and `RECORD_CHARS` code units (a longer frame gets a record of
 * its own), each record naming the one before it (the first names the last record
 * written).
 */
export const planRecords = (
  group: ReadonlyArray<PendingBatch>,
  previous: readonly [number, number] | null,
  batchPrefix: string,
  batchFrames: number
): Array<BatchRecordPlan> => {
  const records: Array<BatchRecordPlan> = []
  let prev = previous
  // The record being cut: whole slices of batches, its first seq, its size so far.
  let parts: Array<ReadonlyArray<string>> = []
  let count = 0
  let first = group[0]!.first
  let chars = 0
  let json = true
  const cut = () => {
    const last = first + count - 1
    const frames = parts.length === 1 ? parts[0]! : parts.flat()
    records.push({ first, last, key: `${batchPrefix}${pad(first)}-${pad(last)}`, frames, bytes: chars, prev, json })
    prev = [first, last]
    first = last + 1
    parts = []
    count = 0
    chars = 0
    json = true
  }
  for (const batch of group) {
    const frames = batch.frames
    let start = 0
    for (let i = 0; i < frames.length; i++) {
      const size = frames[i]!.length
      if (count > 0 && (count >= batchFrames || chars + size > RECORD_CHARS)) {
        if (i > start) parts.push(frames.slice(start, i))
        start = i
        cut()
      }
      count++
      chars += size
      json = json && batch.json
    }
    if (frames.length > start) parts.push(start === 0 ? frames : frames.slice(start))
  }
  cut()
  return records
}
