/**
 * clearCheckpoint removes an execution's in-process child agents (found from what
 * they recorded) and never an independent execution whose id only looks like a child's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode, spawn } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"

describe("clearCheckpoint and child executions", () => {
  it.effect("clears the spawn step's child agent, keeps an execution named like a child", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const store = yield* CheckpointStore.makeWith(storage)
      const child = runCode("child", (_: void, ctx) => Effect.as(ctx.append([{ type: "note", text: "child" }]), "done"))
      const graph = runCode("root", (_: void, ctx) => ctx.run(spawn("sub", child), undefined))
      const harness = yield* AgentHarness.make({ name: "clear", agentGraph: graph }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store)
      )
      yield* harness.execute(undefined, { executionId: "acme" })
      yield* harness.execute(undefined, { executionId: "acme/issue#42" })
      const ids = [...(yield* store.list)].sort()
      const childIds = ids.filter((id) => id !== "acme" && id !== "acme/issue#42" && !id.startsWith("acme/issue#42/"))
      assert.isAbove(childIds.length, 0, `the spawn's child checkpoints as an execution: ${ids.join(", ")}`)

      yield* harness.clearCheckpoint("acme")
      const left = [...(yield* store.list)].sort()
      assert.isFalse(left.includes("acme"))
      for (const id of childIds) assert.isFalse(left.includes(id), `child ${id} was cleared`)
      assert.include(left, "acme/issue#42")
      assert.isTrue(Option.isSome(yield* harness.restore("acme/issue#42")))

      // Clearing the look-alike in turn removes its own child and leaves nothing.
      yield* harness.clearCheckpoint("acme/issue#42")
      assert.deepStrictEqual(yield* store.list, [])
    }))
})
