/**
 * Human output shows control characters escaped (ids, messages, frames), so a recorded
 * value cannot clear the screen, retitle the terminal, forge a line or reorder text;
 * `--json` output stays exact.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import * as Render from "../../src/cli/Render.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import * as DurableOutboundQueue from "../../src/services/DurableOutboundQueue.ts"
import { cli, cliJson, freshHome } from "./suite.ts"

/** Clear screen, retitle, a forged line, a carriage return, a C1 CSI, and a right-to-left override. */
const EVIL = "run\x1b[2J\x1b]0;owned\x07\nFORGED LINE\rX\u009b31m\u202eevil"
/** Nothing a terminal acts on but the newlines between lines: C0, DEL, C1, line separators, bidi controls. */
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

describe("escaped human output", () => {
  it("escapeControl writes every control character as a visible escape, and leaves other text alone", () => {
    assert.strictEqual(
      Render.escape(EVIL),
      "run\\x1b[2J\\x1b]0;owned\\x07\\nFORGED LINE\\rX\\x9b31m\\u202eevil"
    )
    assert.strictEqual(Render.escape("plain ünïcode → ok 日本"), "plain ünïcode → ok 日本")
    assert.strictEqual(Render.text`id ${"a\nb"} and ${3}`, "id a\\nb and 3")
    assert.notMatch(Render.table(["ID"], [[EVIL]]), UNSAFE)
  })

  it.live("ids, messages and frames are escaped in tables, show and errors; --json keeps them exact", () =>
    Effect.gen(function*() {
      const home = yield* freshHome
      const checkpoints = yield* FileStorage.make({ root: roots(home).checkpoints })
      const subprocess = yield* FileStorage.make({ root: roots(home).subprocess })
      const store = yield* CheckpointStore.makeWith(checkpoints)
      const step = runCode("step", (input: string) => Effect.succeed(`${input}${EVIL}`))
      const harness = yield* AgentHarness.make({ name: "escaping", agentGraph: step }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store)
      )
      yield* harness.execute("in", { executionId: EVIL, threadId: EVIL })
      const queue = yield* DurableOutboundQueue.makeWith(subprocess, { socketId: EVIL })
      yield* queue.appendAll([JSON.stringify({ type: "item", text: EVIL }), `raw ${EVIL}`])
      yield* queue.close

      const runs = [
        yield* cli("--home", home, "executions", "list"),
        yield* cli("--home", home, "executions", "show", EVIL),
        yield* cli("--home", home, "queues", "list"),
        yield* cli("--home", home, "queues", "show", EVIL, "--frames"),
        yield* cli("--home", home, "executions", "show", `missing${EVIL}`),
        yield* cli("--home", Path.join(home, EVIL), "paths")
      ]
      for (const run of runs) {
        assert.notMatch(run.out, UNSAFE, run.out)
        // stderr's lines are the CLI's own; none is a value's.
        assert.notMatch(run.err, UNSAFE, run.err)
      }
      assert.include(runs[0]!.out, "run\\x1b[2J\\x1b]0;owned\\x07\\nFORGED LINE\\rX\\x9b31m\\u202eevil")
      assert.include(runs[1]!.out, "\\nFORGED LINE")
      // No value started a line of its own.
      for (const run of runs) assert.isFalse(run.out.split("\n").some((line) => line.startsWith("FORGED")))
      assert.include(runs[3]!.out, "raw run\\x1b[2J")
      assert.notStrictEqual(runs[4]!.code, 0)
      assert.include(runs[4]!.err, "missingrun\\x1b[2J")

      // JSON is exact: the same id comes back.
      const listed = yield* cliJson("--home", home, "executions", "list", "--json")
      assert.deepStrictEqual(listed.executions.map((row: { executionId: string }) => row.executionId), [EVIL])
      const shown = yield* cliJson("--home", home, "queues", "show", EVIL, "--frames", "--json")
      assert.strictEqual(shown.frames[1].frame, `raw ${EVIL}`)
    }).pipe(Effect.scoped))
})
