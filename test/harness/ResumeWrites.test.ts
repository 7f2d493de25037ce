import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

class Refused {
  readonly _tag = "Refused"
}

let lastRuns = 0
const leaf = runCode("leaf", (i: number) => Effect.succeed(i * 2))
// Fails every time it runs, so the execution stays resumable.
const last = runCode("last", (_: number) => Effect.suspend(() => (lastRuns++, Effect.fail(new Refused()))))
const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += yield* ctx.run(leaf, i)
    return yield* ctx.run(last, acc)
  }))

/** Memory storage whose writes are counted. */
const counting = Effect.map(makeMemory, (base) => {
  const writes: Array<string> = []
  const storage: StorageAdapterShape = {
    ...base,
    set: (key, value) => Effect.andThen(Effect.sync(() => writes.push(key)), base.set(key, value))
  }
  return { storage, writes }
})

const host = (storage: StorageAdapterShape) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    return yield* AgentHarness.make({ name: "resume-writes", agentGraph: root }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })

describe("resume writes", () => {
  it.effect("a resume that replays every recorded step and changes nothing writes nothing before the run moves on", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* counting
      const first = yield* Effect.exit((yield* host(storage)).execute(20, { executionId: "quiet" }))
      assert.isTrue(Exit.isFailure(first))
      writes.length = 0
      lastRuns = 0
      const resumed = yield* Effect.exit((yield* host(storage)).resume("quiet"))
      assert.isTrue(Exit.isFailure(resumed))
      assert.strictEqual(lastRuns, 1, "the unrecorded step ran again")
      // No checkpoint, no ledger record: only the mark that this run failed (docs/cli.md#execution-status).
      assert.deepStrictEqual(writes, ["execution:quiet:failed"])
      // Still resumable from the snapshot the first run left.
      const again = yield* Effect.exit((yield* host(storage)).resume("quiet"))
      assert.isTrue(Exit.isFailure(again))
      assert.strictEqual(lastRuns, 2)
    }))

  it.effect("a resume given a parent still checkpoints first, so the index names the parent", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* counting
      const harness = yield* host(storage)
      yield* Effect.exit(harness.execute(2, { executionId: "child-run" }))
      const parent = yield* harness.createContext({ id: "parent-run" })
      writes.length = 0
      yield* Effect.exit((yield* host(storage)).resume("child-run", { parent }))
      assert.isTrue(writes.includes("execution:child-run:snapshot"))
      const index = yield* storage.get(CheckpointStore.indexKey("child-run"))
      assert.deepStrictEqual(Option.map(index, (record) => (record as { parent?: string }).parent), Option.some("parent-run"))
    }))
})
