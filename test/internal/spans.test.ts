/**
 * The per-step spans: opened, as parents of what runs below, when a tracer is
 * installed; without one only their stack frame, so a failure still names its step.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Tracer } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import { spanned } from "../../src/internal/spans.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"

const capturingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

const parentName = Effect.map(Effect.option(Effect.currentParentSpan), (span) =>
  Option.match(span, { onNone: () => undefined, onSome: (found) => found._tag === "Span" ? found.name : "external" }))

describe("spanned", () => {
  it.effect("with a tracer: a span with its attributes and marks, parent of the spans below it", () =>
    Effect.gen(function*() {
      const { spans, tracer } = capturingTracer()
      const inside = yield* spanned("step", { attributes: { path: "/a#0" } }, (span) => {
        span.attribute("replay", "miss")
        return Effect.andThen(Effect.withSpan(Effect.void, "child"), parentName)
      }).pipe(Effect.withTracer(tracer))
      assert.strictEqual(inside, "step")
      const step = spans.find((span) => span.name === "step")!
      assert.strictEqual(step.attributes.get("path"), "/a#0")
      assert.strictEqual(step.attributes.get("replay"), "miss")
      assert.strictEqual(step.status._tag, "Ended")
      const child = spans.find((span) => span.name === "child")!
      assert.strictEqual(Option.getOrUndefined(child.parent)?.spanId, step.spanId)
    }))

  it.effect("without a tracer: no span, and a failure's cause still names it", () =>
    Effect.gen(function*() {
      const inside = yield* Effect.withSpan(spanned("step", {}, () => parentName), "outer")
      assert.strictEqual(inside, "outer")
      const exit = yield* Effect.exit(spanned("step", {}, () => Effect.fail(new Error("boom"))))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.include(Cause.pretty(exit.cause), "at step")
    }))

  it.effect("a step that fails under a harness without a tracer names its steps in the cause", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const leaf = runCode("leaf", () => Effect.fail(new Error("boom")))
      const harness = yield* AgentHarness.make({
        name: "spans",
        agentGraph: runCode("root", (_: void, ctx) => ctx.run(leaf, undefined))
      }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, yield* CheckpointStore.makeWith(storage)))
      const exit = yield* Effect.exit(harness.execute(undefined, { executionId: "x" }))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const pretty = Cause.pretty(exit.cause)
        assert.include(pretty, "at runCode leaf")
        assert.include(pretty, "at runCode root")
      }
    }))
})
