/**
 * The harness, its contexts, context layers and detached handles, used the way
 * noetic documents them: synchronous createContext and detachedSpawn, noetic's
 * context members, ContextLayer definitions, host-written checkpoint stores.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import {
  AgentHarness,
  type CheckpointSnapshot,
  CheckpointSchemaVersion,
  CheckpointSnapshotSchema,
  type CheckpointStore,
  createCheckpointStore,
  createFileStorage,
  createInMemoryStorage,
  createInMemorySubprocessAdapter,
  isNoeticConfigError,
  isNoeticError,
  type LayerStateStore,
  type NoeticContextLayer,
  type NoeticError,
  runCode,
  scratchpad,
  type StorageAdapter
} from "../../src/promise/index.ts"
import { harness } from "./harnesses.ts"
import { runTurn } from "./turns.ts"


const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const configCode = (f: () => unknown): string => {
  try {
    f()
  } catch (error) {
    if (isNoeticConfigError(error)) return error.code
    throw error
  }
  throw new Error("expected a NoeticConfigError")
}

/** A noetic layer counting appended items, whose init reads its scoped storage. */
const counterLayer = (id: string, hooksRun: Array<string>): NoeticContextLayer<{ count: number; seeded: unknown }> => ({
  id,
  name: `counter ${id}`,
  slot: 100,
  scope: "thread",
  hooks: {
    async init({ scopeKey, storage }) {
      hooksRun.push(`${id}:init:${scopeKey}`)
      return { state: { count: 0, seeded: await storage.get("seed") } }
    },
    async onItemAppend({ items, state }) {
      hooksRun.push(`${id}:append`)
      return {
        items: items.filter((item) => item.type !== "noise"),
        state: { ...state, count: state.count + items.length }
      }
    }
  }
})

describe("AgentHarness constructor (noetic's options)", () => {
  it("contextLayers become the layers of every context", () => {
    const layer = counterLayer("counter", [])
    const h = harness({ name: "layers", params: {}, contextLayers: [layer] })
    expect(h.createContext().layers).toEqual([layer])
  })

  it("storage.adapter holds the step ledger (as noetic keeps it there), not the checkpoint storage", async () => {
    const adapter = createInMemoryStorage()
    const checkpoints = createInMemoryStorage()
    const h = harness({
      name: "adapter",
      params: {},
      agentGraph: runCode({ id: "root", execute: async (n: number) => n + 1 }),
      environment: { storage: { adapter, checkpointStore: createCheckpointStore({ storage: checkpoints }) } }
    })
    const { executionId } = await runTurn(h, 1)
    expect((await adapter.list(`execution:${executionId}:ledger:`)).length).toBe(1)
    expect(await checkpoints.list(`execution:${executionId}:ledger:`)).toEqual([])
    expect(await checkpoints.get(`execution:${executionId}:snapshot`)).not.toBeNull()
    // clearCheckpoint discards the ledger where it lives.
    await h.clearCheckpoint(executionId)
    expect(await adapter.list(`execution:${executionId}:ledger:`)).toEqual([])
  })

  it("a storage.adapter it cannot honour (with leases) is refused with a NoeticConfigError saying what to do", () => {
    const error = (() => {
      try {
        new AgentHarness({
          name: "x",
          params: {},
          environment: {
            storage: {
              adapter: createInMemoryStorage(),
              checkpointStore: createCheckpointStore({ storage: createInMemoryStorage() }),
              lease: { owner: "host-a" }
            }
          }
        })
      } catch (e) {
        return e
      }
    })()
    expect(isNoeticConfigError(error)).toBe(true)
    expect(error).toMatchObject({ code: "STORAGE_ADAPTER_UNSUPPORTED" })
    expect((error as { hint: string }).hint).toMatch(/createCheckpointStore/)
  })

  it("retention caps below 1 or NaN throw STEP_LEDGER_RETENTION_INVALID; Infinity disables a cap", () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    for (const bad of [0, 0.5, -1, Number.NaN]) {
      expect(configCode(() =>
        new AgentHarness({
          name: "bad",
          params: {},
          environment: { storage: { checkpointStore, stepLedgerRetention: { maxEntries: bad } } }
        })
      )).toBe("STEP_LEDGER_RETENTION_INVALID")
    }
    harness({
      name: "ok",
      params: {},
      environment: { storage: { checkpointStore, stepLedgerRetention: { maxEntries: Infinity, maxEntryBytes: Infinity } } }
    })
  })

  it("a lease over a host-written storage (no compare-and-set) is a NoeticConfigError with a hint, at construction", () => {
    const hostWritten = new Map<string, unknown>()
    const storage: StorageAdapter = {
      get: async <T>(key: string) => (hostWritten.get(key) ?? null) as T | null,
      set: async (key: string, value: unknown) => void hostWritten.set(key, value),
      delete: async (key: string) => void hostWritten.delete(key),
      list: async (prefix: string) => [...hostWritten.keys()].filter((key) => key.startsWith(prefix)).sort()
    }
    const error = (() => {
      try {
        new AgentHarness({
          name: "x",
          params: {},
          environment: { storage: { checkpointStore: createCheckpointStore({ storage }), lease: { owner: "h", ttlMs: 1000 } } }
        })
      } catch (e) {
        return e
      }
    })()
    expect(isNoeticConfigError(error)).toBe(true)
    expect(error).toMatchObject({ code: "EXECUTION_LEASE_UNSUPPORTED" })
    expect((error as { hint: string }).hint).toMatch(/createFileStorage/)
    // Without a lease the same store is fine.
    harness({ name: "ok", params: {}, environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } } })
  })

  it("a bad lease ttl is a NoeticConfigError", () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    expect(configCode(() =>
      new AgentHarness({ name: "x", params: {}, environment: { storage: { checkpointStore, lease: { owner: "h", ttlMs: 0 } } } })
    )).toBe("LEASE_TTL_INVALID")
  })

  it("close() and Symbol.asyncDispose release the harness", async () => {
    const disposed = new AgentHarness({ name: "disposable", params: {}, agentGraph: runCode({ id: "r", execute: async () => 1 }) })
    {
      await using h = disposed
      expect((await runTurn(h, undefined)).output).toBe(1)
    }
    await expect(runTurn(disposed, undefined)).rejects.toBeDefined()
  })
})

describe("AgentHarness methods", () => {
  it("execute honours contextLayers and extraContextLayers for the execution's context", async () => {
    const base = counterLayer("base", [])
    const other = counterLayer("other", [])
    const extra = counterLayer("extra", [])
    const h = harness({
      name: "exec-layers",
      params: {},
      contextLayers: [base],
      agentGraph: runCode({ id: "layers", execute: async (_: void, ctx) => (ctx.layers ?? []).map((layer) => layer.id) })
    })
    expect((await runTurn(h, undefined)).output).toEqual(["base"])
    expect((await runTurn(h, undefined, { contextLayers: [other] })).output).toEqual(["other"])
    expect((await runTurn(h, undefined, { extraContextLayers: [extra] })).output).toEqual(["base", "extra"])
  })

  it("harness.checkpoint(ctx) saves a snapshot restore reads back; without a store it is a no-op", async () => {
    const storage = createInMemoryStorage()
    const h = harness({ name: "ckpt", params: {}, environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } } })
    const ctx = h.createContext({ threadId: "t-ck" })
    await ctx.setCwd("/srv")
    await h.checkpoint(ctx)
    const restored = await h.restore(ctx.id)
    expect(restored?.threadId).toBe("t-ck")
    expect(restored?.cwdState.cwd).toBe("/srv")
    const plain = harness({ name: "plain", params: {} })
    await plain.checkpoint(plain.createContext())
    expect(await plain.restore("anything")).toBeNull()
  })
})

describe("checkpoint stores", () => {
  it("createCheckpointStore(...).list() resolves [{ executionId }]", async () => {
    const store = createCheckpointStore({ storage: createInMemoryStorage() })
    const h = harness({ name: "lister", params: {}, agentGraph: runCode({ id: "r", execute: async () => 1 }), environment: { storage: { checkpointStore: store } } })
    const { executionId } = await runTurn(h, undefined)
    expect(await store.list()).toEqual([{ executionId }])
  })

  it("a host-written CheckpointStore object is used: saves, loads, lists and clears go to it", async () => {
    const saved = new Map<string, CheckpointSnapshot>()
    const calls: Array<string> = []
    const store: CheckpointStore = {
      async save(snapshot) {
        calls.push("save")
        saved.set(snapshot.executionId, structuredClone(snapshot))
      },
      async load(executionId) {
        calls.push("load")
        return saved.get(executionId) ?? null
      },
      async list() {
        return [...saved.keys()].map((executionId) => ({ executionId }))
      },
      async clear(executionId) {
        calls.push("clear")
        saved.delete(executionId)
      }
    }
    let crash = true
    let innerCalls = 0
    const agent = runCode({
      id: "agent",
      execute: async (_: void, ctx) => {
        const inner = await ctx.run(runCode({ id: "inner", execute: async () => ++innerCalls }), undefined)
        if (crash) throw new Error("crash")
        return inner
      }
    })
    const adapter = createInMemoryStorage()
    const h = harness({ name: "host-store", params: {}, agentGraph: agent, environment: { storage: { checkpointStore: store, adapter } } })
    await expect(runTurn(h, undefined, { executionId: "hs" })).rejects.toThrow("crash")
    expect(calls).toContain("save")
    expect(saved.get("hs")?.schemaVersion).toBe(2)
    crash = false
    expect((await h.resume("hs"))?.output).toBe(1)
    expect(innerCalls).toBe(1)
    expect((await h.restore("hs"))?.id).toBe("hs")
    await h.clearCheckpoint("hs")
    expect(calls).toContain("clear")
    expect(await h.restore("hs")).toBeNull()
    expect(await adapter.list("execution:hs:ledger:")).toEqual([])
  })

  it("a host store that loads a malformed record rejects CHECKPOINT_SCHEMA_MISMATCH", async () => {
    const store: CheckpointStore = {
      save: async () => {},
      load: async () => ({ schemaVersion: 1, executionId: "old" }) as never,
      list: async () => [],
      clear: async () => {}
    }
    const h = harness({ name: "strict", params: {}, environment: { storage: { checkpointStore: store } } })
    const error = await h.restore("old").then(() => undefined, (e: unknown) => e)
    expect(isNoeticConfigError(error)).toBe(true)
    expect(error).toMatchObject({ code: "CHECKPOINT_SCHEMA_MISMATCH" })
  })

  it("CheckpointSnapshotSchema validates snapshots; CheckpointSchemaVersion is 2", () => {
    expect(CheckpointSchemaVersion).toBe(2)
    const snapshot = {
      schemaVersion: 2,
      executionId: "e",
      frontier: [{ stepId: "s", input: 1 }],
      layers: {},
      cwd: null,
      askUser: [],
      itemLog: { items: [] },
      capturedAt: new Date(0).toISOString()
    }
    expect(CheckpointSnapshotSchema.parse(snapshot)).toEqual(snapshot)
    expect(CheckpointSnapshotSchema.safeParse({ ...snapshot, schemaVersion: 1 }).success).toBe(false)
  })
})

describe("harness.createContext (synchronous, noetic's members)", () => {
  it("returns a context at once with id, a random UUID threadId, resourceId, depth 0 and parent null", () => {
    const h = harness({ name: "ctx", params: {} })
    const ctx = h.createContext({ resourceId: "user-1" })
    expect(ctx).not.toBeInstanceOf(Promise)
    expect(ctx.id).toMatch(UUID)
    expect(ctx.threadId).toMatch(UUID)
    expect(ctx.threadId).not.toBe(h.createContext().threadId)
    expect(h.createContext({ threadId: "t-1" }).threadId).toBe("t-1")
    expect(ctx.resourceId).toBe("user-1")
    expect(ctx.parent).toBeNull()
    expect(ctx.depth).toBe(0)
  })

  it("execute's context has a UUID execution id and the default session's thread id unless one is given", async () => {
    const h = harness({
      name: "ids",
      params: {},
      agentGraph: runCode({ id: "who", execute: async (_: void, ctx) => ({ id: ctx.id, threadId: ctx.threadId }) })
    })
    const { executionId, output } = await runTurn(h, undefined)
    expect(executionId).toMatch(UUID)
    // As in noetic, a turn queued without a thread id runs on the default session's thread.
    expect(output).toEqual({ id: executionId, threadId: "__default__" })
    expect((await runTurn(h, undefined, { threadId: "t-7" })).output.threadId).toBe("t-7")
  })

  it("state is assignable; a child context has the parent, depth + 1, and the parent's thread and cwd", () => {
    const h = harness({ name: "ctx", params: {} })
    const root = h.createContext({ state: { queue: [] }, cwdInit: "/work/a" })
    expect(root.state).toEqual({ queue: [] })
    root.state = { queue: ["x"] }
    expect(root.state).toEqual({ queue: ["x"] })
    const child = h.createContext({ parent: root })
    expect(child.parent).toBe(root)
    expect(child.depth).toBe(1)
    expect(child.threadId).toBe(root.threadId)
    expect(child.cwdState).toEqual({ cwd: "/work/a" })
    expect(h.createContext({ parent: root, cwdInit: "/tmp/w" }).cwdState.cwd).toBe("/tmp/w")
  })

  it("itemLog.items starts from items; cwdState has cwd and previousCwd once changed", async () => {
    const h = harness({ name: "ctx", params: {} })
    const ctx = h.createContext({ items: [{ type: "message", role: "user", content: "hi" }] })
    expect(ctx.itemLog.items).toEqual([{ type: "message", role: "user", content: "hi" }])
    ctx.itemLog.append({ type: "message", role: "assistant", content: "hello" })
    expect(ctx.itemLog.items).toHaveLength(2)
    expect(ctx.cwdState.cwd).toBe(process.cwd())
    await ctx.setCwd("/srv/one")
    await ctx.setCwd("/srv/two")
    expect(ctx.cwdState).toEqual({ cwd: "/srv/two", previousCwd: "/srv/one" })
  })

  it("layers are the layer definitions; contextLayers replaces them and extraContextLayers adds to them", () => {
    const base = counterLayer("base", [])
    const other = counterLayer("other", [])
    const extra = counterLayer("extra", [])
    const h = harness({ name: "ctx", params: {}, contextLayers: [base] })
    expect(h.createContext().layers).toEqual([base])
    expect(h.createContext({ contextLayers: [other] }).layers).toEqual([other])
    expect(h.createContext({ extraContextLayers: [extra] }).layers).toEqual([base, extra])
  })

  it("harness and subprocess: ctx.harness is the harness, ctx.subprocess its adapter", () => {
    const h = harness({ name: "ctx", params: {} })
    const ctx = h.createContext()
    expect(ctx.harness).toBe(h)
    expect(ctx.subprocess).toBe(h.subprocess)
  })

  it("ctx.harness.run(step, input, ctx) composes steps inside a body, and they replay on resume", async () => {
    const storage = createInMemoryStorage()
    let inner = 0
    let crash = true
    const step = runCode({ id: "inner", execute: async (n: number) => n + ++inner })
    const agent = runCode({
      id: "agent",
      execute: async (n: number, ctx) => {
        const a = await ctx.harness.run(step, n, ctx)
        const b = await ctx.harness.run(step, a, ctx)
        if (crash) throw new Error("crash")
        return b
      }
    })
    const build = () =>
      harness({ name: "compose", params: {}, agentGraph: agent, environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } } })
    await expect(runTurn(build(), 10, { executionId: "c1" })).rejects.toThrow("crash")
    crash = false
    expect((await build().resume("c1"))?.output).toBe(13)
    expect(inner).toBe(2)
    // harness.run on a context of the harness works the same outside a body.
    const h = build()
    expect(await h.run(runCode({ id: "solo", execute: async (s: string) => s + "!" }), "hi", h.createContext())).toBe("hi!")
  })

  it("checkpoint() saves the context; restore brings its item log back", async () => {
    const storage = createInMemoryStorage()
    const h = harness({ name: "ckpt", params: {}, environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } } })
    const ctx = h.createContext({ items: [{ type: "message", role: "user", content: "remember me" }] })
    await ctx.checkpoint()
    const restored = await h.restore(ctx.id)
    expect(restored?.itemLog.items).toEqual([{ type: "message", role: "user", content: "remember me" }])
    expect(restored?.threadId).toBe(ctx.threadId)
  })

  it("abort(reason) sets aborted and cancels the next step, down the tree, never up", async () => {
    const h = harness({ name: "abort", params: {} })
    const root = h.createContext()
    const child = h.createContext({ parent: root })
    expect(root.aborted).toBe(false)
    child.abort("child only")
    expect(child.aborted).toBe(true)
    expect(root.aborted).toBe(false)
    root.abort("stop")
    root.abort("ignored")
    expect(root.aborted).toBe(true)
    expect(root.abortReason).toBe("stop")
    const error = await h.run(runCode({ id: "late", execute: async () => 1 }), undefined, root).then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).noeticError).toEqual({ kind: "cancelled", reason: "stop" })
  })
})

describe("context layers (noetic's definitions)", () => {
  it("init runs lazily with scoped storage, onItemAppend filters items and updates state, and both reach the snapshot", async () => {
    const hooksRun: Array<string> = []
    const adapter = createInMemoryStorage()
    const storage = createInMemoryStorage()
    const h = harness({
      name: "layers",
      params: {},
      contextLayers: [counterLayer("counter", hooksRun)],
      environment: { storage: { adapter, checkpointStore: createCheckpointStore({ storage }) } }
    })
    const ctx = h.createContext({ threadId: "thread-9" })
    await adapter.set("layers/counter/thread-9/seed", "from storage")
    expect(hooksRun).toEqual([])
    const added = await ctx.append([{ type: "message", id: "m1", content: "a" }, { type: "noise" }])
    expect(added.map((item) => item.type)).toEqual(["message"])
    expect(hooksRun).toEqual(["counter:init:thread-9", "counter:append"])
    expect(ctx.layerState("counter")).toEqual({ count: 2, seeded: "from storage" })
    const snapshot = await createCheckpointStore({ storage }).load(ctx.id)
    expect(snapshot?.layers["counter"]).toEqual({ count: 2, seeded: "from storage" })
  })

  it("runAppendPipeline runs the given layers' onItemAppend in slot order, appends nothing, reports re-renders, and checkpoints", async () => {
    const hooksRun: Array<string> = []
    const storage = createInMemoryStorage()
    const tagger: NoeticContextLayer<{ seen: number }> = {
      id: "tagger",
      slot: 10,
      scope: "thread",
      hooks: {
        async onItemAppend({ items, state }) {
          hooksRun.push("tagger")
          return {
            items: items.map((item) => ({ ...item, tagged: true })),
            state: { seen: (state?.seen ?? 0) + items.length },
            rerender: true,
            scope: "self"
          }
        }
      },
      rerenderTiming: "immediate"
    }
    const failing: NoeticContextLayer = {
      id: "failing",
      slot: 50,
      scope: "thread",
      hooks: {
        async onItemAppend() {
          hooksRun.push("failing")
          throw new Error("layer bug")
        }
      }
    }
    const h = harness({
      name: "pipeline",
      params: {},
      contextLayers: [counterLayer("counter", hooksRun)],
      environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
    })
    const ctx = h.createContext()
    // Slot order, not the order given: tagger (10), failing (50: its items pass on), counter (100).
    const result = await h.runAppendPipeline(
      [counterLayer("counter", hooksRun), failing, tagger],
      [{ type: "message", id: "m1", content: "a" }, { type: "noise" }],
      ctx
    )
    expect(hooksRun).toEqual(["counter:init:" + ctx.threadId, "tagger", "failing", "counter:append"])
    expect(result.items).toEqual([{ type: "message", id: "m1", content: "a", tagged: true }])
    expect(result.rerenderRequests).toEqual([{ layerId: "tagger", slot: 10, timing: "immediate", scope: "self" }])
    // Nothing appended; the layer states changed, and a snapshot holds them.
    expect(ctx.itemLog.items).toEqual([])
    expect(ctx.layerState("counter")).toMatchObject({ count: 2 })
    expect(ctx.layerState("tagger")).toEqual({ seen: 2 })
    const snapshot = await createCheckpointStore({ storage }).load(ctx.id)
    expect(snapshot?.layers["tagger"]).toEqual({ seen: 2 })
    // A pipeline whose items are all filtered stops there; no layer with no hook is needed.
    const dropAll: NoeticContextLayer = {
      id: "drop",
      slot: 1,
      scope: "thread",
      hooks: { onItemAppend: async ({ state }) => ({ items: [], state }) }
    }
    hooksRun.length = 0
    const dropped = await h.runAppendPipeline([dropAll, tagger], [{ type: "message", id: "m2", content: "b" }], ctx)
    expect(dropped).toEqual({ items: [], rerenderRequests: [] })
    expect(hooksRun).toEqual([])
    expect(await h.runAppendPipeline([], [{ type: "x" }], ctx)).toEqual({ items: [{ type: "x" }], rerenderRequests: [] })
  })

  it("a restored context keeps its snapshot's layer state: init does not run again", async () => {
    const storage = createInMemoryStorage()
    const first: Array<string> = []
    const build = (hooksRun: Array<string>) =>
      harness({
        name: "restore-layers",
        params: {},
        contextLayers: [counterLayer("counter", hooksRun)],
        environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
      })
    const ctx = build(first).createContext()
    await ctx.append([{ type: "message", id: "m1", content: "a" }])
    const second: Array<string> = []
    const restored = await build(second).restore(ctx.id)
    await restored!.append([{ type: "message", id: "m2", content: "b" }])
    expect(second).toEqual(["counter:append"])
    expect(restored!.layerState("counter")).toMatchObject({ count: 2 })
  })

  it("a hook noetic does not document is refused at construction, naming it", () => {
    const layer: NoeticContextLayer = {
      id: "memory",
      slot: 200,
      scope: "resource",
      hooks: { recollect: async () => null } as never
    }
    const error = (() => {
      try {
        new AgentHarness({ name: "x", params: {}, contextLayers: [layer] })
      } catch (e) {
        return e
      }
    })()
    expect(isNoeticConfigError(error)).toBe(true)
    expect(error).toMatchObject({ code: "UNSUPPORTED_OPTION" })
    expect((error as Error).message).toContain("recollect")
    const h = harness({ name: "y", params: {} })
    expect(configCode(() => h.createContext({ contextLayers: [layer] }))).toBe("UNSUPPORTED_OPTION")
  })

  it("environment.storage.layerStateStore receives every context's layer state; a restored context reads it back", async () => {
    const hostStore = () => {
      const states = new Map<string, unknown>()
      const sets: Array<string> = []
      const flushes: Array<string> = []
      const store: LayerStateStore = {
        get: <T,>(executionId: string, layerId: string) => states.get(`${executionId}/${layerId}`) as T | undefined,
        set: (executionId, layerId, state) => {
          sets.push(`${executionId}/${layerId}`)
          states.set(`${executionId}/${layerId}`, state)
        },
        has: (executionId, layerId) => states.has(`${executionId}/${layerId}`),
        cleanup: (executionId) => {
          for (const key of [...states.keys()]) if (key.startsWith(`${executionId}/`)) states.delete(key)
        },
        diagnostic: () => {},
        flush: async (executionId) => void flushes.push(executionId)
      }
      return { store, states, sets, flushes }
    }
    const storage = createInMemoryStorage()
    const durable = (store: LayerStateStore) =>
      harness({
        name: "lss",
        params: {},
        contextLayers: [scratchpad()],
        environment: { storage: { adapter: storage, checkpointStore: createCheckpointStore({ storage }), layerStateStore: store } }
      })
    const first = hostStore()
    const h1 = durable(first.store)
    const write = runCode({
      id: "write",
      execute: async (goal: string, ctx) => {
        await ctx.context.scratchpad.update({ goal })
        return ctx.context.scratchpad.snapshot
      }
    })
    const ctx = h1.createContext({ id: "exec-lss", threadId: "t" })
    expect(await h1.run(write, "ship", ctx)).toEqual({ goal: "ship" })
    // The host's store got the layer's state, and the write-through waited on its flush.
    expect(first.sets).toContain("exec-lss/scratchpad")
    expect(first.states.get("exec-lss/scratchpad")).toEqual({ goal: "ship" })
    expect(first.flushes).toContain("exec-lss")
    expect(h1.getLayerState("exec-lss", "scratchpad")).toEqual({ goal: "ship" })
    await h1.checkpoint(ctx)

    // Another host, its own store: the restore hands the snapshot's state to the store,
    // and the restored context reads through it, so what the host sets there is what the next step sees.
    const second = hostStore()
    const h2 = durable(second.store)
    const restored = await h2.restore("exec-lss")
    expect(second.states.get("exec-lss/scratchpad")).toEqual({ goal: "ship" })
    second.store.set("exec-lss", "scratchpad", { goal: "from the host" })
    const read = runCode({ id: "read", execute: async (_: string, c) => c.context.scratchpad.snapshot })
    expect(await h2.run(read, "", restored!)).toEqual({ goal: "from the host" })
    // Not live in this harness: getLayerState / setLayerState go to the host's store, as noetic's do.
    h2.setLayerState("exec-gone", "scratchpad", { goal: "stored" })
    expect(h2.getLayerState("exec-gone", "scratchpad")).toEqual({ goal: "stored" })
  })

  it("a layerStateStore missing a method noetic's interface requires throws INVALID_LAYER_STATE_STORE", () => {
    const store = { get: () => undefined, set: () => {}, diagnostic: () => {} }
    expect(configCode(() => new AgentHarness({ name: "x", params: {}, environment: { storage: { layerStateStore: store } } as never })))
      .toBe("INVALID_LAYER_STATE_STORE")
  })

  it("restore accepts contextLayers: they replace the harness layers, as createContext's do", async () => {
    const storage = createInMemoryStorage()
    const harnessHooks: Array<string> = []
    const callerHooks: Array<string> = []
    const h = harness({
      name: "restore-override",
      params: {},
      contextLayers: [counterLayer("counter", harnessHooks)],
      environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
    })
    const ctx = h.createContext()
    await ctx.append([{ type: "message", id: "m1", content: "a" }])
    harnessHooks.length = 0
    const callerLayer = counterLayer("counter", callerHooks)
    const restored = await h.restore(ctx.id, { contextLayers: [callerLayer] })
    expect(restored!.layers).toEqual([callerLayer])
    await restored!.append([{ type: "message", id: "m2", content: "b" }])
    expect(callerHooks).toEqual(["counter:append"])
    expect(harnessHooks).toEqual([])
    // The seed page's spelling, `context`, is the same option.
    const again = await h.restore(ctx.id, { context: [callerLayer] })
    expect(again!.layers).toEqual([callerLayer])
  })

  it("restore picks layers as createContext does: given ones replace the harness's, extra ones add, none keeps the harness's", async () => {
    const storage = createInMemoryStorage()
    const fromHarness = counterLayer("from-harness", [])
    const fromCaller = counterLayer("from-caller", [])
    const h = harness({
      name: "restore-layers",
      params: {},
      contextLayers: [fromHarness],
      environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
    })
    const ctx = h.createContext()
    await h.checkpoint(ctx)
    expect((await h.restore(ctx.id, { contextLayers: [fromCaller] }))!.layers).toEqual([fromCaller])
    expect((await h.restore(ctx.id, { extraContextLayers: [fromCaller] }))!.layers).toEqual([fromHarness, fromCaller])
    expect((await h.restore(ctx.id))!.layers).toEqual([fromHarness])
  })

  it("a context of a harness with no layers has none (layers undefined), and its state starts as {}", async () => {
    const h = harness({ name: "bare", params: {} })
    const ctx = h.createContext()
    expect(ctx.layers).toBeUndefined()
    expect(ctx.state).toEqual({})
    ctx.state.queue = ["kept"]
    expect(ctx.state).toEqual({ queue: ["kept"] })
    expect(h.createContext({ state: { given: 1 } }).state).toEqual({ given: 1 })
    // A step's context sees the same: noetic code writes to ctx.state without passing one.
    const graph = runCode({
      id: "writes-state",
      execute: async (_: void, stepCtx) => {
        stepCtx.state.seen = true
        return [stepCtx.layers, stepCtx.state]
      }
    })
    const run = harness({ name: "bare-run", params: {}, agentGraph: graph })
    expect((await runTurn(run, undefined)).output).toEqual([undefined, { seen: true }])
  })
})

describe("detachedSpawn (noetic's DetachedHandle)", () => {
  it("returns at once: id is the child's execution id, status moves from running to completed, result is set", async () => {
    const h = harness({ name: "spawner", params: {} })
    const parent = h.createContext()
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handle = h.detachedSpawn(
      runCode({ id: "child", execute: async (n: number, ctx) => { await gate; return { n: n + 1, executionId: ctx.id } } }),
      1,
      parent
    )
    expect(handle.status).toBe("running")
    expect(handle.result).toBeUndefined()
    expect(handle.error).toBeUndefined()
    release()
    const output = await handle.await()
    expect(output.n).toBe(2)
    expect(handle.id).toBe(output.executionId)
    expect(handle.status).toBe("completed")
    expect(handle.result).toEqual(output)
  })

  it("a failed child: status failed, error a message, await rejects with noetic's step_failed", async () => {
    const h = harness({ name: "spawner", params: {} })
    const boom = new Error("disk full")
    const handle = h.detachedSpawn(runCode({ id: "writer", execute: async () => { throw boom } }), undefined, h.createContext())
    const error = await handle.await().then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).noeticError).toMatchObject({
      kind: "step_failed",
      stepId: "writer",
      cause: expect.objectContaining({ name: "Error", message: boom.message })
    })
    expect(handle.status).toBe("failed")
    expect(handle.error).toContain("disk full")
  })

  it("await(timeout) rejects when the timeout passes first, and the child keeps running", async () => {
    const h = harness({ name: "spawner", params: {} })
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handle = h.detachedSpawn(runCode({ id: "slow", execute: async () => { await gate; return "done" } }), undefined, h.createContext())
    const error = await handle.await(20).then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).noeticError).toMatchObject({ kind: "step_failed", stepId: "slow" })
    expect(handle.status).toBe("running")
    release()
    expect(await handle.await()).toBe("done")
  })

  it("a step built with subprocess: adapter is dispatched there; an override in detachedSpawn wins", async () => {
    const own = createInMemorySubprocessAdapter()
    const other = createInMemorySubprocessAdapter()
    try {
      const h = harness({ name: "per-step", params: {} })
      const step = runCode({ id: "routed", execute: async (n: number) => n * 3, subprocess: own })
      const handle = h.detachedSpawn(step, 2, h.createContext())
      expect(await handle.await()).toBe(6)
      expect(await own.get(handle.handleId)).not.toBeNull()
      expect(await h.subprocess.get(handle.handleId)).toBeNull()
      const overridden = h.detachedSpawn(step, 3, h.createContext(), { subprocess: other })
      expect(await overridden.await()).toBe(9)
      expect(await other.get(overridden.handleId)).not.toBeNull()
      expect(await own.get(overridden.handleId)).toBeNull()
    } finally {
      await own.close()
      await other.close()
    }
  })

  it("the parent checkpoints when a child settles, so restore sees the parent", async () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-detached-"))
    const h = harness({
      name: "spawner",
      params: {},
      environment: { storage: { checkpointStore: createCheckpointStore({ storage: createFileStorage({ root }) }) } }
    })
    const parent = h.createContext()
    await h.detachedSpawn(runCode({ id: "c", execute: async () => 1 }), undefined, parent).await()
    expect((await h.restore(parent.id))?.id).toBe(parent.id)
  })
})

describe("noetic's small exports", () => {
  it("DetachedStatus names the statuses a handle reports", async () => {
    const { DetachedStatus } = await import("../../src/promise/index.ts")
    expect(DetachedStatus).toEqual({ Running: "running", Completed: "completed", Failed: "failed" })
    const h = harness({ name: "status", params: {} })
    const handle = h.detachedSpawn(runCode({ id: "one", execute: async () => 1 }), undefined, h.createContext())
    await handle.await()
    expect(handle.status).toBe(DetachedStatus.Completed)
  })

  it("storageGetMany uses getMany when there is one, else a get per key; missing keys are absent", async () => {
    const { storageGetMany } = await import("../../src/promise/index.ts")
    const storage = createInMemoryStorage()
    await storage.set("a", 1)
    await storage.set("b", { two: 2 })
    expect(await storageGetMany(storage, ["a", "b", "missing"])).toEqual(new Map<string, unknown>([["a", 1], ["b", { two: 2 }]]))
    const gets: Array<string> = []
    const withoutGetMany = {
      get: async <T>(key: string) => {
        gets.push(key)
        return (await storage.get<T>(key))
      }
    }
    expect(await storageGetMany(withoutGetMany, ["b", "missing"])).toEqual(new Map([["b", { two: 2 }]]))
    expect(gets).toEqual(["b", "missing"])
    expect(await storageGetMany(withoutGetMany, [])).toEqual(new Map())
  })

  it("CheckpointKeys spell the key a snapshot is saved under", async () => {
    const { CheckpointKeys } = await import("../../src/promise/index.ts")
    const storage = createInMemoryStorage()
    const h = harness({ name: "keys", params: {}, environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } } })
    const ctx = h.createContext()
    await h.checkpoint(ctx)
    expect(await storage.get(`${CheckpointKeys.ExecPrefix}${ctx.id}${CheckpointKeys.SnapshotSuffix}`)).not.toBeNull()
  })
})

describe("noetic's cancel and createDetachedSignal", () => {
  it("harness.cancel(ctx, reason) aborts the context and those under it; a step under it fails cancelled; twice is a no-op", async () => {
    const h = harness({ name: "cancel", params: {} })
    const root = h.createContext()
    const child = h.createContext({ parent: root })
    await h.cancel(root, "user stopped")
    expect(root.aborted).toBe(true)
    expect(child.aborted).toBe(true)
    await h.cancel(root, "again")
    const error = await h.run(runCode({ id: "after", execute: async () => 1 }), undefined, child).then(() => undefined, (e: unknown) => e)
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).noeticError).toMatchObject({ kind: "cancelled", reason: "user stopped" })
  })

  it("createDetachedSignal settles once: the first resolve or reject wins", async () => {
    const { createDetachedSignal } = await import("../../src/promise/index.ts")
    const resolved = createDetachedSignal<number>()
    resolved.resolve(1)
    resolved.resolve(2)
    resolved.reject(new Error("late"))
    expect(await resolved.done).toBe(1)
    const rejected = createDetachedSignal<number>()
    rejected.reject(new Error("first"))
    rejected.resolve(3)
    await expect(rejected.done).rejects.toThrow("first")
  })
})

describe("noetic's getStatus and abort", () => {
  it("a thread's turn reads generating while it runs, aborting once abort asks, idle once abort resolves; its result rejects cancelled", async () => {
    let started: () => void = () => {}
    const running = new Promise<void>((resolve) => (started = resolve))
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => (release = resolve))
    const graph = runCode({
      id: "long",
      execute: async (_: string, ctx) => {
        started()
        // Steps until the context is aborted: the next one fails cancelled.
        for (;;) await ctx.harness.run(runCode({ id: "tick", execute: () => gate }), undefined, ctx)
      }
    })
    const h = harness({ name: "turns", params: {}, agentGraph: graph })
    expect(h.getStatus({ threadId: "t-1" })).toEqual({ kind: "idle" })
    const receipt = await h.execute("go", { threadId: "t-1" })
    const turn = receipt.result().then(() => undefined, (e: unknown) => e)
    await running
    const status = h.getStatus({ threadId: "t-1" })
    expect(status).toEqual({ kind: "generating", startedAt: expect.any(Number), turnId: receipt.executionId })
    expect(h.getStatus()).toEqual({ kind: "idle" })
    const aborted = h.abort({ threadId: "t-1", reason: "user stop" })
    // The running tick waits on the gate: the turn cannot end before it opens.
    for (let i = 0; i < 100 && h.getStatus({ threadId: "t-1" }).kind !== "aborting"; i++) {
      await new Promise((r) => setTimeout(r, 1))
    }
    expect(h.getStatus({ threadId: "t-1" })).toEqual({ kind: "aborting", turnId: receipt.executionId })
    release()
    await aborted
    expect(h.getStatus({ threadId: "t-1" })).toEqual({ kind: "idle" })
    const error = await turn
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).noeticError).toMatchObject({ kind: "cancelled", reason: "user stop" })
    // Nothing running: abort leaves the thread as it is.
    await h.abort({ threadId: "t-1" })
    expect(h.getStatus({ threadId: "t-1" })).toEqual({ kind: "idle" })
  })
})
