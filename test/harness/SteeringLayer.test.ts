/**
 * noetic's `steering()` in the engine (src/harness/SteeringLayer.ts): rules at the two
 * steering hooks, the most restrictive verdict, the ledger, refusals.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"
import * as SteeringLayer from "../../src/harness/SteeringLayer.ts"
import { runCode, spawn } from "../../src/harness/Step.ts"

const noDeleteOutsideWorkspace: SteeringLayer.SteeringRule = {
  id: "no-delete-outside-workspace",
  appliesTo: ["beforeToolCall"],
  predicate: (params) => {
    if (!("toolName" in params) || params.toolName !== "deleteFile") return { action: "allow" }
    const args = params.toolArgs as { path: string }
    return args.path.startsWith("/workspace/") ? { action: "allow" } : { action: "deny", guidance: "Deletion outside /workspace/ is not allowed." }
  }
}

describe("steering", () => {
  it.effect("has noetic's id, slot, scope, placement, budget and timeouts", () =>
    Effect.gen(function*() {
      const layer = yield* SteeringLayer.steering({ rules: [] })
      assert.deepStrictEqual(
        [layer.id, layer.slot, layer.scope, layer.placement, layer.budget, layer.timeouts],
        ["steering", 90, "execution", "live", { min: 0, max: 500 }, { beforeToolCall: 5_000, afterModelCall: 10_000 }]
      )
    }))

  it.effect("a deny rule blocks the tool call with its guidance; each check is in the ledger with its time", () =>
    Effect.gen(function*() {
      const layer = yield* SteeringLayer.steering({ rules: [noDeleteOutsideWorkspace] })
      const harness = yield* AgentHarness.make({ name: "steer", context: [layer] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      yield* TestClock.adjust(5)
      const denied = yield* LayerLifecycle.beforeToolCallLayers(ctx, { toolName: "deleteFile", toolArgs: { path: "/etc/passwd" } })
      assert.deepStrictEqual(denied, { action: "deny", guidance: "Deletion outside /workspace/ is not allowed." })
      const allowed = yield* LayerLifecycle.beforeToolCallLayers(ctx, { toolName: "deleteFile", toolArgs: { path: "/workspace/a" } })
      assert.deepStrictEqual(allowed, { action: "allow" })
      yield* LayerLifecycle.afterModelCallLayers(ctx, { items: [], usage: { inputTokens: 7, outputTokens: 3 } })
      assert.deepStrictEqual(ctx.layerState<SteeringLayer.SteeringState>("steering")!.ledger, [
        {
          kind: "tool_call",
          toolName: "deleteFile",
          toolArgs: { path: "/etc/passwd" },
          ruleId: "steering",
          action: "deny",
          guidance: "Deletion outside /workspace/ is not allowed.",
          timestamp: 5
        },
        { kind: "tool_call", toolName: "deleteFile", toolArgs: { path: "/workspace/a" }, action: "allow", timestamp: 5 },
        { kind: "model_turn", tokenUsage: { input: 7, output: 3 }, action: "allow", timestamp: 5 }
      ])
    }).pipe(Effect.scoped))

  it.effect("guides are joined (an empty one drops nothing); a deny stops the later rules; rules apply only to their hooks", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const rule = (id: string, decision: SteeringLayer.SteeringRule["predicate"], appliesTo: SteeringLayer.SteeringRule["appliesTo"] = ["beforeToolCall", "afterModelCall"]) => ({
        id,
        appliesTo,
        predicate: (params: SteeringLayer.SteeringRuleParams) => (calls.push(id), decision!(params))
      })
      const layer = yield* SteeringLayer.steering({
        rules: [
          rule("a", () => ({ action: "guide", guidance: "Prefer the safe API" })),
          rule("b", () => ({ action: "guide" })),
          rule("only-tools", () => ({ action: "deny", guidance: "no" }), ["beforeToolCall"]),
          rule("never", () => ({ action: "allow" }))
        ]
      })
      const harness = yield* AgentHarness.make({ name: "steer", context: [layer] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      assert.deepStrictEqual(yield* LayerLifecycle.afterModelCallLayers(ctx, { items: [] }), { action: "guide", guidance: "Prefer the safe API" })
      assert.deepStrictEqual(calls, ["a", "b", "never"])
      calls.length = 0
      assert.deepStrictEqual(yield* LayerLifecycle.beforeToolCallLayers(ctx, { toolName: "x", toolArgs: {} }), { action: "deny", guidance: "no" })
      assert.deepStrictEqual(calls, ["a", "b", "only-tools"])
    }).pipe(Effect.scoped))

  it.effect("the ledger keeps the newest maxLedgerEntries; onComplete records the outcome; a child starts with a copy of the ledger", () =>
    Effect.gen(function*() {
      const layer = yield* SteeringLayer.steering({ rules: [], maxLedgerEntries: 2 })
      let childLedger: unknown
      const child = runCode("child", (_: string, ctx) => Effect.sync(() => void (childLedger = ctx.layerState("steering"))))
      const harness = yield* AgentHarness.make({ name: "steer", context: [layer] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      for (const toolName of ["one", "two", "three"]) yield* LayerLifecycle.beforeToolCallLayers(ctx, { toolName, toolArgs: {} })
      assert.deepStrictEqual(ctx.layerState<SteeringLayer.SteeringState>("steering")!.ledger.map((e) => e.toolName), ["two", "three"])
      yield* harness.run(spawn({ id: "sp", child }), "go", ctx)
      assert.deepStrictEqual((childLedger as SteeringLayer.SteeringState).ledger.map((e) => e.toolName), ["two", "three"])
      yield* harness.cancel(ctx, "stop")
      const ledger = ctx.layerState<SteeringLayer.SteeringState>("steering")!.ledger
      assert.deepStrictEqual(ledger.map((e) => e.kind), ["tool_call", "custom"])
      assert.deepStrictEqual(ledger[1]!.custom, { outcome: "aborted" })
    }).pipe(Effect.scoped))

  it.effect("queued feedback is recalled once as <steering_feedback>", () =>
    Effect.gen(function*() {
      const layer = yield* SteeringLayer.steering({ rules: [] })
      const harness = yield* AgentHarness.make({ name: "steer", context: [layer] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      yield* ctx.updateLayer<SteeringLayer.SteeringState>("steering", (s) => ({ ...s!, pendingAsync: [{ ruleId: "tone", guidance: "be brief" }] }))
      const [entry] = yield* LayerLifecycle.recallLayers(ctx)
      assert.deepStrictEqual((entry!.items[0]!.content as any)[0].text, "<steering_feedback>\n[tone] be brief\n</steering_feedback>")
      assert.deepStrictEqual(yield* LayerLifecycle.recallLayers(ctx), [])
    }).pipe(Effect.scoped))

  it.effect("refuses llmEval rules by name, and bad rules or counts", () =>
    Effect.gen(function*() {
      const code = (options: unknown) => Effect.map(Effect.flip(SteeringLayer.steering(options as SteeringLayer.SteeringOptions)), (e) => e.code)
      assert.strictEqual(yield* code({ rules: [{ id: "llm", appliesTo: ["afterModelCall"], llmEval: { mode: "sync", prompt: "ok?" } }] }), "UNSUPPORTED_OPTION")
      assert.strictEqual(yield* code({ rules: [{ id: "x", appliesTo: ["onStore"], predicate: () => null }] }), "INVALID_CONTEXT_LAYER")
      assert.strictEqual(yield* code({ rules: [{ id: "x", appliesTo: ["beforeToolCall"] }] }), "INVALID_CONTEXT_LAYER")
      assert.strictEqual(yield* code({ rules: [noDeleteOutsideWorkspace, noDeleteOutsideWorkspace] }), "INVALID_CONTEXT_LAYER")
      assert.strictEqual(yield* code({ rules: [], maxLedgerEntries: 0 }), "INVALID_CONTEXT_LAYER")
      assert.strictEqual(yield* code({}), "INVALID_CONTEXT_LAYER")
    }))
})
