/**
 * noetic's built-in layer factories through `noetic-effect/promise`: each one's
 * documented example (context-layers/*.mdx) with only the imports changed, run
 * through the harness (a model loop against a local OpenRouter-compatible server,
 * or the harness's layer methods), the options checked, durable state across hosts.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { z } from "zod"
import {
  type AfterModelCallParams,
  AgentHarness,
  type BeforeToolCallParams,
  callModel,
  createCheckpointStore,
  createLocalFsAdapter,
  createSqliteStorage,
  filesystem,
  loop,
  NoeticConfigError,
  observations,
  plan,
  runCode,
  spawn,
  steering,
  SteeringAction,
  type TaskState,
  taskState,
  temporal,
  tool,
  type ToolContextDeclaration,
  toolCalls,
  until
} from "../../src/promise/index.ts"
import { type FakeOpenRouter, type Reply, startFakeOpenRouter } from "../runtime/fakeOpenRouter.ts"
import { harness } from "./harnesses.ts"

const servers: Array<FakeOpenRouter> = []
const serve = async (answer: ReadonlyArray<Reply>) => {
  const server = await startFakeOpenRouter(answer)
  servers.push(server)
  return server
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const configCode = (f: () => unknown): string | undefined => {
  try {
    f()
  } catch (error) {
    expect(error).toBeInstanceOf(NoeticConfigError)
    return (error as NoeticConfigError).code
  }
  return undefined
}

/** The text of every message a request sent, joined. */
const sent = (server: FakeOpenRouter, n: number): string => JSON.stringify(server.requests[n]!.body.messages)

const openrouter = (server: FakeOpenRouter) => ({ provider: "openrouter" as const, apiKey: "sk-test", baseUrl: server.baseUrl })

describe("taskState()", () => {
  it("task-state.mdx's usage: the layer and a namespace-merging coordinator layer; a bad mergeData is refused", () => {
    const layer = taskState()

    // Fan-out: keep every worker's `data` instead of last-writer-wins.
    const coordinatorLayer = taskState({ mergeData: "namespace" })

    expect([layer.id, layer.slot, layer.scope]).toEqual(["task-state", 110, "thread"])
    expect(coordinatorLayer.id).toBe("task-state")
    expect(configCode(() => taskState({ mergeData: "deep" as never }))).toBe("INVALID_CONTEXT_LAYER")
  })

  it("the model records an artifact with task-state/recordArtifact; the next round sees it in <task_state>; the next host on the thread rehydrates it", async () => {
    const server = await serve([
      { toolCalls: [{ id: "c1", name: "task-state/recordArtifact", arguments: "{\"path\":\"src/a.ts\"}" }] },
      { text: "recorded" }
    ])
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "task-state-"))
    const durable = () => {
      const storage = createSqliteStorage({ path: Path.join(dir, "db.sqlite") })
      return new AgentHarness({
        name: "tasks",
        params: {},
        contextLayers: [taskState()],
        callModelDefaults: openrouter(server),
        environment: { storage: { adapter: storage, checkpointStore: createCheckpointStore({ storage }) } }
      })
    }
    const first = durable()
    const agent = callModel({ id: "worker", model: "openai/gpt-4o", instructions: "Work." })
    expect(await first.run(agent, "write a.ts", first.createContext({ threadId: "task-1" }))).toBe("recorded")
    expect(server.requests[0]!.body.tools.map((t: { function: { name: string } }) => t.function.name)).toContain("task-state/recordArtifact")
    expect(sent(server, 1)).toContain("<task_state>")
    expect(sent(server, 1)).toContain("src/a.ts")
    await first.close()

    const second = durable()
    const read = runCode({ id: "read", execute: async (_: string, ctx) => ctx.harness.getLayerState<TaskState>(ctx.id, "task-state") })
    const state = await second.run(read, "", second.createContext({ threadId: "task-1" }))
    expect(state?.files).toEqual(["src/a.ts"])
    // One checkpoint per store: the round with the tool call and the round with the text.
    expect(state?.checkpoints.length).toBe(2)
    await second.close()
  })
})

describe("toolCalls()", () => {
  it("tool-calls.mdx's todo tools share one layer; write_todos' state reaches the model's next round as <todos>", async () => {
    //#region Types

    interface TodoItem {
      id: string
      description: string
      status: "pending" | "in_progress" | "completed"
    }

    interface TodoState {
      items: TodoItem[]
    }

    //#endregion

    //#region Context Declaration

    const TODO_ID = "todos"

    const todoContext: ToolContextDeclaration<TodoState> = {
      id: TODO_ID,
      init: () => ({ items: [] }),
      recall: (state) => {
        if (!state.items.length) {
          return null
        }
        const lines = state.items.map(
          (item) => `[${item.status}] ${item.id}: ${item.description}`
        )
        return `<todos>\n${lines.join("\n")}\n</todos>`
      }
    }

    //#endregion

    //#region Tools

    const writeTodos = tool({
      name: "write_todos",
      description: "Create new todo items.",
      input: z.object({
        items: z.array(z.string())
      }),
      output: z.array(z.object({
        id: z.string(),
        description: z.string(),
        status: z.string()
      })),
      context: todoContext,
      execute: async (args, toolCtx) => {
        const state = toolCtx.context.get<TodoState>(TODO_ID) ?? { items: [] }

        const newItems: TodoItem[] = args.items.map((desc) => ({
          id: crypto.randomUUID().slice(0, 8),
          description: desc,
          status: "pending" as const
        }))

        toolCtx.context.set(TODO_ID, {
          items: [...state.items, ...newItems]
        })

        return newItems
      }
    })

    const updateTodo = tool({
      name: "update_todo",
      description: "Update the status of a todo item.",
      input: z.object({
        id: z.string(),
        status: z.enum(["pending", "in_progress", "completed"])
      }),
      output: z.object({
        id: z.string(),
        description: z.string(),
        status: z.string()
      }),
      context: todoContext,
      execute: async (args, toolCtx) => {
        const state = toolCtx.context.get<TodoState>(TODO_ID) ?? { items: [] }
        const item = state.items.find((i) => i.id === args.id)
        if (!item) {
          throw new Error(`Todo not found: ${args.id}`)
        }
        item.status = args.status
        toolCtx.context.set(TODO_ID, state)
        return item
      }
    })

    //#endregion

    const server = await serve([
      { toolCalls: [{ id: "c1", name: "write_todos", arguments: "{\"items\":[\"ship v2\"]}" }] },
      { text: "planned" },
      { text: "nothing more" }
    ])
    const tools = [writeTodos, updateTodo]
    const layers = toolCalls(tools)
    expect(layers.map((l) => l.id)).toEqual(["todos"])

    const agent = spawn({
      id: "planner",
      child: loop({
        id: "planner-loop",
        steps: [callModel({
          id: "planner-llm",
          model: "anthropic/claude-sonnet-4",
          instructions: "You are a task planner.",
          tools
        })],
        until: until.noToolCalls()
      }),
      context: [
        ...toolCalls(tools)
      ]
    })
    const h = harness({ name: "planner", params: {}, agentGraph: agent, callModelDefaults: openrouter(server) })
    await h.run(agent, "plan the release", h.createContext())
    expect(sent(server, 0)).not.toContain("<todos>")
    expect(sent(server, 1)).toMatch(/<todos>\\n\[pending\] [0-9a-f]{8}: ship v2\\n<\/todos>/)
  })

  it("a context without init / recall is refused", () => {
    expect(configCode(() => toolCalls([{ name: "t", context: { recall: () => null } as never }]))).toBe("INVALID_CONTEXT_LAYER")
    expect(configCode(() => toolCalls("tools" as never))).toBe("INVALID_CONTEXT_LAYER")
  })
})

describe("observations()", () => {
  it("observations.mdx's usage: at the threshold the observer's facts are recalled as <observations>", async () => {
    const layer = observations({
      bufferThreshold: 2000,
      maxObservations: 50,
      observer: async (buffer) => {
        // Call an LLM or use heuristics to extract facts
        return ["User prefers TypeScript", "Project uses Bun"]
      }
    })
    const h = harness({ name: "obs", params: {}, contextLayers: [layer] })
    const ctx = h.createContext({ resourceId: "user-1" })
    await h.initLayers(undefined, ctx)
    await h.storeLayers(undefined, { items: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "short" }] }] }, ctx)
    expect(await h.recallLayers(undefined, "", ctx)).toEqual([])
    const long = "x".repeat(8000)
    await h.storeLayers(undefined, { items: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: long }] }] }, ctx)
    const [entry] = await h.recallLayers(undefined, "", ctx)
    expect((entry!.items[0]!.content as Array<{ text: string }>)[0]!.text).toBe(
      "<observations>\n- User prefers TypeScript\n- Project uses Bun\n</observations>"
    )
    expect(configCode(() => observations({ scope: "global" as never }))).toBe("INVALID_CONTEXT_LAYER")
    expect(configCode(() => observations({ maxObservations: 0 }))).toBe("INVALID_CONTEXT_LAYER")
  })
})

describe("temporal()", () => {
  it("temporal.mdx's usage: extract fills the ledger, searchMemory answers through search, recall grounds the date", async () => {
    const extracted: Array<string> = []
    const extractFacts = async (transcript: string, _now: string) => (extracted.push(transcript), [{ ts: "2026-06-01T10:00:00Z", fact: "moved to Berlin" }])
    const searchFacts = async (query: string, facts: ReadonlyArray<{ ts: string; fact: string }>, now: string) => ({
      facts: facts.filter((f) => f.fact.includes(query)).map((f) => f.fact),
      date: now
    })

    const layer = temporal({
      extract: async ({ transcript, now }) => {
        // LLM call that returns [{ ts: '2026-06-01T10:00:00Z', fact: '...' }, ...]
        return extractFacts(transcript, now)
      },
      search: async ({ query, facts, now }) => {
        // LLM call that returns { facts, date?, fuzzy? }
        return searchFacts(query, facts, now)
      }
    })

    const h = harness({ name: "temporal", params: {}, contextLayers: [layer] })
    const search = runCode({
      id: "search",
      execute: async (_: string, ctx) => {
        await ctx.harness.storeLayers(undefined, {
          items: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "I moved to Berlin ".repeat(500) }] }]
        }, ctx)
        return (ctx.context as any).temporal.searchMemory({ query: "Berlin" })
      }
    })
    const ctx = h.createContext()
    const result = await h.run(search, "", ctx)
    expect(extracted.length).toBe(1)
    expect(result.facts).toEqual(["moved to Berlin"])
    expect(result.date).toMatch(/^\d{4}\/\d{2}\/\d{2} \(\w{3}\) \d{2}:\d{2}$/)
    const [entry] = await h.recallLayers(undefined, "", ctx)
    expect((entry!.items[0]!.content as Array<{ text: string }>)[0]!.text).toMatch(/^<current_datetime>\nNow: /)
    expect(configCode(() => temporal({ extract: "llm" as never }))).toBe("INVALID_CONTEXT_LAYER")
  })
})

describe("steering()", () => {
  it("steering.mdx's usage: a deleteFile outside /workspace/ is denied before it runs, and the model is told why", async () => {
    const layer = steering({
      rules: [
        {
          id: "no-delete-outside-workspace",
          appliesTo: ["beforeToolCall"],
          predicate: (params: BeforeToolCallParams | AfterModelCallParams) => {
            if (!("toolName" in params) || params.toolName !== "deleteFile") {
              return { action: SteeringAction.Allow }
            }
            const args = params.toolArgs as { path: string }
            if (!args.path.startsWith("/workspace/")) {
              return {
                action: SteeringAction.Deny,
                guidance: "Deletion outside /workspace/ is not allowed."
              }
            }
            return { action: SteeringAction.Allow }
          }
        }
      ]
    })

    const deleted: Array<string> = []
    const deleteFile = tool({
      name: "deleteFile",
      description: "Delete a file",
      input: z.object({ path: z.string() }),
      execute: async ({ path }) => (deleted.push(path), "deleted")
    })
    const server = await serve([
      {
        toolCalls: [
          { id: "c1", name: "deleteFile", arguments: "{\"path\":\"/etc/passwd\"}" },
          { id: "c2", name: "deleteFile", arguments: "{\"path\":\"/workspace/tmp\"}" }
        ]
      },
      { text: "ok" }
    ])
    const h = harness({ name: "steer", params: {}, contextLayers: [layer], callModelDefaults: openrouter(server) })
    const ctx = h.createContext()
    await h.run(callModel({ id: "llm", model: "openai/gpt-4o", tools: [deleteFile] }), "clean up", ctx)
    expect(deleted).toEqual(["/workspace/tmp"])
    expect(sent(server, 1)).toContain("Deletion outside /workspace/ is not allowed.")
    const ledger = h.getLayerState<{ ledger: Array<{ kind: string; action?: string }> }>(ctx.id, "steering")!.ledger
    expect(ledger.filter((e) => e.kind === "tool_call").map((e) => e.action)).toEqual(["deny", "allow"])
  })

  it("an llmEval rule is refused by name; bad rules are refused", () => {
    expect(configCode(() =>
      steering({ rules: [{ id: "tone", appliesTo: ["afterModelCall"], llmEval: { mode: "sync", prompt: "Is the reply polite?" } }] })
    )).toBe("UNSUPPORTED_OPTION")
    expect(configCode(() => steering({ rules: [{ id: "x", appliesTo: ["later" as never], predicate: () => ({ action: "allow" }) }] }))).toBe(
      "INVALID_CONTEXT_LAYER"
    )
  })
})

describe("filesystem()", () => {
  it("filesystem.mdx's usage; a message's #references reach the model as # Referenced Files, read through environment.fs", async () => {
    const layer = filesystem({
      baseDir: "/workspace/my-project",
      maxFileSize: 512 * 1024
    })
    expect([layer.id, layer.slot, layer.scope]).toEqual(["filesystem", 350, "thread"])

    const dir = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "fs-layer-")))
    Fs.mkdirSync(Path.join(dir, "src"))
    Fs.writeFileSync(Path.join(dir, "src/index.ts"), "export const main = () => 1")
    Fs.writeFileSync(Path.join(dir, "package.json"), "{\"name\":\"demo\"}")
    const server = await serve([{ text: "seen" }])
    const h = harness({
      name: "files",
      params: {},
      contextLayers: [filesystem({ baseDir: dir })],
      callModelDefaults: openrouter(server),
      environment: { fs: createLocalFsAdapter() }
    })
    const ctx = h.createContext()
    await ctx.append([{ type: "message", role: "user", content: [{ type: "input_text", text: "Look at #src/index.ts and #package.json" }] }])
    expect((ctx.items[0]!.content as Array<{ text: string }>)[0]!.text).toBe(
      "Look at [#src/index.ts](#src-index-ts) and [#package.json](#package-json)"
    )
    await h.run(callModel({ id: "llm", model: "openai/gpt-4o" }), "what do they do?", ctx)
    expect(sent(server, 0)).toContain("# Referenced Files")
    expect(sent(server, 0)).toContain("export const main = () => 1")
    expect(sent(server, 0)).toContain("## package.json")
  })

  it("without environment.fs the layer reads noetic's default, the harness's in-memory filesystem; scoringModel is refused", async () => {
    const server = await serve([{ text: "seen" }])
    const h = harness({ name: "files", params: {}, contextLayers: [filesystem({ baseDir: "/work" })], callModelDefaults: openrouter(server) })
    await h.fs.writeFile("/work/notes.md", "only in memory")
    const ctx = h.createContext()
    await ctx.append([{ type: "message", role: "user", content: [{ type: "input_text", text: "Read #notes.md" }] }])
    await h.run(callModel({ id: "llm", model: "openai/gpt-4o" }), "go", ctx)
    expect(sent(server, 0)).toContain("only in memory")
    expect(configCode(() => filesystem({ scoringModel: "anthropic/claude-haiku-4-5-20251001" }))).toBe("UNSUPPORTED_OPTION")
  })
})

describe("layers still refused", () => {
  it("plan() throws UNSUPPORTED_OPTION naming itself", () => {
    try {
      plan()
      expect.fail("plan() should throw")
    } catch (error) {
      expect((error as NoeticConfigError).code).toBe("UNSUPPORTED_OPTION")
      expect((error as NoeticConfigError).message).toContain("'plan()'")
    }
  })
})
