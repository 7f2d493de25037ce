/**
 * Catch-up reads of the streams service (docs/http-streams.md#reading): a read returns
 * as many chunks as its byte limit holds, whatever their count; chunks read or appended
 * are cached, and the cache never shows one process's stale view to another (a second
 * service on the same storage stands for another process); forks read their source's
 * chunks across the boundary; all of it on memory and on SQLite (whose range read
 * serves the chunk records).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Engine from "../../src/internal/streams/engine.ts"
import * as SqliteStorage from "../../src/layers/SqliteStorage.ts"
import type { DurableStreamsOptions, ReadResult } from "../../src/services/DurableStreams.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const storages: ReadonlyArray<readonly [string, Effect.Effect<StorageAdapterShape, unknown, import("effect/Scope").Scope>]> = [
  ["memory", makeMemory],
  ["sqlite", Effect.suspend(() => SqliteStorage.make({ path: Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "stream-reads-")), "s.db") }))]
]

const octets = "application/octet-stream"
const bytes = (text: string) => new TextEncoder().encode(text)
const textOf = (result: ReadResult) => new TextDecoder().decode(result.bytes)

/** Every read from `offset` to the tail, joined, with how many reads it took. */
const readAll = (streams: Effect.Success<ReturnType<typeof Engine.make>>, path: string, offset = "-1") =>
  Effect.gen(function*() {
    let text = ""
    const messages: Array<string> = []
    let reads = 0
    let at = offset
    for (;;) {
      const result = yield* streams.read(path, at)
      reads++
      text += textOf(result)
      messages.push(...result.messages)
      at = result.nextOffset
      if (result.upToDate) return { text, messages, reads, next: at }
    }
  })

const service = (storage: StorageAdapterShape, options: DurableStreamsOptions = {}) => Engine.make(storage, options)

for (const [name, open] of storages) {
  describe(`stream reads on ${name}`, () => {
  it.effect("a read returns as many chunks as its byte limit holds, however many; the next reads continue with no gap", () =>
    Effect.scoped(Effect.gen(function*() {
      const storage = yield* open
      const streams = yield* service(storage)
      yield* streams.create({ path: "/many", contentType: octets })
      let expected = ""
      for (let i = 0; i < 1500; i++) {
        const piece = `${i % 10}`.repeat(1 + (i % 3))
        expected += piece
        yield* streams.append({ path: "/many", contentType: octets, body: bytes(piece) })
      }
      const whole = yield* readAll(streams, "/many")
      assert.strictEqual(whole.text, expected)
      assert.strictEqual(whole.reads, 1)
      // A fresh service (another process) reads it cold from storage, in pages of at most 700 bytes.
      const paged = yield* readAll(yield* service(storage, { maxReadBytes: 700 }), "/many")
      assert.strictEqual(paged.text, expected)
      assert.strictEqual(paged.reads, Math.ceil(expected.length / 700))
      assert.strictEqual(paged.next, whole.next)
      // From an offset in the middle.
      const middle = yield* streams.read("/many", "-1")
      const cold = yield* service(storage, { maxReadBytes: 1000 })
      const first = yield* cold.read("/many", "-1")
      const rest = yield* readAll(cold, "/many", first.nextOffset)
      assert.strictEqual(textOf(first) + rest.text, textOf(middle))
    })))

  it.effect("another process's reads see every append and a stream created again at a path, never a stale chunk", () =>
    Effect.scoped(Effect.gen(function*() {
      const storage = yield* open
      const writer = yield* service(storage)
      const reader = yield* service(storage, { cacheBytes: 4096 })
      yield* writer.create({ path: "/s", contentType: "application/json" })
      const written: Array<string> = []
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 40; i++) {
          const message = JSON.stringify({ round, i, pad: "p".repeat(i) })
          written.push(message)
          yield* writer.append({ path: "/s", contentType: "application/json", body: bytes(`[${message}]`) })
        }
        assert.deepStrictEqual((yield* readAll(reader, "/s")).messages, written)
      }
      yield* writer.remove("/s")
      yield* writer.create({ path: "/s", contentType: "application/json" })
      yield* writer.append({ path: "/s", contentType: "application/json", body: bytes(`["again",1]`) })
      assert.deepStrictEqual((yield* readAll(reader, "/s")).messages, [`"again"`, "1"])
      assert.deepStrictEqual((yield* readAll(writer, "/s")).messages, [`"again"`, "1"])
    })))

  it.effect("a fork reads its source's chunks and its own across the boundary, cold and warm", () =>
    Effect.scoped(Effect.gen(function*() {
      const storage = yield* open
      const streams = yield* service(storage, { cacheBytes: 0 })
      yield* streams.create({ path: "/src", contentType: octets })
      for (let i = 0; i < 30; i++) yield* streams.append({ path: "/src", contentType: octets, body: bytes(`s${i};`) })
      const at = yield* streams.read("/src", "-1")
      const cut = yield* service(storage, { maxReadBytes: 40 }).pipe(Effect.flatMap((paged) => paged.read("/src", "-1")))
      yield* streams.create({ path: "/fork", contentType: octets, forkedFrom: "/src", forkOffset: cut.nextOffset })
      for (let i = 0; i < 5; i++) yield* streams.append({ path: "/fork", contentType: octets, body: bytes(`f${i};`) })
      for (let i = 30; i < 35; i++) yield* streams.append({ path: "/src", contentType: octets, body: bytes(`s${i};`) })
      const expected = textOf(cut) + "f0;f1;f2;f3;f4;"
      assert.strictEqual((yield* readAll(streams, "/fork")).text, expected)
      const cached = yield* service(storage)
      assert.strictEqual((yield* readAll(cached, "/fork")).text, expected)
      assert.strictEqual((yield* readAll(cached, "/fork")).text, expected)
      assert.strictEqual((yield* readAll(cached, "/src")).text, textOf(at) + "s30;s31;s32;s33;s34;")
    })))
})
}
