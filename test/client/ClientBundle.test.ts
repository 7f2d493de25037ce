/**
 * `noetic-effect/client` bundles for browsers (docs/agent-streams.md#noetic-effectclient):
 * esbuild with `platform: "browser"` builds it with no Node built-in, and the bundle's
 * `readStream` reads a real stream server's JSON stream to its end.
 */
import { build } from "esbuild"
import * as Path from "node:path"
import { assert, describe, it } from "vitest"
import { createInMemoryStorage, createStreamServer } from "../../src/promise/index.ts"

const entry = Path.join(import.meta.dirname, "..", "..", "src", "client", "index.ts")

describe("noetic-effect/client", () => {
  it("bundles for the browser platform with no Node built-in", async () => {
    const result = await build({ entryPoints: [entry], bundle: true, platform: "browser", format: "esm", write: false, metafile: true })
    const inputs = Object.keys(result.metafile.inputs)
    assert.deepStrictEqual(inputs, ["src/client/index.ts"])
    assert.notMatch(result.outputFiles[0]!.text, /node:|require\(/)
  })

  it("readStream reads a closed JSON stream to its end, and from an offset on", async () => {
    const storage = createInMemoryStorage()
    const server = await createStreamServer({ storage })
    try {
      const url = `${server.url}/s`
      await fetch(url, { method: "PUT", headers: { "content-type": "application/json" } })
      await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "[1]" })
      await fetch(url, { method: "POST", headers: { "content-type": "application/json", "stream-closed": "true" }, body: "[2]" })
      const { readStream } = await import("../../src/client/index.ts")
      const items: Array<{ offset: string; data: unknown }> = []
      for await (const item of readStream(url)) items.push(item)
      assert.deepStrictEqual(items.map((item) => item.data), [1, 2])
      const first = await fetch(`${url}?offset=-1`)
      const after = [] as Array<unknown>
      const head = await fetch(url, { method: "HEAD" })
      for await (const item of readStream(url, { offset: head.headers.get("stream-next-offset")! })) after.push(item.data)
      assert.deepStrictEqual(after, [])
      assert.strictEqual(first.status, 200)
      const missing = readStream(`${server.url}/nope`)[Symbol.asyncIterator]()
      const error = await missing.next().then(() => undefined, (e: unknown) => e)
      assert.strictEqual((error as { status?: number }).status, 404)
    } finally {
      await server.close()
      await storage.close()
    }
  })
})
