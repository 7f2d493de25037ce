/**
 * noetic's `traceExporter` (docs/runtime.md#tracing): every span of a harness's runs is
 * exported as it ends, as noetic's `SpanImpl`: the steps' (with what a body put on
 * `ctx.span`), the tool loop's model rounds with noetic's GenAI attributes, its tool
 * calls with `tool.name`, the execution's; one trace, parents linked. An export that
 * rejects never fails the run; a value without `export` is refused at construction.
 */
import { afterEach, describe, expect, it } from "vitest"
import {
  any,
  callModel,
  GenAI,
  InMemoryExporter,
  isNoeticConfigError,
  loop,
  NoopExporter,
  runCode,
  tool,
  ToolAttr,
  until
} from "../../src/promise/index.ts"
import { harness } from "../promise/harnesses.ts"
import { type FakeOpenRouter, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

describe("traceExporter", () => {
  it("exports the spans of a tool loop: steps, model rounds with GenAI attributes, tool calls, the execution", async () => {
    const server = await startFakeOpenRouter([
      { toolCalls: [{ id: "c1", name: "search", arguments: "{\"query\":\"ai\"}" }], usage: { prompt: 7, completion: 2, cost: 0.01 } },
      { text: "news", usage: { prompt: 11, completion: 3 } },
      // The loop's second pass: noToolCalls holds now.
      { text: "news", usage: { prompt: 13, completion: 1 } }
    ])
    servers.push(server)
    const search = tool({ name: "search", description: "Search", execute: async (args: { query: string }) => ({ result: args.query }) })
    const exporter = new InMemoryExporter()
    const h = harness({
      name: "traced",
      params: {},
      agentGraph: loop({
        id: "researcher-loop",
        steps: [callModel({ id: "researcher-llm", model: "m/x", tools: [search] })],
        until: any(until.noToolCalls(), until.maxSteps(10))
      }),
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl },
      traceExporter: exporter
    })
    await h.execute("Find recent AI news")
    expect((await h.getAgentResponse()).text).toBe("news")

    const rounds = exporter.getSpansByName("llm.call")
    expect(rounds).toHaveLength(3)
    expect(rounds.map((span) => span.attributes.get(GenAI.REQUEST_MODEL))).toEqual(["m/x", "m/x", "m/x"])
    expect(rounds.map((span) => span.attributes.get(GenAI.USAGE_INPUT_TOKENS))).toEqual([7, 11, 13])
    expect(rounds.map((span) => span.attributes.get(GenAI.USAGE_OUTPUT_TOKENS))).toEqual([2, 3, 1])
    expect(rounds[0]!.attributes.get(GenAI.COST)).toBe(0.01)
    expect(rounds[0]!.attributes.get(GenAI.SYSTEM)).toBe("openrouter")
    const calls = exporter.getSpansByName("tool.call")
    expect(calls.map((span) => span.attributes.get(ToolAttr.NAME))).toEqual(["search"])

    // One trace; a round's parent is its callModel step's span, that step's the loop's.
    const llm = exporter.getSpansByName("callModel researcher-llm").find((span) => span.spanId === rounds[0]!.parentSpanId)
    const [theLoop] = exporter.getSpansByName("loop researcher-loop")
    const [execution] = exporter.getSpansByName("AgentHarness.execute")
    expect(llm).toBeDefined()
    expect(rounds[0]!.parentSpanId).toBe(llm!.spanId)
    expect(llm!.parentSpanId).toBe(theLoop!.spanId)
    expect(exporter.getTraceTree(execution!.traceId).length).toBeGreaterThanOrEqual(5)
    expect(exporter.getChildSpans(llm!.spanId).map((span) => span.name)).toEqual(expect.arrayContaining(["llm.call", "tool.call"]))
    for (const span of exporter.spans) {
      expect(span.endTime).toBeGreaterThanOrEqual(span.startTime)
      expect(span.duration).toBe(span.endTime! - span.startTime)
      expect(span.status).toBe("ok")
    }
    exporter.clear()
    expect(exporter.spans).toEqual([])
  })

  it("a step body's ctx.span attributes and events reach the exported span", async () => {
    const exporter = new InMemoryExporter()
    const annotated = runCode({
      id: "annotated",
      execute: async (input: string, ctx) => {
        ctx.span.setAttribute("input.length", input.length)
        ctx.span.addEvent("processing_finished", { resultSize: 3 })
        return "out"
      }
    })
    const h = harness({ name: "traced-agent", agentGraph: annotated, params: {}, traceExporter: exporter })
    await h.execute("Hello")
    expect((await h.getAgentResponse()).text).toBe("out")
    const [span] = exporter.getSpansByName("runCode annotated")
    expect(span!.attributes.get("input.length")).toBe(5)
    expect(span!.events.map((event) => [event.name, event.attributes])).toEqual([["processing_finished", { resultSize: 3 }]])
  })

  it("an export that rejects does not fail the run; NoopExporter is accepted; a value without export is refused", async () => {
    let asked = 0
    const failing = { export: async () => {
      asked++
      throw new Error("collector down")
    } }
    const h = harness({ name: "flaky", agentGraph: runCode({ id: "echo", execute: async (s: string) => s }), params: {}, traceExporter: failing })
    await h.execute("hi")
    expect((await h.getAgentResponse()).text).toBe("hi")
    expect(asked).toBeGreaterThan(0)
    await h.close()

    const quiet = harness({ name: "noop", agentGraph: runCode({ id: "echo", execute: async (s: string) => s }), params: {}, traceExporter: new NoopExporter() })
    await quiet.execute("hi")
    expect((await quiet.getAgentResponse()).text).toBe("hi")

    let error: unknown
    try {
      harness({ name: "bad", params: {}, traceExporter: {} as never })
    } catch (thrown) {
      error = thrown
    }
    expect(isNoeticConfigError(error)).toBe(true)
    expect(error).toMatchObject({ code: "INVALID_TRACE_EXPORTER" })
  })
})
