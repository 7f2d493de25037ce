/**
 * Group commit of appends (docs/http-streams.md#the-write-path): appends to one stream
 * that arrive while a commit is under way are committed by one batch, which reads the
 * path record once, yet each append gets its own answer as if it had come alone: its
 * own next offset, its producer's sequence check, its refusal.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Option from "effect/Option"
import * as DurableStreams from "../../src/services/DurableStreams.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

/** Memory storage whose compare-and-set commits a little later (as a disk's fsync does), counting reads of path records. */
const slowCommits = Effect.map(makeMemory, (memory) => {
  const counts = { pathReads: 0 }
  const storage: StorageAdapterShape = {
    ...memory,
    get: (key) => {
      if (key.startsWith("durable-streams/p/")) counts.pathReads++
      return memory.get(key)
    },
    compareAndSet: (key, expected, next) =>
      Effect.andThen(Effect.sleep("2 millis"), memory.compareAndSet!(key, expected, next))
  }
  return { storage, counts }
})

const json = "application/json"
const body = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))

describe("stream appends", () => {
  it.live("concurrent appends are committed in batches, each with its own offset, producer check and refusal", () =>
    Effect.gen(function*() {
      const { storage, counts } = yield* slowCommits
      const streams = yield* DurableStreams.forStorage(storage)
      yield* streams.create({ path: "/s", contentType: json })
      const producer = (seq: number) => ({ producerId: "p", producerEpoch: "0", producerSeq: String(seq) })
      const inputs: Array<DurableStreams.AppendInput> = [
        ...Array.from({ length: 8 }, (_, seq) => ({ path: "/s", contentType: json, body: body({ seq }), ...producer(seq) })),
        // A retry of seq 3 is a duplicate, a gap is refused, another content type is refused.
        { path: "/s", contentType: json, body: body({ seq: 3 }), ...producer(3) },
        { path: "/s", contentType: json, body: body({ seq: 20 }), ...producer(20) },
        { path: "/s", contentType: "text/plain", body: body("text") },
        { path: "/s", contentType: json, body: body({ seq: 8 }), ...producer(8) }
      ]
      const before = counts.pathReads
      const results = yield* Effect.forEach(inputs, (input) => Effect.result(streams.append(input)), { concurrency: "unbounded" })
      const reads = counts.pathReads - before

      const offsets: Array<string> = []
      for (let i = 0; i < 8; i++) {
        const result = results[i]!
        assert.strictEqual(result._tag, "Success")
        if (result._tag !== "Success") return
        assert.strictEqual(result.success.outcome, "appended")
        assert.deepStrictEqual(result.success.producer, { epoch: 0, seq: i })
        offsets.push(result.success.nextOffset)
      }
      assert.deepStrictEqual([...offsets].sort(), offsets)
      assert.strictEqual(new Set(offsets).size, 8)
      const duplicate = results[8]!
      assert.strictEqual(duplicate._tag === "Success" && duplicate.success.outcome, "duplicate")
      const gap = results[9]!
      assert.strictEqual(gap._tag === "Failure" && gap.failure.reason, "SequenceGap")
      const wrongType = results[10]!
      assert.strictEqual(wrongType._tag === "Failure" && wrongType.failure.reason, "Conflict")
      const last = results[11]!
      assert.strictEqual(last._tag === "Success" && last.success.outcome, "appended")

      const read = yield* streams.read("/s", "-1")
      assert.deepStrictEqual(read.messages.map((text) => JSON.parse(text)), [...Array.from({ length: 9 }, (_, seq) => ({ seq }))])
      assert.strictEqual(read.nextOffset, last._tag === "Success" ? last.success.nextOffset : "")
      // One read of the path record per batch, not per append: the first append commits
      // alone, the eleven that arrived meanwhile in one batch.
      assert.isAtMost(reads, 3, `${reads} reads of the path record for ${inputs.length} appends`)
      assert.isTrue(Option.isSome(yield* storage.get("durable-streams/p//s")))
    }))
})

const text = "text/plain"
const bytes = (value: string) => new TextEncoder().encode(value)
const decode = (data: Uint8Array) => new TextDecoder().decode(data)

/** Memory storage with slow commits that counts the compare-and-sets of chunk keys. */
const countingCommits = Effect.map(slowCommits, ({ storage }) => {
  const commits = { chunks: 0 }
  const counted: StorageAdapterShape = {
    ...storage,
    compareAndSet: (key, expected, next) => {
      if (key.startsWith("durable-streams/c/")) commits.chunks++
      return storage.compareAndSet!(key, expected, next)
    }
  }
  return { storage: counted, commits }
})

/** Appends `bodies` concurrently after a first append of `first` (which commits alone, so the rest form one batch). */
const appendBatch = (
  streams: DurableStreams.DurableStreams["Service"],
  path: string,
  contentType: string,
  first: Uint8Array,
  bodies: ReadonlyArray<Uint8Array>
) =>
  Effect.gen(function*() {
    const inputs = [first, ...bodies].map((body) => ({ path, contentType, body }))
    const results = yield* Effect.forEach(inputs, (input) => streams.append(input), { concurrency: "unbounded" })
    return results.map((result) => result.nextOffset)
  })

describe("appends sharing a chunk", () => {
  it.live("a batch is one chunk; each append's offset resumes a read with exactly the appends after it", () =>
    Effect.gen(function*() {
      const { storage, commits } = yield* countingCommits
      const streams = yield* DurableStreams.forStorage(storage)
      yield* streams.create({ path: "/j", contentType: json })
      const values = Array.from({ length: 10 }, (_, n) => ({ n }))
      const offsets = yield* appendBatch(streams, "/j", json, body(values[0]), values.slice(1).map(body))
      assert.isAtMost(commits.chunks, 3, `${commits.chunks} chunk commits for ${values.length} appends`)
      assert.deepStrictEqual([...offsets].sort(), offsets)
      assert.strictEqual(new Set(offsets).size, offsets.length)
      const tail = yield* streams.head("/j")
      assert.strictEqual(offsets[offsets.length - 1], tail.nextOffset)
      for (let i = 0; i < offsets.length; i++) {
        const read = yield* streams.read("/j", offsets[i])
        assert.deepStrictEqual(read.messages.map((message) => JSON.parse(message)), values.slice(i + 1), `from ${offsets[i]}`)
        assert.strictEqual(read.nextOffset, tail.nextOffset)
      }
      // A read from inside a chunk continues into the chunks after it.
      const more = yield* streams.append({ path: "/j", contentType: json, body: body([{ n: 10 }, { n: 11 }]) })
      const read = yield* streams.read("/j", offsets[3])
      assert.deepStrictEqual(read.messages.map((message) => JSON.parse(message)), [...values.slice(4), { n: 10 }, { n: 11 }])
      assert.strictEqual(read.nextOffset, more.nextOffset)

      const { storage: binaryStorage } = yield* countingCommits
      const binary = yield* DurableStreams.forStorage(binaryStorage)
      yield* binary.create({ path: "/b", contentType: text })
      const parts = ["first", "aa", "bbb", "cccc"]
      const at = yield* appendBatch(binary, "/b", text, bytes(parts[0]!), parts.slice(1).map(bytes))
      for (let i = 0; i < at.length; i++) {
        assert.strictEqual(decode((yield* binary.read("/b", at[i])).bytes), parts.slice(i + 1).join(""), `from ${at[i]}`)
      }
    }))

  it.live("a fork at a position inside a chunk inherits the appends before it; a sub-offset counts within the next append", () =>
    Effect.gen(function*() {
      const { storage } = yield* countingCommits
      const streams = yield* DurableStreams.forStorage(storage)
      yield* streams.create({ path: "/src", contentType: text })
      const at = yield* appendBatch(streams, "/src", text, bytes("first"), ["aa", "bbb", "cccc"].map(bytes))
      // "aa", "bbb" and "cccc" share a chunk: the first two offsets are inside it.
      assert.strictEqual(at[1]!.split("_")[0], at[2]!.split("_")[0])
      assert.notStrictEqual(at[2]!.split("_")[0], at[3]!.split("_")[0])
      const readAll = (path: string) => Effect.map(streams.read(path, "-1"), (read) => decode(read.bytes))
      yield* streams.create({ path: "/f1", forkedFrom: "/src", forkOffset: at[1] })
      assert.strictEqual(yield* readAll("/f1"), "firstaa")
      yield* streams.append({ path: "/f1", contentType: text, body: bytes("X") })
      assert.strictEqual(yield* readAll("/f1"), "firstaaX")
      // Idempotent re-creation with the same inner offset.
      assert.isFalse((yield* streams.create({ path: "/f1", forkedFrom: "/src", forkOffset: at[1], contentType: text })).created)
      yield* streams.create({ path: "/f2", forkedFrom: "/src", forkOffset: at[1], forkSubOffset: "3" })
      assert.strictEqual(yield* readAll("/f2"), "firstaabbb")
      const over = yield* Effect.flip(streams.create({ path: "/f3", forkedFrom: "/src", forkOffset: at[1], forkSubOffset: "4" }))
      assert.strictEqual(over.reason, "BadRequest")
      yield* streams.create({ path: "/f4", forkedFrom: "/src", forkOffset: at[2], forkSubOffset: "2" })
      assert.strictEqual(yield* readAll("/f4"), "firstaabbbcc")

      yield* streams.create({ path: "/jsrc", contentType: json })
      const jat = yield* appendBatch(streams, "/jsrc", json, body({ n: 0 }), [body([{ n: 1 }, { n: 2 }]), body({ n: 3 }), body({ n: 4 })])
      yield* streams.create({ path: "/jf", forkedFrom: "/jsrc", forkOffset: jat[1], forkSubOffset: "1" })
      const forked = yield* streams.read("/jf", "-1")
      assert.deepStrictEqual(forked.messages.map((message) => JSON.parse(message)), [{ n: 0 }, { n: 1 }, { n: 2 }, { n: 3 }])
      const past = yield* Effect.flip(streams.create({ path: "/jf2", forkedFrom: "/jsrc", forkOffset: jat[1], forkSubOffset: "2" }))
      assert.strictEqual(past.reason, "BadRequest")
    }))

  it.live("an offset inside a chunk that no append was answered with is refused", () =>
    Effect.gen(function*() {
      const { storage } = yield* countingCommits
      const streams = yield* DurableStreams.forStorage(storage)
      yield* streams.create({ path: "/src", contentType: text })
      const at = yield* appendBatch(streams, "/src", text, bytes("first"), ["aa", "bbb", "cccc"].map(bytes))
      const [index] = at[1]!.split("_")
      for (const bytesAt of [4, 6, 8]) {
        const offset = `${index}_${String(bytesAt).padStart(16, "0")}`
        assert.strictEqual((yield* Effect.flip(streams.read("/src", offset))).reason, "BadRequest", offset)
        const fork = yield* Effect.flip(streams.create({ path: `/f${bytesAt}`, forkedFrom: "/src", forkOffset: offset }))
        assert.strictEqual(fork.reason, "BadRequest", offset)
      }
    }))

  it.live("a close without data takes a chunk of its own: every answer names its own position", () =>
    Effect.gen(function*() {
      const { storage } = yield* countingCommits
      const streams = yield* DurableStreams.forStorage(storage)
      yield* streams.create({ path: "/c", contentType: text })
      const inputs: Array<DurableStreams.AppendInput> = [
        { path: "/c", contentType: text, body: bytes("one") },
        { path: "/c", contentType: text, body: bytes("two") },
        { path: "/c", contentType: text, body: bytes("three") },
        { path: "/c", body: new Uint8Array(0), close: true },
        { path: "/c", contentType: text, body: bytes("late") }
      ]
      const results = yield* Effect.forEach(inputs, (input) => Effect.result(streams.append(input)), { concurrency: "unbounded" })
      const offsets = results.slice(0, 4).map((result) => result._tag === "Success" ? result.success.nextOffset : "")
      assert.strictEqual(new Set(offsets).size, 4)
      assert.deepStrictEqual([...offsets].sort(), offsets)
      const late = results[4]!
      assert.isTrue(late._tag === "Failure" && late.failure.reason === "Conflict" && late.failure.nextOffset === offsets[3])
      const fromThree = yield* streams.read("/c", offsets[2])
      assert.strictEqual(fromThree.bytes.byteLength, 0)
      assert.isTrue(fromThree.closed)
      const fromTwo = yield* streams.read("/c", offsets[1])
      assert.strictEqual(decode(fromTwo.bytes), "three")
    }))

  it.live("a batch that loses its index to another writer is decided again at the new head", () =>
    Effect.gen(function*() {
      const memory = yield* makeMemory
      let raced = false
      const storage: StorageAdapterShape = {
        ...memory,
        compareAndSet: (key, expected, next) =>
          Effect.gen(function*() {
            yield* Effect.sleep("2 millis")
            const value = next as { readonly a: number }
            if (!raced && key.startsWith("durable-streams/c/") && key.endsWith("0000000000000001")) {
              // Another process commits chunk 1 first: "zzz" from producer q, seq 0.
              raced = true
              const rival = { a: value.a, z: 3, d: Buffer.from("zzz").toString("base64"), p: { q: [0, 0] } }
              assert.isTrue(yield* memory.compareAndSet!(key, expected, rival))
            }
            return yield* memory.compareAndSet!(key, expected, next)
          })
      }
      const streams = yield* DurableStreams.forStorage(storage)
      yield* streams.create({ path: "/r", contentType: text })
      const q = (seq: number) => ({ producerId: "q", producerEpoch: "0", producerSeq: String(seq) })
      const inputs: Array<DurableStreams.AppendInput> = [
        { path: "/r", contentType: text, body: bytes("first") },
        { path: "/r", contentType: text, body: bytes("zzz"), ...q(0) },
        { path: "/r", contentType: text, body: bytes("a") },
        { path: "/r", contentType: text, body: bytes("b"), ...q(1) }
      ]
      const results = yield* Effect.forEach(inputs, (input) => streams.append(input), { concurrency: "unbounded" })
      assert.isTrue(raced)
      assert.deepStrictEqual(results.map((result) => result.outcome), ["appended", "duplicate", "appended", "appended"])
      const read = yield* streams.read("/r", "-1")
      assert.strictEqual(decode(read.bytes), "firstzzzab")
      assert.strictEqual(decode((yield* streams.read("/r", results[2]!.nextOffset)).bytes), "b")
      assert.strictEqual(results[3]!.nextOffset, read.nextOffset)
    }))
})
