/**
 * Durable outbound queues served read-only as streams: the queue of socket `<id>` is
 * the JSON-mode stream at `/queues/<id>`, one message `{"seq":n,"frame":"<text>"}` per
 * frame, in seq order. An offset is the last seq delivered, zero-padded to 16 digits
 * (`-1` is the start: the first frame not yet acknowledged; `now` the tail), so offsets
 * sort as seqs do and a reader resumes after the frame it saw last. A queue never
 * closes; writes to its path are refused (`ReadOnly`, 405). Frames acknowledged and
 * compacted are gone: a read from below the watermark starts at the first frame kept.
 *
 * The queue is opened through `DurableOutboundQueue` on a view of its storage that
 * writes nothing (opening repairs what a crash left, which a reader must never apply
 * under a live server), so this follows the queue's record layout wherever it goes.
 * Live reads re-check the queue every `pollMillis`: its writer is an IPC server, which
 * announces nothing to the streams. See docs/agent-streams.md#watching-an-ipc-queue.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { StorageError } from "../../Errors.ts"
import { keyPrefix, makeWith as openQueue, type QueueEntry } from "../../services/DurableOutboundQueue.ts"
import { readOnly, type StorageAdapterShape } from "../../services/StorageAdapter.ts"
import { type QueueStreamsOptions, type ReadResult, StreamError, type StreamInfo } from "./types.ts"

/** Where queue streams live among the stream paths. */
export const QUEUE_PATH_PREFIX = "/queues/"

/** How many frames one read returns at most (before `maxReadBytes`). */
const FRAMES_PER_READ = 1024

const CONTENT_TYPE = "application/json"

/** The socket id a stream path names, when it is a queue path. */
export const queueIdOf = (path: string): string | undefined =>
  path.startsWith(QUEUE_PATH_PREFIX) && path.length > QUEUE_PATH_PREFIX.length ? path.slice(QUEUE_PATH_PREFIX.length) : undefined

/** The offset of "every frame through `seq` was delivered". */
export const queueOffset = (seq: number): string => String(seq).padStart(16, "0")

const QUEUE_OFFSET = /^\d{16}$/

const fail = (reason: StreamError["reason"], message: string) => Effect.fail(new StreamError({ reason, message }))

const storageFailed = (error: StorageError) => new StreamError({ reason: "Storage", message: error.message })

/** What one look at a queue found. */
interface Look {
  readonly acked: number
  /** The seq of the last durable frame (or the watermark when higher). */
  readonly last: number
  readonly entries: ReadonlyArray<QueueEntry>
  /** Why the read stopped short: an unreadable record, named by key. */
  readonly damage: string | undefined
}

/** The read-only operations of the queues a service serves. */
export interface QueueStreams {
  readonly read: (socketId: string, offset: string | undefined, maxBytes: number) => Effect.Effect<ReadResult, StreamError>
  readonly head: (socketId: string) => Effect.Effect<StreamInfo, StreamError>
  readonly awaitChange: (socketId: string, offset: string, timeout: Duration.Input) => Effect.Effect<boolean, StreamError>
  readonly refuse: (socketId: string, operation: string) => Effect.Effect<never, StreamError>
}

/** The queue streams over `fallback` (the streams' storage) unless `options` names others. */
export const make = (fallback: StorageAdapterShape, options: QueueStreamsOptions): QueueStreams => {
  const storages = options.storages !== undefined && options.storages.length > 0 ? options.storages : [fallback]
  const allowed = options.socketIds === undefined ? undefined : new Set(options.socketIds)
  const pollMillis = Math.max(10, options.pollMillis ?? 250)

  /** The storage that holds the queue `socketId`; 404 when none does or it is not served. */
  const locate = (socketId: string): Effect.Effect<StorageAdapterShape, StreamError> =>
    Effect.gen(function*() {
      if (allowed === undefined || allowed.has(socketId)) {
        for (const storage of storages) {
          const keys = yield* Effect.mapError(storage.list(keyPrefix(socketId)), storageFailed)
          if (keys.length > 0) return storage
        }
      }
      return yield* fail("NotFound", `no queue ${socketId} is served here`)
    })

  /** Opens the queue read-only and reads up to `limit` frames from `from` (0: none). */
  const look = (socketId: string, from: number, limit: number): Effect.Effect<Look, StreamError> =>
    Effect.gen(function*() {
      const storage = yield* locate(socketId)
      const queue = yield* Effect.mapError(openQueue(readOnly(storage), { socketId, cachedFrames: 0 }), storageFailed)
      const acked = yield* queue.ackedSeq
      const last = yield* queue.lastFrameSeq
      let entries: ReadonlyArray<QueueEntry> = []
      let damage: string | undefined
      if (limit > 0 && from <= last) {
        const read = yield* queue.readRange(Math.max(from, acked + 1), { limit }).pipe(
          Effect.mapError((error) =>
            error._tag === "InvalidQueueInput" ? new StreamError({ reason: "BadRequest", message: error.message }) : storageFailed(error)
          )
        )
        entries = read.entries.filter((entry) => entry.seq <= last)
        damage = read.damage?.error.message
      }
      yield* queue.close
      return { acked, last, entries, damage }
    })

  /** The seq after which a read starts: -1 / absent is the start, `now` the tail. */
  const parse = (offset: string | undefined): Effect.Effect<number | "now" | "start", StreamError> => {
    if (offset === undefined || offset === "-1") return Effect.succeed("start")
    if (offset === "now") return Effect.succeed("now")
    if (!QUEUE_OFFSET.test(offset) || !Number.isSafeInteger(Number(offset))) {
      return fail("BadRequest", `malformed queue offset ${JSON.stringify(offset)} (16 digits: the last seq read)`)
    }
    return Effect.succeed(Number(offset))
  }

  const read = (socketId: string, offset: string | undefined, maxBytes: number) =>
    Effect.gen(function*() {
      const after = yield* parse(offset)
      const from = typeof after === "number" ? after + 1 : 1
      const found = yield* look(socketId, from, after === "now" ? 0 : FRAMES_PER_READ)
      const startSeq = after === "now" ? found.last : after === "start" ? found.acked : Math.max(after, found.acked)
      if (typeof after === "number" && after > found.last) {
        return yield* fail("BadRequest", `offset ${offset} is beyond the tail ${queueOffset(found.last)} of queue ${socketId}`)
      }
      const messages: Array<string> = []
      let through = startSeq
      let size = 0
      for (const entry of found.entries) {
        const message = JSON.stringify({ seq: entry.seq, frame: entry.frame })
        if (size > 0 && size + message.length > maxBytes) break
        messages.push(message)
        size += message.length
        through = entry.seq
      }
      if (messages.length === 0 && found.damage !== undefined && through < found.last) {
        return yield* fail("Storage", `queue ${socketId}: ${found.damage}`)
      }
      // Frames the read skipped (none, or acked and compacted since) count as delivered.
      if (found.entries.length === 0 && found.damage === undefined) through = Math.max(through, Math.min(found.last, found.acked))
      const upToDate = through >= found.last
      return {
        contentType: CONTENT_TYPE,
        json: true,
        bytes: new Uint8Array(0),
        messages,
        startOffset: queueOffset(startSeq),
        nextOffset: queueOffset(upToDate ? found.last : through),
        upToDate,
        closed: false,
        streamId: `queue:${socketId}`
      } satisfies ReadResult
    })

  const head = (socketId: string) =>
    Effect.map(look(socketId, 0, 0), (found): StreamInfo => ({
      contentType: CONTENT_TYPE,
      nextOffset: queueOffset(found.last),
      closed: false
    }))

  const awaitChange = (socketId: string, offset: string, timeout: Duration.Input) =>
    Effect.gen(function*() {
      const after = yield* parse(offset)
      const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(Duration.fromInputUnsafe(timeout))
      for (;;) {
        const found = yield* look(socketId, 0, 0)
        const seen = typeof after === "number" ? after : found.last
        if (found.last > seen) return true
        const now = yield* Clock.currentTimeMillis
        if (now >= deadline) return false
        yield* Effect.sleep(Duration.millis(Math.min(pollMillis, deadline - now)))
      }
    })

  const refuse = (socketId: string, operation: string) =>
    fail("ReadOnly", `the queue ${socketId} is served read-only: ${operation} is refused`)

  return { read, head, awaitChange, refuse }
}
