/**
 * noetic's `observations()` and `temporal()` in the engine (src/harness/MemoryLayers.ts),
 * driven through the lifecycle a run uses: append, store, recall, spawn, durable state.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { Item } from "../../src/harness/AgentContext.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"
import * as MemoryLayers from "../../src/harness/MemoryLayers.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const durable = (storage: StorageAdapterShape, options: Omit<AgentHarness.AgentHarnessOptions, "name">) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
    AgentHarness.make({ name: "memory", ...options }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store)))

const textOf = (item: Item | undefined): string => ((item?.content as Array<{ text: string }> | undefined) ?? []).map((p) => p.text).join("")
const assistant = (text: string): Item => ({ type: "message", role: "assistant", content: [{ type: "output_text", text }] })
const user = (text: string): Item => ({ type: "message", role: "user", content: [{ type: "input_text", text }] })
const toolOutput = (output: string): Item => ({ type: "function_call_output", callId: "c1", output })

describe("observations", () => {
  it("has noetic's id, slot, scope, budget and the 60 s store / onItemAppend timeouts", () => {
    const layer = MemoryLayers.observations()
    assert.deepStrictEqual(
      [layer.id, layer.slot, layer.scope, layer.budget, layer.timeouts],
      ["observations", 200, "resource", { min: 500, max: 2_500 }, { store: 60_000, onItemAppend: 60_000 }]
    )
    assert.strictEqual(MemoryLayers.observations({ scope: "thread" }).scope, "thread")
  })

  it.effect("buffers the model's output at store and user / tool text on append; at the threshold the observer distils the buffer", () =>
    Effect.gen(function*() {
      const seen: Array<ReadonlyArray<string>> = []
      const layer = MemoryLayers.observations({
        bufferThreshold: 10,
        maxObservations: 3,
        observer: (buffer) => Effect.sync(() => (seen.push(buffer), [`saw ${buffer.length}`]))
      })
      const harness = yield* AgentHarness.make({ name: "obs", context: [layer] })
      const ctx = yield* harness.createContext({ resourceId: "r" })
      yield* ctx.append([user("hello"), toolOutput("tool said")])
      let state = ctx.layerState<MemoryLayers.ObservationsState>("observations")!
      assert.deepStrictEqual([state.buffer, state.bufferTokens, state.observations], [["hello", "tool said"], 5, []])
      // 5 + 8 tokens passes 10: the observer gets the whole buffer, which empties.
      yield* LayerLifecycle.storeLayers(ctx, { items: [assistant("a reply of some length")] })
      state = ctx.layerState<MemoryLayers.ObservationsState>("observations")!
      assert.deepStrictEqual(seen, [["hello", "tool said", "a reply of some length"]])
      assert.deepStrictEqual([state.observations, state.buffer, state.bufferTokens, state.version], [["saw 3"], [], 0, 1])
      for (let i = 0; i < 3; i++) yield* LayerLifecycle.storeLayers(ctx, { items: [assistant("x".repeat(40))] })
      // The newest three kept.
      assert.deepStrictEqual(ctx.layerState<MemoryLayers.ObservationsState>("observations")!.observations, ["saw 1", "saw 1", "saw 1"])
      const [entry] = yield* LayerLifecycle.recallLayers(ctx)
      assert.strictEqual(textOf(entry!.items[0]), "<observations>\n- saw 1\n- saw 1\n- saw 1\n</observations>")
      assert.strictEqual(entry!.items[0]!.role, "developer")
    }).pipe(Effect.scoped))

  it.effect("without an observer the fallback records 'Processed N items'; recall keeps the newest observations that fit the budget", () =>
    Effect.gen(function*() {
      const layer = MemoryLayers.observations({ bufferThreshold: 1 })
      const harness = yield* AgentHarness.make({ name: "obs", context: [layer] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      yield* LayerLifecycle.storeLayers(ctx, { items: [assistant("one"), assistant("two")] })
      assert.deepStrictEqual(ctx.layerState<MemoryLayers.ObservationsState>("observations")!.observations, ["Processed 2 items"])
      const state: MemoryLayers.ObservationsState = { observations: ["old ".repeat(20), "newest"], buffer: [], bufferTokens: 0, version: 1 }
      const recall = (budget: number) => layer.lifecycle!.recall!({ log: [], query: "", ctx, state, budget })
      const small = yield* recall(10)
      assert.strictEqual(textOf((small as any).items[0]), "<observations>\n- newest\n</observations>")
      assert.isNull(yield* recall(2))
    }).pipe(Effect.scoped))

  it.effect("a failing observer on append keeps the items and the state; the resource's observations are rehydrated next execution", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const failing = MemoryLayers.observations({ bufferThreshold: 1, observer: () => Effect.fail("model down") })
      const h1 = yield* durable(storage, { context: [failing] })
      const c1 = yield* h1.createContext({ resourceId: "user-1" })
      const added = yield* c1.append([user("hi there")])
      assert.strictEqual(added.length, 1)
      assert.deepStrictEqual(c1.layerState<MemoryLayers.ObservationsState>("observations")!.buffer, [])

      const layer = MemoryLayers.observations({ bufferThreshold: 1, observer: () => Effect.succeed(["prefers TypeScript"]) })
      const h2 = yield* durable(storage, { context: [layer] })
      const c2 = yield* h2.createContext({ resourceId: "user-1" })
      yield* c2.append([user("I like TS")])
      yield* c2.persistLayerState()
      assert.deepStrictEqual(
        (Option.getOrThrow(yield* storage.get("layers/observations/user-1/state")) as MemoryLayers.ObservationsState).observations,
        ["prefers TypeScript"]
      )
      const h3 = yield* durable(storage, { context: [layer] })
      const c3 = yield* h3.createContext({ resourceId: "user-1", threadId: "another-thread" })
      const [entry] = yield* LayerLifecycle.recallLayers(c3)
      assert.include(textOf(entry!.items[0]), "- prefers TypeScript")
    }).pipe(Effect.scoped))
})

describe("temporal", () => {
  const at = new Date(2026, 2, 4, 9, 5) // Wed 4 March 2026, 09:05 local

  it("has noetic's id, slot, scope, placement and budget", () => {
    const layer = MemoryLayers.temporal()
    assert.deepStrictEqual([layer.id, layer.slot, layer.scope, layer.placement, layer.budget], ["temporal", 80, "resource", "live", { min: 0, max: 200 }])
    const ledger = MemoryLayers.temporal({ groundDateTime: false, injectLedger: true })
    assert.deepStrictEqual([ledger.placement, ledger.budget], ["auto", { min: 0, max: 800 }])
  })

  it.effect("recall grounds the date; extract fills the ledger at the threshold; injectLedger renders the newest facts within budget", () =>
    Effect.gen(function*() {
      const transcripts: Array<{ transcript: string; now: string }> = []
      const layer = MemoryLayers.temporal({
        now: () => at,
        bufferThreshold: 3,
        maxFacts: 2,
        injectLedger: true,
        extract: (input) =>
          Effect.sync(() => (transcripts.push(input), [
            { ts: "2026-03-01T00:00:00Z", fact: "moved to Berlin" },
            { ts: "2026-03-02T00:00:00Z", fact: "started a job" },
            { ts: "2026-03-03T00:00:00Z", fact: "bought a bike" }
          ]))
      })
      const harness = yield* AgentHarness.make({ name: "temporal", context: [layer] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      yield* ctx.append([user("hi")])
      assert.deepStrictEqual(transcripts, [])
      yield* LayerLifecycle.storeLayers(ctx, { items: [assistant("I moved last week")] })
      assert.deepStrictEqual(transcripts, [{ transcript: "hi\nI moved last week", now: "2026/03/04 (Wed) 09:05" }])
      const state = ctx.layerState<MemoryLayers.TemporalState>("temporal")!
      // Capped per fact: the newest two survive.
      assert.deepStrictEqual(state.facts, { "2026-03-02T00:00:00Z": ["started a job"], "2026-03-03T00:00:00Z": ["bought a bike"] })
      const [entry] = yield* LayerLifecycle.recallLayers(ctx, { budgets: new Map([["temporal", 800]]) })
      const text = textOf(entry!.items[0])
      assert.isTrue(text.startsWith("<current_datetime>\nNow: 2026/03/04 (Wed) 09:05\n"))
      assert.include(text, "<remembered_facts>\n- [2026-03-03T00:00:00Z] bought a bike\n- [2026-03-02T00:00:00Z] started a job\n</remembered_facts>")
      // A budget with room for the date block and one fact keeps the newest.
      const tight = yield* layer.lifecycle!.recall!({ log: [], query: "", ctx, state, budget: Math.ceil(text.length / 4) - 5 })
      assert.include(textOf((tight as any).items[0]), "bought a bike")
      assert.notInclude(textOf((tight as any).items[0]), "started a job")
      assert.isAtMost((tight as any).tokenCount, Math.ceil(text.length / 4) - 5)
    }).pipe(Effect.scoped))

  it.effect("without extract it only buffers; searchMemory returns the ledger, or what search answers", () =>
    Effect.gen(function*() {
      const plain = MemoryLayers.temporal({ bufferThreshold: 1, groundDateTime: false })
      const harness = yield* AgentHarness.make({ name: "temporal", context: [plain] })
      const ctx = yield* harness.createContext()
      yield* LayerLifecycle.initLayers(ctx)
      yield* LayerLifecycle.storeLayers(ctx, { items: [assistant("some text")] })
      assert.deepStrictEqual(ctx.layerState<MemoryLayers.TemporalState>("temporal")!.buffer, ["some text"])
      assert.deepStrictEqual(yield* LayerLifecycle.recallLayers(ctx), [])
      yield* ctx.updateLayer<MemoryLayers.TemporalState>("temporal", (s) => ({ ...s!, facts: { "2026-01-01": ["new year"] } }))
      const searchMemory = plain.provides!.searchMemory as any
      assert.deepStrictEqual(yield* LayerLifecycle.runLayerFunction(ctx, plain, searchMemory, { query: "when" }), { facts: ["[2026-01-01] new year"] })
      yield* Effect.flip(LayerLifecycle.runLayerFunction(ctx, plain, searchMemory, { query: 3 }))

      const searching = MemoryLayers.temporal({
        now: () => at,
        search: ({ facts, now, query }) => Effect.succeed({ facts: facts.map((f) => f.fact), date: `${query}@${now}`, fuzzy: true })
      })
      const h2 = yield* AgentHarness.make({ name: "temporal", context: [searching] })
      const c2 = yield* h2.createContext()
      yield* LayerLifecycle.initLayers(c2)
      yield* c2.updateLayer<MemoryLayers.TemporalState>("temporal", (s) => ({ ...s!, facts: { "2026-01-01": ["new year"] } }))
      assert.deepStrictEqual(
        yield* LayerLifecycle.runLayerFunction(c2, searching, searching.provides!.searchMemory as any, { query: "q" }),
        { facts: ["new year"], date: "q@2026/03/04 (Wed) 09:05", fuzzy: true }
      )
      assert.deepStrictEqual(LayerLifecycle.layerTools(c2).map((t) => t.name), ["temporal/searchMemory"])
    }).pipe(Effect.scoped))
})
