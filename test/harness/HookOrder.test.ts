/**
 * The points where the runtime calls each layer hook, against noetic's documented
 * order (context-layers/index.mdx, "Hook Lifecycle": init → recall → [LLM call] →
 * store → ... (loop) → onComplete → dispose, onSpawn for a child and onReturn to
 * the parent; projectHistory after recall; afterModelCall after each response,
 * beforeToolCall before each tool; every hook in slot order whatever the array
 * order). Recorded from a real run: a callModel step whose first round calls a tool.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { ContextLayer } from "../../src/harness/AgentContext.ts"
import { callModel, runCode, spawn } from "../../src/harness/Step.ts"
import type { ModelTool } from "../../src/harness/ToolLoop.ts"
import * as ScriptedModel from "../../src/layers/ScriptedModel.ts"
import { ModelProvider, type ModelResponse } from "../../src/services/ModelProvider.ts"

/** A layer that records each hook the runtime calls, by name. */
const recording = (id: string, slot: number, log: Array<string>): ContextLayer<number> => ({
  id,
  slot,
  scope: "execution",
  lifecycle: {
    init: () => Effect.sync(() => (log.push(`${id}:init`), { state: 0 })),
    recall: ({ state }) => Effect.sync(() => (log.push(`${id}:recall`), `${id}=${state}`)),
    projectHistory: ({ items }) => Effect.sync(() => (log.push(`${id}:projectHistory`), { items })),
    afterModelCall: () => Effect.sync(() => (log.push(`${id}:afterModelCall`), { decision: { action: "allow" } as const })),
    beforeToolCall: ({ toolName }) =>
      Effect.sync(() => (log.push(`${id}:beforeToolCall:${toolName}`), { decision: { action: "allow" } as const })),
    store: ({ state }) => Effect.sync(() => (log.push(`${id}:store`), { state: state + 1 })),
    onSpawn: ({ parentState }) => Effect.sync(() => (log.push(`${id}:onSpawn`), { childState: parentState })),
    onReturn: ({ result }) => Effect.sync(() => (log.push(`${id}:onReturn`), { result })),
    onComplete: ({ outcome }) => Effect.sync(() => void log.push(`${id}:onComplete:${outcome}`)),
    dispose: () => Effect.sync(() => void log.push(`${id}:dispose`))
  }
})

const round = (items: ModelResponse["items"]): ModelResponse => ({ items, usage: { inputTokens: 1, outputTokens: 1 } })

describe("hook order against noetic's documented lifecycle", () => {
  it.effect("a model call with a tool round, a spawned child, then cancel", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const script = [
        round([{ type: "function_call", id: "fc1", callId: "c1", name: "lookup", arguments: "{}", status: "completed" }]),
        round([{ type: "message", id: "m1", role: "assistant", content: [{ type: "output_text", text: "done" }] }]),
        round([{ type: "message", id: "m2", role: "assistant", content: [{ type: "output_text", text: "child done" }] }])
      ]
      let calls = 0
      const provider = Layer.succeed(ModelProvider, {
        name: "scripted",
        mode: "round",
        call: () => Effect.sync(() => script[calls++]!)
      })
      const lookup: ModelTool = {
        name: "lookup",
        parameters: { type: "object", properties: {} },
        execute: () => Effect.sync(() => (log.push("tool:lookup"), "found"))
      }
      // Array order b, a: slots put a first.
      const layers = [recording("b", 200, log), recording("a", 100, log)]
      const harness = yield* AgentHarness.make({ name: "order", context: layers })
      const ctx = yield* harness.createContext({ threadId: "t-order" })
      const graph = runCode("agent", (_: void, step) =>
        Effect.gen(function*() {
          yield* step.run(callModel({ id: "ask", model: "test/model", tools: [lookup] }), "go")
          log.push("--spawn")
          return yield* step.run(spawn({ id: "child", child: callModel({ id: "sub", model: "test/model" }) }), "sub-go")
        }))
      yield* harness.run(graph, undefined, ctx).pipe(Effect.provide(provider), Effect.provide(ScriptedModel.layer([])))
      log.push("--cancel")
      yield* harness.cancel(ctx, "stop")

      const modelRound = ["a:recall", "b:recall", "a:projectHistory", "b:projectHistory", "a:afterModelCall", "b:afterModelCall"]
      const stored = (from: number) => [...log.slice(from, from + 2)].sort()
      let at = 0
      const expect = (segment: ReadonlyArray<string>, what: string) => {
        assert.deepStrictEqual(log.slice(at, at + segment.length), segment, what)
        at += segment.length
      }
      // init in array order, once, before the first model call.
      expect(["b:init", "a:init"], "init")
      expect(modelRound, "first round: recall, projectHistory, afterModelCall in slot order")
      assert.deepStrictEqual(stored(at), ["a:store", "b:store"], "store after the response (concurrent)")
      at += 2
      expect(["a:beforeToolCall:lookup", "b:beforeToolCall:lookup", "tool:lookup"], "beforeToolCall before the tool")
      expect(modelRound, "second round")
      assert.deepStrictEqual(stored(at), ["a:store", "b:store"])
      at += 2
      expect(["--spawn", "a:onSpawn", "b:onSpawn"], "onSpawn for the child, before it runs")
      expect(modelRound, "the child's model call")
      assert.deepStrictEqual(stored(at), ["a:store", "b:store"])
      at += 2
      expect(["a:onReturn", "b:onReturn"], "onReturn to the parent once the child completed")
      expect(["--cancel", "b:onComplete:aborted", "a:onComplete:aborted", "a:dispose", "b:dispose"], "onComplete then dispose")
      assert.strictEqual(at, log.length)
    }).pipe(Effect.scoped))
})
