import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import { runFailedKey } from "../../src/schema/CheckpointSnapshot.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

class Refused {
  readonly _tag = "Refused"
}

let lastRuns = 0
// What the last step fails with: a `Refused` (its failure text "[object Object]"), or an Error of this message.
let failWith: string | undefined
// Whether the root runs one more leaf before the last step (a step the first run never reached).
let extraStep = false
const leaf = runCode("leaf", (i: number) => Effect.succeed(i * 2))
// Fails every time it runs, so the execution stays resumable.
const last = runCode("last", (_: number) =>
  Effect.suspend(() => (lastRuns++, Effect.fail(failWith === undefined ? new Refused() : new Error(failWith)))))
const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += yield* ctx.run(leaf, i)
    if (extraStep) acc += yield* ctx.run(leaf, steps)
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
      // No checkpoint, no ledger record, and no failure mark: the first run's mark already says
      // this run failed, and how (docs/cli.md#execution-status).
      assert.deepStrictEqual(writes, [])
      // Still resumable from the snapshot the first run left.
      const again = yield* Effect.exit((yield* host(storage)).resume("quiet"))
      assert.isTrue(Exit.isFailure(again))
      assert.strictEqual(lastRuns, 2)
      assert.deepStrictEqual(writes, [])
    }))

  it.effect("a resume that fails otherwise than the mark says rewrites the mark", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* counting
      yield* Effect.exit((yield* host(storage)).execute(5, { executionId: "changed" }))
      writes.length = 0
      failWith = "another failure\nwith a second line"
      try {
        assert.isTrue(Exit.isFailure(yield* Effect.exit((yield* host(storage)).resume("changed"))))
      } finally {
        failWith = undefined
      }
      assert.deepStrictEqual(writes, ["execution:changed:failed"])
      const mark = (yield* storage.get(runFailedKey("changed"))).pipe(Option.getOrThrow) as { at: string; error: string }
      assert.strictEqual(mark.error, "another failure")
    }))

  it.effect("a damaged mark, or none, is written afresh when the resume fails", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* counting
      yield* Effect.exit((yield* host(storage)).execute(5, { executionId: "damaged" }))
      for (const stored of ["not a mark", { version: 1, at: 5, error: "[object Object]" }]) {
        yield* storage.set(runFailedKey("damaged"), stored)
        writes.length = 0
        assert.isTrue(Exit.isFailure(yield* Effect.exit((yield* host(storage)).resume("damaged"))))
        assert.deepStrictEqual(writes, ["execution:damaged:failed"])
      }
      yield* storage.delete(runFailedKey("damaged"))
      writes.length = 0
      assert.isTrue(Exit.isFailure(yield* Effect.exit((yield* host(storage)).resume("damaged"))))
      assert.deepStrictEqual(writes, ["execution:damaged:failed"])
      const mark = (yield* storage.get(runFailedKey("damaged"))).pipe(Option.getOrThrow) as { error: string }
      assert.strictEqual(mark.error, "[object Object]")
    }))

  it.effect("a resume that saved a snapshot rewrites the mark, so it is no older than that snapshot", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* counting
      yield* Effect.exit((yield* host(storage)).execute(2, { executionId: "moved" }))
      writes.length = 0
      // A step the first run did not reach completes (its record lands after a snapshot), then the run fails as before.
      extraStep = true
      try {
        assert.isTrue(Exit.isFailure(yield* Effect.exit((yield* host(storage)).resume("moved"))))
      } finally {
        extraStep = false
      }
      assert.isTrue(writes.includes("execution:moved:snapshot"), writes.join(", "))
      assert.deepStrictEqual(writes.filter((key) => key.endsWith(":failed")), ["execution:moved:failed"])
      const snapshot = (yield* storage.get("execution:moved:snapshot")).pipe(Option.getOrThrow) as { capturedAt: string }
      const mark = (yield* storage.get(runFailedKey("moved"))).pipe(Option.getOrThrow) as { at: string }
      assert.isAtLeast(Date.parse(mark.at), Date.parse(snapshot.capturedAt))
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
