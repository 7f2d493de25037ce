/**
 * noetic's harness configuration the facade runs (docs/runtime.md#harness-configuration):
 * `config`, `hooks`, `paramsSchema`, `initialCwd` / `setRootCwd` / `rootCwdState`.
 * Hooks see noetic's steps only: not the tool loop's own round and tool-call steps.
 */
import { describe, expect, it } from "vitest"
import { AgentHarness, callModel, runCode, tool } from "../../src/promise/index.ts"

describe("harness configuration (Promise API)", () => {
  it("hooks run before and after every step dispatch, with the step, its result and the context; a rejecting hook fails the turn", async () => {
    const calls: Array<string> = []
    const inner = runCode({ id: "inner", execute: async (n: number) => n * 2 })
    await using harness = new AgentHarness({
      name: "hooked",
      params: { model: "x" },
      agentGraph: runCode({ id: "outer", execute: async (n: number, ctx) => ctx.harness.run(inner, n, ctx) }),
      hooks: {
        async beforeStep(step, ctx) {
          calls.push(`before ${step.id} ${step.kind} ${ctx.threadId}`)
        },
        async afterStep(step, result) {
          calls.push(`after ${step.id} ${JSON.stringify(result)}`)
          if (result === 8) throw new Error("hook refused")
        }
      }
    })
    expect(harness.config.name).toBe("hooked")
    expect(harness.config.params).toEqual({ model: "x" })
    await harness.execute(2, { threadId: "h" })
    expect((await harness.getAgentResponse({ threadId: "h" })).output).toBe(4)
    expect(calls).toEqual(["before outer runCode h", "before inner runCode h", "after inner 4", "after outer 4"])
    const failing = await harness.execute(4, { threadId: "h" })
    await expect(failing.result()).rejects.toThrow("hook refused")
  })

  it("paramsSchema validates params at construction: parse()'s result becomes config.params; a Standard Schema's issues throw PARAMS_INVALID", () => {
    const zodLike = { parse: (value: any) => ({ ...value, temperature: value.temperature ?? 0.5 }) }
    const harness = new AgentHarness({ name: "p", params: { model: "m" }, paramsSchema: zodLike })
    expect(harness.config.params).toEqual({ model: "m", temperature: 0.5 })
    const standard = {
      "~standard": {
        version: 1,
        vendor: "test",
        validate: (value: any) => typeof value.model === "string" ? { value } : { issues: [{ message: "model is required" }] }
      }
    }
    expect(() => new AgentHarness({ name: "q", params: {}, paramsSchema: standard })).toThrow(
      expect.objectContaining({ code: "PARAMS_INVALID", message: expect.stringContaining("model is required") })
    )
    return harness.close()
  })

  it("initialCwd is every root context's cwd; setRootCwd moves it for later roots and turns, keeping previousCwd", async () => {
    await using harness = new AgentHarness({
      name: "cwd",
      params: {},
      initialCwd: "/srv/app",
      agentGraph: runCode({ id: "where", execute: async (_: string, ctx) => ctx.cwdState.cwd })
    })
    expect(harness.rootCwdState).toEqual({ cwd: "/srv/app" })
    expect(harness.createContext().cwdState.cwd).toBe("/srv/app")
    await harness.execute("a")
    expect((await harness.getAgentResponse()).output).toBe("/srv/app")
    harness.setRootCwd("/srv/other")
    expect(harness.rootCwdState).toEqual({ cwd: "/srv/other", previousCwd: "/srv/app" })
    expect(harness.createContext().cwdState.cwd).toBe("/srv/other")
    await harness.execute("b")
    expect((await harness.getAgentResponse()).output).toBe("/srv/other")
    // A child keeps its parent's cwd, not the root's.
    const parent = harness.createContext({ cwdInit: "/tmp/p" })
    expect(harness.createContext({ parent }).cwdState.cwd).toBe("/tmp/p")
  })
})

describe("hooks around a callModel (Promise API)", () => {
  it("see the callModel step as noetic's plain data, and not the tool loop's own round and tool-call steps", async () => {
    const seen: Array<string> = []
    const lookup = tool({ name: "lookup", description: "Looks up", execute: async () => "A" })
    let round = 0
    await using harness = new AgentHarness({
      name: "hooked-model",
      params: {},
      agentGraph: callModel({ id: "llm", model: "m/x", tools: [lookup] }),
      _testCallModel: async () => ({
        items: round++ === 0
          ? [{ id: "fc1", type: "function_call", callId: "c1", name: "lookup", arguments: "{}", status: "completed" }]
          : [{ id: "m1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "ok" }] }],
        usage: { inputTokens: 1, outputTokens: 1 }
      }),
      hooks: {
        async beforeStep(step) {
          seen.push(`before ${step.id} ${(step as { model?: unknown }).model}`)
        },
        async afterStep(step) {
          seen.push(`after ${step.id}`)
        }
      }
    })
    await harness.execute("go", { threadId: "t" })
    await harness.getAgentResponse({ threadId: "t" })
    expect(seen).toEqual(["before llm m/x", "after llm"])
  })
})
