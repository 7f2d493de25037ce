/**
 * Agent streams exactly once across host crashes (docs/agent-streams.md#exactly-once):
 * a real host process (test/fixtures/agentStreamHost.ts) writes chunk 1..N to its
 * execution's stream and SIGKILLs itself at a chunk boundary k (0..N); a new host on
 * the same storage and port resumes the execution. A `readStream` reader in this
 * process, following live across both hosts, ends with chunk 1..N exactly once, in
 * order, and the final event. On SQLite, and on Postgres when NOETIC_PG_URL is set.
 */
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { readStream } from "../../src/client/index.ts"
import { createPostgresStorage, createSqliteStorage, createStreamServer } from "../../src/promise/index.ts"
import { freePort, startHost } from "../agentStreamHosts.ts"

const CHUNKS = 2

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) Fs.rmSync(dir, { recursive: true, force: true })
})

/**
 * The runs killed at boundary 0..CHUNKS, chained: host k resumes run k-1 and starts run
 * k, killed at boundary k; the last host only resumes. A reader per run follows it
 * live across its two hosts.
 */
const crashCases = async (storage: string) => {
  const port = await freePort()
  const tag = randomUUID().slice(0, 8)
  const runs = Array.from({ length: CHUNKS + 1 }, (_, k) => `exec-${k}-${tag}`)
  const env = { STORAGE: storage, PORT: String(port), CHUNKS: String(CHUNKS) }
  const readings: Array<Promise<Array<unknown>>> = []
  for (let k = 0; k <= CHUNKS + 1; k++) {
    const run = runs[k]
    const hostK = startHost({
      ...env,
      RESUME: k === 0 ? "" : runs[k - 1]!,
      RUN: run ?? "",
      ...(run === undefined ? {} : { KILL_AT: String(k) })
    })
    const { url } = await hostK.until((line) => line.url !== undefined)
    if (run !== undefined) {
      await hostK.until((line) => line.exec === run && line.opened === true)
      readings.push((async () => {
        const seen: Array<unknown> = []
        for await (const item of readStream(`${url}/executions/${run}/output`, { maxBackoffMillis: 200 })) {
          seen.push(item.data)
        }
        return seen
      })())
      assert.strictEqual(await hostK.exited, "SIGKILL")
    } else {
      assert.strictEqual(await hostK.exited, "0")
    }
  }
  // The last host has stopped serving: a server in this process on the same storage and
  // port lets a reader that had not yet read the final event reach it (it reconnects).
  const storageHere = storage.startsWith("sqlite:")
    ? createSqliteStorage({ path: storage.slice("sqlite:".length) })
    : createPostgresStorage({ url: storage.slice(3, storage.lastIndexOf("#")), table: storage.slice(storage.lastIndexOf("#") + 1) })
  const server = await createStreamServer({ storage: storageHere, port })
  try {
    // Each reader ends by itself: its stream is closed after the final event.
    return await Promise.all(readings)
  } finally {
    await server.close()
    await storageHere.close()
  }
}

const expected = [...Array.from({ length: CHUNKS }, (_, i) => `chunk ${i + 1}`), { $end: "succeeded" }]

describe("agent streams across a SIGKILL at every chunk boundary", () => {
  it("SQLite: a reader ends with chunk 1..N exactly once and the final event", { timeout: 300_000 }, async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-stream-crash-"))
    dirs.push(dir)
    const seen = await crashCases(`sqlite:${Path.join(dir, "streams.db")}`)
    seen.forEach((items, k) => assert.deepStrictEqual(items, expected, `killed after ${k} chunks`))
  })

  const pg = process.env.NOETIC_PG_URL
  it.skipIf(pg === undefined)(
    "Postgres: a reader ends with chunk 1..N exactly once and the final event",
    { timeout: 300_000 },
    async () => {
      const table = `agent_stream_${randomUUID().replaceAll("-", "").slice(0, 12)}`
      const seen = await crashCases(`pg:${pg}#${table}`)
      seen.forEach((items, k) => assert.deepStrictEqual(items, expected, `killed after ${k} chunks`))
    }
  )
})
