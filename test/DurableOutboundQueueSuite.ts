/**
 * The behaviour every storage backend must give a `DurableOutboundQueue`. Each backend's
 * test file calls `suite(name, makeStorage)` with an effect that builds a fresh storage;
 * a "restart" is a new queue over the same storage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Scheduler } from "effect"
import type { StorageError } from "../src/Errors.ts"
import { frameKey, keyPrefix, makeWith, metaKey } from "../src/services/DurableOutboundQueue.ts"
import { make, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"

/** Wraps a storage to count calls per operation. */
const counting = (storage: StorageAdapterShape) => {
  const calls = { get: 0, getMany: 0, set: 0, delete: 0, list: 0 }
  const counted: StorageAdapterShape = make({
    get: (key) => Effect.suspend(() => (calls.get++, storage.get(key))),
    set: (key, value) => Effect.suspend(() => (calls.set++, storage.set(key, value))),
    delete: (key) => Effect.suspend(() => (calls.delete++, storage.delete(key))),
    list: (prefix) => Effect.suspend(() => (calls.list++, storage.list(prefix))),
    getMany: (keys) => Effect.suspend(() => (calls.getMany++, storage.getMany(keys)))
  })
  return { calls, counted }
}

const frames = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `{"n":${from + i}}`)

/** Runs the queue suite against a backend. */
export const suite = (name: string, makeStorage: Effect.Effect<StorageAdapterShape, StorageError>) =>
  describe(`DurableOutboundQueue: ${name}`, () => {
    it.effect("append numbers frames from 1 and frameRange returns them in order from any seq", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "q" })
        assert.strictEqual(yield* queue.headSeq, 0)
        assert.deepStrictEqual(yield* Effect.forEach(frames(3), queue.append), [1, 2, 3])
        assert.deepStrictEqual(yield* queue.appendAll(frames(2, 4)), [4, 5])
        assert.strictEqual(yield* queue.headSeq, 5)
        assert.deepStrictEqual(yield* queue.frameRange(1), frames(5).map((frame, i) => ({ seq: i + 1, frame })))
        assert.deepStrictEqual((yield* queue.frameRange(4)).map((e) => e.seq), [4, 5])
        assert.deepStrictEqual((yield* queue.frameRange(2, { limit: 2 })).map((e) => e.seq), [2, 3])
        assert.deepStrictEqual(yield* queue.frameRange(6), [])
      }))

    it.effect("ackUpTo is clamped to the head, ignores lower acks and compacts acked frames", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(5))
        assert.strictEqual(yield* queue.ackUpTo(3), 3)
        assert.strictEqual(yield* queue.ackUpTo(2), 3)
        assert.strictEqual(yield* queue.ackedSeq, 3)
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((e) => e.seq), [4, 5])
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}frame:`), [frameKey("q", 4), frameKey("q", 5)])
        assert.strictEqual(yield* queue.ackUpTo(99), 5)
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}frame:`), [])
        assert.deepStrictEqual(yield* storage.list(keyPrefix("q")), [metaKey("q")])
      }))

    it.effect("startAfter numbers a queue storage knows nothing of; a queue with a record keeps its own numbers", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const fresh = yield* makeWith(storage, { socketId: "late", startAfter: 1_000 })
        assert.deepStrictEqual(yield* fresh.appendAll(frames(2)), [1_001, 1_002])
        yield* fresh.ackUpTo(1_001)
        const reopened = yield* makeWith(storage, { socketId: "late", startAfter: 5 })
        assert.strictEqual(yield* reopened.headSeq, 1_002)
        assert.deepStrictEqual(yield* reopened.appendAll(frames(1)), [1_003])
        const fractional = yield* makeWith(storage, { socketId: "fractional", startAfter: 7.9 })
        assert.deepStrictEqual(yield* fractional.appendAll(frames(1)), [8])
        // Frames written before any ack (no meta record yet) are not taken for a fresh queue.
        const unacked = yield* makeWith(storage, { socketId: "early" })
        yield* unacked.appendAll(frames(3))
        const again = yield* makeWith(storage, { socketId: "early", startAfter: 1_000 })
        assert.deepStrictEqual((yield* again.frameRange(1)).map((e) => e.seq), [1, 2, 3])
      }))

    it.effect("seq numbers are never reused, even after the queue is emptied and reopened", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const first = yield* makeWith(storage, { socketId: "q" })
        yield* first.appendAll(frames(4))
        yield* first.ackUpTo(4)
        yield* first.close
        const second = yield* makeWith(storage, { socketId: "q" })
        assert.strictEqual(yield* second.headSeq, 4)
        assert.strictEqual(yield* second.ackedSeq, 4)
        assert.strictEqual(yield* second.append("next"), 5)
        assert.deepStrictEqual(yield* second.frameRange(0), [{ seq: 5, frame: "next" }])
      }))

    it.effect("a reopened queue holds every unacked frame; queues with other ids are separate", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const a = yield* makeWith(storage, { socketId: "a:b/c" })
        const b = yield* makeWith(storage, { socketId: "a" })
        yield* a.appendAll(frames(3))
        yield* b.append("other")
        yield* a.ackUpTo(1)
        const reopened = yield* makeWith(storage, { socketId: "a:b/c" })
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.frame), frames(2, 2))
        assert.strictEqual(yield* reopened.headSeq, 3)
        assert.deepStrictEqual(yield* (yield* makeWith(storage, { socketId: "a" })).frameRange(1), [{ seq: 1, frame: "other" }])
      }))

    it.effect("repair on open: a frame without its meta write is kept, compaction leftovers and frames after a hole go", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(6))
        yield* queue.ackUpTo(2)
        // A crash mid-compaction of an ack to 4: the meta landed, frames 3 and 4 did not go.
        yield* storage.set(metaKey("q"), { version: 1, acked: 4 })
        // A crash mid-batch: 8 landed, 7 did not; no append of that batch had returned.
        yield* storage.set(frameKey("q", 8), { version: 1, frame: "orphan" })
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.strictEqual(yield* reopened.ackedSeq, 4)
        assert.strictEqual(yield* reopened.headSeq, 6)
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.seq), [5, 6])
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}frame:`), [frameKey("q", 5), frameKey("q", 6)])
        assert.strictEqual(yield* reopened.append("after"), 7)
      }))

    it.effect("a corrupt meta record is a typed Corrupt failure naming the key", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        yield* storage.set(metaKey("q"), { version: 9 })
        const error = yield* Effect.flip(makeWith(storage, { socketId: "q" }))
        assert.strictEqual(error.reason._tag, "Corrupt")
        assert.strictEqual(error.reason.key, metaKey("q"))
      }))

    it.effect("concurrent appends get distinct, gap-free seqs, each frame at its own seq", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "q" })
        const seqs = yield* Effect.forEach(frames(40), (frame) => Effect.map(queue.append(frame), (seq) => [seq, frame] as const), {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(seqs.map(([seq]) => seq).sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i + 1))
        const stored = new Map((yield* queue.frameRange(1)).map((e) => [e.seq, e.frame]))
        for (const [seq, frame] of seqs) assert.strictEqual(stored.get(seq), frame)
      }))

    it.effect("reading a range of stored frames is not one storage round trip per frame", () =>
      Effect.gen(function*() {
        const { calls, counted } = counting(yield* makeStorage)
        const writer = yield* makeWith(counted, { socketId: "q" })
        yield* writer.appendAll(frames(300))
        // A fresh queue has nothing cached: every frame comes from storage.
        const reader = yield* makeWith(counted, { socketId: "q", cachedFrames: 0 })
        calls.get = 0
        calls.getMany = 0
        const entries = yield* reader.frameRange(1)
        assert.strictEqual(entries.length, 300)
        assert.strictEqual(calls.get, 0)
        assert.strictEqual(calls.getMany, 1)
      }))

    it.effect("with no frames cached, every appended frame is still read back", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "q", cachedFrames: 0 })
        yield* queue.appendAll(frames(3))
        yield* queue.append(frames(1, 4)[0]!)
        assert.deepStrictEqual(yield* queue.frameRange(1), frames(4).map((frame, i) => ({ seq: i + 1, frame })))
        assert.deepStrictEqual((yield* queue.frameRange(4)).map((e) => e.seq), [4])
      }))

    it.live("an append interrupted at any point does not wedge the appends after it", () =>
      Effect.gen(function*() {
        // A scheduler that yields every few operations opens a yield point at every
        // step of an append, and the interrupt lands in each of them in turn.
        for (const ops of [2, 3, 4, 5]) {
          for (let yields = 0; yields < 8; yields++) {
            const queue = yield* makeWith(yield* makeStorage, { socketId: "q" })
            const interrupted = yield* Effect.forkChild(
              queue.append("maybe").pipe(Effect.provideService(Scheduler.MaxOpsBeforeYield, ops))
            )
            for (let i = 0; i < yields; i++) yield* Effect.yieldNow
            yield* Fiber.interrupt(interrupted)
            const seq = yield* queue.append("after")
            assert.deepStrictEqual((yield* queue.frameRange(seq)).map((e) => e.frame), ["after"])
          }
        }
      }))

    it.effect("awaitHeadAbove and awaitAcked wake on append and ack", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "q" })
        const head = yield* Effect.forkChild(queue.awaitHeadAbove(1))
        const acked = yield* Effect.forkChild(queue.awaitAcked(2))
        yield* queue.appendAll(frames(2))
        assert.strictEqual(yield* Fiber.join(head), 2)
        yield* queue.ackUpTo(2)
        yield* Fiber.join(acked)
        assert.deepStrictEqual(yield* queue.frameRange(1), [])
      }))
  })
