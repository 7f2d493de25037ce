import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { SETTLED_HANDLES_KEPT } from "../../src/internal/settledHandles.ts"
import { makeMemory } from "../../src/services/SubprocessAdapter.ts"

describe("SubprocessAdapter.makeMemory", () => {
  it.effect("keeps answering get for recent settled children and forgets the oldest, so its map stays bounded", () =>
    Effect.gen(function*() {
      const adapter = yield* makeMemory
      const handles = []
      for (let i = 0; i < SETTLED_HANDLES_KEPT + 10; i++) {
        const handle = yield* adapter.spawn({
          stepId: "child",
          module: undefined,
          input: i,
          executionId: `exec-${i}`,
          parentExecutionId: undefined,
          runInProcess: Effect.succeed(i)
        })
        assert.strictEqual(yield* handle.await, i)
        handles.push(handle)
      }
      assert.isTrue(Option.isNone(yield* adapter.get(handles[0]!.handleId)))
      assert.isTrue(Option.isNone(yield* adapter.get(handles[9]!.handleId)))
      assert.isTrue(Option.isSome(yield* adapter.get(handles[10]!.handleId)))
      assert.isTrue(Option.isSome(yield* adapter.get(handles.at(-1)!.handleId)))
    }))
})

describe("SubprocessAdapter.makeMemory failures", () => {
  it.effect("a child that dies of a defect fails ChildFailed with the defect's name and message; a failure keeps an Error cause's", () =>
    Effect.gen(function*() {
      const adapter = yield* makeMemory
      const settle = (runInProcess: Effect.Effect<unknown, unknown>) =>
        Effect.flatMap(
          adapter.spawn({ stepId: "child", module: undefined, input: 1, executionId: "e", parentExecutionId: undefined, runInProcess }),
          (handle) => Effect.flip(handle.await)
        )
      const died = yield* settle(Effect.sync(() => {
        throw new TypeError("bad input")
      }))
      assert.strictEqual(died.reason._tag, "ChildFailed")
      assert.strictEqual(died.reason.message, "bad input")
      assert.deepStrictEqual((died.reason as { error: unknown }).error, { name: "TypeError", message: "bad input" })
      const failed = yield* settle(Effect.fail({ step: "x", cause: new RangeError("too far") }))
      assert.deepStrictEqual((failed.reason as { error: unknown }).error, {
        step: "x",
        cause: { name: "RangeError", message: "too far" }
      })
    }))
})

describe("SubprocessAdapter.makeMemory handle ids", () => {
  it.effect("a handle id spawned again after it settled is not forgotten while its new child runs", () =>
    Effect.gen(function*() {
      const adapter = yield* makeMemory
      const request = (handleId: string, runInProcess: Effect.Effect<unknown>) => ({
        handleId,
        stepId: "child",
        module: undefined,
        input: 0,
        executionId: `exec-${handleId}`,
        parentExecutionId: undefined,
        runInProcess
      })
      yield* (yield* adapter.spawn(request("reused", Effect.succeed(0)))).await
      const running = yield* adapter.spawn(request("reused", Effect.never))
      for (let i = 0; i < SETTLED_HANDLES_KEPT; i++) {
        yield* (yield* adapter.spawn(request(`other-${i}`, Effect.succeed(i)))).await
      }
      assert.isTrue(Option.isSome(yield* adapter.get("reused")))
      yield* adapter.stop("reused")
      assert.strictEqual(yield* running.status, "stopped")
    }))
})
