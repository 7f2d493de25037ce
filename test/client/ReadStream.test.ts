/**
 * `readStream` follows live data (docs/agent-streams.md#noetic-effectclient): a binary
 * stream over one SSE response (base64 data), resuming after the server ends each
 * response with no gap and no duplicate; a `text/*` stream by long-polls, byte for byte
 * (an SSE event cannot carry a carriage return); a binary stream from a server that
 * refuses SSE for it by long-polls.
 */
import { Effect, Exit, Layer, Scope } from "effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { afterEach, assert, describe, it } from "vitest"
import { readStream } from "../../src/client/index.ts"
import * as HttpServe from "../../src/http/HttpServe.ts"
import * as StreamRoutes from "../../src/http/StreamRoutes.ts"
import * as StreamServer from "../../src/http/StreamServer.ts"
import * as DurableStreams from "../../src/services/DurableStreams.ts"
import { layerMemory } from "../../src/services/StorageAdapter.ts"

const scopes: Array<Scope.Closeable> = []
afterEach(async () => {
  for (const scope of scopes.splice(0)) await Effect.runPromise(Scope.close(scope, Exit.void))
})

const start = async <E>(layer: Layer.Layer<HttpServe.ServedUrl, E, never>) => {
  const scope = Effect.runSync(Scope.make())
  scopes.push(scope)
  const context = await Effect.runPromise(Effect.orDie(Layer.buildWithScope(layer, scope)))
  return (context.mapUnsafe.get(HttpServe.ServedUrl.key) as HttpServe.ServedUrl["Service"]).url
}

/** A server whose SSE responses end after 30 ms (a reconnect every few appends). */
const shortSse = () => start(StreamServer.layerWithService({ sseMillis: 30, longPollMillis: 200 }).pipe(Layer.provide(layerMemory)))

/** A server that answers 400 to every SSE request, as one serving SSE for JSON and text only. */
const noSse = () =>
  start(
    HttpServe.layer(
      HttpRouter.use((router) =>
        Effect.flatMap(DurableStreams.DurableStreams, (streams) => {
          const inner = StreamRoutes.handler(streams, { longPollMillis: 200 })
          return router.add(
            "*",
            "/*",
            Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
              request.url.includes("live=sse")
                ? Effect.succeed(HttpServerResponse.text("SSE needs a JSON or text stream\n", { status: 400 }))
                : inner)
          )
        })
      )
    ).pipe(Layer.provide(DurableStreams.layer()), Layer.provide(layerMemory)) as Layer.Layer<HttpServe.ServedUrl, unknown, never>
  )

/** Every request URL `readStream` sends while `run` runs. */
const recording = async (run: () => Promise<void>): Promise<Array<string>> => {
  const seen: Array<string> = []
  const original = globalThis.fetch
  globalThis.fetch = ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    seen.push(String(input))
    return original(input, init)
  }) as typeof fetch
  try {
    await run()
  } finally {
    globalThis.fetch = original
  }
  return seen
}

const join = (chunks: ReadonlyArray<Uint8Array>) => {
  const out = new Uint8Array(chunks.reduce((n, chunk) => n + chunk.byteLength, 0))
  let at = 0
  for (const chunk of chunks) {
    out.set(chunk, at)
    at += chunk.byteLength
  }
  return out
}

/** Appends `pieces` one by one (a pause between), then closes the stream. */
const writeSlowly = async (url: string, contentType: string, pieces: ReadonlyArray<Uint8Array>) => {
  for (const piece of pieces) {
    const response = await fetch(url, { method: "POST", headers: { "content-type": contentType }, body: piece })
    if (response.status >= 300) throw new Error(`append: ${response.status}`)
    await new Promise((resolve) => setTimeout(resolve, 3))
  }
  await fetch(url, { method: "POST", headers: { "stream-closed": "true" } })
}

/** Every byte 0..255 in a different order per piece, so a gap or a repeat shows. */
const pieces = Array.from({ length: 60 }, (_, i) => Uint8Array.from({ length: 1 + (i % 7) * 5 }, (_, j) => (i * 31 + j * 7) % 256))

describe("readStream following live data", () => {
  it("a binary stream over SSE (base64), across the server ending each response: every byte once, in order", async () => {
    const base = await shortSse()
    const url = `${base}/bin`
    await fetch(url, { method: "PUT", headers: { "content-type": "application/octet-stream" } })
    const read: Array<Uint8Array> = []
    const requests = await recording(async () => {
      const writing = writeSlowly(url, "application/octet-stream", pieces)
      for await (const item of readStream(url)) read.push(item.data as Uint8Array)
      await writing
    })
    assert.deepStrictEqual(join(read), join(pieces))
    assert.isTrue(requests.some((request) => request.includes("live=sse")))
    assert.isFalse(requests.some((request) => request.includes("live=long-poll")))
  })

  it("a text stream by long-polls, carriage returns and all", async () => {
    const base = await shortSse()
    const url = `${base}/text`
    await fetch(url, { method: "PUT", headers: { "content-type": "text/plain" } })
    const texts = ["a\r\nb", "\rc\n", "é\r", "\r\n\r\n", "z"].map((text) => new TextEncoder().encode(text))
    const read: Array<Uint8Array> = []
    const requests = await recording(async () => {
      const writing = writeSlowly(url, "text/plain", texts)
      for await (const item of readStream(url)) read.push(item.data as Uint8Array)
      await writing
    })
    assert.deepStrictEqual(join(read), join(texts))
    assert.isFalse(requests.some((request) => request.includes("live=sse")))
  })

  it("a binary stream from a server that refuses SSE for it: long-polls, every byte once", async () => {
    const base = await noSse()
    const url = `${base}/bin`
    await fetch(url, { method: "PUT", headers: { "content-type": "application/octet-stream" } })
    const read: Array<Uint8Array> = []
    const requests = await recording(async () => {
      const writing = writeSlowly(url, "application/octet-stream", pieces.slice(0, 20))
      for await (const item of readStream(url)) read.push(item.data as Uint8Array)
      await writing
    })
    assert.deepStrictEqual(join(read), join(pieces.slice(0, 20)))
    assert.isTrue(requests.some((request) => request.includes("live=long-poll")))
  })

  it("refuses options it cannot honour before any request: a non-boolean live, a non-string offset, a bad backoff", async () => {
    const base = await shortSse()
    const url = `${base}/json`
    await fetch(url, { method: "PUT", headers: { "content-type": "application/json" } })
    const bad: Array<Record<string, unknown>> = [{ live: "sse" }, { live: "long-poll" }, { offset: 5 }, { maxBackoffMillis: -1 }, { maxBackoffMillis: Number.NaN }]
    for (const options of bad) {
      const requests = await recording(async () => {
        const refused = await readStream(url, options as never).next().then(() => undefined, (error: unknown) => error)
        assert.instanceOf(refused, TypeError, `readStream accepted ${JSON.stringify(options)}`)
      })
      assert.deepStrictEqual(requests, [])
    }
  })
})
