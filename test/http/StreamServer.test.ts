/**
 * The stream server's own promises beside the conformance suite: bad input is refused
 * with the protocol's status and a short reason and stores nothing, a body over the
 * limit is refused before it is read, `layerRouter` mounts into a host's router under a
 * prefix, SSE events carry `id:` and `Last-Event-ID` wins over the URL offset, and the
 * Promise API's configuration errors.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as HttpServe from "../../src/http/HttpServe.ts"
import * as StreamRoutes from "../../src/http/StreamRoutes.ts"
import * as StreamServer from "../../src/http/StreamServer.ts"
import { createInMemoryStorage, createStreamServer, isNoeticConfigError } from "../../src/promise/index.ts"
import * as DurableStreams from "../../src/services/DurableStreams.ts"
import { layerMemory } from "../../src/services/StorageAdapter.ts"
import { readSse } from "./streamHelpers.ts"

const serve = <A, E>(layer: Layer.Layer<A | HttpServe.ServedUrl, E, never>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const context = yield* Layer.buildWithScope(layer, scope)
    return (context.mapUnsafe.get(HttpServe.ServedUrl.key) as HttpServe.ServedUrl["Service"]).url
  })

const memoryServer = (options: StreamServer.StreamServerOptions = {}) =>
  serve(StreamServer.layerWithService(options).pipe(Layer.provide(layerMemory)))

const call = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, body: await response.text() }
  })

const text = { "content-type": "text/plain" }

describe("stream server", () => {
  it.live("refuses bad input with the protocol's status and a reason, and stores nothing", () =>
    Effect.gen(function*() {
      const base = yield* memoryServer()
      const url = `${base}/s`
      assert.strictEqual((yield* call(`${base}/nowhere`)).status, 404)
      assert.strictEqual((yield* call(url, { method: "PUT", headers: { ...text, "stream-ttl": "01" } })).status, 400)
      assert.strictEqual((yield* call(url, { method: "PUT", headers: text, body: "abc" })).status, 201)
      const malformed = yield* call(`${url}?offset=zz`)
      assert.strictEqual(malformed.status, 400)
      assert.match(malformed.body, /malformed offset/)
      assert.strictEqual((yield* call(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status, 409)
      assert.strictEqual((yield* call(url, { method: "POST", headers: text })).status, 400)
      const producer = (epoch: string, seq: string) => ({ ...text, "producer-id": "p", "producer-epoch": epoch, "producer-seq": seq })
      assert.strictEqual((yield* call(url, { method: "POST", headers: producer("1", "0"), body: "d" })).status, 200)
      const stale = yield* call(url, { method: "POST", headers: producer("0", "0"), body: "x" })
      assert.strictEqual(stale.status, 403)
      assert.strictEqual(stale.headers.get("producer-epoch"), "1")
      const gap = yield* call(url, { method: "POST", headers: producer("1", "5"), body: "x" })
      assert.strictEqual(gap.status, 409)
      assert.strictEqual(gap.headers.get("producer-expected-seq"), "1")
      assert.strictEqual((yield* call(url, { method: "POST", headers: { "stream-closed": "true" } })).status, 204)
      const closed = yield* call(url, { method: "POST", headers: text, body: "late" })
      assert.strictEqual(closed.status, 409)
      assert.strictEqual(closed.headers.get("stream-closed"), "true")
      // Only what was accepted is there.
      assert.strictEqual((yield* call(url)).body, "abcd")
    }))

  it.live("refuses a body over the limit before reading it, and stores nothing", () =>
    Effect.gen(function*() {
      const base = yield* memoryServer({ maxBodyBytes: 1024 })
      const url = `${base}/big`
      assert.strictEqual((yield* call(url, { method: "PUT", headers: text })).status, 201)
      const big = yield* call(url, { method: "POST", headers: text, body: "x".repeat(4096) })
      assert.strictEqual(big.status, 413)
      assert.strictEqual((yield* call(url)).body, "")
    }))

  it.live("layerRouter mounts the streams under a prefix of a host's router", () =>
    Effect.gen(function*() {
      const host = Layer.mergeAll(
        HttpRouter.add("GET", "/health", HttpServerResponse.text("ok")),
        StreamRoutes.layerRouter({ prefix: "/streams" })
      ).pipe(Layer.provide(DurableStreams.layer()), Layer.provide(layerMemory))
      const base = yield* serve(HttpServe.layer(host))
      assert.strictEqual((yield* call(`${base}/health`)).body, "ok")
      assert.strictEqual((yield* call(`${base}/streams/a/b`, { method: "PUT", headers: text, body: "hi" })).status, 201)
      assert.strictEqual((yield* call(`${base}/streams/a/b`)).body, "hi")
      // Forks name their source by its URL path, prefix included.
      const fork = yield* call(`${base}/streams/a/c`, { method: "PUT", headers: { "stream-forked-from": "/streams/a/b" } })
      assert.strictEqual(fork.status, 201)
      assert.strictEqual((yield* call(`${base}/streams/a/c`)).body, "hi")
    }))

  it.live("SSE events carry id: the next offset, and Last-Event-ID wins over the URL offset", () =>
    Effect.gen(function*() {
      const base = yield* memoryServer({ sseMillis: 2_000 })
      const url = `${base}/events`
      yield* call(url, { method: "PUT", headers: text, body: "one" })
      const first = yield* call(url)
      const afterOne = first.headers.get("stream-next-offset")!
      yield* call(url, { method: "POST", headers: text, body: "two" })
      const events = yield* Effect.promise(async () => {
        const seen: Array<{ event: string; data: string; id: string | undefined }> = []
        await readSse(`${url}?offset=-1&live=sse`, afterOne, (event) => {
          seen.push(event)
          return event.event === "control"
        })
        return seen
      })
      assert.deepStrictEqual(events.map((event) => [event.event, event.data]).slice(0, 1), [["data", "two"]])
      const control = JSON.parse(events[1]!.data)
      assert.strictEqual(events[1]!.id, control.streamNextOffset)
      assert.strictEqual(events[0]!.id, control.streamNextOffset)
    }))
})

describe("createStreamServer", () => {
  it("refuses a non-loopback host without a token, with a config error", async () => {
    const storage = createInMemoryStorage()
    try {
      await createStreamServer({ storage, host: "0.0.0.0" })
      assert.fail("it served")
    } catch (error) {
      assert.isTrue(isNoeticConfigError(error))
      assert.strictEqual((error as { code: string }).code, "STREAM_SERVER_TOKEN_REQUIRED")
    }
    const server = await createStreamServer({ storage })
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    await server.close()
  })

  it("refuses a missing storage with a config error, not a TypeError", async () => {
    for (const config of [undefined, {}, { storage: null }]) {
      const refused = await createStreamServer(config as never).then(
        async (server) => {
          await server.close()
          return undefined
        },
        (error: unknown) => error
      )
      assert.isTrue(isNoeticConfigError(refused), `createStreamServer(${JSON.stringify(config)}) gave ${String(refused)}`)
      assert.strictEqual((refused as { code: string }).code, "STREAM_STORAGE_UNSUPPORTED")
    }
  })

  it("refuses a long-poll wait that is not a positive number, rather than answer every long-poll at once or with a 500", async () => {
    const storage = createInMemoryStorage()
    for (const longPollMillis of [-1, 0, Number.NaN, Number.POSITIVE_INFINITY, "x" as unknown as number]) {
      const refused = await createStreamServer({ storage, longPollMillis }).then(
        async (server) => {
          await server.close()
          return undefined
        },
        (error: unknown) => error
      )
      assert.isTrue(isNoeticConfigError(refused), `longPollMillis ${String(longPollMillis)} was accepted`)
      assert.strictEqual((refused as { code: string }).code, "STREAM_SERVER_INVALID_OPTION")
      assert.include((refused as Error).message, "longPollMillis")
    }
    const server = await createStreamServer({ storage, longPollMillis: 50 })
    await fetch(`${server.url}/a`, { method: "PUT", headers: { "content-type": "text/plain" } })
    assert.strictEqual((await fetch(`${server.url}/a?offset=now&live=long-poll`)).status, 204)
    await server.close()
  })
})

