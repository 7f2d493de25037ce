import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { TestConsole } from "effect/testing"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cli from "../../src/cli/Cli.ts"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"

/** Runs the CLI in this process and returns what it printed, and how it ended. */
const cli = (...args: Array<string>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(Cli.run(args))
    const out = (yield* TestConsole.logLines).map(String).join("\n")
    return { exit, out }
  }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))

describe("noetic-effect CLI", () => {
  it.live("lists, shows and clears the executions recorded under a home directory", () =>
    Effect.gen(function*() {
      const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-cli-"))
      const store = yield* CheckpointStore.makeWith(yield* FileStorage.make({ root: roots(home).checkpoints }))
      const harness = yield* AgentHarness.make({
        name: "cli",
        agentGraph: runCode("root", (_: void, ctx) => Effect.as(ctx.append([{ type: "note", text: "hello" }]), "done"))
      }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store))
      yield* harness.execute(undefined, { executionId: "exec-a", threadId: "thread-1" })

      const listed = yield* cli("--home", home, "executions", "list", "--json")
      assert.isTrue(Exit.isSuccess(listed.exit))
      assert.deepStrictEqual(JSON.parse(listed.out), ["exec-a"])

      const shown = yield* cli("--home", home, "executions", "show", "exec-a")
      assert.include(shown.out, "thread     thread-1")
      assert.include(shown.out, "items      1")
      assert.include(shown.out, "frontier   (idle)")

      const missing = yield* cli("--home", home, "executions", "show", "missing")
      assert.isTrue(Exit.isFailure(missing.exit))

      yield* cli("--home", home, "executions", "clear", "exec-a")
      assert.deepStrictEqual(JSON.parse((yield* cli("--home", home, "executions", "list", "--json")).out), [])
      // Nothing of the execution is left: neither snapshot nor ledger files.
      assert.deepStrictEqual(Fs.readdirSync(roots(home).checkpoints).filter((name) => name.includes("exec-a")), [])
    }).pipe(Effect.scoped))

  it.live("paths prints the three roots under the home", () =>
    Effect.gen(function*() {
      const { out } = yield* cli("--home", "/tmp/some-home", "paths")
      assert.include(out, "checkpoints  /tmp/some-home/checkpoints")
      assert.include(out, "subprocess   /tmp/some-home/subprocess")
      assert.include(out, "run          /tmp/some-home/run")
    }))
})
