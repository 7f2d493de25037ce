/**
 * `lastLayerUsage` as noetic's `context-types.mdx` defines it: per layer (sorted by
 * id) its tokens, items, band, whether a pin was replayed and its churn; the system
 * prompt, tools and history buckets; their sum.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { ContextLayer } from "../../src/harness/AgentContext.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"
import { callModel, runCode } from "../../src/harness/Step.ts"
import * as ScriptedModel from "../../src/layers/ScriptedModel.ts"
import { ModelProvider } from "../../src/services/ModelProvider.ts"

/** An anchored layer rendering its state, and a live one. */
const plan: ContextLayer<string> = {
  id: "plan",
  scope: "execution",
  lifecycle: { init: () => Effect.succeed({ state: "step 1" }), recall: ({ state }) => Effect.succeed(`plan: ${state}`) }
}
const clock: ContextLayer<undefined> = {
  id: "clock",
  placement: "live",
  lifecycle: { recall: () => Effect.succeed("now: noon") }
}

describe("lastLayerUsage", () => {
  it.effect("buckets and per-layer entries of each assembly; a changed anchored layer is served pinned with its churn", () =>
    Effect.gen(function*() {
      const harness = yield* AgentHarness.make({ name: "usage", context: [plan, clock] })
      const ctx = yield* harness.createContext({ threadId: "t-usage" })
      yield* ctx.append([{ type: "message", id: "u1", role: "user", content: "hello there" }])
      const tools = [{ name: "search", description: "finds things" }]
      const first = LayerLifecycle.layerUsage(ctx, "m1", yield* LayerLifecycle.assembleView(ctx), { instructions: "be brief", tools })
      assert.deepStrictEqual(first.layers.map((entry) => [entry.layerId, entry.placement, entry.served]), [
        ["clock", "live", "fresh"],
        ["plan", "anchor", "fresh"]
      ])
      assert.strictEqual(first.layers[1]!.tokenCount, LayerLifecycle.estimateTokens("plan: step 1"))
      assert.strictEqual(first.systemPromptTokens, LayerLifecycle.estimateTokens("be brief"))
      assert.strictEqual(first.toolsTokens, LayerLifecycle.estimateTokens(JSON.stringify(tools)))
      assert.strictEqual(first.historyTokens, LayerLifecycle.estimateTokens(JSON.stringify(ctx.items[0])))
      assert.strictEqual(
        first.totalUsedTokens,
        first.systemPromptTokens + first.toolsTokens + first.historyTokens + first.layers[0]!.tokenCount + first.layers[1]!.tokenCount
      )
      assert.strictEqual(first.executionId, ctx.id)
      assert.strictEqual(first.modelId, "m1")

      ctx.setLayerStateValue("plan", "step 2")
      const second = LayerLifecycle.layerUsage(ctx, "m1", yield* LayerLifecycle.assembleView(ctx))
      const changed = second.layers.find((entry) => entry.layerId === "plan")!
      assert.strictEqual(changed.served, "pinned")
      assert.isTrue(changed.changed)
      assert.strictEqual(changed.churnRate, 1)
      assert.strictEqual(changed.rebillTokens, LayerLifecycle.estimateTokens("plan: step 2"))
      // The pinned replay's items are what the model saw.
      assert.include(JSON.stringify(changed.items), "step 1")
      assert.strictEqual(second.systemPromptTokens + second.toolsTokens, 0)

      const third = LayerLifecycle.layerUsage(ctx, "m1", yield* LayerLifecycle.assembleView(ctx))
      const steady = third.layers.find((entry) => entry.layerId === "plan")!
      assert.isTrue(steady.changed, "still differs from the pin")
      assert.strictEqual(steady.churnRate, 1)
      ctx.setLayerStateValue("plan", "step 1")
      const back = LayerLifecycle.layerUsage(ctx, "m1", yield* LayerLifecycle.assembleView(ctx))
      const settled = back.layers.find((entry) => entry.layerId === "plan")!
      assert.isFalse(settled.changed)
      assert.strictEqual(settled.churnRate, 2 / 3)
    }).pipe(Effect.scoped))

  it.effect("a callModel step leaves the breakdown of its request on the context", () =>
    Effect.gen(function*() {
      const harness = yield* AgentHarness.make({ name: "usage-model", context: [plan, clock] })
      const ctx = yield* harness.createContext()
      assert.isUndefined(ctx.meter.lastLayerUsage)
      yield* harness.run(runCode("turn", (_: void, step) => step.run(callModel("ask", { model: "scripted-1", instructions: "be brief" }), "what now?")), undefined, ctx).pipe(
        Effect.provide(Layer.succeed(ModelProvider, {
          name: "scripted",
          mode: "round",
          call: () =>
            Effect.succeed({
              items: [{ type: "message", id: "a1", role: "assistant", content: [{ type: "output_text", text: "carry on" }] }],
              usage: { inputTokens: 10, outputTokens: 2 }
            })
        })),
        // The step's type asks for a LanguageModel; the ModelProvider above is the one called.
        Effect.provide(ScriptedModel.layer([]))
      )
      const usage = ctx.meter.lastLayerUsage!
      assert.strictEqual(usage.executionId, ctx.id)
      assert.strictEqual(usage.modelId, "scripted-1")
      assert.deepStrictEqual(usage.layers.map((entry) => entry.layerId), ["clock", "plan"])
      assert.isAbove(usage.historyTokens, 0)
      assert.strictEqual(usage.systemPromptTokens, LayerLifecycle.estimateTokens("be brief"))
      assert.strictEqual(
        usage.totalUsedTokens,
        usage.systemPromptTokens + usage.toolsTokens + usage.historyTokens + usage.layers.reduce((sum, entry) => sum + entry.tokenCount, 0)
      )
    }).pipe(Effect.scoped))
})
