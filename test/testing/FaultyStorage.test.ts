import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import { crashOnTick, FaultyStorage, isHostCrash } from "../../src/testing/index.ts"

const harnessOver = (storage: StorageAdapterShape, graph: Parameters<typeof AgentHarness.make>[0]["agentGraph"]) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
    AgentHarness.make({ name: "faulty", agentGraph: graph }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    ))

describe("testing: FaultyStorage", () => {
  it.effect("fails the writes and reads the plan picks with typed Io errors, and records every operation", () =>
    Effect.gen(function*() {
      const faulty = FaultyStorage.make(yield* makeMemory, {
        failWrite: (_, index) => index === 1,
        failRead: (key) => key === "secret"
      })
      yield* faulty.storage.set("a", 1)
      const writeError = yield* Effect.flip(faulty.storage.set("b", 2))
      assert.strictEqual(writeError.reason._tag, "Io")
      yield* faulty.storage.set("c", 3)
      const readError = yield* Effect.flip(faulty.storage.get("secret"))
      assert.strictEqual(readError.reason._tag, "Io")
      assert.deepStrictEqual(yield* faulty.storage.list(""), ["a", "c"])
      assert.strictEqual(faulty.writes(), 2)
      assert.deepStrictEqual(faulty.operations.map((o) => [o.op, o.key, o.injected]), [
        ["set", "a", false],
        ["set", "b", true],
        ["set", "c", false],
        ["get", "secret", true],
        ["list", "", false]
      ])
    }))

  it.effect("a crash after N writes kills the run; a new harness on what landed resumes it", () =>
    Effect.gen(function*() {
      const disk = yield* makeMemory
      let bodies = 0
      const leaf = (id: string) => runCode(id, (n: number) => Effect.sync(() => (bodies++, n + 1)))
      const graph = runCode("root", (n: number, ctx) =>
        Effect.gen(function*() {
          let current = n
          for (const id of ["a", "b", "c", "d"]) current = yield* ctx.run(leaf(id), current)
          return current
        }))
      // Index key, first snapshot, then ledger records: crash once two steps are recorded.
      const faulty = FaultyStorage.make(disk, { crashAfterWrites: 4 })
      const crashed = yield* Effect.exit((yield* harnessOver(faulty.storage, graph)).execute(0, { executionId: "x" }))
      assert.isTrue(isHostCrash(crashed))
      assert.isTrue(faulty.crashed())
      const ranBeforeCrash = bodies

      const resumed = yield* (yield* harnessOver(disk, graph)).resume("x")
      assert.strictEqual(Option.getOrThrow(resumed).output, 4)
      // Only the steps whose records landed before the crash were skipped.
      assert.strictEqual(bodies, ranBeforeCrash + 2)
    }))

  it.effect("crashOnTick dies on the chosen tick only", () =>
    Effect.gen(function*() {
      const crash = crashOnTick(3)
      yield* crash.tick
      yield* crash.tick
      const exit = yield* Effect.exit(crash.tick)
      assert.isTrue(isHostCrash(exit))
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(crash.tick)))
      assert.strictEqual(crash.ticks(), 4)
    }))
})
