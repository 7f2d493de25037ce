import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import { crashAndResume, exploreCrashPoints, FaultyStorage, isHostCrash, type Workflow } from "../../src/testing/index.ts"

describe("testing: crash points by operation index", () => {
  it.effect("before: the operation never lands; after: it lands and the caller dies; later operations die too", () =>
    Effect.gen(function*() {
      const disk = yield* makeMemory
      const before = FaultyStorage.make(disk, { crashAt: { index: 1, when: "before" } })
      yield* before.storage.set("a", 1)
      assert.isTrue(isHostCrash(yield* Effect.exit(before.storage.set("b", 2))))
      assert.isTrue(isHostCrash(yield* Effect.exit(before.storage.get("a"))))
      assert.isTrue(Option.isNone(yield* disk.get("b")))

      const after = FaultyStorage.make(disk, { crashAt: { index: 0, when: "after" } })
      assert.isTrue(isHostCrash(yield* Effect.exit(after.storage.set("c", 3))))
      assert.deepStrictEqual(yield* disk.get("c"), Option.some(3))
      assert.isTrue(after.crashed())
    }))

  it.effect("failAt fails one operation with a typed Io error; after: the write landed anyway", () =>
    Effect.gen(function*() {
      const disk = yield* makeMemory
      const faulty = FaultyStorage.make(disk, { failAt: { index: 1, when: "after" } })
      yield* faulty.storage.set("a", 1)
      const error = yield* Effect.flip(faulty.storage.set("b", 2))
      assert.strictEqual(error.reason._tag, "Io")
      assert.deepStrictEqual(yield* disk.get("b"), Option.some(2))
      yield* faulty.storage.set("c", 3)
      assert.isFalse(faulty.crashed())
    }))

  it.effect("a crash at a write can leave a torn temp file, which a reopened file storage sweeps and never lists", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-torn-"))
      const faulty = FaultyStorage.make(yield* FileStorage.make({ root }), {
        crashAt: { index: 0, when: "before" },
        tornTempFileIn: root
      })
      yield* Effect.exit(faulty.storage.set("key", { text: "x".repeat(100) }))
      assert.isTrue(Fs.readdirSync(root).some((name) => name.startsWith(".tmp-")))
      const reopened = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* reopened.list(""), [])
      assert.isFalse(Fs.readdirSync(root).some((name) => name.startsWith(".tmp-")))
    }))

  it.effect("crashAndResume and exploreCrashPoints drive a user's workflow through every crash point", () =>
    Effect.gen(function*() {
      let bodies = 0
      const step = (id: string) => runCode(id, (n: number) => Effect.sync(() => (bodies++, n * 2)))
      const graph = runCode("root", (n: number, ctx) =>
        Effect.gen(function*() {
          const a = yield* ctx.run(step("a"), n)
          return yield* ctx.run(step("b"), a)
        }))
      const harnessOver = (storage: StorageAdapterShape) =>
        Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
          AgentHarness.make({ name: "user", agentGraph: graph }).pipe(
            Effect.provideService(CheckpointStore.CheckpointStore, store)
          ))
      const workflowOver = (disk: StorageAdapterShape): Workflow<number> => ({
        open: Effect.succeed(disk),
        start: (storage) => Effect.map(Effect.orDie(Effect.flatMap(harnessOver(storage), (h) => h.execute(3, { executionId: "u" }))), (r) => r.output),
        resume: (storage) =>
          Effect.orDie(Effect.gen(function*() {
            const harness = yield* harnessOver(storage)
            const resumed = yield* harness.resume("u")
            return Option.isSome(resumed) ? resumed.value.output : (yield* harness.execute(3, { executionId: "u" })).output
          }))
      })
      const outcome = yield* crashAndResume(workflowOver(yield* makeMemory), { index: 4, when: "after" })
      assert.isTrue(outcome.struck)
      assert.isTrue(outcome.resumed)
      assert.strictEqual(outcome.output, 12)

      const report = yield* exploreCrashPoints({ workflow: () => Effect.map(makeMemory, workflowOver) })
      assert.isAbove(report.tried, 4)
      assert.strictEqual(report.recovered, report.tried)
      assert.isAbove(bodies, 0)
    }))
})
