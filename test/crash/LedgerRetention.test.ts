/**
 * Memoization under retention: with `maxEntries: 3`, a five-step run resumed re-runs
 * only the two steps whose entries were evicted. Re-running an evicted step records a
 * new entry that evicts a retained one from storage, but the entries loaded when the
 * ledger was opened keep serving the resumed run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import * as StepLedger from "../../src/services/StepLedger.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const names = ["a", "b", "c", "d", "e"] as const

const harnessOver = (storage: StorageAdapterShape, runs: Record<string, number>, crash: { on: boolean }) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    const ledger = yield* StepLedger.makeWith(store, { retention: { maxEntries: 3 } })
    const graph = runCode("root", (_: void, ctx) =>
      Effect.gen(function*() {
        const outputs: Array<string> = []
        for (const name of names) {
          outputs.push(yield* ctx.run(runCode(name, () => Effect.sync(() => (runs[name] = (runs[name] ?? 0) + 1, name.toUpperCase()))), undefined))
        }
        if (crash.on) return yield* Effect.die("crash after the five steps")
        return outputs.join("")
      }))
    return yield* AgentHarness.make({ name: "retention", agentGraph: graph }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store),
      Effect.provideService(StepLedger.StepLedger, ledger)
    )
  })

describe("step ledger retention and resume", () => {
  it.effect("a resumed five-step run with maxEntries 3 re-runs only the two evicted steps", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const runs: Record<string, number> = {}
      const crash = { on: true }
      const first = yield* harnessOver(storage, runs, crash)
      yield* Effect.exit(first.execute(undefined, { executionId: "five" }))
      assert.deepStrictEqual(runs, { a: 1, b: 1, c: 1, d: 1, e: 1 })

      crash.on = false
      const second = yield* harnessOver(storage, runs, crash)
      const resumed = Option.getOrThrow(yield* second.resume("five"))
      assert.strictEqual(resumed.output, "ABCDE")
      assert.deepStrictEqual(runs, { a: 2, b: 2, c: 1, d: 1, e: 1 })
    }))

  it.effect("the ledger itself: loaded entries replay after re-recorded steps evicted their keys", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const store = yield* CheckpointStore.makeWith(storage)
      const ledgers = yield* StepLedger.makeWith(store, { retention: { maxEntries: 3 } })
      const first = yield* ledgers.open("x")
      for (const name of names) yield* first.record(`/${name}#0`, { stepId: name, kind: "code" }, name)
      const second = yield* ledgers.open("x")
      const replayed: Array<string> = []
      for (const name of names) {
        const found = yield* second.lookup(`/${name}#0`, { stepId: name, kind: "code" })
        if (Option.isSome(found)) replayed.push(found.value as string)
        else yield* second.record(`/${name}#0`, { stepId: name, kind: "code" }, name)
      }
      assert.deepStrictEqual(replayed, ["c", "d", "e"])
      // Storage still keeps only maxEntries keys.
      assert.isAtMost((yield* storage.list("execution:x:ledger:")).length, 3)
    }))

  it.effect("a ledger opened again in the same process still says a step's record was evicted (a trace marks its re-run)", () =>
    Effect.gen(function*() {
      const store = yield* CheckpointStore.makeWith(yield* makeMemory)
      const ledgers = yield* StepLedger.makeWith(store, { retention: { maxEntries: 3 } })
      const first = yield* ledgers.open("y")
      for (const name of names) yield* first.record(`/${name}#0`, { stepId: name, kind: "code" }, name)
      const resumed = yield* ledgers.open("y")
      assert.deepStrictEqual(resumed.replayAt("/a#0", { stepId: "a", kind: "code" }), { _tag: "Miss", evicted: true })
      assert.deepStrictEqual(resumed.replayAt("/e#0", { stepId: "e", kind: "code" })._tag, "Hit")
      // A path never recorded is a plain miss; another execution knows nothing of y's evictions.
      assert.deepStrictEqual(resumed.replayAt("/f#0", { stepId: "f", kind: "code" }), { _tag: "Miss", evicted: false })
      const other = yield* ledgers.open("z")
      assert.deepStrictEqual(other.replayAt("/a#0", { stepId: "a", kind: "code" }), { _tag: "Miss", evicted: false })
    }))
})
