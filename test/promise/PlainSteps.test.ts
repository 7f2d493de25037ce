/**
 * noetic's `Step` written as a plain object, without a builder (as noetic's own tests
 * write steps): every place a step is taken accepts it, and it behaves as the step its
 * builder makes.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import {
  AgentHarness,
  type AnyStep,
  createCheckpointStore,
  createFileStorage,
  createInMemorySubprocessAdapter,
  createLocalSubprocessAdapter,
  isNoeticConfigError,
  isNoeticError
} from "../../src/promise/index.ts"
import type { SubprocessAdapter, SubprocessRequest } from "../../src/promise/subprocess.ts"
import { runTurn } from "./turns.ts"

const closing: Array<AgentHarness<any, any>> = []
afterEach(async () => {
  for (const harness of closing.splice(0)) await harness.close()
})
const make = (options: ConstructorParameters<typeof AgentHarness>[0]) => {
  const harness = new AgentHarness(options)
  closing.push(harness)
  return harness
}

/** A noetic step literal, typed loosely as noetic's `Step` union would accept it. */
const plain = (step: Record<string, unknown>): AnyStep<any, any> => step as unknown as AnyStep<any, any>

describe("noetic steps written as plain objects", () => {
  it("run, execute (as the agent graph) and detachedSpawn take them", async () => {
    const echo = plain({ kind: "runCode", id: "echo", execute: async (input: string) => `echo:${input}` })
    const harness = make({ name: "plain", params: {}, agentGraph: echo })
    expect((await runTurn(harness, "a")).output).toBe("echo:a")
    expect(await harness.run(echo, "b", harness.createContext())).toBe("echo:b")
    expect(await harness.detachedSpawn(echo, "c", harness.createContext()).await()).toBe("echo:c")
  })

  it("composite steps take plain children: spawn, loop, inParallel paths, conditional routes, ctx.run", async () => {
    const inc = plain({ kind: "runCode", id: "inc", execute: async (n: number) => n + 1 })
    const graph = plain({
      kind: "runCode",
      id: "root",
      execute: async (n: number, ctx: any) => {
        const spawned = await ctx.harness.run(plain({ kind: "spawn", id: "sub", child: inc }), n, ctx)
        const looped = await ctx.harness.run(
          plain({ kind: "loop", id: "count", steps: [inc], until: (s: { stepCount: number }) => ({ stop: s.stepCount >= 3 }) }),
          spawned,
          ctx
        )
        const merged = await ctx.harness.run(
          plain({
            kind: "inParallel",
            id: "fan",
            mode: "all",
            paths: () => [inc, plain({ kind: "runCode", id: "dbl", execute: async (x: number) => x * 2 })],
            merge: (results: Array<number>) => results.reduce((a, b) => a + b, 0)
          }),
          looped,
          ctx
        )
        return ctx.harness.run(plain({ kind: "conditional", id: "pick", route: () => inc }), merged, ctx)
      }
    })
    const harness = make({ name: "composite", params: {}, agentGraph: graph })
    // 1 -> spawn 2 -> loop of three increments 5 -> (6 + 10) 16 -> 17
    expect((await runTurn(harness, 1)).output).toBe(17)
  })

  it("a completed plain step replays from the ledger after a restart instead of running again", async () => {
    const storage = createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "plain-steps-")) })
    let runs = 0
    const once = plain({ kind: "runCode", id: "once", execute: async () => ++runs })
    let crash = true
    const graph = plain({
      kind: "runCode",
      id: "root",
      execute: async (_: unknown, ctx: any) => {
        const value = await ctx.harness.run(once, null, ctx)
        if (crash) throw new Error("host died")
        return value
      }
    })
    const environment = { storage: { adapter: storage, checkpointStore: createCheckpointStore({ storage }) } }
    const first = make({ name: "replay", params: {}, agentGraph: graph, environment })
    await expect(runTurn(first, null, { executionId: "plain-1" })).rejects.toThrow("host died")
    crash = false
    const second = make({ name: "replay", params: {}, agentGraph: graph, environment })
    expect((await runTurn(second, null, { executionId: "plain-1" })).output).toBe(1)
    expect(runs).toBe(1)
  })

  it("a plain step's own subprocess adapter wins over the harness default; its failure keeps noetic's shape", async () => {
    const requests: Array<string> = []
    const recording = (label: string): SubprocessAdapter => {
      const base = createInMemorySubprocessAdapter()
      return {
        ...base,
        spawn: (request: SubprocessRequest) => {
          requests.push(`${label}:${request.kind === "step" ? request.stepId : request.command}`)
          return base.spawn(request)
        },
        get: (id) => base.get(id),
        stop: (id, reason) => base.stop(id, reason),
        pause: (id) => base.pause(id),
        resume: (id) => base.resume(id),
        isAlive: (handle) => base.isAlive(handle),
        reattach: (id) => base.reattach(id),
        listLive: () => base.listLive()
      }
    }
    const harness = make({ name: "routing", params: {}, environment: { subprocess: recording("A") } })
    const step = plain({ kind: "runCode", id: "per-step", execute: async (input: string) => `echo:${input}`, subprocess: recording("B") })
    expect(await harness.detachedSpawn(step, "hello", harness.createContext()).await()).toBe("echo:hello")
    expect(requests).toEqual(["B:per-step"])
    const throws = plain({ kind: "runCode", id: "throws-sync", execute: () => { throw new Error("sync boom") } })
    const error = await harness.detachedSpawn(throws, "x", harness.createContext()).await().catch((e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as any).noeticError).toMatchObject({ kind: "step_failed", stepId: "throws-sync", cause: { message: "sync boom" } })
  })

  it("a plain step records no module: a local child needs registryEntry, never imports the caller's file", async () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "plain-local-"))
    const local = createLocalSubprocessAdapter({ root })
    const harness = make({ name: "plain-local", params: {} })
    const step = plain({ kind: "runCode", id: "by-id-only", execute: async () => 1 })
    const failure = await harness.detachedSpawn(step, null, harness.createContext(), { subprocess: local }).await().then(
      () => undefined,
      (error: unknown) => error
    )
    await local.close()
    expect(String((failure as Error)?.message)).toMatch(/recorded no module.*registryEntry/)
  })

  it("a plain step with a bad shape gets the builder's NoeticConfigError when it is first used", () => {
    const harness = make({ name: "bad", params: {} })
    const code = (f: () => unknown) => {
      try {
        f()
      } catch (error) {
        return isNoeticConfigError(error) ? error.code : String(error)
      }
      return "no error"
    }
    expect(code(() => harness.detachedSpawn(plain({ kind: "runCode", id: "x" }), 1, harness.createContext()))).toBe(
      "MISSING_EXECUTE_FUNCTION"
    )
    expect(code(() => make({ name: "bad-graph", params: {}, agentGraph: plain({ kind: "spawn", id: "s" }) }))).toBe(
      "MISSING_CHILD_STEP"
    )
  })
})
