/**
 * The Effect side of the model runtime (docs/runtime.md#run-events): the OpenRouter
 * provider streams text, reasoning and tool-call deltas as they arrive, and a
 * `callModel` with tools publishes its rounds, deltas, items and tool calls on
 * `RunEvents`, in order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, PubSub } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { callModel } from "../../src/harness/Step.ts"
import type { ModelTool } from "../../src/harness/ToolLoop.ts"
import * as OpenRouterModel from "../../src/layers/OpenRouterModel.ts"
import * as ScriptedModel from "../../src/layers/ScriptedModel.ts"
import { type ModelDelta, RunEvents, type RunEvent } from "../../src/services/ModelProvider.ts"
import { startFakeOpenRouter } from "./fakeOpenRouter.ts"

const withServer = <A, E, R>(
  replies: Parameters<typeof startFakeOpenRouter>[0],
  f: (server: Awaited<ReturnType<typeof startFakeOpenRouter>>) => Effect.Effect<A, E, R>
) =>
  Effect.acquireUseRelease(
    Effect.promise(() => startFakeOpenRouter(replies)),
    f,
    (server) => Effect.promise(() => server.close())
  )

describe("OpenRouterModel", () => {
  it.effect("streams deltas as the SSE chunks arrive and answers noetic's items", () =>
    withServer([{
      reasoning: "think first",
      text: "hello there",
      toolCalls: [{ id: "call_9", name: "search", arguments: "{\"query\":\"x\"}" }],
      usage: { prompt: 12, completion: 7, cost: 0.25 }
    }], (server) =>
      Effect.gen(function*() {
        const provider = yield* OpenRouterModel.make({ apiKey: "k", baseUrl: server.baseUrl })
        const deltas: Array<ModelDelta> = []
        const response = yield* provider.call(
          {
            model: "m/x",
            items: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }],
            tools: [],
            signal: new AbortController().signal
          },
          (delta) => Effect.sync(() => void deltas.push(delta))
        )
        assert.deepStrictEqual(
          deltas.filter((d) => d.type === "text_delta").map((d) => d.type === "text_delta" && d.delta),
          ["hello", " there"]
        )
        assert.deepStrictEqual(
          deltas.filter((d) => d.type === "reasoning_delta").map((d) => d.type === "reasoning_delta" && d.delta),
          ["think", " first"]
        )
        const args = deltas.flatMap((d) => d.type === "tool_call_delta" ? [d.argumentsDelta] : [])
        assert.strictEqual(args.join(""), "{\"query\":\"x\"}")
        assert.isTrue(args.filter((a) => a !== "").length >= 2)
        assert.deepStrictEqual(response.usage, { inputTokens: 12, outputTokens: 7 })
        assert.strictEqual(response.cost, 0.25)
        assert.deepStrictEqual(response.items.map((item) => item.type), ["reasoning", "message", "function_call"])
        assert.deepStrictEqual(response.items[2], {
          type: "function_call",
          id: "fc_call_9",
          callId: "call_9",
          name: "search",
          arguments: "{\"query\":\"x\"}",
          status: "completed"
        })
      }).pipe(Effect.provide(FetchHttpClient.layer))))
})

describe("RunEvents", () => {
  it.effect("a callModel with tools publishes its rounds, deltas, items and tool calls in order", () =>
    withServer([
      { toolCalls: [{ id: "c1", name: "echo", arguments: "{\"say\":\"hi\"}" }] },
      { text: "echoed hi" }
    ], (server) =>
      Effect.gen(function*() {
        const echo: ModelTool = {
          name: "echo",
          description: "Echoes",
          parameters: { type: "object" },
          execute: (args) => Effect.succeed((args as { say: string }).say)
        }
        const events = yield* PubSub.unbounded<RunEvent>()
        const subscription = yield* PubSub.subscribe(events)
        const harness = yield* AgentHarness.make({
          name: "events",
          agentGraph: callModel({ id: "llm", model: "m/x", tools: [echo] })
        })
        const result = yield* harness.execute("go", { threadId: "t" }).pipe(
          Effect.provide(Layer.mergeAll(
            OpenRouterModel.layer({ apiKey: "k", baseUrl: server.baseUrl }),
            Layer.succeed(RunEvents, events),
            // The graph's type asks for a LanguageModel; with a ModelProvider it is never called.
            ScriptedModel.layer([])
          ))
        )
        assert.strictEqual(result.output, "echoed hi")
        const seen = yield* PubSub.takeAll(subscription)
        const kinds = Array.from(seen, (event) => event.type).filter((type) => type !== "tool_call_delta" && type !== "text_delta")
        assert.deepStrictEqual(kinds, [
          "model_call_started",
          "model_call_first_event",
          "model_call_completed",
          "item",
          "tool_round_started",
          "tool_call_started",
          "tool_call_completed",
          "item",
          "tool_round_completed",
          "model_call_started",
          "model_call_first_event",
          "model_call_completed",
          "item"
        ])
        // noetic's data: what was sent and what came back, and the size of each tool round.
        const [started, , completedRound, , toolRound] = Array.from(seen).filter((event) =>
          event.type !== "tool_call_delta" && event.type !== "text_delta"
        )
        assert.deepInclude(started, { type: "model_call_started", round: 0, messageCount: 1, toolCount: 1 })
        assert.deepInclude(completedRound, { type: "model_call_completed", round: 0, itemCount: 1 })
        assert.deepInclude(toolRound, { type: "tool_round_started", round: 0, toolCount: 1 })
        const completed = Array.from(seen).find((event) => event.type === "tool_call_completed")
        assert.deepStrictEqual(completed && { ...completed }, {
          executionId: result.executionId,
          threadId: "t",
          path: "/llm#0",
          type: "tool_call_completed",
          callId: "c1",
          name: "echo",
          output: "hi",
          error: false,
          replayed: false
        })
        assert.strictEqual(Array.from(seen).filter((event) => event.type === "text_delta").length, 2)
      }).pipe(Effect.scoped)))
})
