/**
 * The durability promise of docs/http-streams.md#durability, with real processes: a
 * `noetic-effect serve` is SIGKILLed while a writer appends and a reader follows live
 * over SSE; started again on the same home, it serves every acknowledged byte at the
 * same offsets, the append in flight appears whole or not at all, and the reader,
 * resuming from its last event id (as a browser's EventSource does), ends with exactly
 * what the stream holds: no gap, no duplicate.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { kill9, readSse, type ServeProcess, startServe } from "./streamHelpers.ts"

const append = (url: string, body: string) =>
  fetch(url, { method: "POST", headers: { "content-type": "text/plain" }, body }).then(
    (response) => response.status === 204 ? "acked" as const : "refused" as const,
    () => "lost" as const
  )

describe("stream server crash", () => {
  it("after SIGKILL and restart: every acknowledged byte at its offset, the reader resumes with no gap and no duplicate", async () => {
    const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-stream-crash-"))
    let serve: ServeProcess = await startServe(["--home", home, "--port", "0"])
    const servers: Array<ServeProcess> = [serve]
    try {
      const path = "/crash/log"
      const created = await fetch(`${serve.url}${path}`, { method: "PUT", headers: { "content-type": "text/plain" } })
      assert.strictEqual(created.status, 201)

      // The reader follows live and, like EventSource, reconnects with its last event id.
      const received: Array<string> = []
      let lastId: string | undefined
      let finalTail: string | undefined
      const stopReader = new AbortController()
      const reader = (async () => {
        while (!stopReader.signal.aborted) {
          const url = `${serve.url}${path}?offset=-1&live=sse`
          await readSse(url, lastId, (event) => {
            if (event.id !== undefined) lastId = event.id
            if (event.event === "data") received.push(event.data)
            return false
          }, stopReader.signal)
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
      })()

      const acked: Array<string> = []
      let i = 0
      while (acked.length < 25) {
        const body = `${i++}|`
        const outcome = await append(`${serve.url}${path}`, body)
        assert.strictEqual(outcome, "acked")
        acked.push(body)
      }
      // One append in flight when the server dies: it may land whole or not at all.
      const inFlight = `${i++}|`
      const pending = append(`${serve.url}${path}`, inFlight)
      await new Promise((resolve) => setTimeout(resolve, 1))
      await kill9(serve)
      const inFlightOutcome = await pending

      serve = await startServe(["--home", home, "--port", "0"])
      servers.push(serve)
      const before = acked.length
      if (inFlightOutcome === "acked") acked.push(inFlight)
      while (acked.length < before + 10) {
        const body = `${i++}|`
        assert.strictEqual(await append(`${serve.url}${path}`, body), "acked")
        acked.push(body)
      }

      const head = await fetch(`${serve.url}${path}`, { method: "HEAD" })
      finalTail = head.headers.get("stream-next-offset")!
      const stored = await (await fetch(`${serve.url}${path}?offset=-1`)).text()
      const expected = acked.join("")
      const withInFlight = acked.slice(0, before).join("") + inFlight + acked.slice(before).join("")
      assert.isTrue(
        stored === expected || (inFlightOutcome !== "acked" && stored === withInFlight),
        `stored ${stored} is neither ${expected} nor ${withInFlight}`
      )
      const deadline = Date.now() + 30_000
      while (lastId !== finalTail && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      stopReader.abort()
      await reader
      assert.strictEqual(lastId, finalTail, "the reader reached the tail")
      assert.strictEqual(received.join(""), stored)

      // SIGTERM stops the server cleanly.
      serve.proc.kill("SIGTERM")
      assert.strictEqual(await serve.exited, 0)
    } finally {
      for (const server of servers) await kill9(server)
      Fs.rmSync(home, { recursive: true, force: true })
    }
  }, 120_000)
})
