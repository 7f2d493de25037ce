/**
 * A durable, numbered outbox for one socket: every outbound frame gets a sequence
 * number that is never issued twice, survives a crash, and stays until a client
 * acknowledges it. Written on any `StorageAdapter`.
 *
 * Layout: `durableOutboundQueue:<socketId>:meta` holds the acked watermark and
 * `durableOutboundQueue:<socketId>:frame:<seq>` (seq zero-padded to 16 digits) one
 * frame each. An append writes only its frame key; the head is the end of the
 * contiguous run of frames above the watermark, recomputed on open. So a crash
 * between a frame write and the meta write loses nothing, and repair on open deletes
 * frames at or below the watermark (an interrupted compaction) and frames after a
 * hole (an interrupted batch, none of whose appends had returned).
 *
 * Appends are group-committed: appends that arrive while a batch is being written
 * form the next batch, whose frames are written concurrently (sharing the file
 * backend's directory fsync). An append returns once every seq up to its own is
 * durable, which is what makes the hole rule above safe.
 *
 * @since 0.1.0
 */
import { Context, Deferred, Effect, Exit, Layer, Option, Schema, Semaphore } from "effect"
import { Corrupt, StorageError } from "../Errors.ts"
import { getMany, StorageAdapter, type StorageAdapterShape } from "./StorageAdapter.ts"

/** One stored frame and its sequence number. */
export interface QueueEntry {
  readonly seq: number
  /** The frame as the appender gave it: opaque text (the IPC server stores a frame's JSON). */
  readonly frame: string
}

/** What a durable outbound queue offers. Seqs start at 1; 0 means "nothing". */
export interface DurableOutboundQueueShape {
  /** The id its keys are written under. */
  readonly socketId: string
  /** Appends one frame durably and returns its seq. */
  readonly append: (frame: string) => Effect.Effect<number, StorageError>
  /** Appends frames durably, in order, in one group commit; returns their seqs. */
  readonly appendAll: (frames: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<number>, StorageError>
  /** The unacked frames with seq at least `fromSeq`, in order; at most `limit` of them when given. */
  readonly frameRange: (
    fromSeq: number,
    options?: { readonly limit?: number | undefined }
  ) => Effect.Effect<ReadonlyArray<QueueEntry>, StorageError>
  /**
   * Marks every frame up to `seq` as handled and compacts them. Clamped to the head;
   * an ack at or below the current watermark changes nothing. Returns the watermark.
   */
  readonly ackUpTo: (seq: number) => Effect.Effect<number, StorageError>
  /** The seq of the last durable frame (0 when none was ever appended). */
  readonly headSeq: Effect.Effect<number>
  /** The acked watermark: every frame up to it has been handled. */
  readonly ackedSeq: Effect.Effect<number>
  /** Waits until the head passes `seq`, and returns the head. */
  readonly awaitHeadAbove: (seq: number) => Effect.Effect<number>
  /** Waits until the watermark reaches `seq`. */
  readonly awaitAcked: (seq: number) => Effect.Effect<void>
  /** Waits for in-flight writes, then refuses further use (a use after close is a defect). */
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
  /** How many recent frames stay in memory so live delivery reads no storage. Default 1024. */
  readonly cachedFrames?: number | undefined
  /**
   * Where a queue that storage knows nothing of starts numbering: its first seq is
   * `startAfter + 1` (rounded down to an integer). Default 0. A queue in memory that may be recreated (a restarted
   * server) starts after a clock reading, so it numbers above everything it sent before.
   */
  readonly startAfter?: number | undefined
}

/** The key prefix every key of the queue `socketId` starts with. */
export const keyPrefix = (socketId: string): string => `durableOutboundQueue:${encodeURIComponent(socketId)}:`

/** The key of the queue's meta record. */
export const metaKey = (socketId: string): string => `${keyPrefix(socketId)}meta`

/** The key of the frame `seq`. */
export const frameKey = (socketId: string, seq: number): string =>
  `${keyPrefix(socketId)}frame:${String(seq).padStart(SEQ_DIGITS, "0")}`

const SEQ_DIGITS = 16
const DEFAULT_CACHED_FRAMES = 1024
const WRITE_CONCURRENCY = 64
const READ_CHUNK = 2048

/** The persisted meta record. */
const Meta = Schema.Struct({ version: Schema.Literal(1), acked: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) })

/** The persisted frame record. */
const FrameRecord = Schema.Struct({ version: Schema.Literal(1), frame: Schema.String })

const decodeMeta = Schema.decodeUnknownEffect(Meta)
const decodeFrameRecord = Schema.decodeUnknownEffect(FrameRecord)

const corrupt = (operation: string, key: string, message: string) =>
  new StorageError({ operation, reason: new Corrupt({ key, message }) })

interface Batch {
  readonly frames: Array<string>
  readonly done: Deferred.Deferred<number, StorageError>
}

/** Opens the queue `socketId` on `storage`, repairing what a crash left behind. */
export const makeWith = Effect.fnUntraced(function*(
  storage: StorageAdapterShape,
  options: DurableOutboundQueueOptions
) {
  const { socketId } = options
  const cachedFrames = Math.max(0, options.cachedFrames ?? DEFAULT_CACHED_FRAMES)
  const meta = metaKey(socketId)
  const framePrefix = `${keyPrefix(socketId)}frame:`
  const keyOf = (seq: number) => frameKey(socketId, seq)

  const storedMeta = yield* storage.get(meta)
  let acked = 0
  if (Option.isSome(storedMeta)) {
    acked = (yield* decodeMeta(storedMeta.value).pipe(
      Effect.mapError((error) => corrupt("open", meta, `not a queue meta record: ${error.message}`))
    )).acked
  }

  // Repair: the head is the end of the contiguous run above the watermark.
  const seqs: Array<number> = []
  for (const key of yield* storage.list(framePrefix)) {
    const seq = Number(key.slice(framePrefix.length))
    if (Number.isSafeInteger(seq) && seq > 0) seqs.push(seq)
  }
  seqs.sort((a, b) => a - b)
  // Only a queue storage knows nothing of starts after `startAfter`: frames without a
  // meta record (a crash before the first ack) keep their own numbers.
  if (Option.isNone(storedMeta) && seqs.length === 0) acked = Math.max(0, Math.floor(options.startAfter ?? 0))
  let head = acked
  const debris: Array<number> = []
  for (const seq of seqs) {
    if (seq <= acked) debris.push(seq)
    else if (seq === head + 1) head = seq
    else debris.push(seq)
  }
  yield* Effect.forEach(debris, (seq) => storage.delete(keyOf(seq)), { concurrency: WRITE_CONCURRENCY, discard: true })

  let committed = head
  let closed = false
  // Committed frames above the watermark, newest last; holds seqs [cacheLow, committed].
  const cache = new Map<number, string>()
  let cacheLow = committed + 1
  let headSignal = Deferred.makeUnsafe<void>()
  let ackSignal = Deferred.makeUnsafe<void>()

  const writeLock = Semaphore.makeUnsafe(1)
  const ackLock = Semaphore.makeUnsafe(1)
  let openBatch: Batch | undefined

  const useAfterClose = (operation: string): Effect.Effect<never> =>
    Effect.die(new Error(`DurableOutboundQueue ${socketId}: ${operation} after close`))

  const remember = (first: number, frames: ReadonlyArray<string>) => {
    if (cachedFrames === 0) {
      // Nothing is cached: the whole range up to the new head is read from storage.
      cacheLow = first + frames.length
      return
    }
    for (let i = 0; i < frames.length; i++) cache.set(first + i, frames[i]!)
    while (cache.size > cachedFrames) cache.delete(cacheLow++)
  }

  const writeBatch = (frames: ReadonlyArray<string>): Effect.Effect<number, StorageError> =>
    Effect.suspend(() => {
      if (closed) return useAfterClose("append")
      const first = committed + 1
      return Effect.forEach(
        frames,
        (frame, i) => storage.set(keyOf(first + i), { version: 1, frame }),
        { concurrency: WRITE_CONCURRENCY, discard: true }
      ).pipe(
        Effect.tapError(() =>
          // The next batch reuses these never-issued seqs; removing what landed keeps a
          // failed append from being delivered after a restart.
          Effect.forEach(frames, (_, i) => Effect.ignore(storage.delete(keyOf(first + i))), {
            concurrency: WRITE_CONCURRENCY,
            discard: true
          })
        ),
        Effect.map(() => {
          remember(first, frames)
          committed = first + frames.length - 1
          const signal = headSignal
          headSignal = Deferred.makeUnsafe<void>()
          Deferred.doneUnsafe(signal, Exit.void)
          return first
        })
      )
    })

  const appendAll = (frames: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<number>, StorageError> =>
    // Uninterruptible from the moment a leader opens a batch until it is written: an
    // interrupt in between would leave the batch open forever, and every later append
    // would join it and wait for a write that never comes.
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (frames.length === 0) return Effect.succeed([])
        if (closed) return useAfterClose("append")
        let batch = openBatch
        const leader = batch === undefined
        if (batch === undefined) {
          batch = { frames: [], done: Deferred.makeUnsafe<number, StorageError>() }
          openBatch = batch
        }
        const index = batch.frames.length
        for (const frame of frames) batch.frames.push(frame)
        const mine = batch
        const result = restore(Effect.map(Deferred.await(mine.done), (first) => frames.map((_, i) => first + index + i)))
        if (!leader) return result
        return writeLock.withPermit(
          Effect.suspend(() => {
            if (openBatch === mine) openBatch = undefined
            return Effect.exit(writeBatch(mine.frames))
          })
        ).pipe(
          Effect.flatMap((exit) => Deferred.done(mine.done, exit)),
          Effect.andThen(result)
        )
      })
    )

  const append = (frame: string) => Effect.map(appendAll([frame]), (seqs) => seqs[0]!)

  const readStored = Effect.fnUntraced(function*(from: number, to: number) {
    const entries: Array<QueueEntry> = []
    for (let start = from; start <= to; start += READ_CHUNK) {
      const end = Math.min(to, start + READ_CHUNK - 1)
      const keys: Array<string> = []
      for (let seq = start; seq <= end; seq++) keys.push(keyOf(seq))
      const found = yield* getMany(storage, keys)
      for (let seq = start; seq <= end; seq++) {
        const key = keys[seq - start]!
        if (!found.has(key)) continue
        const record = yield* decodeFrameRecord(found.get(key)).pipe(
          Effect.mapError((error) => corrupt("frameRange", key, `not a queue frame record: ${error.message}`))
        )
        entries.push({ seq, frame: record.frame })
      }
    }
    return entries
  })

  const frameRange: DurableOutboundQueueShape["frameRange"] = (fromSeq, rangeOptions) =>
    Effect.suspend(() => {
      if (closed) return useAfterClose("frameRange")
      const from = Math.max(Math.floor(fromSeq), acked + 1)
      const limit = rangeOptions?.limit ?? Infinity
      const to = limit === Infinity ? committed : Math.min(committed, from + Math.max(0, Math.floor(limit)) - 1)
      if (from > to) return Effect.succeed([])
      const fromCache = (start: number): Array<QueueEntry> => {
        const entries: Array<QueueEntry> = []
        for (let seq = start; seq <= to; seq++) {
          const frame = cache.get(seq)
          if (frame !== undefined) entries.push({ seq, frame })
        }
        return entries
      }
      if (from >= cacheLow) return Effect.succeed(fromCache(from))
      // Read the cache's part now: the stored read yields, and a commit meanwhile
      // may evict frames from the cache (they stay in storage, but not in this read).
      const low = cacheLow
      const cached = fromCache(Math.max(low, from))
      return Effect.map(readStored(from, Math.min(to, low - 1)), (stored) => stored.concat(cached))
    })

  const ackUpTo = (seq: number): Effect.Effect<number, StorageError> =>
    ackLock.withPermit(Effect.suspend(() => {
      if (closed) return useAfterClose("ackUpTo")
      const target = Math.min(Math.floor(seq), committed)
      if (!(target > acked)) return Effect.succeed(acked)
      const previous = acked
      // The watermark is written before the frames go, so a crash mid-compaction
      // never lowers the head below a seq already issued.
      return storage.set(meta, { version: 1, acked: target }).pipe(
        Effect.andThen(Effect.sync(() => {
          acked = target
          for (let s = cacheLow; s <= target; s++) cache.delete(s)
          if (cacheLow <= target) cacheLow = target + 1
          const signal = ackSignal
          ackSignal = Deferred.makeUnsafe<void>()
          Deferred.doneUnsafe(signal, Exit.void)
        })),
        Effect.andThen(Effect.forEach(
          Array.from({ length: target - previous }, (_, i) => keyOf(previous + 1 + i)),
          (key) => storage.delete(key),
          { concurrency: WRITE_CONCURRENCY, discard: true }
        )),
        Effect.as(target)
      )
    }))

  const awaitHeadAbove = (seq: number): Effect.Effect<number> =>
    Effect.suspend(() => (committed > seq ? Effect.succeed(committed) : Effect.andThen(Deferred.await(headSignal), awaitHeadAbove(seq))))

  const awaitAcked = (seq: number): Effect.Effect<void> =>
    Effect.suspend(() => (acked >= seq ? Effect.void : Effect.andThen(Deferred.await(ackSignal), awaitAcked(seq))))

  const close = writeLock.withPermit(ackLock.withPermit(Effect.sync(() => {
    closed = true
    cache.clear()
  })))

  return DurableOutboundQueue.of({
    socketId,
    append,
    appendAll,
    frameRange,
    ackUpTo,
    headSeq: Effect.sync(() => committed),
    ackedSeq: Effect.sync(() => acked),
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
