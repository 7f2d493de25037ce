import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import {
  AgentHarness,
  createCheckpointStore,
  createFileStorage,
  createHomeStorage,
  createInMemoryStorage,
  createInMemorySubprocessAdapter,
  createLocalSubprocessAdapter,
  createPostgresStorage,
  isNoeticError,
  NoeticConfigError,
  type NoeticError,
  reattachLiveChildren,
  runCode,
  spawn
} from "../../src/promise/index.ts"
import type { StorageAdapter } from "../../src/promise/storage.ts"
import type {
  SubprocessAdapter,
  SubprocessHandle,
  SubprocessRequest,
  SubprocessStatus
} from "../../src/promise/subprocess.ts"
import { waitForRelease } from "../fixtures/subprocessSteps.ts"
import { throwsTypeError } from "./fixtures/siblingSteps.mjs"
import { runTurn } from "../promise/turns.ts"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})
const tempDir = (prefix: string) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
  cleanups.push(() => Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }))
  return dir
}

/**
 * A host-written adapter as a noetic user writes one: it records every request, runs
 * steps through the in-process executor a step request carries, and reports the
 * settlement only through `get` (status and metadata).
 */
const recordingAdapter = () => {
  const requests: Array<SubprocessRequest> = []
  const handles = new Map<string, SubprocessHandle>()
  let next = 0
  const set = (id: string, status: SubprocessStatus, metadata: Record<string, unknown>) => {
    const previous = handles.get(id)!
    handles.set(id, { ...previous, status, updatedAt: new Date().toISOString(), metadata: { ...previous.metadata, ...metadata } })
  }
  const adapter: SubprocessAdapter = {
    async spawn(request) {
      requests.push(request)
      const id = `host-${next++}`
      const now = new Date().toISOString()
      handles.set(id, { id, status: "running", startedAt: now, metadata: { ...request.metadata, runtime: "host" } })
      if (request.kind === "step") {
        // Settles a little later, on a timer, so the caller has to poll get().
        setTimeout(() => {
          request._localExecutor!().then(
            (result) => set(id, "completed", { result }),
            (error: Error) => set(id, "failed", { error: { message: error.message, name: error.name } })
          )
        }, 20)
      }
      return handles.get(id)!
    },
    async get(handleId) {
      return handles.get(handleId) ?? null
    },
    async stop(handleId) {
      if (!handles.has(handleId)) return { kind: "not_found", handleId }
      set(handleId, "stopped", {})
      return { kind: "stopped", handleId, handle: handles.get(handleId)! }
    },
    async pause(handleId) {
      const handle = handles.get(handleId)
      return handle === undefined ? { kind: "not_found", handleId } : { kind: "unsupported", handle, message: "no" }
    },
    async resume(handleId) {
      const handle = handles.get(handleId)
      return handle === undefined ? { kind: "not_found", handleId } : { kind: "unsupported", handle, message: "no" }
    },
    async isAlive(handle) {
      return handles.get(handle.id)?.status === "running"
    },
    async reattach(handleId) {
      return handles.get(handleId) ?? null
    },
    async listLive() {
      return [...handles.values()].filter((handle) => handle.status === "running")
    }
  }
  return { adapter, requests }
}

const double = runCode("double", async (n: number) => n * 2)
const boom = runCode("boom", async (): Promise<number> => {
  throw new Error("the child broke")
})

describe("a host-written SubprocessAdapter", () => {
  it("receives noetic's step request for a detached spawn, and its settlement through get reaches await()", async () => {
    const { adapter, requests } = recordingAdapter()
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    const parent = await harness.createContext({ threadId: "t-1" })
    const handle = harness.detachedSpawn(double, 21, parent)
    expect(await handle.await()).toBe(42)
    expect(requests).toHaveLength(1)
    expect(requests[0]).toMatchObject({
      kind: "step",
      stepId: "double",
      serializedInput: 21,
      executionId: handle.executionId,
      overrides: { threadId: "t-1" }
    })
    // harness.subprocess is the host's adapter: the handle it made is there.
    const listed = await harness.subprocess.get("host-0")
    expect(listed).toMatchObject({ id: "host-0", status: "completed", metadata: { result: 42 } })
  })

  it("a host adapter written as a class with private fields works as environment.subprocess and harness.subprocess", async () => {
    class ClassAdapter implements SubprocessAdapter {
      readonly #inner = recordingAdapter()
      get requests() {
        return this.#inner.requests
      }
      spawn(request: SubprocessRequest) {
        return this.#inner.adapter.spawn(request)
      }
      get(handleId: string) {
        return this.#inner.adapter.get(handleId)
      }
      stop(handleId: string) {
        return this.#inner.adapter.stop(handleId)
      }
      pause(handleId: string) {
        return this.#inner.adapter.pause(handleId)
      }
      resume(handleId: string) {
        return this.#inner.adapter.resume(handleId)
      }
      isAlive(handle: SubprocessHandle) {
        return this.#inner.adapter.isAlive(handle)
      }
      reattach(handleId: string) {
        return this.#inner.adapter.reattach(handleId)
      }
      listLive() {
        return this.#inner.adapter.listLive()
      }
    }
    const adapter = new ClassAdapter()
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    // The host's object itself, as in noetic.
    expect(harness.subprocess).toBe(adapter)
    const handle = harness.detachedSpawn(double, 4, await harness.createContext())
    expect(await handle.await()).toBe(8)
    expect((await harness.subprocess.listLive()).map((h) => h.id)).toEqual([])
    expect(await harness.subprocess.get("host-0")).toMatchObject({ status: "completed" })
    expect(await harness.subprocess.stop("host-0")).toMatchObject({ kind: "stopped" })
    expect(await harness.subprocess.pause("nope")).toEqual({ kind: "not_found", handleId: "nope" })
    expect(adapter.requests).toHaveLength(1)
  })

  it("a failure recorded on metadata.error rejects await() with its message", async () => {
    const { adapter } = recordingAdapter()
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    const handle = harness.detachedSpawn(boom, 1, await harness.createContext())
    await expect(handle.await()).rejects.toThrow("the child broke")
  })

  it("a spawn step given the adapter dispatches its child through it, and the output reaches the caller", async () => {
    const { adapter, requests } = recordingAdapter()
    const graph = spawn("delegate", double, { subprocess: adapter })
    const harness = new AgentHarness({ name: "host", params: {}, agentGraph: graph })
    cleanups.push(() => harness.close())
    const { output } = await runTurn(harness, 5)
    expect(output).toBe(10)
    expect(requests).toEqual([expect.objectContaining({ kind: "step", stepId: "double", serializedInput: 5 })])
  })

  it("a runCode given the adapter runs through it when dispatched below the root; its output is recorded as usual", async () => {
    const { adapter, requests } = recordingAdapter()
    const own = runCode("own", async (n: number) => n + 100, { subprocess: adapter })
    const graph = runCode("root", async (n: number, ctx) => ctx.run(own, n))
    const harness = new AgentHarness({ name: "host", params: {}, agentGraph: graph })
    cleanups.push(() => harness.close())
    expect((await runTurn(harness, 1)).output).toBe(101)
    expect(requests).toEqual([expect.objectContaining({ kind: "step", stepId: "own", serializedInput: 1 })])
    // A detached spawn of that step goes through its adapter once: it runs as that child's root.
    const handle = harness.detachedSpawn(own, 2, await harness.createContext())
    expect(await handle.await()).toBe(102)
    expect(requests).toHaveLength(2)
  })

  it("as the harness default it receives every runCode and spawn dispatch of a step without its own adapter", async () => {
    const { adapter, requests } = recordingAdapter()
    const plusOne = runCode("plusOne", async (n: number) => n + 1)
    const graph = runCode("root", async (n: number, ctx) => {
      const a = await ctx.harness.run(plusOne, n, ctx)
      return ctx.run(spawn("delegate", double), a)
    })
    const harness = new AgentHarness({ name: "host", params: {}, agentGraph: graph, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    expect((await runTurn(harness, 4)).output).toBe(10)
    // The root too, as in noetic; the spawn's child is a runCode dispatched inside the
    // spawn, so it goes through the default as well.
    expect(requests.map((request) => request.kind === "step" ? request.stepId : request.command)).toEqual([
      "root",
      "plusOne",
      "double",
      "double"
    ])
    expect(requests[1]).toMatchObject({ kind: "step", serializedInput: 4 })
    // A step's own adapter comes before the default.
    const own = recordingAdapter()
    const mine = runCode("mine", async (n: number) => -n, { subprocess: own.adapter })
    const viaOwn = new AgentHarness({
      name: "own-first",
      params: {},
      agentGraph: runCode("root2", async (n: number, ctx) => ctx.run(mine, n)),
      environment: { subprocess: adapter }
    })
    cleanups.push(() => viaOwn.close())
    expect((await runTurn(viaOwn, 3)).output).toBe(-3)
    expect(own.requests).toHaveLength(1)
    expect(requests).toHaveLength(5)
  })

  it("a runCode given the adapter goes through it as a harness's root and through harness.run; a detached spawn of it, once", async () => {
    const { adapter, requests } = recordingAdapter()
    const own = runCode("own", async (n: number) => n + 1, { subprocess: adapter })
    const harness = new AgentHarness({ name: "host", params: {}, agentGraph: own })
    cleanups.push(() => harness.close())
    expect((await runTurn(harness, 1)).output).toBe(2)
    expect(await harness.run(own, 2, harness.createContext())).toBe(3)
    expect(requests.map((request) => request.kind === "step" && request.serializedInput)).toEqual([1, 2])
    // The adapter's own run of it (what _localExecutor does) is not sent back to it.
    expect(await harness.detachedSpawn(own, 3, harness.createContext()).await()).toBe(4)
    expect(requests).toHaveLength(3)
  })

  it("a failure of a nested step run by the default adapter rejects the run with its message", async () => {
    const { adapter } = recordingAdapter()
    const graph = runCode("root", async (n: number, ctx) => ctx.run(boom, n))
    const harness = new AgentHarness({ name: "host", params: {}, agentGraph: graph, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    await expect(runTurn(harness, 1)).rejects.toThrow("the child broke")
  })

  it("this library's adapters as the default leave nested steps in place (no child process, no manifest)", async () => {
    const storage = createInMemoryStorage()
    const adapter = createLocalSubprocessAdapter({ storage, root: tempDir("nested-local-") })
    let pid = 0
    const inner = runCode("inner", async (n: number) => {
      pid = process.pid
      return n * 3
    })
    const graph = runCode("root", async (n: number, ctx) => ctx.run(spawn("sub", inner), n))
    const harness = new AgentHarness({ name: "host", params: {}, agentGraph: graph, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    expect((await runTurn(harness, 5)).output).toBe(15)
    expect(pid).toBe(process.pid)
    expect(await storage.list("")).toEqual([])
  })

  it("a host adapter whose get keeps answering null: await() rejects with noetic's handle_evicted; a transient null is tolerated", async () => {
    const forgetful = (nullsBeforeSettled: number): SubprocessAdapter => {
      const { adapter } = recordingAdapter()
      let calls = 0
      return {
        ...adapter,
        spawn: (request) => adapter.spawn(request),
        get: async (handleId) => {
          calls++
          if (nullsBeforeSettled === Infinity || calls <= nullsBeforeSettled) return null
          return adapter.get(handleId)
        }
      }
    }
    const harness = new AgentHarness({ name: "evicting", params: {} })
    cleanups.push(() => harness.close())
    const gone = harness.detachedSpawn(double, 1, harness.createContext(), { subprocess: forgetful(Infinity) })
    const error = await gone.await().then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).noeticError).toMatchObject({ kind: "handle_evicted", handleId: "host-0", stepId: "double" })
    expect(gone.status).toBe("failed")
    // One null, then the real handle: the child's output arrives.
    const flaky = harness.detachedSpawn(double, 2, harness.createContext(), { subprocess: forgetful(1) })
    expect(await flaky.await()).toBe(4)
  })

  it("a plain metadata.error (no noeticError) rejects await() with a plain Error of its message, as noetic rehydrates it", async () => {
    const { adapter } = recordingAdapter()
    let id = 0
    const failing: SubprocessAdapter = {
      ...adapter,
      spawn: async () => ({ id: `plain-${id++}`, status: "running", startedAt: new Date().toISOString(), metadata: {} }),
      get: async (handleId) => ({
        id: handleId,
        status: "failed",
        startedAt: new Date().toISOString(),
        metadata: { error: { message: "boom", name: "BoomError" } }
      })
    }
    const harness = new AgentHarness({ name: "plain-error", params: {} })
    cleanups.push(() => harness.close())
    const handle = harness.detachedSpawn(double, 1, harness.createContext(), { subprocess: failing })
    const error = await handle.await().then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(Error)
    expect(isNoeticError(error)).toBe(false)
    expect((error as Error).message).toBe("boom")
    expect((error as Error).name).toBe("BoomError")
    expect(handle.error).toBe("boom")
    expect(handle.status).toBe("failed")
  })

  it("a detached child's thrown TypeError comes back as the step_failed cause by name and message (in-memory and local)", async () => {
    const local = createLocalSubprocessAdapter({ root: Path.join(tempDir("nte-"), "subprocess"), pollMs: 20 })
    cleanups.push(() => local.close())
    for (const subprocess of [createInMemorySubprocessAdapter(), local]) {
      const harness = new AgentHarness({ name: "typed-failure", params: {}, environment: { subprocess } })
      cleanups.push(() => harness.close())
      const handle = harness.detachedSpawn(throwsTypeError, 1, harness.createContext())
      const error = await handle.await().then(() => undefined, (e: unknown) => e) as NoeticError
      expect(isNoeticError(error)).toBe(true)
      expect(error.noeticError).toMatchObject({ kind: "step_failed", stepId: "throws-type-error" })
      const cause = (error.noeticError as { cause: Error }).cause
      expect(cause).toBeInstanceOf(Error)
      expect(cause.name).toBe("TypeError")
      expect(cause.message).toBe("child typed failure")
      expect(handle.error).toBe("Step 'throws-type-error' failed: child typed failure")
    }
  }, 60_000)

  it("reattachLiveChildren restores the execution a host adapter's handle carries (metadata.executionId) when it names no parent", async () => {
    const { adapter } = recordingAdapter()
    let liveExecution = ""
    const host: SubprocessAdapter = {
      ...adapter,
      listLive: async () => [
        { id: "H1", status: "running", startedAt: new Date().toISOString(), metadata: { executionId: liveExecution } },
        { id: "H2", status: "running", startedAt: new Date().toISOString(), metadata: { executionId: "no-snapshot" } }
      ]
    }
    const harness = new AgentHarness({
      name: "host-reattach",
      params: {},
      environment: { subprocess: host, storage: { checkpointStore: createCheckpointStore({ storage: createInMemoryStorage() }) } }
    })
    cleanups.push(() => harness.close())
    const ctx = harness.createContext({ threadId: "t-9" })
    await harness.checkpoint(ctx)
    liveExecution = ctx.id
    const { contexts, failures, handles } = await reattachLiveChildren(harness)
    expect(handles.map((handle) => handle.id)).toEqual(["H1", "H2"])
    expect([...contexts.keys()]).toEqual(["H1"])
    expect(contexts.get("H1")).toMatchObject({ id: ctx.id, threadId: "t-9" })
    expect(failures).toEqual([])
  })

  it("a per-call override is used for that dispatch only", async () => {
    const host = recordingAdapter()
    const harness = new AgentHarness({ name: "host", params: {} })
    cleanups.push(() => harness.close())
    const parent = await harness.createContext()
    expect(await harness.detachedSpawn(double, 1, parent, { subprocess: host.adapter }).await()).toBe(2)
    expect(await harness.detachedSpawn(double, 2, parent).await()).toBe(4)
    expect(host.requests.map((request) => request.kind === "step" && request.serializedInput)).toEqual([1])
  })

  it("an adapter the engine cannot use is refused at construction with a NoeticConfigError naming what is missing", () => {
    const { adapter } = recordingAdapter()
    const { get: _get, listLive: _listLive, ...partial } = adapter
    let thrown: unknown
    try {
      new AgentHarness({ name: "host", params: {}, environment: { subprocess: partial as unknown as SubprocessAdapter } })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(NoeticConfigError)
    expect(thrown).toMatchObject({ code: "SUBPROCESS_ADAPTER_UNSUPPORTED" })
    expect((thrown as Error).message).toContain("environment.subprocess has no get(), listLive()")
  })
})

describe("the library's adapters speak noetic's interface", () => {
  it("local adapter: unknown, running and finished handles", async () => {
    const base = tempDir("nna-")
    const adapter = createLocalSubprocessAdapter({ root: Path.join(base, "subprocess"), pollMs: 20, stopGraceMs: 2_000 })
    cleanups.push(() => adapter.close())
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())

    // Unknown ids: noetic's not_found results, never a rejection.
    expect(await adapter.get("nope")).toBeNull()
    expect(await adapter.stop("nope", "why")).toEqual({ kind: "not_found", handleId: "nope" })
    expect(await adapter.pause("nope")).toEqual({ kind: "not_found", handleId: "nope" })
    expect(await adapter.resume("nope")).toEqual({ kind: "not_found", handleId: "nope" })
    expect(await adapter.reattach("nope")).toBeNull()

    const parent = await harness.createContext()
    const release = Path.join(base, "go")
    expect(harness.subprocess).toBe(adapter)
    const running = harness.detachedSpawn(waitForRelease, { release, value: "v" }, parent)
    // Listed from the moment detachedSpawn returned.
    expect((await harness.subprocess.listLive()).map((h) => h.id)).toContain(running.handleId)
    const live = await adapter.get(running.handleId)
    expect(live).toMatchObject({
      id: running.handleId,
      status: "running",
      metadata: { executionId: running.executionId, kind: "step", stepId: "waitForRelease", runtime: "local" }
    })
    expect(typeof live!.metadata.pid).toBe("number")
    expect(typeof live!.startedAt).toBe("string")
    expect(await adapter.isAlive(live!)).toBe(true)
    // pause / resume: SIGSTOP and SIGCONT to the child's process group.
    expect(await adapter.pause(running.handleId)).toMatchObject({ kind: "ok", handle: { id: running.handleId, status: "paused" } })
    expect(await adapter.isAlive(live!)).toBe(true)
    expect(await adapter.resume(running.handleId)).toMatchObject({ kind: "ok", handle: { status: "running" } })

    Fs.writeFileSync(release, "")
    expect(await running.await()).toMatchObject({ echoed: "v" })
    const finished = await adapter.get(running.handleId)
    expect(finished).toMatchObject({ status: "completed", metadata: { result: { echoed: "v" } } })
    expect(await adapter.isAlive(finished!)).toBe(false)
    expect(await adapter.pause(running.handleId)).toMatchObject({ kind: "unsupported", handle: { status: "completed" } })

    // Stopping a running child: noetic's stopped result with the stopped handle.
    const release2 = Path.join(base, "never")
    const second = harness.detachedSpawn(waitForRelease, { release: release2, value: "w" }, parent)
    await harness.subprocess.listLive()
    // A paused child still stops.
    expect((await adapter.pause(second.handleId)).kind).toBe("ok")
    const stopped = await adapter.stop(second.handleId, "no longer needed")
    expect(stopped).toMatchObject({
      kind: "stopped",
      handleId: second.handleId,
      handle: { status: "stopped", metadata: { stopReason: "no longer needed" } }
    })
    await expect(second.await()).rejects.toMatchObject({ name: "NoeticError" })
  }, 60_000)

  it("local adapter: noetic's step request by id, with registryEntry as the module that defines the steps", async () => {
    const base = tempDir("nne-")
    const adapter = createLocalSubprocessAdapter({
      root: Path.join(base, "subprocess"),
      pollMs: 20,
      registryEntry: Path.join(import.meta.dirname, "..", "fixtures", "subprocessSteps.ts")
    })
    cleanups.push(() => adapter.close())
    const handle = await adapter.spawn({
      kind: "step",
      stepId: "double",
      serializedInput: 21,
      executionId: "exec-by-id",
      overrides: {},
      metadata: { caller: "me" }
    })
    expect(handle.metadata).toMatchObject({ caller: "me", executionId: "exec-by-id", stepId: "double", runtime: "local" })
    expect(await handle.await()).toBe(42)
    expect(await adapter.get(handle.id)).toMatchObject({ status: "completed", metadata: { result: 42 } })
    // Without an entry a step request by id cannot be loaded by a child: a typed failure.
    const bare = createLocalSubprocessAdapter({ root: Path.join(base, "subprocess2") })
    cleanups.push(() => bare.close())
    await expect(
      bare.spawn({ kind: "step", stepId: "double", serializedInput: 1, executionId: "e2", overrides: {} })
    ).rejects.toMatchObject({ name: "NoeticError" })
  }, 60_000)

  it("local adapter without storage: listLive() is empty and reattach() null, even for its own live child; with storage, found", async () => {
    const before = process.env.NOETIC_HOME
    process.env.NOETIC_HOME = tempDir("nnh-")
    try {
      const registryEntry = Path.join(import.meta.dirname, "..", "fixtures", "subprocessSteps.ts")
      const release = Path.join(process.env.NOETIC_HOME, "release")
      const bare = createLocalSubprocessAdapter({ registryEntry, pollMs: 20, outliveHost: true })
      const handle = await bare.spawn({
        kind: "step",
        stepId: "waitForRelease",
        serializedInput: { release, value: "v" },
        executionId: "exec-bare",
        overrides: {}
      })
      expect(handle.status).toBe("running")
      // Children share Node's compile cache in the home's run directory, made 0700.
      const compileCache = Path.join(process.env.NOETIC_HOME, "run", ".compile-cache")
      expect(Fs.statSync(compileCache).isDirectory()).toBe(true)
      expect(Fs.statSync(compileCache).mode & 0o777).toBe(0o700)
      expect(await bare.listLive()).toEqual([])
      expect(await bare.reattach(handle.id)).toBeNull()
      await bare.close()
      // Another storage-less adapter over the same home finds nothing either: a fresh start.
      const later = createLocalSubprocessAdapter({ registryEntry, pollMs: 20 })
      cleanups.push(() => later.close())
      expect(await later.listLive()).toEqual([])
      expect(await later.reattach(handle.id)).toBeNull()
      expect(await later.stop(handle.id)).toEqual({ kind: "not_found", handleId: handle.id })
      // The home's subprocess storage given as storage lists and reattaches the same child.
      const durable = createLocalSubprocessAdapter({ storage: createHomeStorage("subprocess"), registryEntry, pollMs: 20 })
      cleanups.push(() => durable.close())
      expect((await durable.listLive()).map((live) => live.id)).toEqual([handle.id])
      const again = await durable.reattach(handle.id)
      expect(again).toMatchObject({ id: handle.id, status: "running" })
      Fs.writeFileSync(release, "")
      expect(await again!.await()).toMatchObject({ echoed: "v" })
    } finally {
      if (before === undefined) delete process.env.NOETIC_HOME
      else process.env.NOETIC_HOME = before
    }
  }, 60_000)

  it("two adapters over one root: the one that reattaches takes the stream and the result; the other says so", async () => {
    const base = tempDir("nto-")
    const registryEntry = Path.join(import.meta.dirname, "..", "fixtures", "subprocessSteps.ts")
    const release = Path.join(base, "release")
    const first = createLocalSubprocessAdapter({ root: Path.join(base, "subprocess"), registryEntry, pollMs: 20 })
    cleanups.push(() => first.close())
    const handle = await first.spawn({
      kind: "step",
      stepId: "waitForRelease",
      serializedInput: { release, value: "v" },
      executionId: "exec-two",
      overrides: {}
    })
    const second = createLocalSubprocessAdapter({ root: Path.join(base, "subprocess"), registryEntry, pollMs: 20 })
    cleanups.push(() => second.close())
    const taken = await second.reattach(handle.id)
    expect(taken).toMatchObject({ id: handle.id, status: "running" })
    Fs.writeFileSync(release, "")
    // Whichever connected last has the stream and the result; the other sees the result
    // if it reads it before it is cleared, else says where it went, never "no result".
    const outcomes = await Promise.all([handle, taken!].map((h) =>
      h.await().then((value) => ({ value }), (error: Error) => ({ error: error.message }))
    ))
    expect(outcomes.some((outcome) => "value" in outcome)).toBe(true)
    for (const outcome of outcomes) {
      if ("value" in outcome) expect(outcome.value).toMatchObject({ echoed: "v" })
      else expect(outcome.error).toMatch(/reattached by another host, which took its result/)
    }
  }, 60_000)

  it("a child whose step module starts a child at import (top-level side effects) is refused that spawn: no chain of children", async () => {
    const base = tempDir("nse-")
    const root = Path.join(base, "subprocess")
    const adapter = createLocalSubprocessAdapter({
      root,
      registryEntry: Path.join(import.meta.dirname, "..", "fixtures", "sideEffectSteps.ts"),
      env: { ...process.env, NOETIC_SIDE_EFFECT_ROOT: root },
      pollMs: 20
    })
    cleanups.push(() => adapter.close())
    const handle = await adapter.spawn({ kind: "step", stepId: "leaf", serializedInput: 1, executionId: "e-side", overrides: {} })
    await expect(handle.await()).rejects.toThrow(/top-level side effects/)
    // Only the child this host started was ever recorded.
    const storage = createFileStorage({ root })
    expect((await storage.list("subprocess:manifest:")).length).toBeLessThanOrEqual(1)
  }, 60_000)

  it("default harness adapter: listLive lists a child right after detachedSpawn", async () => {
    const harness = new AgentHarness({ name: "host", params: {} })
    cleanups.push(() => harness.close())
    const base = tempDir("nnl-")
    const handle = harness.detachedSpawn(waitForRelease, { release: Path.join(base, "go"), value: "x" }, await harness.createContext())
    const live = await harness.subprocess.listLive()
    expect(live.map((h) => h.id)).toEqual([handle.handleId])
    expect(live[0]!.status).toBe("running")
    Fs.writeFileSync(Path.join(base, "go"), "")
    await handle.await()
    expect(await harness.subprocess.listLive()).toEqual([])
  })

  it("in-memory adapter: process requests through run, metadataInjector, stepRunner", async () => {
    const ran: Array<unknown> = []
    const adapter = createInMemorySubprocessAdapter({
      run: async (request, handle) => void ran.push({ request, id: handle.id }),
      stepRunner: async (request) => ({ ran: request.stepId, input: request.serializedInput }),
      metadataInjector: (request) => ({ injected: request.kind ?? "process" })
    })
    cleanups.push(() => adapter.close())
    const processHandle = await adapter.spawn({ command: "echo", args: ["hi"], metadata: { mine: 1 } })
    expect(processHandle.metadata).toMatchObject({ mine: 1, injected: "process", command: "echo", args: ["hi"] })
    await processHandle.await()
    expect(ran).toEqual([{ request: expect.objectContaining({ command: "echo", args: ["hi"] }), id: processHandle.id }])
    expect((await adapter.get(processHandle.id))!.status).toBe("completed")

    const stepHandle = await adapter.spawn({ kind: "step", stepId: "s", serializedInput: 3, executionId: "e-1", overrides: {} })
    expect(await stepHandle.await()).toEqual({ ran: "s", input: 3 })
    expect(stepHandle.metadata).toMatchObject({ injected: "step", executionId: "e-1", result: { ran: "s", input: 3 } })
    expect(await adapter.stop("missing")).toEqual({ kind: "not_found", handleId: "missing" })
    // In-process children cannot be suspended.
    expect(await adapter.pause(stepHandle.id)).toMatchObject({ kind: "unsupported", handle: { id: stepHandle.id } })
    expect(await adapter.pause("missing")).toEqual({ kind: "not_found", handleId: "missing" })
  })

  it("in-memory adapter, and the harness's default: runtime 'in-memory'; a process request with nothing to run has completed", async () => {
    const adapter = createInMemorySubprocessAdapter()
    cleanups.push(() => adapter.close())
    const planner = await adapter.spawn({ command: "planner", cwd: "/repo", metadata: { role: "planner" } })
    expect(planner.metadata).toMatchObject({ runtime: "in-memory", role: "planner", command: "planner", cwd: "/repo" })
    expect((await adapter.get(planner.id))?.status).toBe("completed")
    expect(await adapter.stop(planner.id, "done")).toMatchObject({ kind: "stopped" })

    const harness = new AgentHarness({ name: "default-adapter", params: {} })
    cleanups.push(() => harness.close())
    const noop = await harness.subprocess.spawn({ command: "noop" })
    expect(noop.metadata?.runtime).toBe("in-memory")
    const step = harness.detachedSpawn(double, 2, harness.createContext())
    expect(await step.await()).toBe(4)
    expect((await harness.subprocess.get(step.handleId))?.metadata).toMatchObject({ runtime: "in-memory", result: 4 })
  })

  it("in-memory adapter with storage: a reattached child carries metadata.reattachMode 'replay'", async () => {
    const storage = createInMemoryStorage()
    const base = tempDir("nnr-")
    const release = Path.join(base, "go")
    const first = createInMemorySubprocessAdapter({ storage })
    const firstHarness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: first } })
    const handle = firstHarness.detachedSpawn(waitForRelease, { release, value: "r" }, await firstHarness.createContext())
    await firstHarness.subprocess.listLive()
    // The first host goes away without the child settling; its manifest stays.
    await first.close()
    await firstHarness.close()
    const second = createInMemorySubprocessAdapter({ storage })
    cleanups.push(() => second.close())
    const again = await second.reattach(handle.handleId)
    expect(again).toMatchObject({ id: handle.handleId, status: "running", metadata: { reattachMode: "replay" } })
    Fs.writeFileSync(release, "")
    expect(await again!.await()).toMatchObject({ echoed: "r" })
  })
})

  it("in-memory adapter with storage: a request by id (no module) from an earlier adapter is listed and reattached", async () => {
    const storage = createInMemoryStorage()
    const first = createInMemorySubprocessAdapter({ storage, stepRunner: () => new Promise(() => {}) })
    const request = { kind: "step", stepId: "greet", serializedInput: "hi", executionId: "exec-r", overrides: {} } as const
    const spawned = await first.spawn(request)
    expect(spawned.status).toBe("running")
    await first.close()

    // Nothing can load "greet" here and no stepRunner is given: a placeholder, as noetic reattaches it.
    const second = createInMemorySubprocessAdapter({ storage })
    cleanups.push(() => second.close())
    const live = await second.listLive()
    expect(live.map((h) => [h.id, h.status, h.metadata?.stepId, h.metadata?.reattachMode])).toEqual([
      [spawned.id, "running", "greet", "replay"]
    ])
    expect(await second.reattach(spawned.id)).toMatchObject({ id: spawned.id, status: "running" })
    // stop clears the manifest: a later adapter finds nothing.
    expect(await second.stop(spawned.id, "cleanup")).toMatchObject({ kind: "stopped" })
    const third = createInMemorySubprocessAdapter({ storage })
    cleanups.push(() => third.close())
    expect(await third.listLive()).toEqual([])
    expect(await third.reattach(spawned.id)).toBeNull()
  })

  it("in-memory adapter with storage: a later adapter's stepRunner re-runs a recorded request it cannot load", async () => {
    const storage = createInMemoryStorage()
    const first = createInMemorySubprocessAdapter({ storage, stepRunner: () => new Promise(() => {}) })
    const spawned = await first.spawn({ kind: "step", stepId: "greet", serializedInput: "hi", executionId: "exec-s", overrides: { threadId: "t" } })
    await first.close()
    const seen: Array<unknown> = []
    const second = createInMemorySubprocessAdapter({
      storage,
      stepRunner: async (request) => {
        seen.push(request)
        return `hello ${String(request.serializedInput)}`
      }
    })
    cleanups.push(() => second.close())
    const again = await second.reattach(spawned.id)
    expect(again).toMatchObject({ id: spawned.id, metadata: { reattachMode: "replay" } })
    for (let i = 0; i < 100 && (await second.get(spawned.id))?.status === "running"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    expect(await second.get(spawned.id)).toMatchObject({ status: "completed", metadata: { result: "hello hi" } })
    expect(seen).toEqual([expect.objectContaining({ kind: "step", stepId: "greet", serializedInput: "hi", executionId: "exec-s", overrides: { threadId: "t" } })])
    // Settled: its manifest is gone.
    expect(await second.listLive()).toEqual([])
  })

describe("noetic's process requests on the local adapter", () => {
  it("runs an OS command as a durable child: listed, reattached by a later adapter, stopped", async () => {
    const base = tempDir("nnp-")
    const root = Path.join(base, "subprocess")
    const first = createLocalSubprocessAdapter({ root, pollMs: 20, outliveHost: true, stopGraceMs: 2_000 })
    cleanups.push(() => first.close())

    const ok = await first.spawn({ command: process.execPath, args: ["-e", "process.stdout.write('hi')"], metadata: { job: "a" } })
    expect(ok.metadata).toMatchObject({ job: "a", kind: "process", command: process.execPath })
    expect(await ok.await()).toEqual({ exitCode: 0 })
    expect((await first.get(ok.id))!.status).toBe("completed")

    const bad = await first.spawn({ command: process.execPath, args: ["-e", "process.exit(3)"] })
    await expect(bad.await()).rejects.toThrow(/exited with code 3/)
    expect((await first.get(bad.id))!.status).toBe("failed")

    const stdin = await first.spawn({
      command: process.execPath,
      args: ["-e", "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>process.exit(s==='ping'?0:1))"],
      stdin: "ping"
    })
    expect(await stdin.await()).toEqual({ exitCode: 0 })

    const long = await first.spawn({ command: process.execPath, args: ["-e", "setTimeout(() => {}, 60000)"], detached: true })
    expect((await first.listLive()).map((h) => h.id)).toEqual([long.id])
    expect(await first.isAlive(long)).toBe(true)
    // A later host (another adapter over the same root) finds it through its manifest.
    await first.close()
    const second = createLocalSubprocessAdapter({ root, pollMs: 20, stopGraceMs: 2_000 })
    cleanups.push(() => second.close())
    const listed = await second.listLive()
    expect(listed.map((h) => h.id)).toEqual([long.id])
    expect(listed[0]!.metadata).toMatchObject({ kind: "process", command: process.execPath })
    expect(await second.stop(long.id)).toMatchObject({ kind: "stopped", handle: { status: "stopped" } })
    expect(await second.listLive()).toEqual([])
  }, 60_000)
})

describe("storage for the local adapter, and the default file root", () => {
  const manifestsIn = async (storage: StorageAdapter) => {
    const base = tempDir("nnm-")
    const adapter = createLocalSubprocessAdapter({ storage, root: Path.join(base, "subprocess"), pollMs: 20 })
    cleanups.push(() => adapter.close())
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    cleanups.push(() => harness.close())
    const release = Path.join(base, "go")
    const handle = harness.detachedSpawn(waitForRelease, { release, value: "m" }, await harness.createContext())
    expect((await harness.subprocess.listLive()).map((h) => h.id)).toEqual([handle.handleId])
    // The host's manifest is in the given storage.
    expect(await storage.get(`subprocess:manifest:${handle.handleId}`)).toMatchObject({ handleId: handle.handleId, stepId: "waitForRelease" })
    // A second adapter over the same storage and root reattaches the child from it. It
    // lets go before the child ends (leaving it running): one adapter watches a child
    // at a time, and the one that settles it clears its records.
    const second = createLocalSubprocessAdapter({ storage, root: Path.join(base, "subprocess"), pollMs: 20, outliveHost: true })
    cleanups.push(() => second.close())
    expect((await second.listLive()).map((h) => h.id)).toEqual([handle.handleId])
    await second.close()
    Fs.writeFileSync(release, "")
    expect(await handle.await()).toMatchObject({ echoed: "m" })
    expect(await storage.get(`subprocess:manifest:${handle.handleId}`)).toBeNull()
  }

  it("any storage keeps the local adapter's manifests: memory", () => manifestsIn(createInMemoryStorage()), 60_000)

  it("any storage keeps the local adapter's manifests: host-written", async () => {
    const map = new Map<string, unknown>()
    await manifestsIn({
      get: async <T,>(key: string) => (map.has(key) ? structuredClone(map.get(key)) as T : null),
      set: async (key, value) => void map.set(key, structuredClone(value)),
      delete: async (key) => void map.delete(key),
      list: async (prefix) => [...map.keys()].filter((key) => key.startsWith(prefix)).sort()
    })
  }, 60_000)

  it.skipIf(process.env.NOETIC_PG_URL === undefined)("any storage keeps the local adapter's manifests: Postgres", async () => {
    const storage = createPostgresStorage({ url: process.env.NOETIC_PG_URL!, table: `dropin2_manifests_${Date.now()}` })
    cleanups.push(() => storage.close())
    await manifestsIn(storage)
  }, 60_000)

  it("a storage the adapter cannot use is refused with a NoeticConfigError", () => {
    const partial = { get: async () => null, set: async () => {} } as unknown as StorageAdapter
    expect(() => createLocalSubprocessAdapter({ storage: partial })).toThrow(NoeticConfigError)
    expect(() => createLocalSubprocessAdapter({ storage: partial })).toThrow(/delete\(\), list\(\)/)
    // Children open their checkpoint directory themselves: only a file storage will do.
    expect(() => createLocalSubprocessAdapter({ checkpointStorage: createInMemoryStorage() })).toThrow(NoeticConfigError)
    const adapter = createLocalSubprocessAdapter({ storage: createFileStorage({ root: tempDir("nns-") }) })
    cleanups.push(() => adapter.close())
  })

  it("createFileStorage() without a root writes under $NOETIC_HOME/checkpoints", async () => {
    const home = tempDir("nnh-")
    const before = process.env.NOETIC_HOME
    process.env.NOETIC_HOME = home
    cleanups.push(() => {
      if (before === undefined) delete process.env.NOETIC_HOME
      else process.env.NOETIC_HOME = before
    })
    await using storage = createFileStorage()
    await storage.set("a:b", { x: 1 })
    expect(Fs.readdirSync(Path.join(home, "checkpoints")).length).toBeGreaterThan(0)
    expect(await storage.get("a:b")).toEqual({ x: 1 })
  })
})
