/**
 * noetic's in-memory adapter test ("tracks subprocess handles and supports stop"): a
 * handle that already completed, once `stop()` answered `stopped`, reports `stopped`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { createInMemorySubprocessAdapter } from "../../src/promise/index.ts"
import { makeMemory } from "../../src/services/SubprocessAdapter.ts"

describe("in-memory adapter: stop of a completed handle", () => {
  it("facade: tracks subprocess handles and supports stop (noetic's test)", async () => {
    const adapter = createInMemorySubprocessAdapter()
    const handle = await adapter.spawn({ command: "planner", cwd: "/repo", metadata: { role: "planner" } })
    assert.strictEqual(handle.metadata?.runtime, "in-memory")
    assert.strictEqual((await adapter.get(handle.id))?.status, "completed")
    const stopped = await adapter.stop(handle.id, "done")
    assert.strictEqual(stopped.kind, "stopped")
    assert.strictEqual((await adapter.get(handle.id))?.status, "stopped")
    assert.strictEqual(stopped.handle?.status, "stopped")
    await adapter.close()
  })

  it.effect("engine: the handle reports stopped; its outcome stays what it was", () =>
    Effect.gen(function*() {
      const adapter = yield* makeMemory
      const handle = yield* adapter.spawn({
        stepId: "s",
        module: undefined,
        input: 1,
        executionId: "e",
        parentExecutionId: undefined,
        runInProcess: Effect.succeed("done")
      })
      assert.strictEqual(yield* handle.await, "done")
      assert.strictEqual(yield* handle.status, "succeeded")
      yield* adapter.stop(handle.handleId)
      const got = Option.getOrThrow(yield* adapter.get(handle.handleId))
      assert.strictEqual(yield* got.status, "stopped")
      assert.deepStrictEqual(yield* Effect.exit(handle.await), Exit.succeed("done"))
    }))
})
