/**
 * The CLI checks every backend runs: the state real runs left (see state.ts) read
 * back through every command, as a table and as JSON, and bad input refused with one
 * line and a non-zero exit.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, References, type Scope } from "effect"
import { TestConsole } from "effect/testing"
import * as Cli from "../../src/cli/Cli.ts"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as InMemorySubprocessAdapter from "../../src/layers/InMemorySubprocessAdapter.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { keyPrefix } from "../../src/services/DurableOutboundQueue.ts"
import { leaseKey } from "../../src/services/ExecutionLease.ts"
import { type Backend, withRecordedState } from "./backends.ts"

export { type Backend, freshHome } from "./backends.ts"

/** What the CLI printed and how it ended. */
export interface CliRun {
  readonly code: number
  readonly out: string
  readonly err: string
}

/** Runs the CLI in this process, as the bin would, and captures stdout and stderr. */
export const cli = (...args: ReadonlyArray<string>): Effect.Effect<CliRun> =>
  Effect.gen(function*() {
    const code = yield* Cli.main(args)
    const out = (yield* TestConsole.logLines).map(String).join("\n")
    const err = (yield* TestConsole.errorLines).map(String).join("\n")
    return { code, out, err }
  }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))

/** Runs the CLI with `--json` output and parses it; the run must succeed. */
export const cliJson = (...args: ReadonlyArray<string>) =>
  Effect.map(cli(...args), (run) => {
    assert.strictEqual(run.code, 0, `${args.join(" ")} failed: ${run.err}`)
    return JSON.parse(run.out)
  })

/** Asserts a run failed with exactly one line on stderr that includes `text`, and no stack trace. */
export const assertOneLineFailure = (run: CliRun, text: string) => {
  assert.notStrictEqual(run.code, 0, `expected a failure, got: ${run.out}`)
  const lines = run.err.split("\n").filter((line) => line !== "")
  assert.strictEqual(lines.length, 1, `expected one line on stderr, got:\n${run.err}`)
  assert.include(lines[0], text)
  assert.match(lines[0]!, /^noetic-effect: /)
  assert.notInclude(run.err, "    at ")
}

/** Registers the backend-independent CLI tests; `backend` builds a fresh one per test. */
export const suite = (backend: Effect.Effect<Backend, unknown, Scope.Scope>) => {
  const withState = withRecordedState(backend)

  it.live("executions list: a table of status, steps, last checkpoint and thread, newest first; --json; filters", () =>
    withState((b) =>
      Effect.gen(function*() {
        const table = yield* cli(...b.args, "executions", "list")
        assert.strictEqual(table.code, 0, table.err)
        const lines = table.out.split("\n")
        assert.match(lines[0]!, /^EXECUTION\s+STATUS\s+STEPS\s+LAST CHECKPOINT\s+THREAD$/)
        assert.deepStrictEqual(lines.slice(1).map((line) => line.split(/\s+/).slice(0, 3)), [
          ["evicted", "finished", "3"],
          ["changed", "finished", "4"],
          ["crashed", "failed", "1"],
          ["done", "finished", "6"]
        ])
        assert.include(lines.find((line) => line.startsWith("done"))!, "thread-1")

        const { executions } = yield* cliJson(...b.args, "executions", "list", "--json")
        assert.deepStrictEqual(executions.map((row: { executionId: string }) => row.executionId), ["evicted", "changed", "crashed", "done"])
        const times = executions.map((row: { lastCheckpoint: string }) => Date.parse(row.lastCheckpoint))
        assert.deepStrictEqual(times, [...times].sort((x, y) => y - x))
        const done = executions.find((row: { executionId: string }) => row.executionId === "done")
        assert.strictEqual(done.status, "finished")
        assert.strictEqual(done.stepsRecorded, 6)
        assert.strictEqual(done.threadId, "thread-1")
        // The last snapshot was taken with the root in flight; its recorded output says it finished since.
        assert.deepStrictEqual(done.frontier, ["/pipeline#0"])
        // Its run failed in its host (a defect): the harness left a failure mark.
        const crashed = executions.find((row: { executionId: string }) => row.executionId === "crashed")
        assert.strictEqual(crashed.status, "failed")
        assert.strictEqual(crashed.problem, "boom")
        assert.strictEqual(crashed.threadId, "thread-2")

        const failed = yield* cliJson(...b.args, "executions", "list", "--status", "failed", "--json")
        assert.deepStrictEqual(failed.executions.map((row: { executionId: string }) => row.executionId), ["crashed"])
        // Without its mark, what the run left reads as a run cut short.
        yield* b.checkpoints.delete("execution:crashed:failed")
        const interrupted = yield* cliJson(...b.args, "executions", "list", "--status", "interrupted", "--json")
        assert.deepStrictEqual(interrupted.executions.map((row: { executionId: string }) => row.executionId), ["crashed"])
        const recent = yield* cliJson(...b.args, "executions", "list", "--since", "1h", "--json")
        assert.strictEqual(recent.executions.length, 4)
        const future = yield* cliJson(...b.args, "executions", "list", "--since", "2999-01-01", "--json")
        assert.deepStrictEqual(future.executions, [])
        const none = yield* cli(...b.args, "executions", "list", "--since", "2999-01-01")
        assert.include(none.out, "no recorded executions")

        // A snapshot this build cannot read is listed as unreadable, and show says why in one line.
        yield* b.checkpoints.set("checkpoints:old-format", { version: 1, executionId: "old-format" })
        yield* b.checkpoints.set("execution:old-format:snapshot", { schemaVersion: 1, executionId: "old-format" })
        const withBad = yield* cliJson(...b.args, "executions", "list", "--json")
        const bad = withBad.executions.find((row: { executionId: string }) => row.executionId === "old-format")
        assert.strictEqual(bad.status, "unreadable")
        assert.include(bad.problem, "schemaVersion")
        assertOneLineFailure(yield* cli(...b.args, "executions", "show", "old-format"), "execution old-format")

        assertOneLineFailure(yield* cli(...b.args, "executions", "list", "--since", "yesterday"), "bad --since")
        assertOneLineFailure(yield* cli(...b.args, "executions", "list", "--status", "bogus"), "--status")
      })
    ), { timeout: 60_000 })

  it.live("executions list: an execution whose lease is held reads running, then finished once its run ends", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const store = yield* CheckpointStore.makeWith(b.checkpoints)
      const gate = yield* Deferred.make<void>()
      const harness = yield* AgentHarness.make({
        name: "leased",
        agentGraph: runCode("wait", () => Effect.as(Deferred.await(gate), "released")),
        lease: { owner: "host-a", ttl: "5 minutes" }
      }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store))
      const run = yield* Effect.forkChild(harness.execute(undefined, { executionId: "leased" }))
      while (Option.isNone(yield* b.checkpoints.get(leaseKey("leased"))) || Option.isNone(yield* store.load("leased"))) {
        yield* Effect.sleep("20 millis")
      }
      const during = yield* cliJson(...b.args, "executions", "list", "--json")
      const row = during.executions.find((r: { executionId: string }) => r.executionId === "leased")
      assert.strictEqual(row.status, "running")
      assert.strictEqual(row.lease.owner, "host-a")
      assert.isTrue(row.lease.live)
      // Clearing a running execution needs --force.
      assertOneLineFailure(yield* cli(...b.args, "executions", "clear", "leased", "--yes"), "is running")

      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(run)
      const after = yield* cliJson(...b.args, "executions", "list", "--json")
      assert.strictEqual(after.executions.find((r: { executionId: string }) => r.executionId === "leased").status, "finished")
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("a run whose root output the ledger cannot hold still reads finished, one that failed reads failed until a resume finishes it", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const store = yield* CheckpointStore.makeWith(b.checkpoints)
      const run = (id: string, fail: boolean) =>
        Effect.gen(function*() {
          const harness = yield* AgentHarness.make({
            name: "dates",
            // A Date has no faithful JSON form: the ledger drops the root's output.
            agentGraph: runCode("report", (_: void, ctx) =>
              Effect.flatMap(ctx.run(runCode("measure", () => Effect.succeed(3)), undefined), (n) =>
                fail ? Effect.fail("no report" as const) : Effect.succeed(new Date(n))))
          }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store))
          yield* Effect.exit(harness.execute(undefined, { executionId: id }))
        }).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))
      yield* run("dated", false)
      yield* run("undated", true)
      const { executions } = yield* cliJson(...b.args, "executions", "list", "--json")
      const status = (id: string) => executions.find((row: { executionId: string }) => row.executionId === id).status
      assert.strictEqual(status("dated"), "finished")
      assert.strictEqual(status("undated"), "failed")
      assert.strictEqual(executions.find((row: { executionId: string }) => row.executionId === "undated").problem, "no report")
      // A resume that succeeds outranks the mark.
      yield* run("undated", false)
      const after = yield* cliJson(...b.args, "executions", "list", "--json")
      assert.strictEqual(after.executions.find((row: { executionId: string }) => row.executionId === "undated").status, "finished")
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("executions show: the snapshot and the ledger as a tree, with tombstones and evictions marked", () =>
    withState((b) =>
      Effect.gen(function*() {
        const done = yield* cli(...b.args, "executions", "show", "done")
        assert.strictEqual(done.code, 0, done.err)
        assert.include(done.out, "status     finished")
        assert.include(done.out, "thread     thread-1")
        assert.include(done.out, "frontier   /pipeline#0  (completed after this snapshot")
        assert.include(done.out, "ledger     6 records: 6 live")
        const tree = done.out.split("\n").filter((line) => /^\s*(\/|\[)/.test(line)).map((line) => line.match(/^\s*\S+/)![0])
        assert.deepStrictEqual(tree, [
          "/pipeline#0",
          "  /fetch#0",
          "  /parse#0",
          "  /both#0",
          "    [0]",
          "      /left#0",
          "    [1]",
          "      /right#0"
        ])
        const fetch = done.out.split("\n").find((line) => line.startsWith("  /fetch#0"))!
        assert.match(fetch, /runCode\s+fetch\s+139 B\s+\d{4}-\d{2}-\d{2}T/)

        const shown = yield* cliJson(...b.args, "executions", "show", "done", "--json")
        assert.strictEqual(shown.execution.status, "finished")
        assert.strictEqual(shown.snapshot.threadId, "thread-1")
        assert.deepStrictEqual(shown.snapshot.layers, ["scratchpad", "instructions", "history"])
        assert.deepStrictEqual(
          shown.ledger.records.map((r: { path: string; kind: string; state: string }) => [r.path, r.kind, r.state]),
          [
            ["/pipeline#0/fetch#0", "runCode", "live"],
            ["/pipeline#0/parse#0", "runCode", "live"],
            ["/pipeline#0/both#0[0]/left#0", "runCode", "live"],
            ["/pipeline#0/both#0[1]/right#0", "runCode", "live"],
            ["/pipeline#0/both#0", "inParallel", "live"],
            ["/pipeline#0", "runCode", "live"]
          ]
        )
        assert.strictEqual(shown.ledger.records[0].outputBytes, 139)
        assert.isString(shown.ledger.records[0].at)

        const changed = yield* cliJson(...b.args, "executions", "show", "changed", "--json")
        assert.deepStrictEqual(
          changed.ledger.records.map((r: { seq: number; record: string; kind: string | null; state: string; by: number | null }) => [r.seq, r.record, r.kind, r.state, r.by]),
          [
            [0, "step", "runCode", "discarded", 1],
            [1, "tombstone", null, "tombstone", null],
            [2, "step", "invokeTool", "live", null],
            [3, "step", "runCode", "live", null]
          ]
        )
        const changedTable = yield* cli(...b.args, "executions", "show", "changed")
        assert.include(changedTable.out, "discarded by tombstone seq 1")
        assert.include(changedTable.out, "TOMBSTONE")

        const evicted = yield* cliJson(...b.args, "executions", "show", "evicted", "--json")
        assert.strictEqual(evicted.ledger.missing, 3)
        assert.strictEqual(evicted.ledger.lowestSeq, 3)
        assert.include((yield* cli(...b.args, "executions", "show", "evicted")).out, "3 EVICTED")

        const crashed = yield* cli(...b.args, "executions", "show", "crashed")
        assert.include(crashed.out, "status     failed")
        assert.include(crashed.out, "failure    boom")
        assert.include(crashed.out, "items      1")
        assert.notInclude(crashed.out, "completed after this snapshot")

        assertOneLineFailure(yield* cli(...b.args, "executions", "show", "missing"), "unknown execution missing")
      })
    ), { timeout: 60_000 })

  it.live("executions show --output prints one recorded output", () =>
    withState((b) =>
      Effect.gen(function*() {
        const fetched = yield* cli(...b.args, "executions", "show", "done", "--output", "/pipeline#0/fetch#0")
        assert.strictEqual(fetched.code, 0, fetched.err)
        assert.deepStrictEqual(JSON.parse(fetched.out), { url: "https://example.com", body: "x".repeat(100) })
        const root = yield* cliJson(...b.args, "executions", "show", "done", "--output", "/pipeline#0", "--json")
        assert.deepStrictEqual(root.output, { length: 100, both: ["L", "R"] })
        assert.strictEqual(root.stepId, "pipeline")
        assertOneLineFailure(
          yield* cli(...b.args, "executions", "show", "done", "--output", "/pipeline#0/nope#0"),
          "no ledger record at /pipeline#0/nope#0"
        )
        // After a tombstone, the output is the new step's, not the discarded one's.
        const replaced = yield* cliJson(...b.args, "executions", "show", "changed", "--output", "/job#0/x#0", "--json")
        assert.strictEqual(replaced.output, "v2")
        assert.strictEqual(replaced.kind, "invokeTool")
      })
    ), { timeout: 60_000 })

  it.live("queues list and show: head, acked, pending seqs and bytes; --frames prints the pending frames", () =>
    withState((b) =>
      Effect.gen(function*() {
        const table = yield* cli(...b.args, "queues", "list")
        assert.strictEqual(table.code, 0, table.err)
        assert.match(table.out, /^QUEUE\s+STORAGE\s+HEAD\s+ACKED\s+PENDING\s+SEQS\s+BYTES/)
        assert.match(table.out, /demo-queue\s+\S+\s+3\s+1\s+2\s+2-3\s+42 B/)
        const { queues } = yield* cliJson(...b.args, "queues", "list", "--json")
        const demo = queues.find((q: { socketId: string }) => q.socketId === "demo-queue")
        assert.deepStrictEqual(
          [demo.headSeq, demo.ackedSeq, demo.pendingFrames, demo.pendingSeqs, demo.pendingBytes],
          [3, 1, 2, { from: 2, to: 3 }, 42]
        )

        const shown = yield* cli(...b.args, "queues", "show", "demo-queue", "--frames")
        assert.include(shown.out, "pending    2 frames, seqs 2-3, 42 B")
        assert.match(shown.out, /\n2\s+21\s+\{"type":"item","n":2\}/)
        assert.match(shown.out, /\n3\s+21\s+\{"type":"item","n":3\}/)
        const withFrames = yield* cliJson(...b.args, "queues", "show", "demo-queue", "--frames", "--json")
        assert.deepStrictEqual(withFrames.frames.map((f: { seq: number; frame: string }) => [f.seq, JSON.parse(f.frame).n]), [[2, 2], [3, 3]])
        const summary = yield* cliJson(...b.args, "queues", "show", "demo-queue", "--json")
        assert.isUndefined(summary.frames)
        assert.strictEqual(summary.headSeq, 3)

        // Reading is read-only: the queue is as it was.
        assert.strictEqual((yield* cliJson(...b.args, "queues", "show", "demo-queue", "--json")).pendingFrames, 2)
        assertOneLineFailure(yield* cli(...b.args, "queues", "show", "nope"), "unknown queue nope")

        // A damaged record is reported, not a failure of the whole command.
        const recordKeys = (yield* b.checkpoints.list(keyPrefix("demo-queue"))).filter((key) => !key.endsWith(":meta"))
        assert.isAbove(recordKeys.length, 0)
        yield* b.checkpoints.set(recordKeys[recordKeys.length - 1]!, { torn: true })
        const damaged = yield* cli(...b.args, "queues", "show", "demo-queue")
        assert.strictEqual(damaged.code, 0, damaged.err)
        assert.include(damaged.out, "UNREADABLE")
        assert.isAbove((yield* cliJson(...b.args, "queues", "show", "demo-queue", "--json")).damaged.length, 0)
        assert.include((yield* cli(...b.args, "queues", "list")).out, "UNREADABLE")
      })
    ), { timeout: 60_000 })

  it.live("executions clear: one id, or --finished --older-than; unknown ids and bad combinations refused", () =>
    withState((b) =>
      Effect.gen(function*() {
        assertOneLineFailure(yield* cli(...b.args, "executions", "clear", "nope", "--yes"), "unknown execution nope")
        assertOneLineFailure(yield* cli(...b.args, "executions", "clear", "--yes"), "name an execution id")
        assertOneLineFailure(yield* cli(...b.args, "executions", "clear", "--older-than", "1d", "--yes"), "--older-than needs --finished")
        assertOneLineFailure(yield* cli(...b.args, "executions", "clear", "--finished", "--older-than", "soon", "--yes"), "bad --older-than")

        const one = yield* cli(...b.args, "executions", "clear", "crashed", "--yes")
        assert.strictEqual(one.code, 0, one.err)
        assert.include(one.out, "cleared crashed")
        assert.deepStrictEqual(yield* b.checkpoints.list("execution:crashed:"), [])

        // Everything is younger than an hour: nothing matches.
        const old = yield* cliJson(...b.args, "executions", "clear", "--finished", "--older-than", "1h", "--yes", "--json")
        assert.deepStrictEqual(old.cleared, [])
        const all = yield* cliJson(...b.args, "executions", "clear", "--finished", "--older-than", "0s", "--yes", "--json")
        assert.deepStrictEqual([...all.cleared].sort(), ["changed", "done", "evicted"])
        assert.deepStrictEqual((yield* cliJson(...b.args, "executions", "list", "--json")).executions, [])
        assert.deepStrictEqual(yield* b.checkpoints.list("execution:"), [])
      })
    ), { timeout: 60_000 })

  it.live("children: an in-process child its host left behind is listed, shown and stopped (its manifest removed)", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const empty = yield* cli(...b.args, "children", "list")
      assert.strictEqual(empty.code, 0, empty.err)
      assert.include(empty.out, "no recorded children")

      // A host whose scope closes while its child runs: the manifest stays for a restart to re-run it.
      yield* Effect.scoped(Effect.gen(function*() {
        const adapter = yield* InMemorySubprocessAdapter.make({ storage: b.subprocess })
        const store = yield* CheckpointStore.makeWith(b.checkpoints)
        const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter }).pipe(
          Effect.provideService(CheckpointStore.CheckpointStore, store)
        )
        const parent = yield* harness.createContext({ id: "parent-1" })
        yield* harness.detachedSpawn(runCode("forever", () => Effect.never), "in", parent, { handleId: "child-1" })
      }))

      const table = yield* cli(...b.args, "children", "list")
      assert.match(table.out, /^HANDLE\s+STATUS\s+PID\s+STEP\s+PARENT\s+AGE\s+RESULT/)
      assert.match(table.out, /child-1\s+in-process\s+-\s+forever\s+parent-1\s+\d+s\s+-/)
      const { children } = yield* cliJson(...b.args, "children", "list", "--json")
      assert.strictEqual(children.length, 1)
      assert.include(children[0], { handleId: "child-1", status: "in-process", adapter: "memory", parentExecutionId: "parent-1", stepId: "forever" })
      const shown = yield* cliJson(...b.args, "children", "show", "child-1", "--json")
      assert.strictEqual(shown.manifest.serializedInput, "\"in\"")
      assert.include((yield* cli(...b.args, "children", "show", "child-1")).out, "parent     parent-1")
      // The parent's view names the child it spawned.
      assert.include((yield* cli(...b.args, "executions", "show", "parent-1")).out, "children   child-1 (in-process)")
      const parentJson = yield* cliJson(...b.args, "executions", "show", "parent-1", "--json")
      assert.deepStrictEqual(parentJson.children.map((c: { handleId: string }) => c.handleId), ["child-1"])
      assert.strictEqual(parentJson.execution.status, "idle")

      assertOneLineFailure(yield* cli(...b.args, "children", "show", "nope"), "unknown child handle nope")
      assertOneLineFailure(yield* cli(...b.args, "children", "stop", "nope"), "unknown child handle nope")
      const stopped = yield* cli(...b.args, "children", "stop", "child-1")
      assert.strictEqual(stopped.code, 0, stopped.err)
      assert.include(stopped.out, "child-1 runs inside its host (in-process adapter): removed its manifest")
      assert.deepStrictEqual((yield* cliJson(...b.args, "children", "list", "--json")).children, [])
    }).pipe(Effect.scoped), { timeout: 60_000 })
}
