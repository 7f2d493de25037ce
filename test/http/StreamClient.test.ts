/**
 * The official client, `@durable-streams/client`, against `createStreamServer` on
 * SQLite: an idempotent producer writes, catch-up and live SSE reads follow, the stream
 * closes; and a server with a token admits the client only with the bearer header.
 */
import { DurableStream, IdempotentProducer } from "@durable-streams/client"
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { createSqliteStorage, createStreamServer } from "../../src/promise/index.ts"

const withServer = async (
  options: { readonly token?: string },
  f: (url: string) => Promise<void>
) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-stream-client-"))
  const storage = createSqliteStorage({ path: Path.join(dir, "streams.db") })
  const server = await createStreamServer({ storage, ...options })
  try {
    await f(server.url)
  } finally {
    await server.close()
    await storage.close()
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe("the official Durable Streams client", () => {
  it("writes with an idempotent producer, reads catch-up and live over SSE, sees the close", () =>
    withServer({}, async (url) => {
      const stream = await DurableStream.create({ url: `${url}/chat/room-1`, contentType: "application/json" })
      // A live reader from the start, over SSE, until the stream closes.
      const live = await stream.stream<{ n: number }>({ live: "sse" })
      const seen: Array<number> = []
      const done = new Promise<void>((resolve) => {
        live.subscribeJson(async (batch) => {
          for (const item of batch.items) seen.push(item.n)
          if (batch.streamClosed) resolve()
        })
      })
      const producer = new IdempotentProducer(stream, "writer-1", { lingerMs: 1 })
      for (let n = 0; n < 50; n++) producer.append(JSON.stringify({ n }))
      await producer.flush()
      await producer.close()
      await done
      assert.deepStrictEqual(seen, Array.from({ length: 50 }, (_, n) => n))

      const catchUp = await stream.stream<{ n: number }>({ live: false })
      assert.deepStrictEqual((await catchUp.json()).map((item) => item.n), seen)
      const head = await stream.head()
      assert.isTrue(head.exists && head.streamClosed)
    }))

  it("with a token, the client needs the bearer header", () =>
    withServer({ token: "t0ken" }, async (url) => {
      let refused = false
      try {
        await DurableStream.create({ url: `${url}/private`, contentType: "text/plain" })
      } catch {
        refused = true
      }
      assert.isTrue(refused)
      const stream = await DurableStream.create({
        url: `${url}/private`,
        contentType: "text/plain",
        headers: { Authorization: "Bearer t0ken" }
      })
      await stream.append("secret")
      const read = await stream.stream({ live: false })
      assert.strictEqual(await read.text(), "secret")
    }))
})
