/**
 * A program written from noetic's runtime docs (framework/runtime.mdx, api/runtime-types.mdx,
 * observability.mdx), with only its import specifiers changed, against the local
 * OpenRouter-compatible server: the Quick Example as written (a loop over callModel with
 * a zod-typed search tool until noToolCalls, then getAgentResponse().text), then every
 * constructor option and ExecuteOption the pages list, each working or refused by name.
 * The one other change is the provider's address: `baseUrl` points at the local server
 * (the docs' `callModelDefaults: { provider: 'openrouter' }` reads the key from the env).
 */
import { afterEach, describe, expect, it } from "vitest"
import { z } from "zod"
// was: from '@noetic-tools/core'
import {
  AgentHarness,
  any,
  callModel,
  type ContextData,
  createCheckpointStore,
  createInMemoryFsAdapter,
  createInMemoryShellAdapter,
  createInMemoryStorage,
  InMemoryExporter,
  isNoeticConfigError,
  loop,
  type NoeticContextLayer,
  runCode,
  scratchpad,
  until
} from "../../src/promise/index.ts"
import { type FakeOpenRouter, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
const harnesses: Array<AgentHarness> = []
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()))
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const serve = async (replies: Parameters<typeof startFakeOpenRouter>[0]) => {
  const server = await startFakeOpenRouter(replies)
  servers.push(server)
  return server
}

const configCode = (f: () => unknown): string => {
  try {
    harnesses.push(f() as AgentHarness)
  } catch (error) {
    expect(isNoeticConfigError(error)).toBe(true)
    return (error as { code: string }).code
  }
  return "accepted"
}

describe("noetic's runtime docs, only the imports changed", () => {
  it("runtime.mdx Quick Example", async () => {
    const server = await serve([
      { toolCalls: [{ id: "call_1", name: "search", arguments: "{\"query\":\"AI news\"}" }] },
      { text: "Here is the news." },
      { text: "Here is the news." }
    ])
    const saved = process.env.OPENROUTER_API_KEY
    process.env.OPENROUTER_API_KEY = "sk-from-env"
    try {
      // ---- from runtime.mdx ----
      const searchTool = {
        name: "search",
        description: "Search the web for information",
        input: z.object({ query: z.string() }),
        output: z.object({ result: z.string() }),
        execute: async (args: { query: string }) => ({ result: `Results for: ${args.query}` })
      }

      const agent = loop({
        id: "researcher-loop",
        steps: [callModel<ContextData, string, string>({
          id: "researcher-llm",
          model: "openai/gpt-4o",
          instructions: "You are a research assistant.",
          tools: [searchTool]
        })],
        until: any(until.noToolCalls(), until.maxSteps(10))
      })

      const harness = new AgentHarness({
        name: "researcher",
        agentGraph: agent,
        params: {},
        callModelDefaults: { provider: "openrouter", baseUrl: server.baseUrl } // reads OPENROUTER_API_KEY from the env
      })
      harnesses.push(harness)

      await harness.execute("Find recent AI news")
      const response = await harness.getAgentResponse()
      // ---- end ----
      expect(response.text).toBe("Here is the news.")
      expect(server.requests[0]!.authorization).toBe("Bearer sk-from-env")
      expect(server.requests[0]!.body.model).toBe("openai/gpt-4o")
      expect(server.requests[0]!.body.messages[0]).toEqual({ role: "system", content: "You are a research assistant." })
      expect(server.requests[0]!.body.tools[0].function.name).toBe("search")
      expect(server.requests[0]!.body.tools[0].function.parameters).toMatchObject({
        type: "object",
        properties: { query: { type: "string" } }
      })
      expect(server.requests[1]!.body.messages.at(-1)).toEqual({
        role: "tool",
        tool_call_id: "call_1",
        content: JSON.stringify({ result: "Results for: AI news" })
      })
      // As in noetic, the loop feeds the first pass's output to the second as its input,
      // which callModel appends as a user message (noetic's appendUserInput).
      expect(response.items.map((item) => [item.type, (item as any).role])).toEqual([
        ["message", "user"],
        ["function_call", undefined],
        ["function_call_output", undefined],
        ["message", "assistant"],
        ["message", "user"],
        ["message", "assistant"]
      ])
      expect(server.requests).toHaveLength(3)
      expect(response.usage.inputTokens).toBeGreaterThan(0)
      // HarnessResponse.lastLayerUsage, as runtime.mdx lists it: the last round's breakdown.
      expect(response.lastLayerUsage).toMatchObject({ modelId: "openai/gpt-4o", layers: [] })
      expect(response.lastLayerUsage!.totalUsedTokens).toBeGreaterThan(0)
    } finally {
      if (saved === undefined) delete process.env.OPENROUTER_API_KEY
      else process.env.OPENROUTER_API_KEY = saved
    }
  })

  it("runtime.mdx: execute options, queued follow-ups, hooks, createContext + run, seedSessionHistory", async () => {
    const server = await serve((_body, n) => ({ text: `answer ${n}` }))
    const seen: Array<string> = []
    const harness = new AgentHarness({
      name: "researcher",
      agentGraph: callModel<ContextData, string, string>({ id: "llm", model: "openai/gpt-4o" }),
      params: { model: "openai/gpt-4o" },
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl },
      hooks: {
        async beforeStep(step, ctx) {
          seen.push(`Starting step ${step.id} (depth ${ctx.depth})`)
        },
        async afterStep(step, _result, ctx) {
          seen.push(`Step ${step.id} used ${ctx.tokens.total} tokens`)
        }
      }
    })
    harnesses.push(harness)
    expect(harness.config).toMatchObject({ name: "researcher", params: { model: "openai/gpt-4o" } })

    await harness.execute("What is 2+2?")
    expect((await harness.getAgentResponse()).text).toBe("answer 0")
    expect(seen).toEqual(["Starting step llm (depth 0)", "Step llm used 15 tokens"])

    await harness.execute("Hello", { threadId: "thread-1", resourceId: "user-1" })
    // Submitted while the first turn runs: queued, a turn of its own after it.
    await harness.execute("follow-up", { threadId: "thread-1", messageId: "m-2" })
    const thread = await harness.getAgentResponse({ threadId: "thread-1" })
    expect(thread.text).toMatch(/^answer /)
    expect(thread.items.filter((item) => item.type === "message" && (item as any).role === "user")).toHaveLength(2)
    expect(harness.getStatus({ threadId: "thread-1" })).toEqual({ kind: "idle" })
    expect(harness.getQueueSize({ threadId: "thread-1" })).toBe(0)

    // createContext + run.
    const counter = runCode({ id: "count", execute: async (input: number, ctx) => (ctx.state as { count: number }).count + input })
    const ctx = harness.createContext({ state: { count: 1 } })
    expect(await harness.run(counter, 2, ctx)).toBe(3)

    // Resuming a session from disk.
    const threadId = "task-T-abc123"
    harness.seedSessionHistory(threadId, [
      { id: "p1", type: "message", role: "user", status: "completed", content: [{ type: "input_text", text: "earlier" }] }
    ])
    await harness.execute("continue from here", { threadId })
    await harness.getAgentResponse({ threadId })
    const sent = server.requests.at(-1)!.body.messages
    expect(sent.map((m: any) => m.content)).toEqual(["earlier", "continue from here"])
  })

  it("runtime.mdx's constructor options and api/runtime-types.mdx's AgentConfig fields: each works or is refused by name", async () => {
    const storage = createInMemoryStorage()
    const step = runCode({ id: "echo", execute: async (input: string) => input })
    const store = {
      states: new Map<string, unknown>(),
      get(executionId: string, layerId: string) {
        return this.states.get(`${executionId}/${layerId}`) as any
      },
      set(executionId: string, layerId: string, state: unknown) {
        this.states.set(`${executionId}/${layerId}`, state)
      },
      cleanup() {},
      diagnostic() {}
    }
    const all = () =>
      new AgentHarness({
        name: "my-agent",
        agentGraph: step,
        params: { model: "openai/gpt-4o" },
        contextLayers: [scratchpad()],
        hooks: {},
        tools: [],
        paramsSchema: z.object({ model: z.string() }),
        environment: {
          storage: { adapter: storage, checkpointStore: createCheckpointStore({ storage }), layerStateStore: store, stepLedgerRetention: { maxEntries: 10 } }
        },
        callModelDefaults: { provider: "openrouter", apiKey: "k" },
        itemSchemas: { schemas: { items: [] }, strict: true },
        traceExporter: new InMemoryExporter(),
        defaultDeliveryMode: "between-rounds",
        initialCwd: "/tmp"
      })
    expect(configCode(all)).toBe("accepted")
    const built = harnesses.at(-1)!
    expect(built.rootCwdState).toEqual({ cwd: "/tmp" })
    await built.execute("hi")
    expect((await built.getAgentResponse()).text).toBe("hi")

    // Documented, not run here: refused by name.
    const refused = (options: Record<string, unknown>, name: string) => {
      let error: any
      try {
        harnesses.push(new AgentHarness({ name: "x", params: {}, ...options } as never))
      } catch (thrown) {
        error = thrown
      }
      expect(error?.code).toBe("UNSUPPORTED_OPTION")
      expect(error?.message).toContain(name)
    }
    refused({ contextCache: { enabled: false } }, "contextCache")
    refused({ projection: {} }, "projection")
    refused({ forceAtomicRecall: true }, "forceAtomicRecall")
    refused({ callModelDefaults: { provider: "noetic" } }, "noetic")
    // Not a constructor option of noetic's: its config.storage is environment.storage.adapter.
    refused({ storage: createInMemoryStorage() }, "storage")
    expect(built.config.storage).toBe(storage)
    // paramsSchema is checked at construction: zod's parse throws its ZodError, as in noetic.
    expect(() => new AgentHarness({ name: "x", params: { model: 1 }, paramsSchema: z.object({ model: z.string() }) })).toThrow(z.ZodError)
  })

  it("observability.mdx Quick Example", async () => {
    const myStep = runCode({ id: "annotated", execute: async (input: string, ctx) => {
      ctx.span.setAttribute("input.length", input.length)
      ctx.span.addEvent("processing_started")
      return input.toUpperCase()
    } })
    // ---- from observability.mdx ----
    const exporter = new InMemoryExporter()
    const harness = new AgentHarness({
      name: "traced-agent",
      agentGraph: myStep,
      params: {},
      traceExporter: exporter
    })
    harnesses.push(harness)

    await harness.execute("Hello")

    // Inspect collected spans
    const lines: Array<string> = []
    await harness.getAgentResponse()
    for (const span of exporter.spans) {
      lines.push(`${span.name} [${span.duration}ms]`)
    }
    // ---- end ----
    expect(lines.some((line) => line.startsWith("runCode annotated ["))).toBe(true)
    expect(exporter.getSpansByName("runCode annotated")[0]!.attributes.get("input.length")).toBe(5)
  })

  it("api/runtime-types.mdx: recallLayersAtomic, recallLayersEventual, executeRerender, createSpan", async () => {
    const recalls: Array<string> = []
    const layer = (id: string, slot: number, recallMode: "atomic" | "eventual"): NoeticContextLayer<null> => ({
      id,
      slot,
      scope: "execution",
      recallMode,
      hooks: {
        async recall({ query }) {
          recalls.push(id)
          return `${id}: ${query}`
        }
      }
    })
    const layers = [layer("a", 10, "atomic"), layer("e", 20, "eventual"), layer("b", 30, "atomic")]
    const exporter = new InMemoryExporter()
    const harness = new AgentHarness({ name: "layers", params: {}, contextLayers: layers, traceExporter: exporter })
    harnesses.push(harness)
    const ctx = harness.createContext()
    const budgets = new Map([["a", 100], ["e", 100], ["b", 100]])

    expect((await harness.recallLayersAtomic(layers, "q", ctx, budgets)).map((out) => out.layerId)).toEqual(["a", "b"])
    recalls.length = 0
    expect((await harness.recallLayersEventual(layers, "q", ctx, budgets)).map((out) => out.layerId)).toEqual(["e"])
    // Served from the recall cache the second time: recall is not called again.
    expect((await harness.recallLayersEventual(layers, "q", ctx, budgets)).map((out) => out.layerId)).toEqual(["e"])
    expect(recalls).toEqual(["e"])

    recalls.length = 0
    const slotAfter = await harness.executeRerender([{ layerId: "e", slot: 20, timing: "immediate", scope: "slot-after" }], layers, ctx, budgets, "again")
    expect(slotAfter.map((out) => out.layerId)).toEqual(["e", "b"])
    // A re-render recalls fresh, the eventual layer included.
    expect(recalls).toEqual(["e", "b"])
    expect((await harness.executeRerender([{ layerId: "a", slot: 10, timing: "batched", scope: "self" }], layers, ctx, budgets)).map((out) => out.layerId)).toEqual(["a"])
    expect((await harness.executeRerender([], layers, ctx, budgets))).toEqual([])

    const root = harness.createSpan("custom.root", null)
    const child = harness.createSpan("custom.child", root)
    expect(root.parentSpanId).toBeNull()
    expect(child.parentSpanId).toBe(root.spanId)
    expect(child.traceId).toBe(root.traceId)
    child.setAttribute("k", 1)
    child.end()
    root.end()
    expect(exporter.getSpansByName("custom.child")[0]!.attributes.get("k")).toBe(1)
    expect(exporter.getChildSpans(root.spanId).map((span) => span.name)).toEqual(["custom.child"])
  })

  it("environment.fs / environment.shell with noetic's in-memory adapters reach a tool as toolCtx.fs / toolCtx.shell", async () => {
    const server = await serve([
      { toolCalls: [{ id: "c1", name: "notes", arguments: "{\"line\":\"b\"}" }] },
      { text: "noted" }
    ])
    const fs = createInMemoryFsAdapter({ "/work/notes.txt": "a\n" })
    const shell = createInMemoryShellAdapter()
    const notes = {
      name: "notes",
      description: "Appends a line to the notes",
      input: z.object({ line: z.string() }),
      execute: async (args: { line: string }, toolCtx: any) => {
        await toolCtx.fs.appendFile("/work/notes.txt", `${args.line}\n`)
        const ran = await toolCtx.shell.exec("ls")
        return { notes: await toolCtx.fs.readFileText("/work/notes.txt"), exitCode: ran.exitCode }
      }
    }
    const harness = new AgentHarness({
      name: "env",
      agentGraph: callModel<ContextData, string, string>({ id: "llm", model: "m/x", tools: [notes] }),
      params: {},
      environment: { fs, shell },
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    harnesses.push(harness)
    expect(harness.fs).toBe(fs)
    expect(harness.shell).toBe(shell)
    await harness.execute("note b")
    expect((await harness.getAgentResponse()).text).toBe("noted")
    expect(server.requests[1]!.body.messages.at(-1).content).toBe(JSON.stringify({ notes: "a\nb\n", exitCode: 127 }))

    // The adapter itself, as noetic's behaves.
    await fs.mkdir("/work/sub/deep")
    await fs.writeFile("/work/sub/x.txt", "x")
    expect(await fs.readdir("/work")).toEqual(["notes.txt", "sub"])
    expect((await fs.stat("/work/sub")).isDirectory()).toBe(true)
    expect((await fs.stat("/work/sub/x.txt")).size).toBe(1)
    await fs.rename("/work/sub", "/moved")
    expect(await fs.readFileText("/moved/x.txt")).toBe("x")
    await expect(fs.readFileText("/work/sub/x.txt")).rejects.toThrow(/ENOENT/)
    await expect(fs.rm("/moved")).rejects.toThrow(/ENOTEMPTY/)
    await fs.rm("/moved", { recursive: true })
    await expect(fs.access("/moved/deep")).rejects.toThrow(/ENOENT/)
    await fs.rm("/nothing", { force: true })
    await expect(fs.readFile("/work")).rejects.toThrow(/EISDIR/)
    expect((await fs.readFile("/work/../work/./notes.txt")).toString()).toBe("a\nb\n")
  })

  it("ExecuteOptions state, contextLayers, deliveryMode 'between-rounds' and 'interrupt'", async () => {
    let release: () => void = () => {}
    let entered: () => void = () => {}
    const inTool = () => new Promise<void>((resolve) => (entered = resolve))
    // A first round whose last user message is "first" or "slow" asks for the blocking tool; anything else is answered.
    const lastUser = (messages: Array<any>) => messages.filter((m) => m.role === "user").at(-1)?.content
    const server = await serve((body, n) =>
      ["first", "slow"].includes(lastUser(body.messages)) && !body.messages.some((m: any) => m.role === "tool")
        ? { toolCalls: [{ id: `w${n}`, name: "wait", arguments: "{}" }] }
        : { text: `reply ${n}: ${body.messages.map((m: any) => typeof m.content === "string" ? m.content : "").join("|")}` }
    )
    const wait = {
      name: "wait",
      description: "Waits",
      input: z.object({}),
      execute: async () => {
        entered()
        await new Promise<void>((resolve) => (release = resolve))
        return "waited"
      }
    }
    const seenState: Array<unknown> = []
    const note: NoeticContextLayer<null> = {
      id: "note",
      slot: 100,
      scope: "execution",
      hooks: { async recall() {
        return "layer says hi"
      } }
    }
    const harness = new AgentHarness({
      name: "modes",
      agentGraph: loop({
        id: "l",
        steps: [
          runCode({ id: "peek", execute: async (input: string, ctx) => (seenState.push(ctx.state), input) }),
          callModel<ContextData, string, string>({ id: "llm", model: "m/x", tools: [wait] })
        ],
        until: until.maxSteps(1)
      }),
      params: {},
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: server.baseUrl }
    })
    harnesses.push(harness)

    // between-rounds: queued while round 0's tool runs, sent with round 1.
    const entering = inTool()
    await harness.execute("first", { threadId: "br", state: { tenant: "acme" }, contextLayers: [note] })
    await entering
    await harness.execute("by the way", { threadId: "br", deliveryMode: "between-rounds" })
    release()
    const response = await harness.getAgentResponse({ threadId: "br" })
    expect(seenState).toEqual([{ tenant: "acme" }])
    const round1 = server.requests[1]!.body.messages.map((m: any) => m.content)
    expect(round1).toContain("by the way")
    expect(round1.some((c: unknown) => typeof c === "string" && c.includes("layer says hi"))).toBe(true)
    expect(response.text).toMatch(/^reply 1:/)
    expect(harness.getQueueSize({ threadId: "br" })).toBe(0)

    // interrupt: the turn in flight is aborted, the message runs next.
    const sent = server.requests.length
    const full = harness.getFullStream({ threadId: "int" })
    const stuck = inTool()
    await harness.execute("slow", { threadId: "int" })
    await stuck
    // The stuck turn asked the model once: round 0 answered the tool call that blocks.
    expect(server.requests.length).toBe(sent + 1)
    await harness.execute("stop", { threadId: "int", deliveryMode: "interrupt" })
    // Cancellation is cooperative, as in noetic: the aborted turn ends once its tool returns.
    // As noetic's session does, a waiter of the aborted turn hears of the cancellation.
    const waiting = harness.getAgentResponse({ threadId: "int" }).then(() => "resolved", (error) => error.noeticError?.kind)
    release()
    expect(await waiting).toBe("cancelled")
    // Then the interrupting message's turn runs, and the session answers with it.
    const interrupted = await harness.getAgentResponse({ threadId: "int" })
    const types: Array<string> = []
    let aborted: Record<string, unknown> | undefined
    for await (const event of full) {
      if (event.type === "modes:turn_aborted") aborted = event.data
      if (event.source === "framework") types.push(event.type)
      if (types.filter((t) => t === "modes:turn_started").length === 2 && event.type === "modes:turn_completed") break
    }
    expect(types.filter((t) => /:turn_/.test(t))).toEqual(["modes:turn_started", "modes:turn_aborted", "modes:turn_started", "modes:turn_completed"])
    expect(aborted).toMatchObject({ errorKind: "cancelled", errorTag: "StepCancelled" })
    expect(String(aborted!.reason)).toContain("interrupt")
    expect(interrupted.items.filter((item) => item.type === "message" && (item as any).role === "user").map((item: any) => item.content[0].text)).toContain("stop")
  })
})
