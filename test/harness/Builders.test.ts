/**
 * The Effect API's step builders in noetic's option-object shape (bodies return
 * Effects): the same options, defaults and build-time codes as the Promise facade.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { EmptyStepId } from "../../src/Errors.ts"
import {
  type AnyStep,
  callModel,
  conditional,
  inParallel,
  invokeTool,
  loop,
  runCode,
  type Snapshot,
  spawn
} from "../../src/harness/Step.ts"
import * as Facade from "../../src/promise/index.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, StorageAdapter } from "../../src/services/StorageAdapter.ts"
import { facadeHelperStep, helperStep } from "../fixtures/stepHelpers.ts"

const codeOf = (build: () => unknown): string => {
  try {
    build()
  } catch (error) {
    const e = error as { _tag?: string; code?: string; hint?: string }
    // An empty id is its own class, as the interpreter's check of a plain-object step is.
    assert.strictEqual(e._tag, e.code === "EMPTY_STEP_ID" ? "EmptyStepId" : "StepConfigInvalid")
    if (e.code === "EMPTY_STEP_ID") assert.instanceOf(error, EmptyStepId)
    assert.isAbove(e.hint?.length ?? 0, 0)
    return e.code!
  }
  throw new Error("expected StepConfigInvalid or EmptyStepId")
}

const runGraph = <S extends AnyStep>(graph: S, input: unknown) =>
  Effect.flatMap(AgentHarness.make({ name: "builders", agentGraph: graph }), (harness) =>
    Effect.map(harness.execute(input as never), (result) => result.output as unknown))

describe("Effect builders: noetic's option objects", () => {
  it("every builder throws noetic's build-time codes", () => {
    const body = runCode({ id: "b", execute: (n: number) => Effect.succeed(n) })
    assert.strictEqual(codeOf(() => runCode({ id: " ", execute: () => Effect.succeed(1) })), "EMPTY_STEP_ID")
    assert.strictEqual(codeOf(() => runCode({ id: "x" } as never)), "MISSING_EXECUTE_FUNCTION")
    assert.strictEqual(codeOf(() => callModel({ id: "m", model: "" })), "MISSING_MODEL")
    assert.strictEqual(codeOf(() => invokeTool({ id: "t" } as never)), "MISSING_TOOL")
    assert.strictEqual(codeOf(() => spawn({ id: "s" } as never)), "MISSING_CHILD_STEP")
    assert.strictEqual(codeOf(() => loop({ id: "l", steps: [], until: () => ({ stop: true }) })), "MISSING_LOOP_BODY")
    assert.strictEqual(codeOf(() => loop({ id: "l", steps: [body] } as never)), "MISSING_UNTIL_PREDICATE")
    assert.strictEqual(codeOf(() => inParallel({ id: "p", mode: "all", paths: () => [body] } as never)), "MISSING_MERGE_FUNCTION")
    assert.strictEqual(codeOf(() => conditional({ id: "c" } as never)), "MISSING_ROUTE_FUNCTION")
    assert.strictEqual(loop({ id: "l", steps: [body], until: () => ({ stop: true }) }).maxIterations, 1000)
  })

  it.effect("runCode, invokeTool, conditional, inParallel and loop run with Effect bodies", () =>
    Effect.gen(function*() {
      const double = runCode({ id: "double", execute: (n: number) => Effect.succeed(n * 2) })
      assert.strictEqual(yield* runGraph(double, 4), 8)

      const tool = { name: "add", execute: (args: { a: number; b: number }) => Effect.succeed(args.a + args.b) }
      assert.strictEqual(yield* runGraph(invokeTool({ id: "sum", tool, args: { b: 10 } }), { a: 1, b: 2 }), 11)

      const route = conditional({ id: "route", route: (n: number) => (n > 0 ? double : null) })
      assert.strictEqual(yield* runGraph(route, 3), 6)
      assert.strictEqual(yield* runGraph(route, -3), -3)

      const settled = inParallel({
        id: "both",
        mode: "settle",
        paths: () => [double, runCode({ id: "bad", execute: () => Effect.fail("nope") })],
        merge: (results) => results.map((r) => `${r.stepId}:${r.status}`).join(",")
      })
      assert.strictEqual(yield* runGraph(settled, 1), "double:fulfilled,bad:rejected")

      const seen: Array<number> = []
      const counted = loop({
        id: "count",
        steps: [runCode({ id: "inc", execute: (n: number) => Effect.succeed(n + 1) })],
        until: (snapshot: Snapshot) => {
          seen.push(snapshot.stepCount)
          return Effect.succeed({ stop: snapshot.lastOutput === 3 })
        }
      })
      assert.strictEqual(yield* runGraph(counted, 0), 3)
      assert.deepStrictEqual(seen, [1, 2, 3])
    }))

  it.effect("retry re-runs the body; a resumed run replays its one recorded success", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const store = CheckpointStore.layer.pipe(Layer.provide(Layer.succeed(StorageAdapter, storage)))
      let calls = 0
      let crash = true
      const flaky = runCode({
        id: "flaky",
        retry: { maxAttempts: 3, backoff: "fixed", initialDelay: 0 },
        execute: () =>
          Effect.suspend(() => {
            calls++
            return calls < 3 ? Effect.fail("transient" as const) : Effect.succeed(calls)
          })
      })
      const root = runCode({
        id: "root",
        execute: (_: void, ctx) =>
          Effect.flatMap(ctx.run(flaky, undefined), (n) => (crash ? Effect.die("host died") : Effect.succeed(n)))
      })
      const harness = yield* AgentHarness.make({ name: "retry", agentGraph: root }).pipe(Effect.provide(store))
      yield* Effect.exit(harness.execute(undefined, { executionId: "e" }))
      assert.strictEqual(calls, 3)
      crash = false
      const resumed = yield* harness.resume("e")
      assert.deepStrictEqual(resumed._tag === "Some" ? resumed.value.output : undefined, 3)
      assert.strictEqual(calls, 3)
    }))

  it.live("spawn timeout fails the step with SpawnTimeout", () =>
    Effect.gen(function*() {
      const step = spawn({ id: "bounded", child: runCode({ id: "slow", execute: () => Effect.never }), timeout: 20 })
      const error = yield* Effect.flip(runGraph(step, undefined))
      assert.strictEqual((error as { _tag: string })._tag, "SpawnTimeout")
    }))
})

describe("a step's module: the module that called its builder", () => {
  const here = import.meta.url
  const helpers = new URL("../fixtures/stepHelpers.ts", here).href
  const leaf = runCode("leaf", (n: number) => Effect.succeed(n))

  it("every builder, called here, records this module", () => {
    const steps: Array<AnyStep> = [
      leaf,
      callModel({ id: "model", model: "m" }),
      invokeTool({ id: "tool", tool: "t" }),
      conditional("cond", { if: () => true, then: leaf }),
      conditional({ id: "route", route: () => leaf }),
      inParallel("par", [leaf]),
      inParallel({ id: "paths", mode: "race", paths: () => [leaf] }),
      loop({ id: "loop", steps: [leaf], until: () => Effect.succeed({ stop: true }) }),
      spawn("child", leaf)
    ]
    for (const step of steps) assert.strictEqual(step.module, here, step.id)
  })

  it("the Promise facade's builders record the module that called them, not the facade's", () => {
    assert.strictEqual(Facade.runCode("leaf", (n: number) => n).module, here)
    assert.strictEqual(Facade.spawn("child", Facade.runCode("leaf", (n: number) => n)).module, here)
  })

  it("a step built by a helper records the helper's module, through either builder", () => {
    assert.strictEqual(helperStep("helped").module, helpers)
    assert.strictEqual(facadeHelperStep("helped").module, helpers)
  })

  it("an explicit module is kept as given", () => {
    assert.strictEqual(runCode("pinned", (n: number) => Effect.succeed(n), { module: "file:///elsewhere.js" }).module, "file:///elsewhere.js")
  })

  it.effect("a step built inline in a running step's body records this module", () =>
    Effect.gen(function*() {
      const built: Array<AnyStep> = []
      const root = runCode("root", (_: void, ctx) =>
        Effect.gen(function*() {
          let total = 0
          for (let i = 0; i < 3; i++) {
            const step = runCode("inline", (n: number) => Effect.succeed(n + 1))
            built.push(step)
            total += yield* ctx.run(step, i)
          }
          return total
        }))
      assert.strictEqual(yield* runGraph(root, undefined), 6)
      assert.deepStrictEqual(built.map((step) => step.module), [here, here, here])
    }))
})
