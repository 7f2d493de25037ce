/**
 * The behaviour every storage backend must give a `DurableOutboundQueue`. Each backend's
 * test file calls `suite(name, makeStorage)` with an effect that builds a fresh storage;
 * a "restart" is a new queue over the same storage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Scheduler } from "effect"
import { Io, StorageError as StorageErrorClass, type StorageError } from "../src/Errors.ts"
import { batchKey, frameKey, keyPrefix, makeWith, metaKey } from "../src/services/DurableOutboundQueue.ts"
import { make, type StorageAdapterShape, type StorageWrite } from "../src/services/StorageAdapter.ts"

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

/** `storage` whose writes each wait for `gate`: batches pile up in the queue meanwhile. */
const gatedWrites = (storage: StorageAdapterShape, gate: Deferred.Deferred<void>): StorageAdapterShape =>
  make({
    get: storage.get,
    set: (key, value) => Effect.andThen(Deferred.await(gate), storage.set(key, value)),
    delete: storage.delete,
    list: storage.list,
    getMany: storage.getMany
  })

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
        // The batch record holding 4 and 5 stays until all of it is acked.
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}batch:`), [batchKey("q", 1, 5)])
        assert.strictEqual(yield* queue.ackUpTo(99), 5)
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}batch:`), [])
        assert.deepStrictEqual(yield* storage.list(keyPrefix("q")), [metaKey("q")])
      }))

    it.effect("on a storage with writeAll, an ack writes its watermark and deletes the acked records in one step", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const writeAll = storage.writeAll
        if (writeAll === undefined) return
        const groups: Array<ReadonlyArray<StorageWrite>> = []
        let deletes = 0
        const watched: StorageAdapterShape = {
          ...storage,
          delete: (key) => Effect.suspend(() => (deletes++, storage.delete(key))),
          writeAll: (writes) => Effect.suspend(() => (groups.push(writes), writeAll(writes)))
        }
        const queue = yield* makeWith(watched, { socketId: "q", batchFrames: 2 })
        yield* queue.appendAll(frames(2))
        yield* queue.appendAll(frames(2, 3))
        yield* queue.appendAll(frames(1, 5))
        // Nothing whole is acked: the watermark alone, by set.
        yield* queue.ackUpTo(1)
        assert.strictEqual(groups.length, 0)
        yield* queue.ackUpTo(4)
        assert.deepStrictEqual(groups.map((writes) => writes.map((write) => [write.op, write.key])), [[
          ["set", metaKey("q")],
          ["delete", batchKey("q", 1, 2)],
          ["delete", batchKey("q", 3, 4)]
        ]])
        const [metaWrite] = groups[0]!
        assert.strictEqual(metaWrite?.op === "set" ? (metaWrite.value as { acked: number }).acked : undefined, 4)
        assert.strictEqual(deletes, 0)
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}batch:`), [batchKey("q", 5, 5)])
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((e) => e.seq), [5])
      }))

    it.effect("startAfter numbers a queue storage knows nothing of; a queue with a record keeps its own numbers", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const fresh = yield* makeWith(storage, { socketId: "late", startAfter: 1_000 })
        assert.deepStrictEqual(yield* fresh.appendAll(frames(2)), [1_001, 1_002])
        yield* fresh.ackUpTo(1_001)
        yield* fresh.close
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

    it.effect("a queue reopened after a crash numbers above every seq it may have issued", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const crashed = yield* makeWith(storage, { socketId: "q" })
        yield* crashed.appendAll(frames(3))
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.seq), [1, 2, 3])
        const next = yield* reopened.append("next")
        assert.isAbove(next, 3)
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.seq), [1, 2, 3, next])
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
        yield* a.close
        const reopened = yield* makeWith(storage, { socketId: "a:b/c" })
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.frame), frames(2, 2))
        assert.strictEqual(yield* reopened.headSeq, 3)
        assert.deepStrictEqual(yield* (yield* makeWith(storage, { socketId: "a" })).frameRange(1), [{ seq: 1, frame: "other" }])
      }))

    it.effect("repair on open: compaction leftovers go; legacy one-frame records are still read", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(2))
        yield* queue.appendAll(frames(2, 3))
        yield* queue.ackUpTo(1)
        // A crash mid-compaction of an ack to 2: the meta landed, the record 1-2 did not go.
        yield* storage.set(metaKey("q"), { version: 2, acked: 2, high: 4 })
        // A record of the layout before batches.
        yield* storage.set(frameKey("q", 5), { version: 1, frame: "legacy" })
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.strictEqual(yield* reopened.ackedSeq, 2)
        assert.strictEqual(yield* reopened.headSeq, 5)
        assert.deepStrictEqual(yield* reopened.frameRange(1), [
          { seq: 3, frame: frames(1, 3)[0]! },
          { seq: 4, frame: frames(1, 4)[0]! },
          { seq: 5, frame: "legacy" }
        ])
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}batch:`), [batchKey("q", 3, 4)])
        assert.strictEqual(yield* reopened.append("after"), 6)
        yield* reopened.ackUpTo(6)
        assert.deepStrictEqual(yield* storage.list(keyPrefix("q")), [metaKey("q")])
      }))

    it.effect("a lost record in the middle keeps the later frames and their seqs; reading across it is Corrupt naming its key", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(2))
        yield* queue.appendAll(frames(2, 3))
        yield* queue.appendAll(frames(2, 5))
        yield* storage.delete(batchKey("q", 3, 4))
        // A crash: no clean close, so the reopened queue numbers above its reservation.
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.isAtLeast(yield* reopened.headSeq, 6)
        const read = yield* reopened.readRange(1)
        assert.deepStrictEqual(read.entries.map((e) => e.seq), [1, 2])
        assert.strictEqual(read.damage?.error.reason._tag, "Corrupt")
        assert.strictEqual(read.damage?.error.reason.key, batchKey("q", 3, 4))
        assert.strictEqual(read.damage?.through, 4)
        assert.deepStrictEqual((yield* reopened.frameRange(5)).map((e) => e.seq), [5, 6])
        const error = yield* Effect.flip(reopened.frameRange(1))
        assert.strictEqual(error._tag === "StorageError" && error.reason.key, batchKey("q", 3, 4))
        // Later records survive the reopen, and no seq is issued twice.
        assert.include(yield* storage.list(`${keyPrefix("q")}batch:`), batchKey("q", 5, 6))
        assert.isAbove(yield* reopened.append("next"), 6)
      }))

    it.live("a group's records are written beside its reservation, not after it; a record that landed alone is numbered above after a crash", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        // The host dies while the reservation is still being written.
        const metaHangs: StorageAdapterShape = {
          ...storage,
          set: (key, value) => key === metaKey("q") ? Effect.never : storage.set(key, value)
        }
        const queue = yield* makeWith(metaHangs, { socketId: "q" })
        const append = yield* Effect.forkChild(queue.appendAll(frames(3)))
        // The record lands while the mark is in flight; the append is not durable yet.
        for (let i = 0; i < 200 && !(yield* storage.list(`${keyPrefix("q")}batch:`)).includes(batchKey("q", 1, 3)); i++) {
          yield* Effect.sleep("5 millis")
        }
        assert.include(yield* storage.list(`${keyPrefix("q")}batch:`), batchKey("q", 1, 3))
        assert.isUndefined(append.pollUnsafe())
        yield* Fiber.interrupt(append)
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.seq), [1, 2, 3])
        assert.isAbove(yield* reopened.append("next"), 3)
      }))

    it.effect("reopened on intact records (the first never closed), numbering continues at head + 1, as noetic's does", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const first = yield* makeWith(storage, { socketId: "q" })
        yield* first.append("a")
        yield* first.append("b")
        const second = yield* makeWith(storage, { socketId: "q" })
        assert.strictEqual(yield* second.headSeq, 2)
        assert.strictEqual(yield* second.append("c"), 3)
        assert.deepStrictEqual((yield* second.frameRange(1)).map((e) => e.frame), ["a", "b", "c"])
        // Another process (a storage object of its own over the same records): the same.
        const restarted = yield* makeWith({ ...storage }, { socketId: "q" })
        assert.strictEqual(yield* restarted.append("d"), 4)
      }))

    it.effect("a damaged last record: numbering goes on above the reserved high-water mark", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(3))
        yield* queue.appendAll(frames(3, 4))
        yield* storage.set(batchKey("q", 4, 6), { version: 2, frames: "torn" })
        // Another process, which knows nothing of what the first committed.
        const reopened = yield* makeWith({ ...storage }, { socketId: "q" })
        assert.isAbove(yield* reopened.append("next"), 65_536)
      }))

    it.effect("a lost last record is not numbered again: the high-water mark outlives it", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(3))
        yield* queue.appendAll(frames(3, 4))
        yield* storage.delete(batchKey("q", 4, 6))
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.isAtLeast(yield* reopened.headSeq, 6)
        assert.isAbove(yield* reopened.append("next"), 6)
      }))

    it.effect("a damaged record is Corrupt naming its key, and the frames before and after it stay readable", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q", cachedFrames: 0 })
        yield* queue.appendAll(frames(2))
        yield* queue.appendAll(frames(2, 3))
        yield* queue.appendAll(frames(2, 5))
        yield* storage.set(batchKey("q", 3, 4), { version: 2, frames: "torn" })
        const read = yield* queue.readRange(1, { limit: 10 })
        assert.deepStrictEqual(read.entries.map((e) => e.seq), [1, 2])
        assert.strictEqual(read.damage?.error.reason.key, batchKey("q", 3, 4))
        const after = yield* queue.readRange(read.damage!.through + 1)
        assert.deepStrictEqual(after.entries.map((e) => e.seq), [5, 6])
        assert.isUndefined(after.damage)
        // Acking past it compacts it like any other record.
        yield* queue.ackUpTo(4)
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((e) => e.seq), [5, 6])
      }))

    it.effect("frames offered as JSON are stored as JSON values where the storage takes JSON text, and read back as the same texts", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const texts = [
          JSON.stringify({ type: "item", item: { n: 1, s: "a quote \" a backslash \\ a line break \n \u2028 \ud83d\ude00 \ud800" } }),
          JSON.stringify("a string"),
          JSON.stringify(-0.5e-7),
          JSON.stringify([1, { a: null, __proto__: { b: 2 } }, 1e21])
        ]
        const queue = yield* makeWith(storage, { socketId: "j" })
        yield* queue.appendAll(texts, { json: true })
        const stored = yield* storage.get(batchKey("j", 1, 4))
        const record = stored._tag === "Some" ? stored.value as { version: number; frames: ReadonlyArray<unknown> } : undefined
        if (storage.takesJsonText === true) {
          assert.strictEqual(record?.version, 3)
          assert.deepStrictEqual(record?.frames, texts.map((text) => JSON.parse(text)))
        } else {
          assert.strictEqual(record?.version, 2)
        }
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((e) => e.frame), texts)
        const reopened = yield* makeWith(storage, { socketId: "j", cachedFrames: 0 })
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.frame), texts)
      }))

    it.effect("frames not offered as JSON, alone or in a batch with JSON ones, are stored as strings", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "s" })
        // Not JSON at all: a string record is the only way to keep it.
        yield* queue.appendAll(["not json {", "{\"n\": 1}"])
        // Offered together, so both go in one batch record.
        yield* Effect.all([queue.appendAll(["{\"n\":2}"], { json: true }), queue.appendAll(["plain text"])], {
          concurrency: "unbounded"
        })
        for (const key of (yield* storage.list(keyPrefix("s"))).filter((key) => key.includes(":batch:"))) {
          const stored = yield* storage.get(key)
          assert.strictEqual(stored._tag === "Some" ? (stored.value as { version: number }).version : undefined, 2)
        }
        const reopened = yield* makeWith(storage, { socketId: "s", cachedFrames: 0 })
        assert.deepStrictEqual((yield* reopened.frameRange(1)).map((e) => e.frame), ["not json {", "{\"n\": 1}", "{\"n\":2}", "plain text"])
      }))

    it.effect("a damaged JSON-value record is Corrupt naming its key", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "d", cachedFrames: 0 })
        yield* queue.appendAll(frames(2), { json: true })
        yield* queue.appendAll(frames(2, 3), { json: true })
        yield* storage.set(batchKey("d", 3, 4), { version: 3, first: 3, frames: "torn", prev: [1, 2] })
        const read = yield* queue.readRange(1, { limit: 10 })
        assert.deepStrictEqual(read.entries.map((e) => e.frame), frames(2))
        assert.strictEqual(read.damage?.error.reason.key, batchKey("d", 3, 4))
      }))

    it.effect("NaN, fractions and negatives are rejected with a typed error, not read as empty", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "q" })
        yield* queue.appendAll(frames(3))
        for (const bad of [NaN, 1.5, -1, Infinity]) {
          assert.strictEqual((yield* Effect.flip(queue.frameRange(bad)))._tag, "InvalidQueueInput")
          assert.strictEqual((yield* Effect.flip(queue.ackUpTo(bad)))._tag, "InvalidQueueInput")
        }
        assert.strictEqual((yield* Effect.flip(queue.frameRange(1, { limit: NaN })))._tag, "InvalidQueueInput")
        assert.strictEqual((yield* Effect.flip(queue.frameRange(1, { limit: 0 })))._tag, "InvalidQueueInput")
        assert.strictEqual(yield* queue.ackedSeq, 0)
        assert.strictEqual((yield* queue.frameRange(1)).length, 3)
      }))

    it.effect("a frame that is not a string fails append InvalidQueueInput, numbers nothing, and the queue goes on", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "bad-frame" })
        yield* queue.append("first")
        for (const bad of [1, null, { a: 1 }, [1], undefined]) {
          const error = yield* Effect.flip(queue.append(bad as never))
          assert.strictEqual(error._tag, "InvalidQueueInput")
        }
        assert.strictEqual((yield* Effect.flip(queue.appendAll(["ok", 2] as never)))._tag, "InvalidQueueInput")
        assert.strictEqual(yield* queue.append("second"), 2)
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((e) => e.frame), ["first", "second"])
      }))

    it.effect("concurrent appends share one storage write per batch; each batch key is written once", () =>
      Effect.gen(function*() {
        const { calls, counted } = counting(yield* makeStorage)
        const written: Array<string> = []
        const recording: StorageAdapterShape = { ...counted, set: (key, value) => (written.push(key), counted.set(key, value)) }
        const queue = yield* makeWith(recording, { socketId: "q" })
        yield* queue.append("warm-up")
        calls.set = 0
        written.length = 0
        const seqs = yield* Effect.forEach(frames(200), queue.append, { concurrency: "unbounded" })
        assert.deepStrictEqual([...seqs].sort((a, b) => a - b), Array.from({ length: 200 }, (_, i) => i + 2))
        // 200 appends, far fewer writes: they were grouped.
        assert.isAtMost(calls.set, 3)
        assert.strictEqual(new Set(written).size, written.length)
      }))

    it.effect("a producer ready when a write settles offers its frames before the next write takes them", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        // A storage that commits a turn after the write is asked for, as SQLite's group
        // commit does, and nothing runs meanwhile but what was ready.
        const written: Array<number> = []
        const turnLater: StorageAdapterShape = {
          ...storage,
          set: (key, value) =>
            Effect.andThen(Effect.yieldNow, Effect.suspend(() => {
              const batch = value as { frames?: ReadonlyArray<string> }
              if (batch.frames !== undefined) written.push(batch.frames.length)
              return storage.set(key, value)
            }))
        }
        const queue = yield* makeWith(turnLater, { socketId: "q" })
        yield* queue.append("warm-up")
        written.length = 0
        // A producer offering 100 frames a turn, 3,000 in all.
        for (let turn = 0; turn < 30; turn++) {
          for (const frame of frames(100, turn * 100)) {
            if (queue.offerUnsafe(frame) === undefined) yield* queue.offerAll([frame])
          }
          yield* Effect.yieldNow
        }
        yield* queue.awaitOffered
        assert.strictEqual(written.reduce((sum, n) => sum + n, 0), 3_000)
        // Each write takes the frames of the turn it waited and of the turn after it.
        assert.isAtMost(written.length, 17)
      }))

    it.effect("a batch of more than ~96K characters is cut into chained records; a lost one is Corrupt, a failed one fails the batch whole", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        // 40,000 characters each: two frames to a record.
        const big = Array.from({ length: 5 }, (_, i) => String(i + 1).repeat(40_000))
        assert.deepStrictEqual(yield* queue.appendAll(big), [1, 2, 3, 4, 5])
        const batchPrefix = `${keyPrefix("q")}batch:`
        assert.deepStrictEqual(yield* storage.list(batchPrefix), [batchKey("q", 1, 2), batchKey("q", 3, 4), batchKey("q", 5, 5)])
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.deepStrictEqual(yield* reopened.frameRange(1), big.map((frame, i) => ({ seq: i + 1, frame })))
        // The records name each other: one lost from the middle is reported by name.
        yield* storage.delete(batchKey("q", 3, 4))
        const damaged = yield* makeWith(storage, { socketId: "q" })
        const read = yield* damaged.readRange(1)
        assert.deepStrictEqual(read.entries.map((e) => e.seq), [1, 2])
        assert.strictEqual(read.damage?.error.reason.key, batchKey("q", 3, 4))

        // One record of a batch failing fails the batch, and none of its records stays.
        const other = yield* makeStorage
        const failing: StorageAdapterShape = make({
          get: other.get,
          set: (key, value) =>
            key === batchKey("f", 3, 4)
              ? Effect.fail(new StorageErrorClass({ operation: "set", reason: new Io({ key, message: "disk full", cause: null }) }))
              : other.set(key, value),
          delete: other.delete,
          list: other.list,
          getMany: other.getMany
        })
        const fq = yield* makeWith(failing, { socketId: "f" })
        const error = yield* Effect.flip(fq.appendAll(big))
        assert.strictEqual(error._tag === "StorageError" && error.reason._tag, "Io")
        assert.deepStrictEqual(yield* other.list(`${keyPrefix("f")}batch:`), [])
        const next = yield* fq.append("after")
        assert.isAbove(next, 5)
        assert.deepStrictEqual((yield* fq.frameRange(1)).map((e) => e.frame), ["after"])
      }))

    it.effect("a small cache serves the newest frames and storage the rest: every range reads the same frames", () =>
      Effect.gen(function*() {
        for (const cachedFrames of [1, 3, 5, 8]) {
          const queue = yield* makeWith(yield* makeStorage, { socketId: "q", cachedFrames })
          const all: Array<string> = []
          // Batches of 1, 4, 2, 6 and 3 frames, and an ack part-way through a batch.
          for (const size of [1, 4, 2, 6, 3]) {
            const batch = frames(size, all.length + 1)
            yield* queue.appendAll(batch)
            all.push(...batch)
          }
          yield* queue.ackUpTo(4)
          for (let from = 1; from <= all.length + 1; from++) {
            for (const limit of [1, 2, 7, undefined]) {
              const read = yield* queue.frameRange(from, { limit })
              const start = Math.max(from, 5)
              const end = limit === undefined ? all.length : Math.min(all.length, start + limit - 1)
              const expected = Array.from({ length: Math.max(0, end - start + 1) }, (_, i) => ({ seq: start + i, frame: all[start + i - 1]! }))
              assert.deepStrictEqual(read, expected, `cachedFrames ${cachedFrames}, from ${from}, limit ${limit}`)
            }
          }
        }
      }))

    it.live("batches that pile up behind a slow write go in the next writes two at a time, in records of batchFrames", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const gate = yield* Deferred.make<void>()
        let inFlight = 0
        let mostInFlight = 0
        const slow: StorageAdapterShape = make({
          get: storage.get,
          set: (key, value) =>
            Effect.suspend(() => {
              inFlight++
              mostInFlight = Math.max(mostInFlight, inFlight)
              return Deferred.await(gate).pipe(
                Effect.andThen(Effect.sleep("1 millis")),
                Effect.andThen(storage.set(key, value)),
                Effect.ensuring(Effect.sync(() => void inFlight--))
              )
            }),
          delete: storage.delete,
          list: storage.list,
          getMany: storage.getMany
        })
        const queue = yield* makeWith(slow, { socketId: "q", batchFrames: 2 })
        const first = yield* queue.offerAll(["a"])
        for (let i = 0; i < 5; i++) yield* Effect.yieldNow
        // Three batches of two pile up while the first write waits.
        const rest = yield* queue.offerAll(frames(6, 2))
        assert.deepStrictEqual(rest.seqs, [2, 3, 4, 5, 6, 7])
        yield* Deferred.succeed(gate, undefined)
        yield* first.durable
        yield* rest.durable
        // Two batches a write, their records written at once: 2-5 together, then 6-7.
        assert.strictEqual(mostInFlight, 2)
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}batch:`), [
          batchKey("q", 1, 1),
          batchKey("q", 2, 3),
          batchKey("q", 4, 5),
          batchKey("q", 6, 7)
        ])
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((e) => e.frame), ["a", ...frames(6, 2)])
      }))

    it.live("a record may run across two batches of one write; every frame reads back at its seq", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const gate = yield* Deferred.make<void>()
        const gated = gatedWrites(storage, gate)
        const queue = yield* makeWith(gated, { socketId: "q", batchFrames: 3, cachedFrames: 0 })
        const first = yield* queue.offerAll(["a"])
        for (let i = 0; i < 5; i++) yield* Effect.yieldNow
        // Two batches of three 40,000-character frames: records of two frames, by size.
        const big = Array.from({ length: 6 }, (_, i) => String.fromCharCode(98 + i).repeat(40_000))
        const rest = yield* queue.offerAll(big)
        yield* Deferred.succeed(gate, undefined)
        yield* first.durable
        yield* rest.durable
        assert.deepStrictEqual(yield* storage.list(`${keyPrefix("q")}batch:`), [
          batchKey("q", 1, 1),
          batchKey("q", 2, 3),
          batchKey("q", 4, 5),
          batchKey("q", 6, 7)
        ])
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.deepStrictEqual(yield* reopened.frameRange(1), ["a", ...big].map((frame, i) => ({ seq: i + 1, frame })))
      }))

    it.live("the window holds a producer back until an ack makes room", () =>
      Effect.gen(function*() {
        const queue = yield* makeWith(yield* makeStorage, { socketId: "q", windowFrames: 10 })
        yield* queue.appendAll(frames(10))
        const blocked = yield* Effect.forkChild(queue.offerAll(["more"]))
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
        assert.isUndefined(blocked.pollUnsafe())
        assert.deepStrictEqual(yield* queue.windowUsage, { frames: 10, bytes: frames(10).join("").length })
        yield* queue.ackUpTo(5)
        const offered = yield* Fiber.join(blocked)
        assert.deepStrictEqual(offered.seqs, [11])
        yield* offered.durable
        assert.strictEqual((yield* queue.windowUsage).frames, 6)
      }))

    it.live("offerUnsafe numbers a frame only while the writer runs and the window has room; awaitOffered waits for it", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const gate = yield* Deferred.make<void>()
        const gated = gatedWrites(storage, gate)
        const queue = yield* makeWith(gated, { socketId: "q", windowFrames: 3 })
        // No writer running: nothing is numbered, the caller goes through offerAll.
        assert.isUndefined(queue.offerUnsafe("a"))
        assert.deepStrictEqual(yield* queue.windowUsage, { frames: 0, bytes: 0 })
        const first = yield* queue.offerAll(["a"])
        assert.deepStrictEqual(first.seqs, [1])
        assert.strictEqual(queue.offerUnsafe("b"), 2)
        assert.strictEqual(queue.offerUnsafe("c"), 3)
        // The window is full.
        assert.isUndefined(queue.offerUnsafe("d"))
        const waiting = yield* Effect.forkChild(queue.awaitOffered)
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
        assert.isUndefined(waiting.pollUnsafe())
        assert.strictEqual(yield* queue.headSeq, 0)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(waiting)
        assert.strictEqual(yield* queue.headSeq, 3)
        assert.deepStrictEqual((yield* queue.frameRange(1)).map((entry) => entry.frame), ["a", "b", "c"])
      }))

    it.effect("clear acks everything but never resets numbering; size counts unacked frames", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const queue = yield* makeWith(storage, { socketId: "q" })
        yield* queue.appendAll(frames(4))
        yield* queue.ackUpTo(1)
        assert.strictEqual(yield* queue.size, 3)
        yield* queue.clear
        assert.strictEqual(yield* queue.size, 0)
        assert.strictEqual(yield* queue.append("x"), 5)
        yield* queue.close
        assert.strictEqual(yield* (yield* makeWith(storage, { socketId: "q" })).append("y"), 6)
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

    it.effect("a range over more records than the decoded-record cache holds reads every frame, after the newest were read alone", () =>
      Effect.gen(function*() {
        const storage = yield* makeStorage
        const writer = yield* makeWith(storage, { socketId: "q" })
        // One record per frame: more records than a queue keeps decoded.
        for (const frame of frames(11)) yield* writer.append(frame)
        // A restarted server: nothing cached, so every read goes to storage. A client
        // resuming at 8 reads (and keeps decoded) the newest records first; a read of
        // the whole range then decodes older ones, which pushes those out mid-read.
        const reopened = yield* makeWith(storage, { socketId: "q" })
        assert.deepStrictEqual((yield* reopened.frameRange(8)).map((e) => e.seq), [8, 9, 10, 11])
        assert.deepStrictEqual(yield* reopened.frameRange(1), frames(11).map((frame, i) => ({ seq: i + 1, frame })))
        // Two readers at once (the server's sender and its producer) read the same.
        const both = yield* Effect.all([reopened.frameRange(1), reopened.frameRange(5)], { concurrency: "unbounded" })
        assert.deepStrictEqual(both[0], frames(11).map((frame, i) => ({ seq: i + 1, frame })))
        assert.deepStrictEqual(both[1], frames(7, 5).map((frame, i) => ({ seq: i + 5, frame })))
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
