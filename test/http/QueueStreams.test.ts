/**
 * A socket's `DurableOutboundQueue` served read-only as a stream at `/queues/<id>`
 * (docs/agent-streams.md#watching-an-ipc-queue): catch-up reads in seq order with
 * offsets that are seqs, HEAD, long-poll and SSE that see frames appended while they
 * wait, compacted frames gone, writes refused 405, unknown and unlisted queues 404, and
 * the path left an ordinary stream path when queues are not served. On SQLite, with the
 * queue written by a real queue in the same process, as an IPC server's is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as HttpServe from "../../src/http/HttpServe.ts"
import * as StreamServer from "../../src/http/StreamServer.ts"
import * as SqliteStorage from "../../src/layers/SqliteStorage.ts"
import { createSqliteStorage, createStreamServer } from "../../src/promise/index.ts"
import type * as DurableStreams from "../../src/services/DurableStreams.ts"
import { JSON_FRAMES, makeWith as openQueue } from "../../src/services/DurableOutboundQueue.ts"
import { StorageAdapter, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import { roots, SUBPROCESS_DATABASE } from "../../src/NoeticHome.ts"
import { kill9, readSse, startServe } from "./streamHelpers.ts"

const freshPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-queue-streams-")), "q.db")

const serveOn = (storage: StorageAdapterShape, options: StreamServer.StreamServerOptions & DurableStreams.DurableStreamsOptions = {}) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const layer = StreamServer.layerWithService({ longPollMillis: 3_000, ...options }).pipe(
      Layer.provide(Layer.succeed(StorageAdapter, storage))
    )
    const context = yield* Layer.buildWithScope(layer, scope)
    return (context.mapUnsafe.get(HttpServe.ServedUrl.key) as HttpServe.ServedUrl["Service"]).url
  })

const call = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, body: await response.text() }
  })

const seqOffset = (seq: number) => String(seq).padStart(16, "0")

describe("queues served as streams", () => {
  it.live("catch-up reads give the frames in seq order from an offset that is a seq; writes are refused 405", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      const queue = yield* openQueue(storage, { socketId: "ipc/one" })
      yield* queue.appendAll(["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"], JSON_FRAMES)
      yield* queue.append("plain text")
      const base = yield* serveOn(storage, { queues: {} })
      const url = `${base}/queues/${encodeURIComponent("ipc/one")}`

      const all = yield* call(`${url}?offset=-1`)
      assert.strictEqual(all.status, 200)
      assert.strictEqual(all.headers.get("content-type"), "application/json")
      assert.deepStrictEqual(JSON.parse(all.body), [
        { seq: 1, frame: "{\"n\":1}" },
        { seq: 2, frame: "{\"n\":2}" },
        { seq: 3, frame: "{\"n\":3}" },
        { seq: 4, frame: "plain text" }
      ])
      assert.strictEqual(all.headers.get("stream-next-offset"), seqOffset(4))
      assert.strictEqual(all.headers.get("stream-up-to-date"), "true")
      assert.isNull(all.headers.get("stream-closed"))

      const after2 = yield* call(`${url}?offset=${seqOffset(2)}`)
      assert.deepStrictEqual(JSON.parse(after2.body).map((m: { seq: number }) => m.seq), [3, 4])
      const atTail = yield* call(`${url}?offset=${seqOffset(4)}`)
      assert.deepStrictEqual(JSON.parse(atTail.body), [])
      const head = yield* call(url, { method: "HEAD" })
      assert.strictEqual(head.status, 200)
      assert.strictEqual(head.headers.get("stream-next-offset"), seqOffset(4))

      assert.strictEqual((yield* call(`${url}?offset=${seqOffset(9)}`)).status, 400)
      assert.strictEqual((yield* call(`${url}?offset=0000000000000001_0000000000000000`)).status, 400)
      for (const method of ["PUT", "POST", "DELETE"]) {
        const refused = yield* call(url, { method, headers: { "content-type": "application/json" }, ...(method === "DELETE" ? {} : { body: "[1]" }) })
        assert.strictEqual(refused.status, 405, method)
        assert.strictEqual(refused.headers.get("allow"), "GET, HEAD, OPTIONS")
        assert.match(refused.body, /read-only/)
      }
      // Nothing was written: the queue holds what it held.
      assert.strictEqual(yield* queue.lastFrameSeq, 4)
      assert.deepStrictEqual(JSON.parse((yield* call(`${url}?offset=-1`)).body).length, 4)
      assert.strictEqual((yield* call(`${base}/queues/nope?offset=-1`)).status, 404)
      yield* queue.close
    }).pipe(Effect.scoped))

  it.live("acknowledged frames are gone: a read from the start begins after the watermark", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      const queue = yield* openQueue(storage, { socketId: "s", batchFrames: 2 })
      yield* queue.appendAll(["a", "b", "c", "d", "e"])
      yield* queue.ackUpTo(3)
      const base = yield* serveOn(storage, { queues: {} })
      const fromStart = yield* call(`${base}/queues/s?offset=-1`)
      assert.deepStrictEqual(JSON.parse(fromStart.body), [{ seq: 4, frame: "d" }, { seq: 5, frame: "e" }])
      const fromOld = yield* call(`${base}/queues/s?offset=${seqOffset(1)}`)
      assert.deepStrictEqual(JSON.parse(fromOld.body).map((m: { seq: number }) => m.seq), [4, 5])
      yield* queue.close
    }).pipe(Effect.scoped))

  it.live("long-poll and SSE see frames appended while they wait, in seq order, with id: the seq", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      const queue = yield* openQueue(storage, { socketId: "live" })
      yield* queue.append("first")
      const base = yield* serveOn(storage, { queues: { pollMillis: 50 } })
      const url = `${base}/queues/live`

      const waiting = Effect.runPromise(call(`${url}?offset=${seqOffset(1)}&live=long-poll`))
      yield* Effect.sleep("200 millis")
      yield* queue.append("second")
      const polled = yield* Effect.promise(() => waiting)
      assert.strictEqual(polled.status, 200)
      assert.deepStrictEqual(JSON.parse(polled.body), [{ seq: 2, frame: "second" }])
      assert.strictEqual(polled.headers.get("stream-next-offset"), seqOffset(2))

      const seen: Array<number> = []
      const ids: Array<string | undefined> = []
      const reading = readSse(`${url}?offset=-1&live=sse`, undefined, (event) => {
        if (event.event !== "data") return false
        for (const message of JSON.parse(event.data) as Array<{ seq: number }>) seen.push(message.seq)
        ids.push(event.id)
        return seen.length >= 6
      })
      for (let i = 3; i <= 6; i++) {
        yield* Effect.sleep("60 millis")
        yield* queue.append(`frame ${i}`)
      }
      assert.strictEqual(yield* Effect.promise(() => reading), "stopped")
      assert.deepStrictEqual(seen, [1, 2, 3, 4, 5, 6])
      assert.strictEqual(ids[ids.length - 1], seqOffset(6))

      // A browser's EventSource reconnects with Last-Event-ID: it gets what came after.
      yield* queue.append("seventh")
      const resumed: Array<number> = []
      yield* Effect.promise(() =>
        readSse(`${url}?offset=-1&live=sse`, seqOffset(6), (event) => {
          if (event.event === "data") for (const m of JSON.parse(event.data) as Array<{ seq: number }>) resumed.push(m.seq)
          return resumed.length >= 1
        })
      )
      assert.deepStrictEqual(resumed, [7])
      yield* queue.close
    }).pipe(Effect.scoped))

  it.live("only the listed queues are served; without `queues` the path is an ordinary stream path", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      const one = yield* openQueue(storage, { socketId: "one" })
      const two = yield* openQueue(storage, { socketId: "two" })
      yield* one.append("1")
      yield* two.append("2")
      const listed = yield* serveOn(storage, { queues: { socketIds: ["one"] } })
      assert.strictEqual((yield* call(`${listed}/queues/one?offset=-1`)).status, 200)
      assert.strictEqual((yield* call(`${listed}/queues/two?offset=-1`)).status, 404)
      const plain = yield* serveOn(storage)
      assert.strictEqual((yield* call(`${plain}/queues/one?offset=-1`)).status, 404)
      const created = yield* call(`${plain}/queues/one`, { method: "PUT", headers: { "content-type": "text/plain" } })
      assert.strictEqual(created.status, 201)
      yield* one.close
      yield* two.close
    }).pipe(Effect.scoped))

  it.live("createStreamServer serves queues from another storage when asked", () =>
    Effect.gen(function*() {
      const queuePath = freshPath()
      const queueStorage = yield* SqliteStorage.make({ path: queuePath })
      const queue = yield* openQueue(queueStorage, { socketId: "sock" })
      yield* queue.appendAll(["x", "y"])
      yield* queue.close
      const server = yield* Effect.promise(async () => {
        const streams = await createSqliteStorage({ path: freshPath() })
        const queues = await createSqliteStorage({ path: queuePath })
        return createStreamServer({ storage: streams, queues: { storage: queues } })
      })
      const read = yield* call(`${server.url}/queues/sock?offset=-1`)
      assert.deepStrictEqual(JSON.parse(read.body), [{ seq: 1, frame: "x" }, { seq: 2, frame: "y" }])
      yield* Effect.promise(() => server.close())
    }).pipe(Effect.scoped))
})

describe("noetic-effect serve --queues", () => {
  it.live("serves the home's IPC queues read-only beside its streams", () =>
    Effect.gen(function*() {
      const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-serve-queues-"))
      const root = roots(home).subprocess
      Fs.mkdirSync(root, { recursive: true })
      const storage = yield* SqliteStorage.make({ path: Path.join(root, SUBPROCESS_DATABASE) })
      const queue = yield* openQueue(storage, { socketId: "child-1" })
      yield* queue.appendAll(["hello", "world"])
      const serve = yield* Effect.acquireRelease(
        Effect.promise(() => startServe(["--home", home, "--port", "0", "--queues"])),
        (running) => Effect.promise(() => kill9(running))
      )
      const read = yield* call(`${serve.url}/queues/child-1?offset=-1`)
      assert.strictEqual(read.status, 200)
      assert.deepStrictEqual(JSON.parse(read.body), [{ seq: 1, frame: "hello" }, { seq: 2, frame: "world" }])
      const waiting = Effect.runPromise(call(`${serve.url}/queues/child-1?offset=${seqOffset(2)}&live=long-poll`))
      yield* Effect.sleep("300 millis")
      yield* queue.append("again")
      assert.deepStrictEqual(JSON.parse((yield* Effect.promise(() => waiting)).body), [{ seq: 3, frame: "again" }])
      assert.strictEqual((yield* call(`${serve.url}/queues/child-1`, { method: "POST", headers: { "content-type": "application/json" }, body: "[1]" })).status, 405)
      yield* queue.close
    }).pipe(Effect.scoped), 60_000)
})
