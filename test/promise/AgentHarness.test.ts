import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import {
  AgentHarness,
  callModel,
  createCheckpointStore,
  createFileStorage,
  createInMemoryStorage,
  createInMemorySubprocessAdapter,
  DEFAULT_STEP_LEDGER_RETENTION,
  inParallel,
  invokeTool,
  NoeticConfigError,
  isNoeticError,
  NoeticError,
  reattachLiveChildren,
  runCode
} from "../../src/promise/index.ts"
import { waitForRelease } from "../fixtures/subprocessSteps.ts"
import { runTurn } from "./turns.ts"

const harnesses: Array<AgentHarness> = []
const track = <H extends AgentHarness>(harness: H): H => {
  harnesses.push(harness)
  return harness
}
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((harness) => harness.close()))
})

const tempRoot = (name: string) => Fs.mkdtempSync(Path.join(Os.tmpdir(), `noetic-facade-${name}-`))

const configError = (f: () => unknown): NoeticConfigError => {
  try {
    f()
  } catch (error) {
    if (error instanceof NoeticConfigError) return error
    throw error
  }
  throw new Error("expected a NoeticConfigError")
}

describe("Promise facade: AgentHarness", () => {
  it("a zero-config harness executes and every durability hook is a no-op", async () => {
    const harness = track(new AgentHarness({
      name: "plain",
      agentGraph: runCode("root", async (n: number) => n * 2),
      params: {}
    }))
    const { executionId, output } = await runTurn(harness, 21)
    expect(output).toBe(42)
    expect(await harness.restore(executionId)).toBeNull()
    expect(await harness.resume(executionId)).toBeNull()
    await harness.checkpoint(await harness.createContext())
    expect(await harness.subprocess.listLive()).toEqual([])
    expect(await harness.subprocess.reattach("nope")).toBeNull()
  })

  it("throws NoeticConfigError for invalid retention caps at construction, and accepts Infinity", () => {
    const storage = createInMemoryStorage()
    const checkpointStore = createCheckpointStore({ storage })
    for (const bad of [0, -1, Number.NaN]) {
      for (const field of ["maxEntryBytes", "maxEntries"] as const) {
        const error = configError(() =>
          new AgentHarness({
            name: "bad",
            params: {},
            environment: { storage: { checkpointStore, stepLedgerRetention: { [field]: bad } } }
          })
        )
        expect(error.code).toBe("STEP_LEDGER_RETENTION_INVALID")
        expect(error.hint.length).toBeGreaterThan(0)
      }
    }
    track(new AgentHarness({
      name: "unbounded",
      params: {},
      environment: {
        storage: { checkpointStore, stepLedgerRetention: { maxEntryBytes: Infinity, maxEntries: Infinity } }
      }
    }))
    expect(DEFAULT_STEP_LEDGER_RETENTION).toEqual({ maxEntryBytes: 128 * 1024, maxEntries: 1000 })
  })

  it("retention through harness.run on a restored context: evicted steps re-run, the retained ones replay", async () => {
    const storage = createInMemoryStorage()
    const checkpointStore = createCheckpointStore({ storage })
    const harness = track(new AgentHarness({
      name: "bounded",
      params: {},
      environment: { storage: { adapter: storage, checkpointStore, stepLedgerRetention: { maxEntries: 3 } } }
    }))
    const calls: Array<string> = []
    const steps = [1, 2, 3, 4, 5].map((n) =>
      runCode({
        id: `s${n}`,
        execute: async () => {
          calls.push(`s${n}`)
          return `out-${n}`
        }
      })
    )
    // A host driving steps itself: five top-level dispatches on one context.
    const ctx = harness.createContext()
    for (const step of steps) await harness.run(step, "go", ctx)
    expect(calls).toHaveLength(5)
    const resumed = await harness.restore(ctx.id)
    calls.length = 0
    const outputs: Array<unknown> = []
    for (const step of steps) outputs.push(await harness.run(step, "go", resumed!))
    // Only the two evicted before the restart run again; re-recording them evicts more
    // keys in storage, but what the context loaded still replays.
    expect(calls).toEqual(["s1", "s2"])
    expect(outputs).toEqual(["out-1", "out-2", "out-3", "out-4", "out-5"])
  })

  it("a bad lease ttl throws a NoeticConfigError naming the problem", () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    for (const ttlMs of [0, -5, Number.NaN, Infinity]) {
      expect(() =>
        new AgentHarness({ name: "x", params: {}, environment: { storage: { checkpointStore, lease: { owner: "h", ttlMs } } } })
      ).toThrow(expect.objectContaining({ name: "NoeticConfigError", code: "LEASE_TTL_INVALID" }))
    }
  })

  it("an empty step id throws EMPTY_STEP_ID; execute without a graph rejects NO_STEP_CONFIGURED", async () => {
    expect(configError(() => runCode("", () => 1)).code).toBe("EMPTY_STEP_ID")
    const harness = track(new AgentHarness({ name: "no-graph", params: {} }))
    await expect(runTurn(harness, undefined)).rejects.toMatchObject({ code: "NO_STEP_CONFIGURED" })
  })

  it("a step body's throw rejects as noetic's step_failed NoeticError, each runCode wrapping the one below", async () => {
    const boom = new RangeError("out of range")
    const harness = track(new AgentHarness({
      name: "throws",
      params: {},
      agentGraph: runCode("root", async (_: void, ctx) => ctx.run(runCode("inner", () => { throw boom }), undefined))
    }))
    const error = await runTurn(harness, undefined).then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    const outer = error as NoeticError
    expect(outer.message).toBe("Step 'root' failed: Step 'inner' failed: out of range")
    expect(outer.noeticError).toMatchObject({ kind: "step_failed", stepId: "root", retriesExhausted: false })
    const inner = (outer.noeticError as { cause?: Error }).cause as NoeticError
    expect(isNoeticError(inner)).toBe(true)
    expect(inner.noeticError).toMatchObject({ kind: "step_failed", stepId: "inner" })
    expect((inner.noeticError as { cause: unknown }).cause).toBe(boom)
  })

  it("harness.run and ctx.run reject with step_failed; retriesExhausted after a retry policy's attempts", async () => {
    const boom = new Error("flaky")
    const harness = track(new AgentHarness({ name: "run-fails", params: {} }))
    const ctx = harness.createContext()
    let attempts = 0
    const retried = runCode({
      id: "retried",
      retry: { maxAttempts: 2, backoff: "fixed", initialDelay: 1 },
      execute: () => {
        attempts++
        throw boom
      }
    })
    const error = await harness.run(retried, undefined, ctx).then(() => undefined, (e: unknown) => e)
    expect(attempts).toBe(2)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).message).toBe("Step 'retried' failed: flaky")
    expect((error as NoeticError).noeticError).toEqual({
      kind: "step_failed",
      stepId: "retried",
      cause: boom,
      retriesExhausted: true
    })
    const viaCtx = await harness.run(
      runCode("outer", async (_: void, c) => {
        const inner = await c.run(runCode("once", () => { throw boom }), undefined).then(() => undefined, (e: unknown) => e)
        return isNoeticError(inner) ? inner.noeticError : inner
      }),
      undefined,
      ctx
    )
    expect(viaCtx).toEqual({ kind: "step_failed", stepId: "once", cause: boom, retriesExhausted: false })
  })

  it("a tool that throws rejects with step_failed of its invokeTool step; a tool's own NoeticError passes as it is", async () => {
    const boom = new Error("quota exceeded")
    const harness = track(new AgentHarness({
      name: "tools",
      params: {},
      tools: { search: () => { throw boom } }
    }))
    const ctx = harness.createContext()
    const byName = await harness.run(invokeTool({ id: "look", tool: { name: "look", execute: () => { throw boom } } }), {}, ctx)
      .then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(byName)).toBe(true)
    expect((byName as NoeticError).message).toBe("Step 'look' failed: quota exceeded")
    expect((byName as NoeticError).noeticError).toEqual({ kind: "step_failed", stepId: "look", cause: boom, retriesExhausted: false })
    const harnessTool = await harness.run(invokeTool("find", "search"), {}, ctx).then(() => undefined, (e: unknown) => e)
    expect((harnessTool as NoeticError).noeticError).toMatchObject({ kind: "step_failed", stepId: "find", cause: boom })
    const own = new NoeticError({ code: "BUDGET", message: "over budget", noeticError: { kind: "budget_exceeded" } })
    const passed = await harness.run(invokeTool({ id: "spend", tool: { execute: () => { throw own } } }), {}, ctx)
      .then(() => undefined, (e: unknown) => e)
    expect(passed).toBe(own)
  })

  it("a cancelled context rejects with noetic's cancelled kind, not step_failed", async () => {
    const harness = track(new AgentHarness({ name: "cancel", params: {} }))
    const ctx = harness.createContext()
    ctx.abort("user stopped")
    const error = await harness.run(runCode("never", () => "ran"), undefined, ctx).then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).message).toBe("Cancelled: user stopped")
    expect((error as NoeticError).noeticError).toEqual({ kind: "cancelled", reason: "user stopped" })
  })

  it("whatever a step body throws stays reachable as the step_failed cause: a string, a plain object, an error with its own _tag", async () => {
    class NotFound extends Error {
      readonly _tag = "NotFound"
    }
    const thrown: ReadonlyArray<unknown> = ["boom", { status: 404 }, new NotFound("no such user"), { _tag: "Timeout" }]
    for (const value of thrown) {
      const harness = track(new AgentHarness({
        name: "throws-anything",
        params: {},
        agentGraph: runCode("root", async () => {
          throw value
        })
      }))
      const error = await runTurn(harness, undefined).then(() => undefined, (e: unknown) => e)
      expect(isNoeticError(error)).toBe(true)
      const payload = (error as NoeticError).noeticError as { kind: string; stepId: string; cause: Error }
      expect(payload).toMatchObject({ kind: "step_failed", stepId: "root" })
      expect((error as NoeticError).cause).toBe(value)
      if (value instanceof Error) expect(payload.cause).toBe(value)
      else expect(payload.cause.cause).toBe(value)
    }
  })

  it("a checkpoint storage that cannot be opened rejects with NoeticError STORAGE_IO, not an engine error", async () => {
    const file = Path.join(tempRoot("not-a-dir"), "file")
    Fs.writeFileSync(file, "")
    const harness = track(new AgentHarness({
      name: "unopenable",
      params: {},
      agentGraph: runCode("root", () => 1),
      environment: {
        storage: { checkpointStore: createCheckpointStore({ storage: createFileStorage({ root: Path.join(file, "sub") }) }) }
      }
    }))
    const error = await runTurn(harness, undefined).then(() => undefined, (error: unknown) => error)
    expect(error).toBeInstanceOf(NoeticError)
    expect((error as NoeticError).code).toBe("STORAGE_IO")
  })

  it("the seed's durable harness: a crashed run resumes on a new harness and completed steps replay", async () => {
    const checkpointRoot = tempRoot("checkpoints")
    let crash = true
    const calls = { research: 0, write: 0 }
    const agent = runCode("agent", async (topic: string, ctx) => {
      const notes = await ctx.run(
        runCode("research", async (t: string) => {
          calls.research++
          return `notes on ${t} #${Math.random()}`
        }),
        topic
      )
      const draft = await ctx.run(
        runCode("write", async (n: string) => {
          calls.write++
          if (crash) throw new Error("host died")
          return `draft from ${n}`
        }),
        notes
      )
      return { notes, draft }
    })
    const build = () =>
      track(new AgentHarness({
        name: "durable-agent",
        agentGraph: agent,
        params: {},
        environment: {
          storage: { checkpointStore: createCheckpointStore({ storage: createFileStorage({ root: checkpointRoot }) }) }
        }
      }))
    await expect(runTurn(build(), "rl", { executionId: "exec-1" })).rejects.toThrow("host died")
    crash = false
    const harness = build()
    const restored = await harness.restore("exec-1", { state: { queue: "host" } })
    expect(restored?.id).toBe("exec-1")
    expect(restored?.state).toEqual({ queue: "host" })
    expect(restored?.frontier.map((entry) => entry.stepId)).toContain("agent")
    const resumed = await harness.resume("exec-1")
    expect(resumed?.output.draft).toBe(`draft from ${resumed?.output.notes}`)
    expect(calls).toEqual({ research: 1, write: 2 })
    await harness.clearCheckpoint("exec-1")
    expect(await harness.restore("exec-1")).toBeNull()
  })

  it("a bad snapshot rejects with CHECKPOINT_SCHEMA_MISMATCH", async () => {
    const storage = createInMemoryStorage()
    await storage.set("execution:old:snapshot", { schemaVersion: 3, executionId: "old" })
    const harness = track(new AgentHarness({
      name: "strict",
      params: {},
      environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
    }))
    const error = await harness.restore("old").then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(NoeticConfigError)
    expect((error as NoeticConfigError).code).toBe("CHECKPOINT_SCHEMA_MISMATCH")
  })

  it("callModel talks to a plain { generate } model and the turn lands in the item log", async () => {
    const storage = createInMemoryStorage()
    const prompts: Array<unknown> = []
    const harness = track(new AgentHarness({
      name: "chat",
      params: {},
      agentGraph: inParallel("both", [callModel("ask")]),
      model: {
        generate: async (request) => {
          prompts.push(request.messages)
          return { id: "resp-1", text: "hello there" }
        }
      },
      environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
    }))
    const { executionId, output } = await runTurn(harness, "hi")
    expect(output).toEqual([{ responseId: "resp-1", text: "hello there" }])
    expect(prompts).toEqual([[{ role: "user", content: "hi" }]])
    const ctx = await harness.restore(executionId)
    // The session put the input in the log as noetic's user item; the model turn added its answer.
    expect(ctx?.items.map((item) => item.content)).toEqual([[{ type: "input_text", text: "hi" }], "hello there"])
  })

  it("a plain model's answer of the wrong shape, and a harness without a model, fail the model step with a typed error", async () => {
    const wrong = track(new AgentHarness({
      name: "wrong-model",
      params: {},
      agentGraph: callModel("ask"),
      model: { generate: async () => ({ text: 42 }) as never }
    }))
    const shape = await runTurn(wrong, "hi").then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(shape)).toBe(true)
    expect(JSON.stringify((shape as { noeticError: unknown }).noeticError)).toContain("not { text: string, id?: string }")
    const none = track(new AgentHarness({ name: "no-model", params: {}, agentGraph: callModel("ask") }))
    const missing = await runTurn(none, "hi").then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(missing)).toBe(true)
    expect(JSON.stringify((missing as { noeticError: unknown }).noeticError)).toContain("built without a model")
  })

  it("detachedSpawn returns a handle at once and its await gets the child's output", async () => {
    const harness = track(new AgentHarness({ name: "spawner", params: {} }))
    const parent = await harness.createContext({ id: "parent" })
    const handle = harness.detachedSpawn(runCode("child", async (n: number) => n + 1), 1, parent, {
      metadata: { purpose: "test" }
    })
    expect(handle.parentExecutionId).toBe("parent")
    expect(typeof handle.handleId).toBe("string")
    expect(await handle.await()).toBe(2)
    expect(handle.status).toBe("completed")
  })

  it("an ask-user prompt restored from a snapshot and answered before its step asks again is not lost", async () => {
    const storage = createInMemoryStorage()
    let gate: () => void = () => {}
    const opened = new Promise<void>((resolve) => gate = resolve)
    let resumed = false
    const agent = runCode("agent", async (_: string, ctx) => {
      // Not recorded before the crash, so on resume it runs again while the prompt is already restored.
      if (resumed) await opened
      return ctx.askUser({ question: "approve?" })
    })
    const boot = () =>
      track(new AgentHarness({ name: "asker", agentGraph: agent, environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } } }))
    const first = boot()
    void runTurn(first, "x", { executionId: "ask-exec" }).catch(() => {})
    let restored = await first.restore("ask-exec")
    // Polled with a pause: the turn runs from the session's queue, on later turns of the event loop.
    while (restored === null || restored.pendingAskUser.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      restored = await first.restore("ask-exec")
    }
    const promptId = restored.pendingAskUser[0]!.id

    resumed = true
    const second = boot()
    const result = second.resume("ask-exec")
    let answered = false
    while (!answered) {
      answered = await second.answerAskUser("ask-exec", promptId, "yes").then(() => true, () => false)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    gate()
    expect(await result).toEqual({ executionId: "ask-exec", output: "yes" })
  })

  it("the seed's host crash: the next boot gets a running child back with its parent context, never checkpointed by hand", async () => {
    const storage = createInMemoryStorage()
    const checkpointStore = createCheckpointStore({ storage })
    const release = Path.join(tempRoot("release"), "go")
    const boot = () => {
      const subprocess = createInMemorySubprocessAdapter({ storage, checkpointStore })
      return track(new AgentHarness({ name: "crash-proof", params: {}, environment: { subprocess, storage: { checkpointStore } } }))
    }
    try {
      const first = boot()
      const parentCtx = await first.createContext({ id: "parent-ctx" })
      const handle = first.detachedSpawn(waitForRelease, { release, value: "job" }, parentCtx)
      await handle.started()
      expect(handle.status).toBe("running")

      // The first host is gone without shutting down; the next boot builds the same harness.
      const { contexts, failures, handles } = await reattachLiveChildren(boot())
      expect(handles.map((h) => h.handleId)).toEqual([handle.handleId])
      expect(contexts.get(handle.handleId)?.id).toBe("parent-ctx")
      expect(failures).toEqual([])
    } finally {
      Fs.writeFileSync(release, "")
    }
  })
})
