/**
 * Durability of the tool loop (docs/runtime.md#durability-of-the-tool-loop): a host
 * killed with SIGKILL in the middle of a `callModel`'s tool loop resumes in a new
 * process without asking the model again for the rounds that completed and without
 * re-running the tool call that completed. Requests are counted at the local
 * OpenRouter-compatible server.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { afterEach, describe, expect, it } from "vitest"
import { type FakeOpenRouter, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const host = Path.resolve(import.meta.dirname, "../fixtures/toolLoopHost.ts")

const started: Array<ChildProcess.ChildProcess> = []
const servers: Array<FakeOpenRouter> = []
afterEach(async () => {
  for (const proc of started.splice(0)) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL")
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

/** Starts the host; resolves with the first line it prints that has `event`. */
const startHost = (args: ReadonlyArray<string>) => {
  const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", host, ...args], { stdio: ["ignore", "pipe", "inherit"] })
  started.push(proc)
  const lines = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
  const next = async (): Promise<any> => {
    const line = await lines.next()
    if (line.done === true) throw new Error(`the host exited (code ${proc.exitCode}, signal ${proc.signalCode})`)
    return JSON.parse(line.value)
  }
  return { proc, next }
}

/** SIGKILLs a running process; resolves with the signal it exited by. */
const killed = (proc: ChildProcess.ChildProcess) =>
  new Promise<NodeJS.Signals | null>((resolve, reject) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return reject(new Error("the host had exited already"))
    proc.once("exit", (_code, signal) => resolve(signal))
    proc.kill("SIGKILL")
  })

describe("a host killed mid tool loop", () => {
  it("resumes without calling the model for completed rounds or re-running the completed tool call", async () => {
    const server = await startFakeOpenRouter([
      { toolCalls: [{ id: "c-alpha", name: "alpha", arguments: "{}" }] },
      { toolCalls: [{ id: "c-beta", name: "beta", arguments: "{}" }] },
      { text: "both tools answered" }
    ])
    servers.push(server)
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tool-loop-crash-"))
    try {
      const first = startHost(["run", dir, server.baseUrl, "exec-1"])
      expect(await first.next()).toEqual({ event: "in-beta" })
      expect(await killed(first.proc)).toBe("SIGKILL")
      // Two rounds were asked for; alpha completed, beta was cut short.
      expect(server.requests).toHaveLength(2)
      expect(Fs.readFileSync(Path.join(dir, "tool-runs.log"), "utf8")).toBe("alpha\nbeta\n")

      const second = startHost(["resume", dir, server.baseUrl, "exec-1"])
      expect(await second.next()).toEqual({ event: "done", output: "both tools answered" })
      // Only the unfinished round went to the model; alpha did not run again, beta did.
      expect(server.requests).toHaveLength(3)
      expect(Fs.readFileSync(Path.join(dir, "tool-runs.log"), "utf8")).toBe("alpha\nbeta\nbeta\n")
      // The resumed round was sent the whole log: both calls and both outputs.
      const messages = server.requests[2]!.body.messages
      expect(messages.filter((m: any) => m.role === "tool").map((m: any) => [m.tool_call_id, m.content])).toEqual([
        ["c-alpha", "{\"alpha\":\"ok\"}"],
        ["c-beta", "{\"beta\":\"ok\"}"]
      ])
      expect(messages.filter((m: any) => m.role === "user")).toEqual([{ role: "user", content: "go" }])
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
