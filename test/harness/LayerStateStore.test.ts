/**
 * A host's `LayerStateStore` (noetic's `environment.storage.layerStateStore`) given to
 * the engine: layer state is written to it and read back from it, hook and write
 * failures reach its `diagnostic`, `flush` is awaited with the write-through, and
 * `cleanup` follows `dispose`; the durable write-through stays the engine's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { ContextLayer } from "../../src/harness/AgentContext.ts"
import type { LayerStateStore } from "../../src/harness/LayerHooks.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"

/** noetic's in-memory store, written from its documented interface, recording what the engine asks of it. */
const recordingStore = () => {
  const states = new Map<string, unknown>()
  const calls: Array<string> = []
  const diagnostics: Array<[string, string]> = []
  const disabled = new Set<string>()
  const key = (executionId: string, layerId: string) => `${executionId}/${layerId}`
  const store: LayerStateStore = {
    get: (executionId, layerId) => states.get(key(executionId, layerId)),
    set: (executionId, layerId, state) => void states.set(key(executionId, layerId), state),
    has: (executionId, layerId) => states.has(key(executionId, layerId)),
    cleanup: (executionId) => {
      calls.push(`cleanup:${executionId}`)
      for (const k of [...states.keys()]) if (k.startsWith(`${executionId}/`)) states.delete(k)
    },
    diagnostic: (layerId, hook) => void diagnostics.push([layerId, hook]),
    flush: (executionId) => Effect.sync(() => void calls.push(`flush:${executionId}`)),
    disable: (executionId, layerId) => void disabled.add(key(executionId, layerId)),
    isDisabled: (executionId, layerId) => disabled.has(key(executionId, layerId))
  }
  return { store, states, calls, diagnostics, disabled }
}

const notes: ContextLayer<{ readonly notes: ReadonlyArray<string> }> = {
  id: "notes",
  slot: 100,
  scope: "thread",
  lifecycle: {
    init: ({ storage }) => Effect.map(Effect.orDie(storage.get("state")), (saved) => ({ state: (saved as any) ?? { notes: [] } })),
    recall: ({ state }) => Effect.succeed(`notes: ${state.notes.join(", ")}`),
    store: ({ state }) => Effect.succeed({ state: { notes: [...state.notes, "stored"] } })
  }
}
const flaky: ContextLayer<number> = {
  id: "flaky",
  slot: 200,
  scope: "execution",
  lifecycle: { init: () => Effect.succeed({ state: 1 }), recall: () => Effect.fail(new Error("index down")) }
}
const broken: ContextLayer<number> = {
  id: "broken",
  scope: "execution",
  onInitError: "disable",
  lifecycle: { init: () => Effect.fail(new Error("no config")), recall: () => Effect.succeed("never") }
}

const reply = [{ type: "message", id: "a1", role: "assistant", content: [{ type: "output_text", text: "ok" }] }]

describe("a host's LayerStateStore", () => {
  it.effect("holds the live state both ways, hears of failures, is flushed and cleaned up; durability stays the engine's", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const checkpoints = yield* CheckpointStore.makeWith(storage)
      const host = recordingStore()
      const harness = yield* AgentHarness.make({ name: "store", context: [notes, flaky, broken], layerStateStore: host.store }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, checkpoints)
      )
      const ctx = yield* harness.createContext({ id: "exec-1", threadId: "t1" })
      yield* LayerLifecycle.initLayers(ctx)
      // init's state is in the host's store.
      assert.deepStrictEqual(host.states.get("exec-1/notes"), { notes: [] })
      assert.strictEqual(host.states.get("exec-1/flaky"), 1)
      // A failed init under 'disable' is reported and disabled in the store too.
      assert.isTrue(host.disabled.has("exec-1/broken"))
      assert.deepStrictEqual(host.diagnostics[0], ["broken", "init"])

      // What the host sets is what the next hook sees.
      host.store.set("exec-1", "notes", { notes: ["from host"] })
      const recalled = yield* LayerLifecycle.recallLayers(ctx)
      assert.deepStrictEqual(recalled.map((entry) => [entry.layerId, entry.items[0]!.content]), [
        ["notes", [{ type: "input_text", text: "notes: from host" }]]
      ])
      // The failing recall reached the store's diagnostic.
      assert.deepStrictEqual(host.diagnostics[1], ["flaky", "recall"])

      yield* LayerLifecycle.storeLayers(ctx, { items: reply })
      assert.deepStrictEqual(host.states.get("exec-1/notes"), { notes: ["from host", "stored"] })
      assert.include(host.calls, "flush:exec-1")
      // The engine wrote the thread's state through to its own storage as well.
      assert.deepStrictEqual(
        Option.getOrUndefined(yield* storage.get("layers/notes/t1/state")),
        { notes: ["from host", "stored"] }
      )
      // A snapshot records the state the store holds.
      assert.deepStrictEqual(ctx.layers["notes"], { notes: ["from host", "stored"] })

      yield* harness.cancel(ctx, "done")
      assert.strictEqual(host.calls.at(-1), "cleanup:exec-1")
      assert.isFalse(host.states.has("exec-1/notes"))
      // The context still knows its last state (a later snapshot keeps it).
      assert.deepStrictEqual(ctx.layerState("notes"), { notes: ["from host", "stored"] })

      // The next execution of the thread rehydrates from the engine's storage into the store.
      const next = yield* harness.createContext({ id: "exec-2", threadId: "t1" })
      yield* LayerLifecycle.initLayers(next)
      assert.deepStrictEqual(host.states.get("exec-2/notes"), { notes: ["from host", "stored"] })
    }).pipe(Effect.scoped))
})
