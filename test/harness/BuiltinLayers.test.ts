/**
 * noetic's built-in layers in the engine (src/harness/BuiltinLayers.ts and the
 * modules beside it), driven through the lifecycle functions a run uses.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { ContextLayer, Item } from "../../src/harness/AgentContext.ts"
import * as Builtin from "../../src/harness/BuiltinLayers.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"
import { runCode, spawn } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const durable = (storage: StorageAdapterShape, options: Omit<AgentHarness.AgentHarnessOptions, "name">) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
    AgentHarness.make({ name: "builtins", ...options }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store)))

const textOf = (item: Item | undefined): string => ((item?.content as Array<{ text: string }> | undefined) ?? []).map((p) => p.text).join("")

const reply: ReadonlyArray<Item> = [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "done" }] }]

const fn = (layer: ContextLayer<any>, name: string) => layer.provides![name] as Extract<NonNullable<ContextLayer<any>["provides"]>[string], { kind: "function" }>

describe("taskState", () => {
  it.effect("has noetic's id, slot, scope, budget; store appends a checkpoint with the time and depth, capped at the newest 50", () =>
    Effect.gen(function*() {
      const layer = Builtin.taskState()
      assert.deepStrictEqual([layer.id, layer.slot, layer.scope, layer.budget], ["task-state", 110, "thread", { min: 100, max: 800 }])
      const harness = yield* AgentHarness.make({ name: "task", context: [layer] })
      const ctx = yield* harness.createContext({ threadId: "t" })
      yield* LayerLifecycle.initLayers(ctx)
      assert.deepStrictEqual(ctx.layerState("task-state"), { checkpoints: [], files: [], data: {} })
      for (let i = 0; i < 60; i++) {
        yield* TestClock.adjust(1000)
        yield* LayerLifecycle.storeLayers(ctx, { items: reply })
      }
      const state = ctx.layerState<Builtin.TaskState>("task-state")!
      assert.strictEqual(state.checkpoints.length, 50)
      // The newest survive: the 11th store (t = 11 s) is now the oldest.
      assert.deepStrictEqual(state.checkpoints[0], { timestamp: 11_000, depth: 0 })
      assert.deepStrictEqual(state.checkpoints[49], { timestamp: 60_000, depth: 0 })
    }).pipe(Effect.scoped))

  it.effect("recall renders a <task_state> block; over budget the oldest checkpoints go first, then a char slice keeps the closing tag", () =>
    Effect.gen(function*() {
      const layer = Builtin.taskState()
      const state: Builtin.TaskState = {
        checkpoints: Array.from({ length: 50 }, (_, i) => ({ timestamp: i, depth: 0 })),
        files: ["a.ts"],
        data: { k: "v" }
      }
      const harness = yield* AgentHarness.make({ name: "task", context: [layer] })
      const ctx = yield* harness.createContext()
      const recall = (budget: number) =>
        Effect.map(layer.lifecycle!.recall!({ log: [], query: "", ctx, state, budget }), (out) => textOf((out as any).items[0]))
      const full = `<task_state>\n${JSON.stringify(state, null, 2)}\n</task_state>`
      assert.strictEqual(yield* recall(0), full)
      assert.strictEqual(yield* recall(Math.ceil(full.length / 4)), full)
      const trimmed = yield* recall(Math.ceil(full.length / 4) - 1)
      assert.isTrue(trimmed.endsWith("</task_state>"))
      assert.include(trimmed, "\"timestamp\": 49")
      assert.notInclude(trimmed, "\"timestamp\": 0,")
      assert.include(trimmed, "a.ts")
      const tiny = yield* recall(20)
      assert.isAtMost(tiny.length, 80)
      assert.isTrue(tiny.endsWith("\n</task_state>"))
    }).pipe(Effect.scoped))

  it.effect("recordArtifact and setTaskData change the state through ctx.context; __outcome is reserved; bad input is refused", () =>
    Effect.gen(function*() {
      const layer = Builtin.taskState()
      const harness = yield* AgentHarness.make({ name: "task", context: [layer] })
      const ctx = yield* harness.createContext()
      const run = (name: string, args: unknown) => LayerLifecycle.runLayerFunction(ctx, layer, fn(layer, name), args)
      assert.strictEqual(yield* run("recordArtifact", { path: "src/a.ts" }), "Recorded artifact: src/a.ts")
      assert.strictEqual(yield* run("recordArtifact", { path: "src/a.ts" }), "Already recorded: src/a.ts")
      assert.strictEqual(yield* run("setTaskData", { key: "pr", value: { url: "u" } }), "Recorded pr.")
      const before = ctx.layerState("task-state")
      assert.include(String(yield* run("setTaskData", { key: "__outcome", value: "x" })), "reserved")
      assert.strictEqual(ctx.layerState("task-state"), before)
      assert.deepStrictEqual(ctx.layerState("task-state"), { checkpoints: [], files: ["src/a.ts"], data: { pr: { url: "u" } } })
      // An empty path fails the schema: no state change.
      yield* Effect.flip(run("recordArtifact", { path: "" }))
      assert.deepStrictEqual(ctx.layerState<Builtin.TaskState>("task-state")!.files, ["src/a.ts"])
      // The model sees both as tools with a JSON Schema.
      const tools = LayerLifecycle.layerTools(ctx).map((t) => t.name)
      assert.deepStrictEqual(tools, ["task-state/recordArtifact", "task-state/setTaskData"])
    }).pipe(Effect.scoped))

  it.effect("a spawned child gets a copy; its artifacts merge back (files deduplicated, data spread); namespace keeps each child's data under its id", () =>
    Effect.gen(function*() {
      for (const mergeData of ["shallow", "namespace"] as const) {
        const layer = Builtin.taskState({ mergeData })
        const child = runCode("worker", (_: string, ctx) =>
          Effect.gen(function*() {
            const seen = ctx.layerState<Builtin.TaskState>("task-state")!
            yield* ctx.updateLayer<Builtin.TaskState>("task-state", (s) => ({ ...s!, files: [...s!.files, "b.ts"], data: { ...s!.data, verdict: "ok" } }))
            return seen.files.join(",")
          }))
        const harness = yield* AgentHarness.make({ name: "task", context: [layer] })
        const ctx = yield* harness.createContext({ threadId: `t-${mergeData}` })
        yield* LayerLifecycle.initLayers(ctx)
        yield* ctx.updateLayer<Builtin.TaskState>("task-state", (s) => ({ ...s!, files: ["a.ts"], data: { verdict: "parent" } }))
        const output = yield* harness.run(spawn({ id: "sp", child }), "go", ctx)
        assert.strictEqual(output, "a.ts")
        const merged = ctx.layerState<Builtin.TaskState>("task-state")!
        assert.deepStrictEqual(merged.files, ["a.ts", "b.ts"])
        if (mergeData === "shallow") assert.deepStrictEqual(merged.data, { verdict: "ok" })
        else {
          assert.strictEqual(merged.data.verdict, "parent")
          const [childId] = Object.keys(merged.data).filter((key) => key !== "verdict")
          assert.deepStrictEqual(merged.data[childId!], { verdict: "ok" })
        }
      }
    }).pipe(Effect.scoped))

  it.effect("cancel records data.__outcome 'aborted' with a final checkpoint, and the thread's state is rehydrated by its next execution", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const first = yield* durable(storage, { context: [Builtin.taskState()] })
      const ctx = yield* first.createContext({ threadId: "thread-1" })
      yield* LayerLifecycle.initLayers(ctx)
      yield* LayerLifecycle.storeLayers(ctx, { items: reply })
      yield* first.cancel(ctx, "stop")
      const saved = Option.getOrThrow(yield* storage.get("layers/task-state/thread-1/state")) as Builtin.TaskState
      assert.strictEqual(saved.data.__outcome, "aborted")
      assert.strictEqual(saved.checkpoints.length, 2)

      const second = yield* durable(storage, { context: [Builtin.taskState()] })
      const next = yield* second.createContext({ threadId: "thread-1" })
      yield* LayerLifecycle.initLayers(next)
      assert.deepStrictEqual(next.layerState("task-state"), saved)
    }).pipe(Effect.scoped))
})

describe("toolCalls", () => {
  interface Todos {
    readonly items: ReadonlyArray<string>
  }
  const todos: Builtin.ToolContextDeclaration<Todos> = {
    id: "todos",
    init: () => ({ items: [] }),
    recall: (state) => state.items.length === 0 ? null : `<todos>\n${state.items.join("\n")}\n</todos>`
  }

  it("one execution-scoped layer per distinct context id (else the tool's name), tools without a context skipped, slot overridable", () => {
    const layers = Builtin.toolCalls([
      { name: "write_todos", context: todos },
      { name: "update_todo", context: todos },
      { name: "plain" },
      { name: "my_tool", context: { init: () => ({}), recall: () => null } }
    ])
    assert.deepStrictEqual(layers.map((l) => [l.id, l.slot, l.scope]), [["todos", 110, "execution"], ["my_tool", 110, "execution"]])
    assert.strictEqual(Builtin.toolCalls([{ name: "t", context: todos }], { slot: 500 })[0]!.slot, 500)
  })

  it.effect("init gives the declaration's initial state; recall renders it once the tool wrote some, nothing before", () =>
    Effect.gen(function*() {
      const harness = yield* AgentHarness.make({ name: "todos", context: Builtin.toolCalls([{ name: "write_todos", context: todos }]) })
      const ctx = yield* harness.createContext()
      assert.deepStrictEqual(yield* LayerLifecycle.recallLayers(ctx), [])
      assert.deepStrictEqual(ctx.layerState("todos"), { items: [] })
      yield* ctx.updateLayer<Todos>("todos", (s) => ({ items: [...s!.items, "ship"] }))
      const [entry] = yield* LayerLifecycle.recallLayers(ctx)
      assert.strictEqual(entry!.layerId, "todos")
      assert.strictEqual(textOf(entry!.items[0]), "<todos>\nship\n</todos>")
    }).pipe(Effect.scoped))
})

describe("the Effect entry", () => {
  it("exports every built-in layer factory", async () => {
    const entry = await import("../../src/index.ts")
    const factories = [
      entry.BuiltinLayers.scratchpad,
      entry.BuiltinLayers.history,
      entry.BuiltinLayers.instructions,
      entry.BuiltinLayers.taskState,
      entry.BuiltinLayers.toolCalls,
      entry.MemoryLayers.observations,
      entry.MemoryLayers.temporal,
      entry.SteeringLayer.steering,
      entry.FilesystemLayer.filesystem
    ]
    assert.deepStrictEqual(factories.map((f) => typeof f), Array(9).fill("function"))
  })
})
