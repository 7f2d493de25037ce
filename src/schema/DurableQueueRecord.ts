/**
 * The stored layout of a durable outbound queue (`services/DurableOutboundQueue.ts`):
 * its keys and its records. A storage that keeps some keys apart (the file storage's
 * append-only logs, `appendOnlyLog`) and the tools that find queues read them here,
 * not from the queue service.
 *
 * `durableOutboundQueue:<socketId>:batch:<first>-<last>` (seqs zero-padded to 16
 * digits) holds the frames `first..last`; `durableOutboundQueue:<socketId>:meta` the
 * acked watermark and the high-water mark; `:frame:<seq>` a legacy one-frame record.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** Digits of a zero-padded seq in a key. */
const SEQ_DIGITS = 16

/** The key prefix every key of the queue `socketId` starts with. */
export const keyPrefix = (socketId: string): string => `durableOutboundQueue:${encodeURIComponent(socketId)}:`

/** The key of the queue's meta record. */
export const metaKey = (socketId: string): string => `${keyPrefix(socketId)}meta`

/** A seq as it appears in a key: zero-padded to 16 digits. */
export const pad = (seq: number) => String(seq).padStart(SEQ_DIGITS, "0")

/** The key of the batch record holding the frames `first..last`. */
export const batchKey = (socketId: string, first: number, last: number): string =>
  `${keyPrefix(socketId)}batch:${pad(first)}-${pad(last)}`

/** A batch record's key, of any queue. */
const BATCH_KEY = /^durableOutboundQueue:[^:]*:batch:\d{16}-\d{16}$/

/**
 * The append-only log a key belongs to, for a storage that keeps such keys in a log
 * rather than one record each: a batch record is written once and deleted once, so
 * the batch records of one queue form one log, named by the queue's key prefix.
 * Undefined for every other key (the meta record is rewritten in place).
 */
export const appendOnlyLog = (key: string): string | undefined =>
  BATCH_KEY.test(key) ? key.slice(0, key.indexOf(":batch:") + 1) : undefined

/**
 * The text of a version 3 record: `{"version":3,"first":..,"frames":[<frame JSON>,..],"prev":..}`,
 * built by one `join`, so it is one flat string. Built as a template around the joined
 * frames, it would be a string of pieces, and a storage writing it (UTF-8 into a file
 * or a SQLite parameter) would first copy it whole into a flat one.
 */
export const jsonRecordText = (record: {
  readonly first: number
  readonly frames: ReadonlyArray<string>
  readonly prev: readonly [number, number] | null
}): string => {
  const parts = record.frames.slice()
  const last = parts.length - 1
  parts[0] = `{"version":3,"first":${record.first},"frames":[${parts[0]}`
  parts[last] = `${parts[last]}],"prev":${JSON.stringify(record.prev)}}`
  return parts.join(",")
}

/** The key of a legacy one-frame record (the layout before batch records). */
export const frameKey = (socketId: string, seq: number): string => `${keyPrefix(socketId)}frame:${pad(seq)}`


/** The persisted meta record; version 1 (no high-water mark) is read as `high = acked`. */
const Meta = Schema.Union([
  Schema.Struct({ version: Schema.Literal(1), acked: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) }),
  Schema.Struct({
    version: Schema.Literal(2),
    acked: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
    high: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
  })
])

/** A batch record: its frames, and the range of the batch written before it (none for the first). */
const BatchRecord = Schema.Struct({
  version: Schema.Literal(2),
  first: Schema.Int,
  frames: Schema.Array(Schema.String),
  prev: Schema.NullOr(Schema.Tuple([Schema.Int, Schema.Int]))
})

/**
 * A batch record whose frames are JSON values (written from frames offered as `json`):
 * each frame's text is the value's `JSON.stringify`.
 */
const JsonBatchRecord = Schema.Struct({
  version: Schema.Literal(3),
  first: Schema.Int,
  frames: Schema.Array(Schema.Unknown),
  prev: Schema.NullOr(Schema.Tuple([Schema.Int, Schema.Int]))
})

/** A legacy one-frame record. */
const FrameRecord = Schema.Struct({ version: Schema.Literal(1), frame: Schema.String })

export const decodeMeta = Schema.decodeUnknownEffect(Meta)
const decodeBatchSchema = Schema.decodeUnknownEffect(Schema.Union([BatchRecord, JsonBatchRecord]))

const isInt = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value)

/** A batch record as read: its first seq, its frames' texts, and the range of the record before it. */
export interface DecodedBatch {
  readonly first: number
  readonly frames: ReadonlyArray<string>
  readonly prev: readonly [number, number] | null
}

/** The texts of a version 3 record's frames. */
const frameTexts = (frames: ReadonlyArray<unknown>): Array<string> => frames.map((frame) => JSON.stringify(frame))

/**
 * A batch record checked by hand: a replay reads thousands of frames per record, and a
 * schema walk over each of them costs more than reading the file. What fails the check
 * goes through the schema, which says why.
 */
export const decodeBatch = (value: unknown): Effect.Effect<DecodedBatch, Schema.SchemaError> => {
  if (typeof value === "object" && value !== null) {
    const record = value as { readonly version?: unknown; readonly first?: unknown; readonly frames?: unknown; readonly prev?: unknown }
    const { first, frames, prev } = record
    if (
      isInt(first) && Array.isArray(frames) &&
      (prev === null || (Array.isArray(prev) && prev.length === 2 && isInt(prev[0]) && isInt(prev[1])))
    ) {
      const before = prev as readonly [number, number] | null
      if (record.version === 3) return Effect.succeed({ first, frames: frameTexts(frames), prev: before })
      if (record.version === 2 && frames.every((frame) => typeof frame === "string")) {
        return Effect.succeed({ first, frames, prev: before })
      }
    }
  }
  return Effect.map(decodeBatchSchema(value), (record) => ({
    first: record.first,
    frames: record.version === 3 ? frameTexts(record.frames) : record.frames,
    prev: record.prev
  }))
}
export const decodeFrameRecord = Schema.decodeUnknownEffect(FrameRecord)
