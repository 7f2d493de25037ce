/**
 * `executions show` reads an at-most-once step's intent record: superseded by the
 * step record written when its body completed, live while the outcome is unknown.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { invokeTool, runCode } from "../../src/harness/Step.ts"
import { readLedger } from "../../src/cli/Executions.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"

const paying = (crash: boolean) =>
  runCode("root", (_: void, ctx) =>
    ctx.run(
      invokeTool({
        id: "pay",
        effects: "at-most-once",
        tool: { execute: (amount: number) => crash ? Effect.die("host crashed mid-payment") : Effect.succeed(`paid ${amount}`) }
      }),
      42
    ))

const run = (crash: boolean, executionId: string) =>
  Effect.gen(function*() {
    const storage = yield* makeMemory
    const store = yield* CheckpointStore.makeWith(storage)
    const harness = yield* AgentHarness.make({ name: "intents", agentGraph: paying(crash) }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
    yield* Effect.exit(harness.execute(undefined, { executionId }))
    return (yield* readLedger(storage, executionId)).view.records.map((r) => [r.path, r.record, r.state, r.by, r.outputBytes])
  })

describe("the ledger view of at-most-once steps", () => {
  it.effect("a completed body: its intent is superseded by the step record", () =>
    Effect.gen(function*() {
      const records = yield* run(false, "paid")
      const pay = records.filter(([path]) => path === "/root#0/pay#0")
      assert.strictEqual(pay.length, 2)
      const [intent, step] = pay
      assert.deepStrictEqual(intent!.slice(1, 3), ["intent", "superseded"])
      assert.strictEqual(intent![4], null)
      assert.deepStrictEqual(step!.slice(1, 3), ["step", "live"])
      assert.strictEqual(step![4], JSON.stringify("paid 42").length)
    }))

  it.effect("a body cut short: the intent is live, with no output", () =>
    Effect.gen(function*() {
      const records = yield* run(true, "unknown")
      assert.deepStrictEqual(records.filter(([path]) => path === "/root#0/pay#0"), [["/root#0/pay#0", "intent", "live", null, null]])
    }))
})
