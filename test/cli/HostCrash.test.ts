/**
 * The CLI after a real host SIGKILL: `children list` sees the orphaned child alive
 * (pid and start time), then finished with the result it persisted while no host ran;
 * `children stop` stops one; its queue and execution read back too. Also: clear asks
 * for confirmation on stdin, run as the bin runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { isAlive } from "../../src/internal/procStat.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import { recordState } from "./state.ts"
import { cli, cliJson } from "./suite.ts"
import { crashDirectory, sigkill, startHost } from "../hostProcesses.ts"

const hostScript = Path.join(import.meta.dirname, "..", "fixtures", "subprocessHost.ts")
const mainScript = Path.join(import.meta.dirname, "..", "..", "src", "cli", "main.ts")

/** A home whose recorded children are killed when the scope closes. */
const crashHome = crashDirectory("ncc-", (home) => FileStorage.make({ root: roots(home).subprocess }))

/** Starts the fixture host, reads the line it prints once its child runs, and SIGKILLs it. */
const spawnThenKillHost = (home: string, release: string) =>
  Effect.gen(function*() {
    const host = yield* startHost(hostScript, [home, "spawn", release, "0"])
    const spawned = (yield* host.nextLine) as { handleId: string; parentId: string }
    yield* sigkill(host.proc)
    return spawned
  })

const waitUntil = (condition: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    while (!(yield* condition)) yield* Effect.sleep("25 millis")
  })

describe("noetic-effect CLI after a real host crash", () => {
  it.live("children list shows the orphaned child alive, then finished with the result it persisted", () =>
    Effect.gen(function*() {
      const home = yield* crashHome
      const release = Path.join(home, "release")
      const { handleId, parentId } = yield* spawnThenKillHost(home, release)

      const alive = yield* cliJson("--home", home, "children", "list", "--json")
      assert.strictEqual(alive.children.length, 1)
      const child = alive.children[0]
      assert.include(child, { handleId, status: "running", alive: true, adapter: "local", stepId: "waitForRelease", parentExecutionId: parentId })
      assert.isNumber(child.pid)
      assert.isTrue(yield* isAlive(child.pid, (yield* cliJson("--home", home, "children", "show", handleId, "--json")).manifest.pidStarttime))
      const table = yield* cli("--home", home, "children", "list")
      assert.match(table.out, new RegExp(`${handleId}\\s+running\\s+${child.pid}\\s+waitForRelease\\s+${parentId}\\s+\\d+s\\s+-`))

      // The child runs its step as an execution of its own: its live process makes it running.
      const childExecutionRow = Effect.map(
        cliJson("--home", home, "executions", "list", "--json"),
        (listed) => listed.executions.find((row: { executionId: string }) => row.executionId !== parentId)
      )
      // The child records its first snapshot once it has booted.
      yield* waitUntil(Effect.map(childExecutionRow, (row) => row !== undefined))
      const childExecution = yield* childExecutionRow
      assert.strictEqual(childExecution.status, "running")
      assert.deepStrictEqual(childExecution.runningIn, { handleId, pid: child.pid })

      Fs.writeFileSync(release, "go")
      yield* waitUntil(Effect.map(cliJson("--home", home, "children", "list", "--json"), (r) => r.children[0].alive === false))

      const finished = (yield* cliJson("--home", home, "children", "list", "--json")).children[0]
      assert.strictEqual(finished.status, "finished")
      assert.deepStrictEqual(finished.result, { _tag: "Success", value: { echoed: "job-1", pid: child.pid } })
      assert.match((yield* cli("--home", home, "children", "list")).out, new RegExp(`${handleId}\\s+finished\\s+.*ok \\{"echoed":"job-1"`))
      assert.include((yield* cli("--home", home, "children", "show", handleId)).out, `result     {"_tag":"Success","value":{"echoed":"job-1","pid":${child.pid}}}`)

      // The child's result frame waits in its queue for a host to ack it.
      const queue = yield* cliJson("--home", home, "queues", "show", `subprocess:${handleId}`, "--frames", "--json")
      assert.strictEqual(queue.storage, "subprocess")
      assert.isAbove(queue.headSeq, queue.ackedSeq)
      assert.isTrue(queue.frames.some((frame: { frame: string }) => JSON.parse(frame.frame).status?.kind === "result"))

      // The child ran its step as an execution of its own, which finished; its parent never ran a step.
      const { executions } = yield* cliJson("--home", home, "executions", "list", "--json")
      assert.deepStrictEqual(
        executions.map((row: { executionId: string; status: string }) => [row.executionId === parentId ? "parent" : "child", row.status]).sort(),
        [["child", "finished"], ["parent", "idle"]]
      )
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("children stop stops an orphaned child (SIGTERM) and records it as stopped", () =>
    Effect.gen(function*() {
      const home = yield* crashHome
      const { handleId } = yield* spawnThenKillHost(home, Path.join(home, "release"))
      const { children } = yield* cliJson("--home", home, "children", "list", "--json")
      const { manifest } = yield* cliJson("--home", home, "children", "show", handleId, "--json")
      assert.strictEqual(children[0].status, "running")

      const stopped = yield* cliJson("--home", home, "children", "stop", handleId, "--grace", "20s", "--json")
      assert.strictEqual(stopped.action, "stopped")
      assert.strictEqual(stopped.signal, "SIGTERM")
      assert.strictEqual(stopped.result.error._tag, "Stopped")
      assert.isFalse(yield* isAlive(manifest.pid, manifest.pidStarttime))
      const after = (yield* cliJson("--home", home, "children", "list", "--json")).children[0]
      assert.include(after, { status: "finished", alive: false })
      assert.strictEqual(after.result.error._tag, "Stopped")
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("executions clear asks on stdin: no keeps the execution (exit 1), yes clears it", () =>
    Effect.gen(function*() {
      const home = yield* crashHome
      yield* recordState(yield* FileStorage.make({ root: roots(home).checkpoints }))
      const bin = (input: string) =>
        ChildProcess.spawnSync(process.execPath, ["--import", "tsx", mainScript, "--home", home, "executions", "clear", "done"], {
          input,
          encoding: "utf8",
          timeout: 60_000
        })
      const declined = bin("n\n")
      assert.strictEqual(declined.status, 1)
      assert.include(declined.stderr, "Clear execution done (finished, 6 ledger records)? [y/N]")
      assert.include(declined.stderr, "noetic-effect: not confirmed; nothing was changed")
      const listed = yield* cliJson("--home", home, "executions", "list", "--json")
      assert.isTrue(listed.executions.some((row: { executionId: string }) => row.executionId === "done"))

      // No input at all (a closed stdin, as in CI) is a "no" too.
      assert.strictEqual(bin("").status, 1)

      const accepted = bin("y\n")
      assert.strictEqual(accepted.status, 0, accepted.stderr)
      assert.include(accepted.stdout, "cleared done")
      const after = yield* cliJson("--home", home, "executions", "list", "--json")
      assert.isFalse(after.executions.some((row: { executionId: string }) => row.executionId === "done"))
    }).pipe(Effect.scoped), { timeout: 120_000 })
})
