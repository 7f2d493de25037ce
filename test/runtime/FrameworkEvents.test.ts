/**
 * noetic's framework events of the tool loop (docs/runtime.md#run-events): the session's
 * full stream carries `<name>:tool_round_started` / `_completed` around a round's tool
 * calls, `model_call_first_event`, and the data noetic documents; the stream-idle
 * watchdog fails a round whose provider goes silent (`model_call_stalled`, then
 * `turn_aborted` "model stream idle timeout after <N>ms") and is re-armed by every
 * stream event.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Stream } from "effect"
import { afterEach, expect, it as vit } from "vitest"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import * as Sessions from "../../src/harness/Sessions.ts"
import type { StreamEvent } from "../../src/harness/SessionTurn.ts"
import { callModel as engineCallModel } from "../../src/harness/Step.ts"
import { callModel, tool } from "../../src/promise/index.ts"
import { ModelProvider, type ModelResponse, StreamIdleTimeout } from "../../src/services/ModelProvider.ts"
import { harness } from "../promise/harnesses.ts"
import { type FakeOpenRouter, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

describe("framework events on getFullStream", () => {
  vit("a tool round is announced before its calls and after them, with noetic's data", async () => {
    const server = await startFakeOpenRouter([
      { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"q\":\"a\"}" }, { id: "c2", name: "lookup", arguments: "{\"q\":\"b\"}" }] },
      { text: "done" }
    ])
    servers.push(server)
    const lookup = tool({ name: "lookup", description: "Looks up", execute: async (args: { q: string }) => args.q.toUpperCase() })
    const h = harness({
      name: "agent",
      params: {},
      agentGraph: callModel({ id: "llm", model: "m/x", tools: [lookup] }),
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    const full = h.getFullStream({ threadId: "t" })
    await h.execute("go", { threadId: "t" })
    expect((await h.getAgentResponse({ threadId: "t" })).text).toBe("done")
    const events: Array<StreamEvent> = []
    for await (const event of full) {
      if (event.source === "framework") events.push(event as StreamEvent)
      if (event.type === "agent:turn_completed") break
    }
    const names = events.map((e) => e.type).filter((type) =>
      /:(model_call|tool_round|tool_call)_/.test(type)
    )
    expect(names).toEqual([
      "agent:model_call_started",
      "agent:model_call_first_event",
      "agent:model_call_completed",
      "agent:tool_round_started",
      "agent:tool_call_started",
      "agent:tool_call_completed",
      "agent:tool_call_started",
      "agent:tool_call_completed",
      "agent:tool_round_completed",
      "agent:model_call_started",
      "agent:model_call_first_event",
      "agent:model_call_completed"
    ])
    const data = (type: string) => events.filter((e) => e.type === `agent:${type}`).map((e) => e.data)
    expect(data("tool_round_started")).toEqual([{ round: 0, toolCount: 2 }])
    expect(data("tool_round_completed")).toEqual([{ round: 0, toolCount: 2 }])
    expect(data("model_call_first_event")).toEqual([{ round: 0, model: "m/x" }, { round: 1, model: "m/x" }])
    expect(data("model_call_started")[1]).toMatchObject({ round: 1, messageCount: 5, toolCount: 1 })
    expect(data("model_call_completed")[0]).toMatchObject({ round: 0, itemCount: 2 })
  })
})

/** A provider that emits `beats` stream events `everyMs` apart, then answers (or, with `beats` Infinity, never does). */
const beating = (beats: number, everyMs: number, aborted: Array<boolean>) =>
  Layer.succeed(ModelProvider, {
    name: "beating",
    mode: "round",
    call: (request, emit) =>
      Effect.gen(function*() {
        request.signal.addEventListener("abort", () => aborted.push(true))
        for (let i = 0; i < beats; i++) {
          yield* Effect.sleep(everyMs)
          yield* emit({ type: "provider_event" })
        }
        return {
          items: [{ type: "message", id: "m1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "alive" }] }],
          usage: { inputTokens: 1, outputTokens: 1 }
        } satisfies ModelResponse
      })
  })

const turnEvents = (provider: Layer.Layer<ModelProvider>, idleTimeoutMs: number) =>
  Effect.gen(function*() {
    const host = yield* AgentHarness.make({ name: "idle", agentGraph: engineCallModel({ id: "llm", model: "m/slow" }) })
    const sessions = yield* Sessions.make(host).pipe(
      Effect.provide(Layer.mergeAll(provider, Layer.succeed(StreamIdleTimeout, idleTimeoutMs)))
    )
    const events = yield* Effect.forkChild(Stream.runCollect(
      Stream.takeUntil((yield* sessions.events("t")), (e) => e.type === "idle:turn_completed" || e.type === "idle:turn_aborted")
    ))
    yield* sessions.enqueue("hello", { threadId: "t" })
    return Array.from(yield* Fiber.join(events))
  })

describe("the stream-idle watchdog", () => {
  it.live("a provider silent for the idle timeout fails the round: model_call_stalled, then turn_aborted", () =>
    Effect.gen(function*() {
      const aborted: Array<boolean> = []
      const events = yield* turnEvents(beating(Infinity, 1_000, aborted), 80)
      const types = events.map((e) => e.type)
      assert.deepStrictEqual(types.filter((t) => /model_call|turn_aborted/.test(t)), [
        "idle:model_call_started",
        "idle:model_call_stalled",
        "idle:turn_aborted"
      ])
      assert.deepInclude(events.find((e) => e.type === "idle:model_call_stalled")!.data, { round: 0, idleTimeoutMs: 80 })
      assert.deepInclude(events.at(-1)!.data, { reason: "model stream idle timeout after 80ms" })
      // The request was aborted.
      assert.deepStrictEqual(aborted, [true])
    }).pipe(Effect.scoped))

  it.live("every stream event re-arms it: a slow but live stream is not cut short", () =>
    Effect.gen(function*() {
      // Five events 40 ms apart (200 ms in all) under an 80 ms timeout.
      const events = yield* turnEvents(beating(5, 40, []), 80)
      const types = events.map((e) => e.type)
      assert.includeMembers(types, ["idle:model_call_first_event", "idle:model_call_completed", "idle:turn_completed"])
      assert.notInclude(types, "idle:model_call_stalled")
    }).pipe(Effect.scoped))
})

describe("callModel's emit option", () => {
  const run = async (name: string, emit: unknown) => {
    const server = await startFakeOpenRouter([
      { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"q\":\"a\"}" }] },
      { text: "done" }
    ])
    servers.push(server)
    const lookup = tool({ name: "lookup", description: "Looks up", execute: async () => "A" })
    const step = callModel({ id: "llm", model: "m/x", tools: [lookup], ...(emit === undefined ? {} : { emit: emit as never }) })
    const h = harness({
      name,
      params: {},
      agentGraph: step,
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    const full = h.getFullStream({ threadId: "t" })
    await h.execute("go", { threadId: "t" })
    await h.getAgentResponse({ threadId: "t" })
    const events: Array<StreamEvent> = []
    for await (const event of full) {
      events.push(event as StreamEvent)
      if (event.type === `${name}:turn_completed`) break
    }
    return { step, events }
  }

  vit("emit: false publishes none of the step's framework events; turn, item and sdk events still go out", async () => {
    const { step, events } = await run("quiet", false)
    expect(step.emit).toBe(false)
    const framework = events.filter((e) => e.source === "framework").map((e) => e.type)
    expect(framework).toEqual(["quiet:turn_started", "quiet:item_appended", "quiet:item_appended", "quiet:turn_completed"])
    expect(events.some((e) => e.source === "sdk" && e.type === "response.output_text.delta")).toBe(true)
  })

  vit("a filter function sees each event's name and data and lets through what it allows", async () => {
    const asked: Array<string> = []
    const { events } = await run("filtered", (eventType: string, data: Record<string, unknown>) => {
      asked.push(eventType)
      return eventType.startsWith("tool_") || (eventType === "step_started" && data.stepId === "llm")
    })
    const framework = events.filter((e) => e.source === "framework" && !/turn_|item_appended/.test(e.type)).map((e) => e.type)
    expect(framework).toEqual([
      "filtered:step_started",
      "filtered:tool_round_started",
      "filtered:tool_call_started",
      "filtered:tool_call_completed",
      "filtered:tool_round_completed"
    ])
    expect(asked).toContain("model_call_started")
    expect(asked).toContain("step_completed")
  })

  vit("an emit that is neither a boolean nor a function throws INVALID_EMIT", () => {
    expect(() => callModel({ id: "llm", model: "m/x", emit: "no" as never })).toThrow(expect.objectContaining({ code: "INVALID_EMIT" }))
  })
})

describe("the item stream of a tool loop", () => {
  vit("carries the streamed function call and, apart from it, the tool result", async () => {
    const server = await startFakeOpenRouter([
      { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"q\":\"a\"}" }] },
      { text: "done" }
    ])
    servers.push(server)
    const lookup = tool({ name: "lookup", description: "Looks up", execute: async () => "A" })
    const h = harness({
      name: "items",
      params: {},
      agentGraph: callModel({ id: "llm", model: "m/x", tools: [lookup] }),
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    const stream = h.getItemStream({ threadId: "t" })
    await h.execute("go", { threadId: "t" })
    await h.getAgentResponse({ threadId: "t" })
    const complete: Array<any> = []
    for await (const item of stream) {
      if (item.isComplete) complete.push(item)
      if (item.isComplete && item.type === "message" && (item as any).role === "assistant") break
    }
    expect(complete.map((item) => item.type)).toEqual(["message", "function_call", "function_call_output", "message"])
    expect(complete[1]).toMatchObject({ type: "function_call", callId: "c1", name: "lookup", arguments: "{\"q\":\"a\"}" })
    expect(complete[2]).toMatchObject({ type: "function_call_output", callId: "c1", output: "A" })
  })
})
