/**
 * A durable, numbered outbox for one socket: every outbound frame gets a sequence
 * number that is never issued twice, survives a crash, and stays until a client
 * acknowledges it. Written on any `StorageAdapter`.
 *
 * Layout: frames are stored in batch records of at most `batchFrames` frames and
 * ~96K characters (so no record's JSON is a large object for V8).
 * `durableOutboundQueue:<socketId>:batch:<first>-<last>` (seqs zero-padded to 16
 * digits) holds the frames `first..last`, written once and deleted once a client has
 * acknowledged all of them. `durableOutboundQueue:<socketId>:meta` holds the acked
 * watermark and a high-water mark: every seq up to it may have been issued. The
 * high-water mark is written ahead of the batches in reservations of many seqs, so it
 * costs one meta write per thousands of frames. A reopened queue whose records are
 * intact numbers on at the head + 1 (as noetic's does): a frame reaches a client only
 * once its record is durable, so no client saw a seq above the last record. When the
 * last record is damaged, or missing (below what a queue of this process committed on
 * the same storage), it numbers above the mark, so a seq once issued is never issued
 * again. A cleanly closed queue shrinks its reservation to the exact head.
 *
 * Each batch record names the one written before it, so a record that goes missing
 * between two others is reported (`Corrupt`, naming its key) by the read that crosses
 * it, like a damaged one, while the frames around it stay readable.
 *
 * Appends are pipelined and group-committed: `offerAll` numbers frames and hands
 * them to one writer fiber without waiting for the disk; frames offered while a write
 * runs go in the next one, its records written together (one transaction on SQLite).
 * Readers only ever see committed frames (the head advances once a batch is durable,
 * in seq order). A window bounds the frames (and bytes) that are unpersisted or
 * unacknowledged: an offer beyond it waits for an ack, so a producer that outruns the
 * disk or the client is held back.
 *
 * Legacy one-frame records (`:frame:<seq>`, the layout before batches) are read as
 * one-frame batches.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import { StorageError } from "../Errors.ts"
import {
  batchKey,
  decodeBatch,
  decodeFrameRecord,
  jsonRecordText,
  keyPrefix,
  metaKey
} from "../schema/DurableQueueRecord.ts"
import { FrameCache } from "../internal/durableQueue/frameCache.ts"
import { type BatchRecordPlan, type PendingBatch, planRecords } from "../internal/durableQueue/records.ts"
import { type DecodedRecord, readValues } from "../internal/durableQueue/reads.ts"
import { corrupt, DELETE_CONCURRENCY, firstRecordFrom, type IndexEntry, recover } from "../internal/durableQueue/recovery.ts"
import { JsonText, StorageAdapter, type StorageAdapterShape } from "./StorageAdapter.ts"
import {
  DEFAULT_WINDOW_FRAMES,
  DEFAULT_WINDOW_BYTES,
  DEFAULT_BATCH_FRAMES,
  GROUP_BATCHES,
  STREAM_FRAMES,
  RESERVE_SEQS,
  DECODED_RECORDS,
  READ_RECORDS,
} from "../internal/durableQueue/limits.ts"

/** One stored frame and its sequence number. */
export interface QueueEntry {
  readonly seq: number
  /** The frame as the appender gave it: opaque text (the IPC server stores a frame's JSON). */
  readonly frame: string
}

/** A seq, limit or frame handed to the queue is not what it accepts (NaN, a fraction, a negative). */
export class InvalidQueueInput extends Schema.TaggedError<InvalidQueueInput>(
  "noetic-effect/DurableOutboundQueue/InvalidQueueInput"
)("InvalidQueueInput", {
  operation: Schema.String,
  message: Schema.String
}) {
  /** The error code. */
  get code(): "INVALID_QUEUE_INPUT" {
    return "INVALID_QUEUE_INPUT"
  }
}

/** A range read that stopped short at an unreadable record. */
export interface RangeDamage {
  /** The `Corrupt` failure naming the damaged or missing record's key. */
  readonly error: StorageError
  /** The last seq the unreadable record covers: a reader goes on after it. */
  readonly through: number
}

/** What {@link DurableOutboundQueueShape.readRange} read. */
export interface RangeRead {
  /** The frames read, in order (before the damage, when there is one). */
  readonly entries: ReadonlyArray<QueueEntry>
  /** The last seq the read covered: the next read starts after it. */
  readonly through: number
  /** An unreadable record that cut the read short. */
  readonly damage: RangeDamage | undefined
}

/** Frames offered to the queue: their seqs, and an effect that waits until they are durable. */
export interface Offered {
  readonly seqs: ReadonlyArray<number>
  /** Succeeds once every offered frame is durable; fails with the write's error if a batch could not be written. */
  readonly durable: Effect.Effect<void, StorageError>
}

/** How offered frames are written. */
export interface OfferOptions {
  /**
   * The frames are JSON texts as `JSON.stringify` writes them (an IPC server's encoded
   * frames): on a storage that `takesJsonText`, a record of such frames holds them as
   * JSON values (version 3), not escaped into strings, and a replay reads back the same
   * texts. Default false: any string.
   */
  readonly json?: boolean | undefined
}

/** The options of an offer of frames encoded by `JSON.stringify` (an IPC server's). */
export const JSON_FRAMES: OfferOptions = { json: true }

/** What a durable outbound queue offers. Seqs start at 1; 0 means "nothing". */
export interface DurableOutboundQueueShape {
  /** The id its keys are written under. */
  readonly socketId: string
  /** Appends one frame durably and returns its seq; a frame that is not a string fails `InvalidQueueInput`, numbering nothing. */
  readonly append: (frame: string) => Effect.Effect<number, StorageError | InvalidQueueInput>
  /** Appends frames durably, in order, in one group commit; returns their seqs. Any frame not a string fails the lot `InvalidQueueInput`. */
  readonly appendAll: (
    frames: ReadonlyArray<string>,
    options?: OfferOptions
  ) => Effect.Effect<ReadonlyArray<number>, StorageError | InvalidQueueInput>
  /**
   * Numbers frames and hands them to the writer without waiting for the disk (waiting
   * only for room in the window). They become readable once their batch is durable.
   */
  readonly offerAll: (frames: ReadonlyArray<string>, options?: OfferOptions) => Effect.Effect<Offered>
  /**
   * `offerAll` of one frame, synchronously, when it needs no effect: the window has room,
   * the writer is running and no write failure waits to be taken. Returns the frame's
   * seq, or undefined (nothing done) when `offerAll` must be used instead. For a
   * producer that hands over frames one by one, where an effect per frame costs more
   * than the frame. `awaitOffered` waits for its durability.
   */
  readonly offerUnsafe: (frame: string, options?: OfferOptions) => number | undefined
  /**
   * Waits until every frame offered so far has been written or has failed (a failure
   * is reported by `takeWriteFailures`).
   */
  readonly awaitOffered: Effect.Effect<void>
  /**
   * The unacked frames with seq at least `fromSeq`, in order; at most the seqs
   * `fromSeq .. fromSeq + limit - 1` when a limit is given. Fails `Corrupt` (naming the
   * key) when the range crosses an unreadable record.
   */
  readonly frameRange: (
    fromSeq: number,
    options?: { readonly limit?: number | undefined }
  ) => Effect.Effect<ReadonlyArray<QueueEntry>, StorageError | InvalidQueueInput>
  /** Like `frameRange`, but hands back the frames before an unreadable record and where to go on. */
  readonly readRange: (
    fromSeq: number,
    options?: { readonly limit?: number | undefined }
  ) => Effect.Effect<RangeRead, StorageError | InvalidQueueInput>
  /**
   * Marks every frame up to `seq` as handled and compacts them. Clamped to the head;
   * an ack at or below the current watermark changes nothing. Returns the watermark.
   */
  readonly ackUpTo: (seq: number) => Effect.Effect<number, StorageError | InvalidQueueInput>
  /** The write failures of offered batches since the last call (an `append` also fails with its own). */
  readonly takeWriteFailures: Effect.Effect<ReadonlyArray<StorageError>>
  /** Acks every durable frame (waiting for those in flight). Numbering carries on: no seq is reused. */
  readonly clear: Effect.Effect<void, StorageError>
  /** How many frames are stored and not yet acknowledged. */
  readonly size: Effect.Effect<number>
  /**
   * The highest seq this queue may have issued (0 when none was ever appended). After a
   * crash that is the reserved high-water mark, which no stored frame may hold: wait for
   * the ack of a seq you appended, not for the ack of `headSeq`.
   */
  readonly headSeq: Effect.Effect<number>
  /**
   * The highest seq a frame of this queue holds, or the watermark when that is higher
   * (0 when none was ever appended): unlike `headSeq`, never a reserved seq no frame
   * has. What noetic's `getHeadSeq()` reports.
   */
  readonly lastFrameSeq: Effect.Effect<number>
  /** The acked watermark: every frame up to it has been handled. */
  readonly ackedSeq: Effect.Effect<number>
  /** What the window holds now: frames (and their bytes) offered and not yet acknowledged. */
  readonly windowUsage: Effect.Effect<{ readonly frames: number; readonly bytes: number }>
  /** Waits until the head passes `seq`, and returns the head. */
  readonly awaitHeadAbove: (seq: number) => Effect.Effect<number>
  /** Waits until the watermark reaches `seq`. */
  readonly awaitAcked: (seq: number) => Effect.Effect<void>
  /** Waits for in-flight writes, records the exact high-water mark, then refuses further use (a use after close is a defect). */
  readonly close: Effect.Effect<void>
}

/** A durable outbound queue, provided by a layer over a `StorageAdapter`. */
export class DurableOutboundQueue extends Context.Service<DurableOutboundQueue, DurableOutboundQueueShape>()(
  "noetic-effect/DurableOutboundQueue"
) {}

/** How a queue is opened. */
export interface DurableOutboundQueueOptions {
  /** Names the queue in storage; any string (it is percent-encoded into keys). */
  readonly socketId: string
  /**
   * How many recent frames stay in memory so live delivery reads no storage. Default
   * four times `batchFrames`: twice the most one write takes, so frames committed
   * while the previous write's are still being sent are delivered from memory too.
   */
  readonly cachedFrames?: number | undefined
  /**
   * Where a queue that storage knows nothing of starts numbering: its first seq is
   * `startAfter + 1` (rounded down to an integer). Default 0. A queue in memory that may be recreated (a restarted
   * server) starts after a clock reading, so it numbers above everything it sent before.
   */
  readonly startAfter?: number | undefined
  /**
   * The window: at most this many frames offered and not yet acknowledged. An offer
   * beyond it waits for an ack. Default 65,536.
   */
  readonly windowFrames?: number | undefined
  /** The window in bytes (UTF-16 code units of the frames). Default 64 MiB. */
  readonly windowBytes?: number | undefined
  /** The most frames one batch record holds. Default 4096. */
  readonly batchFrames?: number | undefined
}

/** The queue's stored layout (see `schema/DurableQueueRecord.ts`). */
export { appendOnlyLog, batchKey, frameKey, keyPrefix, metaKey } from "../schema/DurableQueueRecord.ts"

const isSeq = (n: number) => Number.isSafeInteger(n) && n >= 0

/** Opens the queue `socketId` on `storage`, repairing what a crash left behind. */
export const makeWith = Effect.fnUntraced(function*(
  storage: StorageAdapterShape,
  options: DurableOutboundQueueOptions
) {
  const { socketId } = options
  const windowFrames = Math.max(1, options.windowFrames ?? DEFAULT_WINDOW_FRAMES)
  const windowBytes = Math.max(1, options.windowBytes ?? DEFAULT_WINDOW_BYTES)
  const batchFrames = Math.max(1, options.batchFrames ?? DEFAULT_BATCH_FRAMES)
  const groupFrames = GROUP_BATCHES * batchFrames
  const cachedFrames = Math.max(0, options.cachedFrames ?? 2 * groupFrames)
  const meta = metaKey(socketId)
  const prefix = keyPrefix(socketId)
  const batchPrefix = `${prefix}batch:`

  const opened = yield* recover(storage, socketId, options.startAfter)
  let acked = opened.acked
  let high = opened.high
  const index: Array<IndexEntry> = opened.index
  const shared = opened.shared
  // Numbering goes on above everything that may have been issued.
  let committed = opened.committed
  // The highest seq a written frame holds: after a crash the numbering goes on above the
  // reserved mark, but no frame holds the seqs in between.
  let lastFrame = opened.lastFrame
  let assigned = committed
  let closed = false
  // The last record written (or found), which the next batch names as its predecessor.
  let previous: readonly [number, number] | null = index.length === 0
    ? null
    : [index[index.length - 1]!.first, index[index.length - 1]!.last]

  // Committed frames above the watermark, for live delivery (see `internal/durableQueue/frameCache.ts`).
  const cache = new FrameCache(cachedFrames, committed)
  let headSignal = Deferred.makeUnsafe<void>()
  let ackSignal = Deferred.makeUnsafe<void>()
  // Woken whenever the window shrinks (an ack, a failed batch).
  let roomSignal = Deferred.makeUnsafe<void>()

  // The window: frames and bytes numbered and not yet acknowledged.
  let windowUsedFrames = 0
  let windowUsedBytes = 0
  for (const entry of index) windowUsedFrames += entry.last - Math.max(entry.first, acked + 1) + 1

  const pending: Array<PendingBatch> = []
  let writeFailures: Array<StorageError> = []
  let writing = false
  // The batch the writer is writing now (it has left `pending`).
  let inFlight: PendingBatch | undefined
  let idle = Deferred.makeUnsafe<void>()
  Deferred.doneUnsafe(idle, Exit.void)
  const metaLock = Semaphore.makeUnsafe(1)
  const ackLock = Semaphore.makeUnsafe(1)

  const useAfterClose = (operation: string): Effect.Effect<never> =>
    Effect.die(new Error(`DurableOutboundQueue ${socketId}: ${operation} after close`))

  const wake = (signal: Deferred.Deferred<void>) => Deferred.doneUnsafe(signal, Exit.void)

  /**
   * Writes the meta record with the current watermark and at least `nextHigh`, and
   * deletes the records `gone` in the same atomic step (the storage's `writeAll`, which
   * `gone` needs).
   */
  const writeMeta = (nextAcked: number, nextHigh: number, gone: ReadonlyArray<string> = []) =>
    metaLock.withPermit(Effect.suspend(() => {
      const record = { version: 2, acked: Math.max(acked, nextAcked), high: Math.max(nextHigh, nextAcked) }
      const write = gone.length > 0 && storage.writeAll !== undefined
        ? storage.writeAll([{ op: "set", key: meta, value: record }, ...gone.map((key) => ({ op: "delete" as const, key }))])
        : storage.set(meta, record)
      return Effect.as(write, record)
    }))

  /**
   * Writes a group of consecutive batches: every record together (one group commit
   * where the storage has one), beside a new high-water mark when the group goes past
   * it. The group is durable when its records and that mark are; when one write fails,
   * it fails whole and none of its records is left.
   */
  const writeGroup = (group: ReadonlyArray<PendingBatch>): Effect.Effect<void, StorageError> => {
    const lastBatch = group[group.length - 1]!
    const last = lastBatch.first + lastBatch.frames.length - 1
    const records = planRecords(group, previous, batchPrefix, batchFrames)
    // Frames that are JSON go in as JSON values where the storage takes JSON text: no
    // escaping each into a string, and a shorter record to checksum, write and sync.
    const writeRecord = (record: BatchRecordPlan) =>
      storage.set(
        record.key,
        record.json && storage.takesJsonText === true
          ? new JsonText(jsonRecordText(record))
          : { version: 2, first: record.first, frames: record.frames, prev: record.prev }
      )
    // The records, and a new high-water mark when the group goes past the last, are
    // written at once: no seq of this group is issued (acknowledged to a producer or sent
    // to a client) before all are durable, and a restart numbers above every record it
    // finds, so a record that lands before its reservation is still covered.
    const writes: Array<Effect.Effect<void, StorageError>> = records.map(writeRecord)
    if (last > high) {
      writes.push(Effect.map(writeMeta(acked, last + Math.max(RESERVE_SEQS, batchFrames)), (written) => {
        high = written.high
      }))
    }
    // Every write is waited for, failed or not, so none lands after the clean-up below.
    const written: Effect.Effect<void, StorageError> = writes.length === 1
      ? writes[0]!
      : Effect.flatMap(
        Effect.forEach(writes, (write) => Effect.exit(write), { concurrency: "unbounded" }),
        (exits) => exits.find(Exit.isFailure) ?? Effect.void
      )
    return written.pipe(
      Effect.tapError(() =>
        // These seqs are burnt (the high-water mark covers them); removing what may have
        // landed keeps a failed append from being delivered after a restart.
        Effect.forEach(records, (record) => Effect.ignore(storage.delete(record.key)), {
          concurrency: DELETE_CONCURRENCY,
          discard: true
        })
      ),
      Effect.onExit((exit) =>
        Effect.sync(() => {
          if (Exit.isSuccess(exit)) {
            for (const record of records) {
              index.push({ first: record.first, last: record.last, key: record.key, legacy: false, bytes: record.bytes })
            }
            previous = [records[records.length - 1]!.first, last]
            lastFrame = last
            for (const batch of group) cache.remember(batch.first, batch.frames)
          } else {
            // A burnt group leaves the window at once: nothing will ever ack it.
            for (const batch of group) {
              windowUsedFrames -= batch.frames.length
              windowUsedBytes -= batch.bytes
            }
            const room = roomSignal
            roomSignal = Deferred.makeUnsafe<void>()
            wake(room)
            cache.burnt(last)
          }
          committed = last
          if (last > shared.committed) shared.committed = last
          const signal = headSignal
          headSignal = Deferred.makeUnsafe<void>()
          wake(signal)
        })
      )
    )
  }

  /**
   * Writes what is pending, up to two batches' worth of whole batches, and settles
   * it; false when nothing is pending, and then the queue is idle (decided in the same
   * step as the look, so no frame is left behind). Batches that piled up while the last
   * write ran go in one write, so a slow disk costs fewer round trips, not more.
   */
  const writeNext: Effect.Effect<boolean> = Effect.suspend(() => {
    if (pending.length === 0) {
      inFlight = undefined
      writing = false
      wake(idle)
      return Effect.succeed(false)
    }
    let take = 1
    let frames = pending[0]!.frames.length
    while (take < pending.length && frames + pending[take]!.frames.length <= groupFrames) frames += pending[take++]!.frames.length
    const group = pending.splice(0, take)
    inFlight = group[group.length - 1]
    return writeGroup(group).pipe(
      Effect.onExit((exit) =>
        Effect.sync(() => {
          if (Exit.isFailure(exit)) {
            const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
            if (error !== undefined && error._tag === "Fail" && writeFailures.length < 64) writeFailures.push(error.error)
          }
          for (const batch of group) Deferred.doneUnsafe(batch.done, exit)
        })
      ),
      Effect.exit,
      Effect.as(true)
    )
  })

  /**
   * The one writer: drains pending batches in order, each written once. Frames pending
   * after a write were offered while it ran. A few (a producer awaiting each append
   * offers its next frame as the last write settles) go at once: the producer waits no
   * extra turn of the event loop. Many (a stream) mean producers are still offering: the
   * writer yields a turn first, so every producer ready to run offers too and the next
   * write takes their frames as well. On a storage whose commit holds the event loop
   * (SQLite), nothing is offered while a write runs, and without the turn a stream would
   * cost a commit (and an fsync) every few hundred frames. With none pending, it yields
   * first too, so offers made meanwhile join the next batch even on a storage that never
   * yields.
   */
  const writer: Effect.Effect<void> = Effect.flatMap(writeNext, (wrote) =>
    !wrote
      ? Effect.void
      : pending.length > 0 && pendingFrames() < STREAM_FRAMES
      ? writer
      : Effect.andThen(Effect.yieldNow, writer))

  /** How many frames are pending, counted up to {@link STREAM_FRAMES}. */
  const pendingFrames = () => {
    let frames = 0
    for (let i = 0; i < pending.length && frames < STREAM_FRAMES; i++) frames += pending[i]!.frames.length
    return frames
  }

  const sizeOf = (frames: ReadonlyArray<string>) => frames.reduce((sum, frame) => sum + frame.length, 0)

  /** Numbers one frame into the last pending batch (a new one when it is full); returns that batch. */
  const place = (frame: string, json: boolean): PendingBatch => {
    let batch = pending[pending.length - 1]
    if (batch === undefined || batch.frames.length >= batchFrames) {
      batch = { first: assigned + 1, frames: [], bytes: 0, json: true, done: Deferred.makeUnsafe<void, StorageError>() }
      pending.push(batch)
    }
    batch.frames.push(frame)
    batch.bytes += frame.length
    batch.json = batch.json && json
    assigned++
    windowUsedFrames++
    windowUsedBytes += frame.length
    return batch
  }

  /** Numbers `frames` into pending batches now (no yield in between, so seqs are in call order). */
  const enqueue = (frames: ReadonlyArray<string>, json: boolean): { readonly offered: Offered; readonly startWriter: boolean } => {
    const seqs: Array<number> = []
    const touched: Array<PendingBatch> = []
    for (const frame of frames) {
      const batch = place(frame, json)
      if (touched[touched.length - 1] !== batch) touched.push(batch)
      seqs.push(assigned)
    }
    const startWriter = !writing && pending.length > 0
    if (startWriter) {
      writing = true
      idle = Deferred.makeUnsafe<void>()
    }
    return {
      offered: {
        seqs,
        durable: touched.length === 1
          ? Deferred.await(touched[0]!.done)
          : Effect.forEach(touched, (batch) => Deferred.await(batch.done), { discard: true })
      },
      startWriter
    }
  }

  const offerAll = (frames: ReadonlyArray<string>, offerOptions?: OfferOptions): Effect.Effect<Offered> =>
    // Uninterruptible from numbering to starting the writer: an interrupt in between
    // would leave numbered frames that no writer ever writes. Only the wait for room
    // can be interrupted.
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend((): Effect.Effect<Offered> => {
        if (closed) return useAfterClose("append")
        if (frames.length === 0) return Effect.succeed({ seqs: [], durable: Effect.void })
        // An empty window takes any offer, so one offer larger than the window still goes.
        if (!fits(frames.length, sizeOf(frames))) {
          return Effect.andThen(restore(Deferred.await(roomSignal)), offerAll(frames, offerOptions))
        }
        const { offered, startWriter } = enqueue(frames, offerOptions?.json === true)
        // The writer outlives the offering fiber: it drains every pending batch.
        return startWriter ? Effect.as(Effect.forkDetach(Effect.andThen(Effect.yieldNow, writer)), offered) : Effect.succeed(offered)
      })
    )

  const offerUnsafe = (frame: string, offerOptions?: OfferOptions): number | undefined => {
    // The writer is running, so it will take this frame: nothing to fork.
    if (closed || !writing || writeFailures.length > 0) return undefined
    if (windowUsedFrames + 1 > windowFrames || windowUsedBytes + frame.length > windowBytes) return undefined
    place(frame, offerOptions?.json === true)
    return assigned
  }

  // Batches are written one after another, in order: once the last is settled, all are.
  const awaitOffered: Effect.Effect<void> = Effect.suspend(() => {
    const last = pending.length > 0 ? pending[pending.length - 1] : inFlight
    return last === undefined ? Effect.void : Effect.ignore(Deferred.await(last.done))
  })

  /** Whether an offer of `frames` frames of `bytes` fits the window now. An empty window takes any offer. */
  const fits = (frames: number, bytes: number) =>
    windowUsedFrames === 0 || (windowUsedFrames + frames <= windowFrames && windowUsedBytes + bytes <= windowBytes)

  const appendAll = (
    frames: ReadonlyArray<string>,
    offerOptions?: OfferOptions
  ): Effect.Effect<ReadonlyArray<number>, StorageError | InvalidQueueInput> =>
    Effect.suspend((): Effect.Effect<ReadonlyArray<number>, StorageError | InvalidQueueInput> => {
      // Checked before anything is numbered: a frame of another type would be written
      // as a record no reader accepts, and an array of frames must be one.
      const bad = Array.isArray(frames) ? frames.findIndex((frame) => typeof frame !== "string") : 0
      if (bad !== -1) {
        const what = Array.isArray(frames) ? frames[bad] : frames
        return Effect.fail(
          new InvalidQueueInput({
            operation: "append",
            message: `a frame must be a string (encode it with JSON.stringify first), got ${
              what === null ? "null" : Array.isArray(what) ? "an array" : typeof what
            }`
          })
        )
      }
      return Effect.flatMap(offerAll(frames, offerOptions), (offered) => Effect.as(offered.durable, offered.seqs))
    })

  const append = (frame: string) => Effect.map(appendAll([frame]), (seqs) => seqs[0]!)

  const indexFrom = (seq: number) => firstRecordFrom(index, seq)

  // The last few records read, decoded: records are written once, and a replay reads a
  // large record page by page, which would otherwise parse it once per page.
  const decodedRecords = new Map<string, DecodedRecord>()
  const rememberDecoded = (key: string, record: DecodedRecord) => {
    decodedRecords.set(key, record)
    if (decodedRecords.size > DECODED_RECORDS) decodedRecords.delete(decodedRecords.keys().next().value!)
  }
  const pushFrames = (entries: Array<QueueEntry>, first: number, frames: ReadonlyArray<string>, from: number, to: number) => {
    for (let seq = Math.max(first, from, acked + 1); seq <= to && seq - first < frames.length; seq++) {
      entries.push({ seq, frame: frames[seq - first]! })
    }
  }

  /** Reads the stored frames of `[from, to]`, stopping at the first unreadable record. */
  const readStored = Effect.fnUntraced(function*(from: number, to: number) {
    const entries: Array<QueueEntry> = []
    const records: Array<IndexEntry> = []
    for (let i = indexFrom(from); i < index.length && index[i]!.first <= to; i++) records.push(index[i]!)
    for (let start = 0; start < records.length; start += READ_RECORDS) {
      const chunk = records.slice(start, start + READ_RECORDS)
      // The decoded records this chunk uses are taken before the read: the cache is small,
      // and decoding the chunk's other records (or another read meanwhile) pushes entries
      // out of it, while a record found there is not read from storage.
      const held = new Map<string, DecodedRecord>()
      for (const record of chunk) {
        const decoded = decodedRecords.get(record.key)
        if (decoded !== undefined) held.set(record.key, decoded)
      }
      const { unreadable, values } = yield* readValues(
        storage,
        chunk.filter((record) => !held.has(record.key)).map((record) => record.key)
      )
      for (const record of chunk) {
        const damage = (message: string, key = record.key, through = record.last): RangeDamage => ({
          error: corrupt("frameRange", key, message),
          through: Math.min(through, to)
        })
        let decodedRecord = held.get(record.key)
        if (decodedRecord === undefined) {
          const failed = unreadable.get(record.key)
          // The storage found the record damaged (its own `Corrupt`, naming the key).
          if (failed !== undefined) return { entries, damage: { error: failed, through: Math.min(record.last, to) } }
          if (!values.has(record.key)) {
            // Compacted while it was read: nothing in it is wanted any more.
            if (record.last <= acked) continue
            return { entries, damage: damage("the batch record is missing") }
          }
          const value = values.get(record.key)
          if (record.legacy) {
            const decoded = yield* Effect.result(decodeFrameRecord(value))
            if (decoded._tag === "Failure") return { entries, damage: damage(`not a queue frame record: ${decoded.failure.message}`) }
            decodedRecord = { frames: [decoded.success.frame], prev: null }
          } else {
            const decoded = yield* Effect.result(decodeBatch(value))
            if (decoded._tag === "Failure") return { entries, damage: damage(`not a queue batch record: ${decoded.failure.message}`) }
            const batch = decoded.success
            if (batch.first !== record.first || batch.frames.length !== record.last - record.first + 1) {
              return { entries, damage: damage(`the record holds seqs from ${batch.first}, ${batch.frames.length} frames`) }
            }
            decodedRecord = { frames: batch.frames, prev: batch.prev }
          }
          rememberDecoded(record.key, decodedRecord)
        }
        // The record written before this one must still be here unless it was acked.
        const prev = decodedRecord.prev
        if (prev !== null && prev[1] > acked && prev[1] >= from) {
          const before = index[indexFrom(prev[1])]
          if (before === undefined || before.first !== prev[0] || before.last !== prev[1]) {
            return { entries, damage: damage("the batch record is missing", batchKey(socketId, prev[0], prev[1]), prev[1]) }
          }
        }
        pushFrames(entries, record.first, decodedRecord.frames, from, to)
      }
    }
    return { entries, damage: undefined }
  })

  const validateRange = (operation: string, fromSeq: number, limit: number | undefined) => {
    if (!isSeq(fromSeq)) {
      return Effect.fail(new InvalidQueueInput({ operation, message: `fromSeq must be a non-negative integer, got ${fromSeq}` }))
    }
    if (limit !== undefined && !(Number.isSafeInteger(limit) && limit >= 1) && limit !== Infinity) {
      return Effect.fail(new InvalidQueueInput({ operation, message: `limit must be a positive integer, got ${limit}` }))
    }
    return Effect.void
  }

  const readRange: DurableOutboundQueueShape["readRange"] = (fromSeq, rangeOptions) =>
    Effect.andThen(
      validateRange("frameRange", fromSeq, rangeOptions?.limit),
      Effect.suspend((): Effect.Effect<RangeRead, StorageError> => {
        if (closed) return useAfterClose("frameRange")
        const from = Math.max(fromSeq, acked + 1)
        const limit = rangeOptions?.limit ?? Infinity
        const to = limit === Infinity ? committed : Math.min(committed, from + limit - 1)
        if (from > to) return Effect.succeed({ entries: [], through: Math.max(to, fromSeq - 1), damage: undefined })
        if (from >= cache.low) return Effect.succeed({ entries: cache.read(from, to), through: to, damage: undefined })
        // Read the cache's part now: the stored read yields, and a commit meanwhile
        // may evict frames from the cache (they stay in storage, but not in this read).
        const low = cache.low
        const cached = cache.read(Math.max(low, from), to)
        return Effect.map(readStored(from, Math.min(to, low - 1)), (stored) =>
          stored.damage !== undefined
            ? { entries: stored.entries, through: stored.damage.through, damage: stored.damage }
            : { entries: stored.entries.concat(cached), through: to, damage: undefined })
      })
    )

  const frameRange: DurableOutboundQueueShape["frameRange"] = (fromSeq, rangeOptions) =>
    Effect.flatMap(readRange(fromSeq, rangeOptions), (read) =>
      read.damage !== undefined ? Effect.fail(read.damage.error) : Effect.succeed(read.entries))

  const ackUpTo = (seq: number): Effect.Effect<number, StorageError | InvalidQueueInput> =>
    !isSeq(seq)
      ? Effect.fail(new InvalidQueueInput({ operation: "ackUpTo", message: `seq must be a non-negative integer, got ${seq}` }))
      : ackLock.withPermit(Effect.suspend(() => {
        if (closed) return useAfterClose("ackUpTo")
        const target = Math.min(seq, committed)
        if (!(target > acked)) return Effect.succeed(acked)
        // The watermark is written before the records go, so a crash mid-compaction
        // never lowers the head below a seq already issued. A storage with atomic
        // groups deletes them with the watermark instead: one commit, all or nothing.
        const gone: Array<string> = []
        if (storage.writeAll !== undefined) {
          for (const entry of dropped) if (entry.last <= target) gone.push(entry.key)
          for (let i = 0; i < index.length && index[i]!.last <= target; i++) gone.push(index[i]!.key)
        }
        return writeMeta(target, high, gone).pipe(
          Effect.andThen(Effect.sync(() => {
            acked = target
            cache.evictBelow(target + 1)
            if (gone.length > 0) {
              // Deleted with the watermark: nothing of them is left to compact.
              while (index.length > 0 && index[0]!.last <= target) index.shift()
              dropped = dropped.filter((entry) => entry.last > target)
              for (const key of gone) decodedRecords.delete(key)
            } else {
              while (index.length > 0 && index[0]!.last <= target) dropped.push(index.shift()!)
            }
            // The window: every numbered frame at or below the watermark leaves it.
            let frames = 0
            let bytes = 0
            for (const entry of index) {
              frames += entry.last - Math.max(entry.first, target + 1) + 1
              bytes += entry.bytes
            }
            for (const batch of pending) {
              frames += batch.frames.length
              bytes += batch.bytes
            }
            windowUsedFrames = frames
            windowUsedBytes = bytes
            for (const signal of [ackSignal, roomSignal]) wake(signal)
            ackSignal = Deferred.makeUnsafe<void>()
            roomSignal = Deferred.makeUnsafe<void>()
          })),
          Effect.andThen(Effect.suspend(() => compact(target))),
          Effect.as(target)
        )
      }))

  // Records dropped from the index by an ack, waiting for their delete.
  let dropped: Array<IndexEntry> = []
  const compact = (target: number) =>
    Effect.suspend(() => {
      const keys = dropped.filter((entry) => entry.last <= target).map((entry) => entry.key)
      for (const key of keys) decodedRecords.delete(key)
      dropped = dropped.filter((entry) => entry.last > target)
      return Effect.forEach(keys, (key) => storage.delete(key), { concurrency: DELETE_CONCURRENCY, discard: true })
    })

  const clear = Effect.suspend(() => {
    if (closed) return useAfterClose("clear")
    return Deferred.await(idle).pipe(Effect.andThen(Effect.suspend(() => ackUpTo(committed))), Effect.asVoid)
  }).pipe(Effect.catchTag("InvalidQueueInput", Effect.die))

  const size = Effect.sync(() => {
    let frames = 0
    for (const entry of index) frames += entry.last - Math.max(entry.first, acked + 1) + 1
    return frames
  })

  const awaitHeadAbove = (seq: number): Effect.Effect<number> =>
    Effect.suspend(() => (committed > seq ? Effect.succeed(committed) : Effect.andThen(Deferred.await(headSignal), awaitHeadAbove(seq))))

  const awaitAcked = (seq: number): Effect.Effect<void> =>
    Effect.suspend(() => (acked >= seq ? Effect.void : Effect.andThen(Deferred.await(ackSignal), awaitAcked(seq))))

  const close = Effect.suspend(() => {
    if (closed) return Effect.void
    closed = true
    return Deferred.await(idle).pipe(
      // The exact mark: a clean reopen numbers on without a gap.
      Effect.andThen(ackLock.withPermit(Effect.suspend(() =>
        high > committed
          ? Effect.ignore(metaLock.withPermit(storage.set(meta, { version: 2, acked, high: committed })))
          : Effect.void
      ))),
      Effect.andThen(Effect.sync(() => {
        cache.clear()
      }))
    )
  })

  return DurableOutboundQueue.of({
    socketId,
    append,
    appendAll,
    offerAll,
    offerUnsafe,
    awaitOffered,
    takeWriteFailures: Effect.sync(() => {
      const taken = writeFailures
      writeFailures = []
      return taken
    }),
    frameRange,
    readRange,
    ackUpTo,
    clear,
    size,
    headSeq: Effect.sync(() => committed),
    lastFrameSeq: Effect.sync(() => Math.max(lastFrame, acked)),
    ackedSeq: Effect.sync(() => acked),
    windowUsage: Effect.sync(() => ({ frames: windowUsedFrames, bytes: windowUsedBytes })),
    awaitHeadAbove,
    awaitAcked,
    close
  })
})

/** Opens the queue `options.socketId` on the `StorageAdapter` in context. */
export const make = Effect.fnUntraced(function*(options: DurableOutboundQueueOptions) {
  return yield* makeWith(yield* StorageAdapter, options)
})

/** A queue for the life of the layer, closed when the layer is released. */
export const layer = (
  options: DurableOutboundQueueOptions
): Layer.Layer<DurableOutboundQueue, StorageError, StorageAdapter> =>
  Layer.effect(
    DurableOutboundQueue,
    Effect.acquireRelease(make(options), (queue) => queue.close)
  )
