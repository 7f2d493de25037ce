import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { ContextLayer, Item } from "../../src/harness/AgentContext.ts"
import * as Channels from "../../src/harness/Channels.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"
import { runCode, spawn } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const durable = (storage: StorageAdapterShape, options: Omit<AgentHarness.AgentHarnessOptions, "name">) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
    AgentHarness.make({ name: "layers", ...options }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store)))

/** A layer that records every hook it runs, in order. */
const recording = (id: string, slot: number, log: Array<string>): ContextLayer<{ n: number }> => ({
  id,
  slot,
  scope: "thread",
  lifecycle: {
    init: ({ storage }) =>
      Effect.map(Effect.orDie(storage.get("state")), (saved) => {
        log.push(`${id}:init`)
        return { state: (saved as { n: number } | null) ?? { n: 0 } }
      }),
    recall: ({ state }) => Effect.sync(() => (log.push(`${id}:recall`), `${id} n=${state.n}`)),
    projectHistory: ({ items }) => Effect.sync(() => (log.push(`${id}:projectHistory`), { items })),
    afterModelCall: () => Effect.sync(() => (log.push(`${id}:afterModelCall`), { decision: { action: "allow" } as const })),
    beforeToolCall: () => Effect.sync(() => (log.push(`${id}:beforeToolCall`), { decision: { action: "allow" } as const })),
    store: ({ state }) => Effect.sync(() => (log.push(`${id}:store`), { state: { n: state.n + 1 } })),
    onComplete: ({ outcome }) => Effect.sync(() => void log.push(`${id}:onComplete:${outcome}`)),
    dispose: () => Effect.sync(() => void log.push(`${id}:dispose`))
  }
})

const reply: LayerLifecycle.RecallEntry["items"] = [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "hi" }] }]

describe("LayerLifecycle", () => {
  it.effect("runs noetic's hooks in noetic's order: init, recall (slot order), projectHistory, afterModelCall, store, beforeToolCall; cancel runs onComplete then dispose (reverse)", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      // Array order b, a; slots put a first.
      const harness = yield* AgentHarness.make({ name: "order", context: [recording("b", 200, log), recording("a", 100, log)] })
      const ctx = yield* harness.createContext({ threadId: "t1" })
      yield* LayerLifecycle.initLayers(ctx)
      const view = yield* LayerLifecycle.assembleView(ctx, { query: "q" })
      const decision = yield* LayerLifecycle.afterModelCallLayers(ctx, { items: reply })
      yield* ctx.append(reply)
      yield* LayerLifecycle.storeLayers(ctx, { items: reply })
      yield* LayerLifecycle.beforeToolCallLayers(ctx, { toolName: "search", toolArgs: {} })
      yield* harness.cancel(ctx, "stop")
      // The exact sequence, with store concurrent (either order) and complete in array order, dispose reversed:
      assert.deepStrictEqual(log.slice(0, 8), ["b:init", "a:init", "a:recall", "b:recall", "a:projectHistory", "b:projectHistory", "a:afterModelCall", "b:afterModelCall"])
      assert.deepStrictEqual([...log.slice(8, 10)].sort(), ["a:store", "b:store"])
      assert.deepStrictEqual(log.slice(10), ["a:beforeToolCall", "b:beforeToolCall", "b:onComplete:aborted", "a:onComplete:aborted", "a:dispose", "b:dispose"])
      assert.strictEqual(decision.action, "allow")
      assert.deepStrictEqual(view.anchor.map((entry) => entry.layerId), ["a", "b"])
      assert.deepStrictEqual(ctx.layerState("a"), { n: 1 })
      // A second cancel does nothing.
      yield* harness.cancel(ctx)
      assert.strictEqual(log.filter((entry) => entry === "a:dispose").length, 1)
    }).pipe(Effect.scoped))

  it.live("an init past its timeout stops the execution at the timeout; onInitError 'disable' runs it without the layer", () =>
    Effect.gen(function*() {
      const slow = (onInitError?: "disable"): ContextLayer<string> => ({
        id: "slow",
        scope: "execution",
        timeouts: { init: 10 },
        ...(onInitError === undefined ? {} : { onInitError }),
        lifecycle: {
          // Never settles in the test's time: only the timeout ends it.
          init: () => Effect.as(Effect.sleep("1 hour"), { state: "late" }),
          recall: () => Effect.succeed("should not run")
        }
      })
      const harness = yield* AgentHarness.make({ name: "timeouts", context: [slow()] })
      const ctx = yield* harness.createContext()
      const exit = yield* Effect.exit(LayerLifecycle.initLayers(ctx))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "timed out after 10 ms")

      const lenient = yield* AgentHarness.make({ name: "timeouts", context: [slow("disable")] })
      const ctx2 = yield* lenient.createContext()
      yield* LayerLifecycle.initLayers(ctx2)
      assert.deepStrictEqual(yield* LayerLifecycle.recallLayers(ctx2), [])
    }).pipe(Effect.scoped))

  it.effect("thread-scoped state is written through and rehydrated by the next execution of the thread; execution scope is not", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const layer = (scope: "thread" | "execution"): ContextLayer<{ notes: Array<string> }> => ({
        id: `notes-${scope}`,
        scope,
        lifecycle: {
          init: ({ storage }) =>
            Effect.map(Effect.orDie(storage.get("state")), (saved) => ({ state: (saved as any) ?? { notes: [] } })),
          store: ({ state, newItems }) => Effect.succeed({ state: { notes: [...state.notes, String(newItems.length)] } })
        }
      })
      const turn = Effect.gen(function*() {
        const harness = yield* durable(storage, { context: [layer("thread"), layer("execution")] })
        const ctx = yield* harness.createContext({ threadId: "thread-1" })
        yield* LayerLifecycle.initLayers(ctx)
        yield* LayerLifecycle.storeLayers(ctx, { items: reply })
        return [ctx.layerState<{ notes: Array<string> }>("notes-thread")!, ctx.layerState<{ notes: Array<string> }>("notes-execution")!] as const
      }).pipe(Effect.scoped)
      const [firstThread] = yield* turn
      assert.deepStrictEqual(firstThread.notes, ["1"])
      const [thread, execution] = yield* turn
      assert.deepStrictEqual(thread.notes, ["1", "1"])
      assert.deepStrictEqual(execution.notes, ["1"])
      assert.deepStrictEqual(Option.getOrThrow(yield* storage.get("layers/notes-thread/thread-1/state")), { notes: ["1", "1"] })
    }))

  it.effect("onSpawn seeds a spawned child's state and items; onReturn merges back and changes the result", () =>
    Effect.gen(function*() {
      const counter: ContextLayer<number> = {
        id: "counter",
        scope: "execution",
        init: () => 10,
        lifecycle: {
          onSpawn: ({ parentState }) =>
            Effect.succeed({ childState: parentState + 1, items: [{ type: "message", role: "developer", content: "seeded" } as Item] }),
          onReturn: ({ childState, result }) => Effect.succeed({ parentState: childState * 2, result: `${result}!` })
        }
      }
      const child = runCode("child", (_: string, ctx) =>
        Effect.gen(function*() {
          yield* ctx.updateLayer<number>("counter", (n) => (n ?? 0) + 1)
          return `items=${ctx.items.length} state=${ctx.layerState("counter")}`
        }))
      const harness = yield* AgentHarness.make({ name: "spawn", context: [counter], agentGraph: spawn({ id: "sp", child }) })
      const ctx = yield* harness.createContext()
      const output = yield* harness.run(spawn({ id: "sp", child }), "go", ctx)
      assert.strictEqual(output, "items=1 state=12!")
      assert.strictEqual(ctx.layerState("counter"), 24)
    }).pipe(Effect.scoped))

  it.live("channels: queue FIFO with recv timeout, value latest, topic to waiters; tryRecv", () =>
    Effect.gen(function*() {
      const hub = new Channels.ChannelHub()
      const queue = Channels.channel<number>("q", { mode: "queue", capacity: 2 })
      yield* hub.send(queue, 1)
      yield* hub.send(queue, 2)
      assert.strictEqual(yield* hub.recv(queue), 1)
      assert.strictEqual(hub.tryRecv(queue), 2)
      assert.strictEqual(hub.tryRecv(queue), null)
      const timedOut = yield* Effect.flip(hub.recv(queue, { timeoutMs: 20 }))
      assert.strictEqual(timedOut._tag, "ChannelTimeout")
      const value = Channels.channel<string>("v", { mode: "value" })
      yield* hub.send(value, "a")
      yield* hub.send(value, "b")
      assert.strictEqual(hub.tryRecv(value), "b")
      assert.strictEqual(yield* hub.recv(value), "b")
      const topic = Channels.channel<string>("t", { mode: "topic" })
      const [x, y] = yield* Effect.all([hub.recv(topic), hub.recv(topic), Effect.andThen(Effect.sleep(10), hub.send(topic, "news"))], {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual([x, y], ["news", "news"])
      assert.strictEqual(hub.tryRecv(topic), null)
      // A full queue parks the sender until a receiver frees a slot.
      yield* hub.send(queue, 3)
      yield* hub.send(queue, 4)
      const [, got] = yield* Effect.all([hub.send(queue, 5), Effect.andThen(Effect.sleep(10), hub.recv(queue))], { concurrency: "unbounded" })
      assert.strictEqual(got, 3)
      assert.deepStrictEqual([hub.tryRecv(queue), hub.tryRecv(queue)], [4, 5])
    }))

  it.effect("an external channel's stored values: tryRecv sees them after refresh; a taken one leaves storage at flushTaken, an untaken one stays", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const approvals = Channels.channel<string>("approval", { mode: "queue", external: true })
      // Another process: its own hub on the same storage.
      const sender = new Channels.ChannelHub(storage)
      yield* sender.handle(approvals, "exec-1").send("a")
      yield* sender.handle(approvals, "exec-1").send("b")
      const host = new Channels.ChannelHub(storage)
      assert.strictEqual(host.tryRecv(approvals), null)
      yield* host.refresh()
      assert.strictEqual(host.tryRecv(approvals), "a")
      assert.strictEqual((yield* storage.list("channels/approval/")).length, 2)
      yield* host.flushTaken()
      assert.strictEqual((yield* storage.list("channels/approval/")).length, 1)
      // A host that dies now (this hub dropped) leaves "b" for the next one.
      const next = new Channels.ChannelHub(storage)
      assert.strictEqual(yield* next.recv(approvals, { timeoutMs: 0 }), "b")
      // A second refresh does not hand out again what this hub already read.
      yield* next.refresh()
      assert.strictEqual(next.tryRecv(approvals), null)
      // A value channel keeps its latest record stored: a restore reads it again.
      const mode = Channels.channel<string>("mode", { mode: "value", external: true })
      yield* sender.handle(mode, "exec-1").send("fast")
      yield* sender.handle(mode, "exec-1").send("safe")
      yield* host.refresh()
      assert.strictEqual(host.tryRecv(mode), "safe")
      yield* host.flushTaken()
      assert.strictEqual(new Channels.ChannelHub(storage).tryRecv(mode), null)
      const restored = new Channels.ChannelHub(storage)
      yield* restored.refresh()
      assert.strictEqual(restored.tryRecv(mode), "safe")
    }))
})
