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
