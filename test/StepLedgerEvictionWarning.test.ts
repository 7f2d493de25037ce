/**
 * A run longer than the ledger's retention says so once, not once per execution: in a
 * loop of long executions, whether each gets its own ledger service (a harness per
 * execution, a leased run) or they share one, one warning is logged; the evictions
 * are all counted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { makeMemory } from "../src/services/StorageAdapter.ts"

const leaf = runCode("leaf", (i: number) => Effect.succeed(i))
const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    for (let i = 0; i < steps; i++) yield* ctx.run(leaf, i)
  }))

describe("StepLedger eviction warning", () => {
  it.effect("a loop of executions past maxEntries warns once in all", () => {
    const warnings: Array<string> = []
    return Effect.gen(function*() {
      const store = yield* CheckpointStore.makeWith(yield* makeMemory)
      const evicted: Array<number> = []
      // Leased runs get a ledger of their own, as does a harness built per execution.
      for (const lease of [undefined, { owner: "host-a" }]) {
        for (let e = 0; e < 3; e++) {
          const ledger = yield* StepLedger.makeWith(store, { retention: { maxEntries: 5 } })
          const harness = yield* AgentHarness.make({ name: "loop", agentGraph: root, ...(lease ? { lease } : {}) }).pipe(
            Effect.provideService(CheckpointStore.CheckpointStore, store),
            Effect.provideService(StepLedger.StepLedger, ledger)
          )
          yield* harness.execute(12)
          if (lease === undefined) evicted.push((yield* ledger.stats).evicted)
        }
      }
      const eviction = warnings.filter((w) => w.includes("past maxEntries"))
      assert.strictEqual(eviction.length, 1)
      assert.include(eviction[0]!, "once per process")
      // Every execution evicted (12 steps and a root entry over a cap of 5), warned or not.
      assert.isTrue(evicted.every((count) => count > 0))
    }).pipe(
      Effect.scoped,
      Effect.provide(Logger.layer([
        Logger.make((options) => {
          if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
        })
      ]))
    )
  }, 60_000)
})
