/**
 * noetic's `harness.callModel({ ..., ctx })` given the context of a session turn feeds
 * that session's streams, as noetic's direct call feeds the broadcaster its context
 * carries (docs/runtime.md#harnesscallmodel): provider deltas on getTextStream and
 * getFullStream, `model_call_*`, `tool_round_*`, `tool_call_*`, the tool result as
 * `item_appended` on getItemStream. Its usage is not the turn's (only steps charge a
 * context); without a session (harness.run) nothing streams and the call still answers.
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCode, type StreamEvent, tool } from "../../src/promise/index.ts"
import { harness } from "../promise/harnesses.ts"
import { type FakeOpenRouter, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const serve = async (replies: Parameters<typeof startFakeOpenRouter>[0]) => {
  const server = await startFakeOpenRouter(replies)
  servers.push(server)
  return server
}

const userItem = (text: string) => ({
  id: "u1",
  type: "message",
  role: "user",
  status: "completed",
  content: [{ type: "input_text", text }]
})

/** Events of one thread's full stream until its first turn ends. */
const untilTurnEnds = async (stream: AsyncIterable<StreamEvent>, name: string) => {
  const events: Array<StreamEvent> = []
  for await (const event of stream) {
    events.push(event)
    if (event.type === `${name}:turn_completed` || event.type === `${name}:turn_aborted`) break
  }
  return events
}

describe("harness.callModel with a session turn's context", () => {
  it("streams its deltas, lifecycle events and tool results to the turn's session", async () => {
    const server = await serve([
      { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"q\":\"a\"}" }], usage: { prompt: 3, completion: 1 } },
      { text: "direct answer", reasoning: "thinking", usage: { prompt: 5, completion: 2 } }
    ])
    const lookup = tool({ name: "lookup", description: "Looks up", execute: async (args: { q: string }) => `found ${args.q}` })
    const step = runCode({
      id: "raw",
      execute: async (_: string, ctx) => {
        const answer = await ctx.harness.callModel({ model: "m/direct", items: [userItem("hello")], tools: [lookup], ctx })
        return answer.items.map((item: any) => item.type).join(",")
      }
    })
    const h = harness({ name: "direct", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    const full = h.getFullStream({ threadId: "t" })
    const text = h.getTextStream({ threadId: "t" })
    const reasoning = h.getReasoningStream({ threadId: "t" })
    const itemStream = h.getItemStream({ threadId: "t" })
    await h.execute("go", { threadId: "t" })
    const response = await h.getAgentResponse({ threadId: "t" })
    expect(response.text).toBe("function_call,function_call_output,reasoning,message")
    // The direct call's usage is its caller's: no step charged the turn.
    expect(response.usage).toEqual({ inputTokens: 0, outputTokens: 0 })

    const events = await untilTurnEnds(full, "direct")
    const framework = events.filter((e) => e.source === "framework").map((e) => e.type)
      .filter((type) => /:(model_call|tool_round|tool_call)_/.test(type))
    expect(framework).toEqual([
      "direct:model_call_started",
      "direct:model_call_first_event",
      "direct:model_call_completed",
      "direct:tool_round_started",
      "direct:tool_call_started",
      "direct:tool_call_completed",
      "direct:tool_round_completed",
      "direct:model_call_started",
      "direct:model_call_first_event",
      "direct:model_call_completed"
    ])
    const completedCall = events.find((e) => e.type === "direct:tool_call_completed")!
    expect(completedCall.data).toMatchObject({ callId: "c1", name: "lookup", output: "found a", error: false })
    expect(events.find((e) => e.type === "direct:model_call_started")!.data).toMatchObject({ round: 0, model: "m/direct", messageCount: 1, toolCount: 1 })
    const sdk = events.filter((e) => e.source === "sdk").map((e) => e.type)
    expect(sdk).toContain("response.function_call_arguments.delta")
    expect(sdk).toContain("response.output_text.delta")
    expect(sdk).toContain("response.reasoning.delta")
    const appended = events.filter((e) => e.type === "direct:item_appended").map((e) => (e.data.item as any).type)
    expect(appended).toContain("function_call_output")

    const deltas: Array<string> = []
    for await (const delta of text) {
      deltas.push(delta)
      if (deltas.join("") === "direct answer") break
    }
    expect(deltas.join("")).toBe("direct answer")
    const thoughts: Array<string> = []
    for await (const delta of reasoning) {
      thoughts.push(delta)
      if (thoughts.join("") === "thinking") break
    }
    expect(thoughts.join("")).toBe("thinking")
    const complete: Array<string> = []
    for await (const item of itemStream) {
      if (item.isComplete) complete.push(item.type)
      if (item.isComplete && item.type === "message" && (item as any).role === "assistant") break
    }
    // The turn's input, the streamed call, the framework's tool result, the streamed answer.
    expect(complete.filter((type) => type !== "reasoning")).toEqual(["message", "function_call", "function_call_output", "message"])
  })

  it("a false emit gates its framework events; its deltas still stream", async () => {
    const server = await serve([{ text: "quiet" }])
    const step = runCode({
      id: "raw",
      execute: async (_: string, ctx) => {
        const answer = await ctx.harness.callModel({ model: "m/q", items: [userItem("hi")], ctx, emit: false })
        return String((answer.items[0] as any).content[0].text)
      }
    })
    const h = harness({ name: "quiet", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    const full = h.getFullStream()
    await h.execute("go")
    expect((await h.getAgentResponse()).text).toBe("quiet")
    const events = await untilTurnEnds(full, "quiet")
    expect(events.filter((e) => /:(model_call|tool_)/.test(e.type))).toEqual([])
    expect(events.filter((e) => e.type === "response.output_text.delta").map((e) => e.data.delta).join("")).toBe("quiet")
  })

  it("outside a session turn (harness.run) streams nothing to the default session", async () => {
    const server = await serve([{ text: "unseen" }])
    let answered = ""
    const step = runCode({
      id: "raw",
      execute: async (_: string, ctx) => {
        const answer = await ctx.harness.callModel({ model: "m/r", items: [userItem("hi")], ctx })
        answered = String((answer.items[0] as any).content[0].text)
        return "ok"
      }
    })
    const h = harness({ name: "offline", agentGraph: runCode({ id: "echo", execute: async (input: string) => input }), params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    const full = h.getFullStream()
    expect(await h.run(step, "go", h.createContext())).toBe("ok")
    expect(answered).toBe("unseen")
    // The default session's stream carries only its own turn afterwards.
    await h.execute("next")
    await h.getAgentResponse()
    const events = await untilTurnEnds(full, "offline")
    expect(events.filter((e) => e.source === "sdk" || /:model_call_/.test(e.type))).toEqual([])
  })
})
