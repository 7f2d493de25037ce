/**
 * The model side of the runtime through the Promise facade (docs/runtime.md), against
 * a local server speaking OpenRouter's wire format: noetic's runtime.mdx Quick Example
 * (a loop over a callModel with a search tool until noToolCalls), the item log sent
 * and appended in noetic's shapes, model ids and params reaching the provider, errors
 * and rate limits, the `_testCallModel` seam, generator tools, refused options.
 */
import { afterEach, describe, expect, it } from "vitest"
import {
  any,
  callModel,
  execute,
  ItemSchemaRegistry,
  type LLMResponse,
  loop,
  NoeticErrorImpl,
  runCode,
  tool,
  toolWithGenerator,
  until
} from "../../src/promise/index.ts"
import { harness } from "../promise/harnesses.ts"
import { runTurn } from "../promise/turns.ts"
import { type FakeOpenRouter, objectSchema, type Reply, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
const serve = async (answer: ReadonlyArray<Reply> | ((body: any, n: number) => Reply | undefined)) => {
  const server = await startFakeOpenRouter(answer)
  servers.push(server)
  return server
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const rejection = (promise: Promise<unknown>): Promise<any> =>
  promise.then(() => expect.fail("expected a rejection"), (error) => error)

const searchCalls: Array<unknown> = []
const searchTool = {
  name: "search",
  description: "Search the web for information",
  input: objectSchema({ query: "string" }),
  execute: async (args: { query: string }) => {
    searchCalls.push(args)
    return { result: `Results for: ${args.query}` }
  }
}

describe("the model runtime against an OpenRouter-compatible server", () => {
  it("runs runtime.mdx's Quick Example: a loop over callModel with a search tool until noToolCalls", async () => {
    searchCalls.length = 0
    const server = await serve([
      { toolCalls: [{ id: "call_1", name: "search", arguments: "{\"query\":\"AI news\"}" }], usage: { prompt: 20, completion: 4, cost: 0.001 } },
      { text: "Found: Results for: AI news", reasoning: "the tool answered" },
      { text: "Nothing more to add." }
    ])
    const agent = loop({
      id: "researcher-loop",
      steps: [callModel({
        id: "researcher-llm",
        model: "openai/gpt-4o",
        instructions: "You are a research assistant.",
        tools: [searchTool],
        params: { temperature: 0.2, maxTokens: 300 }
      })],
      until: any(until.noToolCalls(), until.maxSteps(10))
    })
    const h = harness({
      name: "researcher",
      agentGraph: agent,
      params: {},
      callModelDefaults: { provider: "openrouter", apiKey: "sk-test", baseUrl: server.baseUrl }
    })
    const ctx = h.createContext()
    const output = await h.run(agent, "Find recent AI news", ctx)

    // Iteration 1 made two rounds (a tool call, then text); it had tool calls, so iteration 2 ran.
    expect(output).toBe("Nothing more to add.")
    expect(server.requests).toHaveLength(3)
    expect(searchCalls).toEqual([{ query: "AI news" }])
    const [first, second] = server.requests
    expect(first!.authorization).toBe("Bearer sk-test")
    expect(first!.body).toMatchObject({
      model: "openai/gpt-4o",
      stream: true,
      temperature: 0.2,
      max_tokens: 300,
      messages: [
        { role: "system", content: "You are a research assistant." },
        { role: "user", content: "Find recent AI news" }
      ],
      tools: [{
        type: "function",
        function: {
          name: "search",
          description: "Search the web for information",
          parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] }
        }
      }]
    })
    // The second round is sent the item log: the tool call and its output.
    expect(second!.body.messages.slice(1)).toEqual([
      { role: "user", content: "Find recent AI news" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "search", arguments: "{\"query\":\"AI news\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: JSON.stringify({ result: "Results for: AI news" }) }
    ])
    // The log holds noetic's items: content parts and status.
    const items = ctx.itemLog.items as ReadonlyArray<any>
    expect(items.map((item) => item.type)).toEqual([
      "message",
      "function_call",
      "function_call_output",
      "reasoning",
      "message",
      "message",
      "message"
    ])
    expect(items[0]).toMatchObject({ role: "user", status: "completed", content: [{ type: "input_text", text: "Find recent AI news" }] })
    expect(items[1]).toMatchObject({ type: "function_call", callId: "call_1", name: "search", status: "completed" })
    expect(items[2]).toMatchObject({ type: "function_call_output", callId: "call_1", status: "completed", output: "{\"result\":\"Results for: AI news\"}" })
    expect(items[4]).toMatchObject({
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "Found: Results for: AI news" }]
    })
    // noetic's loop feeds the output on as the next input, appended as a user message.
    expect(items[5]).toMatchObject({ role: "user", content: [{ type: "input_text", text: "Found: Results for: AI news" }] })
  })

  it("gives a loop's snapshot the tokens and cost of its model calls, so until.maxCost stops it", async () => {
    const server = await serve([
      { toolCalls: [{ id: "c1", name: "search", arguments: "{\"query\":\"q\"}" }], usage: { prompt: 20, completion: 4, cost: 0.002 } },
      { text: "answer", usage: { prompt: 30, completion: 6, cost: 0.003 } },
      { text: "never asked" }
    ])
    const seen: Array<{ tokens: unknown; cost: number }> = []
    const agent = loop({
      id: "costly",
      steps: [callModel({ id: "llm", model: "m/x", tools: [searchTool] })],
      until: (snapshot) => {
        seen.push({ tokens: snapshot.tokens, cost: snapshot.cost })
        return until.maxCost(0.004)(snapshot)
      }
    })
    const h = harness({
      name: "cost",
      agentGraph: agent,
      params: {},
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    expect((await runTurn(h, "go")).output).toBe("answer")
    expect(seen).toHaveLength(1)
    expect(seen[0]!.tokens).toEqual({ input: 50, output: 10, total: 60 })
    expect(seen[0]!.cost).toBeCloseTo(0.005, 10)
    expect(server.requests).toHaveLength(2)
  })

  it("resolves model, instructions and tools given as (async) functions of the context", async () => {
    const server = await serve([{ text: "lazy" }])
    const step = callModel({
      id: "lazy",
      model: async () => "m/lazy",
      instructions: (ctx) => `depth ${ctx.depth}`,
      tools: async () => [searchTool]
    })
    const h = harness({ name: "lazy", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    expect((await runTurn(h, "go")).output).toBe("lazy")
    expect(server.requests[0]!.body).toMatchObject({
      model: "m/lazy",
      messages: [{ role: "system", content: "depth 0" }, { role: "user", content: "go" }],
      tools: [{ function: { name: "search" } }]
    })
  })

  it("reads the key from OPENROUTER_API_KEY, and answers a whole JSON completion too", async () => {
    const server = await serve([{ text: "hi", json: true }])
    const saved = process.env.OPENROUTER_API_KEY
    process.env.OPENROUTER_API_KEY = "sk-from-env"
    try {
      const step = callModel({ id: "ask", model: "m/x" })
      const h = harness({ name: "env", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", baseUrl: server.baseUrl } })
      expect((await runTurn(h, "hello")).output).toBe("hi")
      expect(server.requests[0]!.authorization).toBe("Bearer sk-from-env")
    } finally {
      if (saved === undefined) delete process.env.OPENROUTER_API_KEY
      else process.env.OPENROUTER_API_KEY = saved
    }
  })

  it("rejects a 429 with kind model_rate_limit and its retry-after, a refusal with model_refused", async () => {
    const server = await serve([
      { status: 429, retryAfter: "2", errorBody: "{\"error\":{\"message\":\"slow down\"}}" },
      { refusal: "I can't help with that." },
      { status: 500 }
    ])
    const step = callModel({ id: "ask", model: "m/x" })
    const h = harness({ name: "errors", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    const limited = await rejection(runTurn(h, "one"))
    expect(limited).toBeInstanceOf(Error)
    expect(limited.noeticError).toMatchObject({ kind: "model_rate_limit", stepId: "ask", retryAfter: 2000 })
    const refused = await rejection(runTurn(h, "two"))
    expect(refused.noeticError).toMatchObject({ kind: "model_refused", stepId: "ask", refusal: "I can't help with that." })
    const failed = await rejection(runTurn(h, "three"))
    expect(failed.noeticError).toMatchObject({ kind: "step_failed", stepId: "ask" })
    expect(failed.message).toContain("HTTP 500")
  })

  it("rejects output its schema refuses with model_parse_error", async () => {
    const server = await serve([{ text: "{\"score\":\"high\"}" }])
    const step = callModel({ id: "grade", model: "m/x", output: objectSchema({ score: "number" }) as any })
    const h = harness({ name: "parse", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    const error = await rejection(runTurn(h, "essay"))
    expect(error.noeticError).toMatchObject({ kind: "model_parse_error", stepId: "grade", raw: "{\"score\":\"high\"}" })
  })

  it("answers a tool call to an unknown tool, or with malformed arguments, with an error output and goes on", async () => {
    const server = await serve([
      { toolCalls: [{ id: "c1", name: "nope", arguments: "{}" }, { id: "c2", name: "search", arguments: "{not json" }] },
      { text: "done" }
    ])
    const step = callModel({ id: "ask", model: "m/x", tools: [searchTool] })
    const h = harness({ name: "bad-calls", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    expect((await runTurn(h, "go")).output).toBe("done")
    const tools = server.requests[1]!.body.messages.filter((m: any) => m.role === "tool")
    expect(tools[0].content).toMatch(/^Error: unknown tool "nope"/)
    expect(tools[1].content).toBe("Error: malformed JSON in tool arguments: {not json")
  })

  it("gives a tool noetic's ToolExecutionContext, and uses the harness's tools when the step names none", async () => {
    const server = await serve([
      { text: "first call" },
      { toolCalls: [{ id: "c1", name: "where", arguments: "{}" }] },
      { text: "ok" }
    ])
    const seen: Array<unknown> = []
    const where = tool({
      name: "where",
      description: "Tells where it runs",
      input: objectSchema({}),
      output: undefined,
      execute: async (_args, toolCtx) => {
        seen.push(toolCtx.ctx.id, toolCtx.ctx.threadId, await toolCtx.fs.readFileText("/x"), toolCtx.lastStepMeta?.responseItems.length)
        return "here"
      }
    })
    const fs = { readFileText: async (path: string) => `contents of ${path}` } as any
    // Two calls: the tool, run by the second, sees the first's meta as lastStepMeta.
    const step = runCode({
      id: "twice",
      execute: async (input: string, ctx) => {
        await ctx.run(callModel({ id: "first", model: "m/x", tools: [] }), input)
        return ctx.run(callModel({ id: "ask", model: "m/x" }), input)
      }
    })
    const h = harness({
      name: "tool-ctx",
      agentGraph: step,
      params: {},
      tools: [where],
      environment: { fs },
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    const { executionId } = await runTurn(h, "go", { threadId: "t-1" })
    expect(seen).toEqual([executionId, "t-1", "contents of /x", 1])
    // `tools: []` offers none; no `tools` offers the harness's.
    expect(server.requests[0]!.body.tools).toBeUndefined()
    expect(server.requests[1]!.body.tools.map((t: any) => t.function.name)).toEqual(["where"])
  })

  it("runs a toolWithGenerator tool: its yields are progress, its return value the result", async () => {
    const server = await serve([{ toolCalls: [{ id: "c1", name: "count", arguments: "{\"to\":3}" }] }, { text: "counted" }])
    const count = toolWithGenerator({
      name: "count",
      description: "Counts",
      input: objectSchema({ to: "number" }),
      async *execute(args: { to: number }) {
        for (let i = 1; i <= args.to; i++) yield { progress: i }
        return { counted: args.to }
      }
    })
    const h = harness({
      name: "gen",
      agentGraph: callModel({ id: "ask", model: "m/x", tools: [count] }),
      params: {},
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    expect((await runTurn(h, "go")).output).toBe("counted")
    expect(server.requests[1]!.body.messages.at(-1)).toEqual({ role: "tool", tool_call_id: "c1", content: "{\"counted\":3}" })
  })
})

describe("harness.callModel", () => {
  it("runs one model call with its tool loop on the given items, from a step, recording and appending nothing", async () => {
    searchCalls.length = 0
    const server = await serve([
      { toolCalls: [{ id: "c1", name: "search", arguments: "{\"query\":\"direct\"}" }], usage: { prompt: 3, completion: 1, cost: 0.01 } },
      { text: "direct answer", usage: { prompt: 5, completion: 2, cost: 0.02 } }
    ])
    let answer: any
    const step = runCode({
      id: "raw",
      execute: async (_: string, ctx) => {
        answer = await ctx.harness.callModel({
          model: "m/direct",
          instructions: "be direct",
          items: [{ id: "u1", type: "message", role: "user", status: "completed", content: [{ type: "input_text", text: "hello" }] }],
          tools: [searchTool],
          ctx
        })
        return "ok"
      }
    })
    const h = harness({ name: "direct", agentGraph: step, params: {}, callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl } })
    const ctx = h.createContext()
    expect(await h.run(step, "go", ctx)).toBe("ok")
    expect(searchCalls).toEqual([{ query: "direct" }])
    expect(answer.items.map((item: any) => item.type)).toEqual(["function_call", "function_call_output", "message"])
    expect(answer.usage).toEqual({ inputTokens: 8, outputTokens: 3 })
    expect(answer.cost).toBeCloseTo(0.03, 10)
    expect(server.requests[0]!.body.messages).toEqual([{ role: "system", content: "be direct" }, { role: "user", content: "hello" }])
    expect(ctx.itemLog.items).toEqual([])
  })
})

describe("noetic's testing seam, _testCallModel", () => {
  const textOnly = (text: string): LLMResponse => ({
    items: [{ id: `msg-${text}`, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }],
    usage: { inputTokens: 10, outputTokens: 5 }
  })

  it("answers each call from the script; tool traffic in an answer is appended, not run", async () => {
    const asked: Array<any> = []
    const script: Array<LLMResponse> = [
      {
        items: [
          { id: "fc-1", type: "function_call", status: "completed", callId: "call_1", name: "search", arguments: "{\"query\":\"q\"}" },
          { id: "fco-1", type: "function_call_output", status: "completed", callId: "call_1", output: "found" },
          ...textOnly("first").items
        ],
        usage: { inputTokens: 50, outputTokens: 20 },
        cost: 0.5
      },
      textOnly("second")
    ]
    searchCalls.length = 0
    const agent = loop({
      id: "l",
      steps: [callModel({ id: "llm", model: "m", tools: [searchTool] })],
      until: until.noToolCalls()
    })
    const h = harness({
      name: "scripted",
      agentGraph: agent,
      params: {},
      _testCallModel: async (request) => {
        asked.push(request)
        const next = script.shift()
        if (next === undefined) throw new Error("Mock callModel exhausted")
        return next
      }
    })
    const ctx = h.createContext()
    expect(await h.run(agent, "go", ctx)).toBe("second")
    expect(searchCalls).toEqual([])
    expect(asked.map((r) => r.model)).toEqual(["m", "m"])
    expect(asked[0].items).toMatchObject([{ type: "message", role: "user" }])
    expect(asked[0].tools.map((t: any) => t.name)).toEqual(["search"])
    expect(asked[0].signal).toBeInstanceOf(AbortSignal)
    expect((ctx.itemLog.items as ReadonlyArray<any>).map((i) => i.id)).toContain("fco-1")
  })

  it("passes a NoeticErrorImpl the seam throws through as it is", async () => {
    const h = harness({
      name: "seam-error",
      agentGraph: callModel({ id: "llm", model: "m" }),
      params: {},
      _testCallModel: async () => {
        throw new NoeticErrorImpl({ kind: "model_rate_limit", stepId: "llm", retryAfter: 5 })
      }
    })
    const error = await rejection(runTurn(h, "go"))
    expect(error).toBeInstanceOf(NoeticErrorImpl)
    expect(error.message).toBe("Model rate limited at step 'llm' (retry after 5ms)")
  })
})

describe("item schemas and execute()", () => {
  it("refuses a model answer item of a type no schema knows with item_schema_mismatch", async () => {
    const h = harness({
      name: "items",
      agentGraph: callModel({ id: "llm", model: "m" }),
      params: {},
      _testCallModel: async () => ({ items: [{ id: "x1", type: "custom_widget", payload: 1 }], usage: { inputTokens: 1, outputTokens: 1 } })
    })
    const error = await rejection(runTurn(h, "go"))
    expect(error.noeticError).toEqual({ kind: "item_schema_mismatch", category: "items", itemType: "custom_widget" })
    expect(error.message).toBe("Item type 'custom_widget' did not match any registered item extension schema.")
  })

  it("ItemSchemaRegistry accepts an extension type its schemas accept, and checks a category", () => {
    const widget = {
      "~standard": {
        validate: (value: any) => value?.type === "custom_widget" && typeof value.payload === "number" ? { value } : { issues: [{ message: "no" }] }
      }
    }
    const registry = new ItemSchemaRegistry().extend({ items: [widget] })
    const item = { id: "x1", type: "custom_widget", payload: 1 }
    expect(registry.parse(item)).toBe(item)
    expect(() => registry.parse({ type: "custom_widget", payload: "one" })).toThrow(NoeticErrorImpl)
    expect(() => new ItemSchemaRegistry().parse({ type: "" })).toThrow(/non-empty string "type"/)
    const strict = new ItemSchemaRegistry({ toolResults: [widget] })
    expect(() => strict.parseWithCategory({ type: "function_call_output", callId: "c", output: "" }, "toolResults")).toThrow(
      expect.objectContaining({ noeticError: { kind: "item_schema_mismatch", category: "toolResults" } })
    )
  })

  it("execute(step, input, ctx) runs a step on a context, and below a running step from its body", async () => {
    const double = runCode({ id: "double", execute: async (n: number) => n * 2 })
    const outer = runCode({ id: "outer", execute: async (n: number, ctx) => (await execute(double, n, ctx)) + 1 })
    // noetic's steps are plain data: the function given is the step's `execute`.
    expect((double as unknown as { execute: unknown }).execute).toBeTypeOf("function")
    expect(await (double as unknown as { execute: (n: number) => Promise<number> }).execute(4)).toBe(8)
    const h = harness({ name: "exec", params: {} })
    const ctx = h.createContext()
    expect(await execute(outer, 20, ctx)).toBe(41)
  })
})

describe("options noetic documents and this library does not run", () => {
  const codeOf = (f: () => unknown): string | undefined => {
    try {
      f()
    } catch (error) {
      return (error as { code?: string }).code
    }
    return undefined
  }

  it("a callModel with tools on a harness with only a LanguageModel fails rather than ignore them", async () => {
    const h = harness({
      name: "no-provider",
      agentGraph: callModel({ id: "llm", model: "m", tools: [searchTool] }),
      params: {},
      model: { generate: async () => ({ text: "hi" }) }
    })
    const error = await rejection(runTurn(h, "go"))
    expect(error.code).toBe("NO_MODEL_PROVIDER")
    expect(error.message).toContain("callModelDefaults")
  })

  it("are refused by name with UNSUPPORTED_OPTION", () => {
    const refused = (f: () => unknown, name: string) => {
      let error: any
      try {
        f()
      } catch (thrown) {
        error = thrown
      }
      expect(error?.code).toBe("UNSUPPORTED_OPTION")
      expect(error?.message).toContain(name)
    }
    refused(() => harness({ name: "h", params: {}, callModelDefaults: { apiKey: "k" } }), "noetic")
    refused(() => harness({ name: "h", params: {}, callModelDefaults: { provider: "openrouter", cache: true } as any }), "cache")
    refused(() => callModel({ id: "c", model: "m", projection: {} } as any), "projection")
    refused(() => tool({ name: "t", description: "", execute: async () => 1, needsApproval: true } as any), "needsApproval")
    expect(codeOf(() => tool({ name: "", description: "", execute: async () => 1 }))).toBe("EMPTY_TOOL_NAME")
  })
})
