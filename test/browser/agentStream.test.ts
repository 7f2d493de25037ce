/**
 * An agent's stream in a real browser (Debian's chromium-headless-shell driven by
 * playwright-core; docs/agent-streams.md#in-a-browser): a page with a plain
 * `EventSource` on the execution's SSE URL follows a host process
 * (test/fixtures/agentStreamHost.ts) that writes chunk 1..N slowly. The host is
 * SIGKILLed mid-stream; a new host process on the same storage and port resumes the
 * execution. The EventSource reconnects by itself (`Last-Event-ID`), and the page ends
 * with chunk 1..N exactly once, in order, and the final event.
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { chromium } from "playwright-core"
import { afterAll, assert, describe, it } from "vitest"
import { freePort, startHost } from "../agentStreamHosts.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium-headless-shell"
const CHUNKS = 6

const page = (streamUrl: string) => `<!doctype html>
<meta charset="utf-8">
<ol id="out"></ol>
<script>
  window.seen = []
  window.ended = false
  const source = new EventSource(${JSON.stringify(`${streamUrl}?offset=-1&live=sse`)})
  source.addEventListener("data", (event) => {
    for (const message of JSON.parse(event.data)) {
      window.seen.push(message)
      const item = document.createElement("li")
      item.textContent = JSON.stringify(message)
      document.getElementById("out").append(item)
      if (message && message.$end) { window.ended = true; source.close() }
    }
  })
</script>`

const cleanups: Array<() => unknown> = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

describe.skipIf(!Fs.existsSync(CHROMIUM))("an agent stream in a real browser", () => {
  it("a plain EventSource ends with every chunk exactly once across a SIGKILL of the host", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-stream-browser-"))
    cleanups.push(() => Fs.rmSync(dir, { recursive: true, force: true }))
    const env = {
      STORAGE: `sqlite:${Path.join(dir, "streams.db")}`,
      PORT: String(await freePort()),
      CHUNKS: String(CHUNKS),
      DELAY_MS: "200"
    }
    // It writes 3 chunks and waits there: killed mid-stream on any machine.
    const first = startHost({ ...env, RUN: "browser-run", HOLD_AFTER: "3" })
    cleanups.push(() => first.proc.kill("SIGKILL"))
    const { url } = await first.until((line) => line.url !== undefined)
    await first.until((line) => line.opened === true)

    // The page comes from another origin: the stream server allows any (CORS).
    const site = Http.createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
      response.end(page(`${url}/executions/browser-run/output`))
    })
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve))
    cleanups.push(() => new Promise((resolve) => site.close(resolve)))
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
    cleanups.push(() => browser.close())
    const tab = await browser.newPage()
    await tab.goto(`http://127.0.0.1:${(site.address() as { port: number }).port}/`)

    // Mid-stream: the page has some chunks, the host is killed.
    await tab.waitForFunction(() => (globalThis as any).seen.length >= 3, undefined, { timeout: 60_000 })
    first.proc.kill("SIGKILL")
    assert.strictEqual(await first.exited, "SIGKILL")
    assert.deepStrictEqual(await tab.evaluate(() => (globalThis as any).seen), ["chunk 1", "chunk 2", "chunk 3"])

    // The second host serves until told to stop: the page reconnects on its own
    // schedule (an EventSource waits some seconds), maybe after the resume has finished.
    const second = startHost({ ...env, RESUME: "browser-run", SERVE_UNTIL_TERM: "1" })
    cleanups.push(() => second.proc.kill("SIGKILL"))
    await second.until((line) => line.done !== undefined)

    await tab.waitForFunction(() => (globalThis as any).ended === true, undefined, { timeout: 60_000 })
    second.proc.kill("SIGTERM")
    assert.strictEqual(await second.exited, "0")
    const seen = await tab.evaluate(() => (globalThis as any).seen as Array<unknown>)
    assert.deepStrictEqual(seen, [
      ...Array.from({ length: CHUNKS }, (_, i) => `chunk ${i + 1}`),
      { $end: "succeeded" }
    ])
    assert.strictEqual(await tab.locator("#out li").count(), CHUNKS + 1)
  })
})
