/**
 * `createStreamHandler`: the stream routes mounted in a host's own Node HTTP server
 * under a prefix, beside the host's own pages (docs/http-streams.md#in-your-own-server):
 * writes, catch-up and live reads under the prefix, the host's answers elsewhere, the
 * body limit and token, queues under the prefix, and a bad prefix refused.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import * as Http from "node:http"
import { createInMemoryStorage, createStreamHandler, isNoeticConfigError, type StreamHandler } from "../../src/promise/index.ts"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const host = async (streams: StreamHandler) => {
  const server = Http.createServer((request, response) => {
    if (streams.matches(request.url)) return streams.handle(request, response)
    response.end("the host's page\n")
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  cleanups.push(async () => {
    await streams.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`
}

describe("createStreamHandler", () => {
  it("serves the streams under its prefix in the host's server, and the host answers the rest", async () => {
    const storage = createInMemoryStorage()
    const streams = await createStreamHandler({ storage, prefix: "/streams/", longPollMillis: 2_000 })
    assert.strictEqual(streams.prefix, "/streams")
    assert.isTrue(streams.matches("/streams/a?offset=-1"))
    assert.isFalse(streams.matches("/streamsx/a"))
    const base = await host(streams)
    assert.strictEqual(await (await fetch(`${base}/`)).text(), "the host's page\n")
    const put = await fetch(`${base}/streams/chat`, { method: "PUT", headers: { "content-type": "application/json" } })
    assert.strictEqual(put.status, 201)
    const waiting = fetch(`${base}/streams/chat?offset=now&live=long-poll`)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const post = await fetch(`${base}/streams/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"n\":1}" })
    assert.strictEqual(post.status, 204)
    const live = await waiting
    assert.strictEqual(live.status, 200)
    assert.deepStrictEqual(await live.json(), [{ n: 1 }])
    assert.deepStrictEqual(await (await fetch(`${base}/streams/chat?offset=-1`)).json(), [{ n: 1 }])
    assert.strictEqual((await fetch(`${base}/streams/none?offset=-1`)).status, 404)
  })

  it("holds the body limit and the token, and serves queues read-only under the prefix", async () => {
    const storage = createInMemoryStorage()
    const streams = await createStreamHandler({ storage, token: "t0k", maxBodyBytes: 8, queues: true })
    const base = await host(streams)
    const auth = { authorization: "Bearer t0k", "content-type": "text/plain" }
    assert.strictEqual((await fetch(`${base}/streams/s`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 401)
    assert.strictEqual((await fetch(`${base}/streams/s`, { method: "PUT", headers: auth })).status, 201)
    assert.strictEqual((await fetch(`${base}/streams/s`, { method: "POST", headers: auth, body: "way more than eight" })).status, 413)
    assert.strictEqual((await fetch(`${base}/streams/s?offset=-1`, { headers: auth })).headers.get("stream-next-offset"), "0000000000000000_0000000000000000")
    assert.strictEqual((await fetch(`${base}/streams/queues/q?offset=-1`, { headers: auth })).status, 404)
    assert.strictEqual((await fetch(`${base}/streams/queues/q`, { method: "PUT", headers: auth })).status, 405)
  })

  it("refuses a prefix that is not a path", async () => {
    const storage = createInMemoryStorage()
    const refused = await createStreamHandler({ storage, prefix: "streams" }).then(() => undefined, (error: unknown) => error)
    assert.isTrue(isNoeticConfigError(refused))
  })

  it("refuses a long-poll or SSE wait that is not a positive number", async () => {
    const storage = createInMemoryStorage()
    for (const longPollMillis of [-1, Number.NaN, "x" as unknown as number]) {
      const refused = await createStreamHandler({ storage, longPollMillis }).then(
        async (handler) => {
          await handler.close()
          return undefined
        },
        (error: unknown) => error
      )
      assert.isTrue(isNoeticConfigError(refused), `longPollMillis ${String(longPollMillis)} was accepted`)
      assert.strictEqual((refused as { code: string }).code, "STREAM_SERVER_INVALID_OPTION")
    }
  })
})
