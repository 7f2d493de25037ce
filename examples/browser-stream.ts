/**
 * An agent's tokens in a browser, across host crashes (docs/agent-streams.md).
 *
 * `npm run example browser-stream` starts one host process: a durable harness (SQLite
 * at `$TMPDIR/noetic-browser-stream/streams/streams.db`) whose agent writes tokens
 * slowly to its execution's stream with `ctx.stream()`, and one HTTP server on
 * http://127.0.0.1:4437/ of the host's own that serves the page at `/` and mounts the
 * stream routes under `/streams` (`createStreamHandler`); the page shows the tokens
 * with a plain `EventSource`. Kill the host (Ctrl-C, or `kill -9`) mid-run and start it
 * again: it resumes the execution, and the open page continues where it was, every
 * token once. The database is where `noetic-effect serve --home <that directory>`
 * keeps its streams, so that server shows the same stream too (the host prints how).
 *
 * Under `npm run examples` (NOETIC_EXAMPLES_ALL=1) it runs a short bounded version:
 * a fresh directory, free ports, a few quick tokens read back with `readStream`.
 *
 * Uses the documented APIs only (`noetic-effect/promise`, `noetic-effect/client`).
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { readStream, ReadStreamError } from "noetic-effect/client"
import { AgentHarness, createCheckpointStore, createSqliteStorage, createStreamHandler, runCode } from "noetic-effect/promise"

const quick = process.env.NOETIC_EXAMPLES_ALL === "1"
const dir = quick
  ? Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-browser-stream-"))
  : Path.join(Os.tmpdir(), "noetic-browser-stream")
Fs.mkdirSync(dir, { recursive: true })
const words = ("Durable streams keep every token an agent writes, so a page that watches it " +
  "sees each one exactly once, even when the host that runs the agent is killed and " +
  "another host resumes the execution from its step ledger.").split(" ")
const tokens = quick ? words.slice(0, 6) : words
const delay = quick ? 20 : 700

// Where `noetic-effect serve --home <dir>` keeps its streams: that server shows them too.
Fs.mkdirSync(Path.join(dir, "streams"), { recursive: true })
const storage = createSqliteStorage({ path: Path.join(dir, "streams", "streams.db") })

// Each sentence is a step: a finished step replays from the ledger (writing nothing),
// the step in flight runs again and its chunks already stored are not written twice.
const sentence = (from: number, to: number) =>
  runCode(`tokens-${from}`, async (_: null, ctx) => {
    const out = ctx.stream()
    for (let i = from; i < to; i++) {
      await new Promise((resolve) => setTimeout(resolve, delay))
      await out.write(tokens[i]! + " ")
    }
    await out.close()
    return to
  })
const agent = runCode("writer", async (_: null, ctx) => {
  for (let from = 0; from < tokens.length; from += 4) {
    await ctx.run(sentence(from, Math.min(from + 4, tokens.length)), null)
  }
  return tokens.length
})
const harness = new AgentHarness({
  name: "browser-stream",
  agentGraph: agent,
  params: {},
  environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
})

// The stream routes, mounted in the host's own server under /streams.
const streams = await createStreamHandler({ storage, prefix: "/streams" })

// Which execution this directory is on: a finished one makes way for a new one.
const current = Path.join(dir, "current")
const executionId = Fs.existsSync(current) ? Fs.readFileSync(current, "utf8") : `run-${Date.now()}`
Fs.writeFileSync(current, executionId)
const streamPath = `/streams/executions/${executionId}/output`

const html = `<!doctype html><meta charset="utf-8"><title>agent stream</title>
<style>body{font:18px system-ui;max-width:40em;margin:3em auto}#state{color:#888}</style>
<p id="state">connecting…</p><p id="out"></p>
<script>
  const state = document.getElementById("state"), out = document.getElementById("out")
  const source = new EventSource(${JSON.stringify(`${streamPath}?offset=-1&live=sse`)})
  source.onopen = () => { state.textContent = "streaming" }
  source.onerror = () => { state.textContent = "reconnecting…" }
  source.addEventListener("data", (event) => {
    for (const message of JSON.parse(event.data)) {
      if (message && message.$end) { state.textContent = "done: " + message.$end; source.close() }
      else out.textContent += message
    }
  })
</script>`
// One server: the streams under /streams, the page everywhere else.
const site = Http.createServer({ requestTimeout: 0 }, (request, response) => {
  if (streams.matches(request.url)) return streams.handle(request, response)
  response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
  response.end(html)
})
await new Promise<void>((resolve) => site.listen(quick ? 0 : 4437, "127.0.0.1", resolve))
const pageUrl = `http://127.0.0.1:${(site.address() as { port: number }).port}/`
const streamUrl = new URL(streamPath, pageUrl).href

console.log(`open ${pageUrl}   (execution ${executionId}, its stream: ${streamUrl})`)
console.log(`the same stream from a standalone server: noetic-effect serve --home ${dir} --port 0, then <its url>/executions/${executionId}/output`)
// `resume` continues a recorded execution (null when there is none yet): a restarted
// host picks up where the killed one was.
const running = harness.resume(executionId).then((resumed) => resumed ?? harness.execute(null, { executionId }).then((receipt) => receipt.result()))

if (quick) {
  // What the page does, in Node: read the stream live to its final event.
  // The stream exists once the agent's first step opens it: a 404 before that.
  const seen: Array<unknown> = []
  for (;;) {
    try {
      for await (const item of readStream(streamUrl)) seen.push(item.data)
      break
    } catch (error) {
      if (!(error instanceof ReadStreamError && error.status === 404)) throw error
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  const text = seen.filter((data) => typeof data === "string").join("")
  console.log(`read back: ${JSON.stringify(text.trim())}, then ${JSON.stringify(seen[seen.length - 1])}`)
  if (text !== tokens.map((token) => token + " ").join("")) throw new Error("the stream does not hold every token once")
}

await running
console.log(`execution ${executionId} finished; start again for a new one`)
Fs.rmSync(current, { force: true })
if (!quick) await new Promise((resolve) => setTimeout(resolve, 2_000))
await harness.close()
await streams.close()
site.closeAllConnections()
await new Promise((resolve) => site.close(resolve))
await storage.close()
if (quick) Fs.rmSync(dir, { recursive: true, force: true })
