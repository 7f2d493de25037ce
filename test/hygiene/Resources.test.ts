/**
 * Resource hygiene of the Promise API: a harness, storages, subprocess adapters and
 * the durable queue release everything they hold on `close()` and on `await using`
 * (Symbol.asyncDispose), and a host that forgets to close any of them still exits by
 * itself: nothing leaves a timer, socket or child handle keeping the process alive.
 *
 * Each case is its own host process (test/fixtures/hygieneHost.ts), so one leak is
 * never hidden by, or blamed on, another.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { sparePids } from "../fixtures/spares.ts"

const fixture = fileURLToPath(new URL("../fixtures/hygieneHost.ts", import.meta.url))
const pg = process.env.NOETIC_PG_URL

/** How long a host that should exit by itself gets (generous: the machine is shared). */
const EXIT_WITHIN_MS = 60_000

interface HostRun {
  readonly exited: boolean
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  /** The prewarmed spares of the host's subprocess root still running a while after it exited (none, unless one outlived it). */
  readonly spares: ReadonlyArray<number>
}

/** The spares of `root` once gone, else those still there after EXIT_WITHIN_MS. */
const sparesLeft = async (root: string): Promise<ReadonlyArray<number>> => {
  const deadline = Date.now() + EXIT_WITHIN_MS
  let left = sparePids(root)
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    left = sparePids(root)
  }
  return left
}

const runHost = (scenario: string, mode: "close" | "dispose" | "forget"): Promise<HostRun> =>
  new Promise((resolve) => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-hygiene-"))
    const child = spawn(process.execPath, ["--import", "tsx", fixture, scenario, mode, dir], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    const timer = setTimeout(() => child.kill("SIGKILL"), EXIT_WITHIN_MS)
    child.on("exit", async (code, signal) => {
      clearTimeout(timer)
      const spares = await sparesLeft(Path.join(dir, "subprocess"))
      for (const pid of spares) process.kill(pid, "SIGKILL")
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
      resolve({ exited: signal === null, code, stdout, stderr, spares })
    })
  })

const scenarios = [
  "harness",
  "file-storage",
  "memory-storage",
  "local-adapter",
  "local-adapter-prewarm",
  "in-memory-adapter",
  "queue",
  "ipc",
  ...(pg === undefined ? [] : ["postgres-storage"])
]

describe("resource hygiene", () => {
  for (const scenario of scenarios) {
    for (const mode of ["close", "dispose"] as const) {
      it(`${scenario}: ${mode === "close" ? "close()" : "await using"} releases everything`, { timeout: 120_000 }, async () => {
        const run = await runHost(scenario, mode)
        assert.ok(run.exited, `the host did not exit by itself: ${run.stderr}`)
        assert.strictEqual(run.code, 0, run.stderr)
        const report = JSON.parse(run.stdout.trim().split("\n").at(-1)!)
        assert.deepStrictEqual(report.left, {}, `still held after release: ${JSON.stringify(report.left)}`)
        assert.deepStrictEqual(run.spares, [], "a spare child outlived its adapter")
      })
    }
  }

  // A listening IPC server keeps serving, as a net.Server does: that is what the host
  // asked for. The others hold nothing a forgotten close() would leave behind (a
  // Postgres storage lets its pool go once idle).
  for (const scenario of scenarios.filter((s) => s !== "ipc")) {
    it(`${scenario}: a host that never closes it still exits by itself`, { timeout: 120_000 }, async () => {
      const run = await runHost(scenario, "forget")
      assert.ok(run.exited, `the host was kept alive: ${run.stderr}`)
      assert.strictEqual(run.code, 0, run.stderr)
      assert.include(run.stdout, `"forgot":"${scenario}"`)
      assert.deepStrictEqual(run.spares, [], "a spare child outlived its host")
    })
  }
})
