/**
 * A user's program: typed steps (tools, conditionals, loops, settled branches, child
 * agents), detached children on the in-memory adapter with manifests, and a host
 * restart that reattaches them.
 */
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import {
  AgentHarness,
  CheckpointStore,
  conditional,
  inParallel,
  InMemorySubprocessAdapter,
  invokeTool,
  loop,
  reattachLiveChildren,
  runCode,
  spawn,
  StorageAdapter
} from "../../src/index.ts"
import { double } from "../fixtures/subprocessSteps.ts"

class Overheated extends Schema.TaggedError<Overheated>()("Overheated", { degrees: Schema.Number }) {}

describe("usage: typed steps", () => {
  it.effect("errors of steps are catchable by tag from execute", () =>
    Effect.gen(function*() {
      const check = runCode("check", (degrees: number) =>
        degrees > 100 ? Effect.fail(new Overheated({ degrees })) : Effect.succeed(degrees))
      const agent = conditional("hot?", {
        if: (n: number) => n > 0,
        then: check,
        else: runCode("cold", (n: number) => Effect.succeed(`cold ${n}`))
      })
      const harness = yield* AgentHarness.make({ name: "thermo", agentGraph: agent })
      const { output } = yield* harness.execute(5)
      expectTypeOf(output).toEqualTypeOf<number | string>()
      assert.strictEqual(output, 5)
      const caught = yield* harness.execute(500).pipe(
        Effect.map((r) => String(r.output)),
        Effect.catchTag("Overheated", (e) => Effect.succeed(`too hot: ${e.degrees}`))
      )
      assert.strictEqual(caught, "too hot: 500")
    }))

  it.effect("settle reports each branch, loop iterates, spawn runs a child agent", () =>
    Effect.gen(function*() {
      const agent = runCode("agent", (n: number, ctx) =>
        Effect.gen(function*() {
          const settled = yield* ctx.run(
            inParallel("both", [
              runCode("ok", (x: number) => Effect.succeed(x)),
              runCode("bad", (x: number) => Effect.fail(new Overheated({ degrees: x })))
            ], { mode: "settle" }),
            n
          )
          expectTypeOf(settled[1]).toEqualTypeOf<
            | { readonly _tag: "Success"; readonly stepId: string; readonly status: "fulfilled"; readonly value: never }
            | { readonly _tag: "Failure"; readonly stepId: string; readonly status: "rejected"; readonly error: Overheated }
          >()
          const counted = yield* ctx.run(
            loop("count", runCode("inc", (x: number) => Effect.succeed(x + 1)), { until: (x) => x >= 3 }),
            0
          )
          const child = yield* ctx.run(spawn("child", runCode("kid", (x: number) => Effect.succeed(x * 10))), counted)
          return { tags: settled.map((s) => s._tag), counted, child }
        }))
      const harness = yield* AgentHarness.make({ name: "steps", agentGraph: agent })
      const { output } = yield* harness.execute(1)
      assert.deepStrictEqual(output, { tags: ["Success", "Failure"], counted: 3, child: 30 })
    }))

  it.effect("invokeTool calls a harness tool; a failing tool is ToolFailed, an unknown one UnknownTool", () =>
    Effect.gen(function*() {
      const agent = runCode("agent", (q: string, ctx) =>
        Effect.gen(function*() {
          const found = yield* ctx.run(invokeTool("search", "search"), q)
          return found
        }))
      const harness = yield* AgentHarness.make({
        name: "tools",
        agentGraph: agent,
        tools: { search: (input) => Effect.succeed(`results for ${String(input)}`) }
      })
      const { output } = yield* harness.execute("effect")
      assert.strictEqual(output, "results for effect")
      const broken = yield* AgentHarness.make({
        name: "broken",
        agentGraph: agent,
        tools: { search: () => Effect.fail("down") }
      })
      const tag = yield* broken.execute("x").pipe(
        Effect.map(() => "ok"),
        Effect.catchTags({ ToolFailed: (e) => Effect.succeed(`failed ${String(e.cause)}`), UnknownTool: () => Effect.succeed("unknown") })
      )
      assert.strictEqual(tag, "failed down")
    }))
})

describe("usage: detached children", () => {
  const Storage = CheckpointStore.layer.pipe(Layer.provideMerge(StorageAdapter.layerMemory))

  /** One host's life: an adapter keeping manifests in the shared storage, a harness, then `body`. */
  const host = <A, E>(body: (harness: AgentHarness.AgentHarness<undefined>) => Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const storage = yield* StorageAdapter.StorageAdapter
      const checkpointStore = yield* CheckpointStore.CheckpointStore
      return yield* Effect.scoped(
        Effect.flatMap(AgentHarness.make({ name: "host" }), body).pipe(
          Effect.provide(InMemorySubprocessAdapter.layer({ storage, checkpointStore }))
        )
      )
    })

  it.effect("a child the host awaited before it shut down is not reattached (re-run) by the next host", () =>
    Effect.gen(function*() {
      yield* host((harness) =>
        Effect.gen(function*() {
          const parent = yield* harness.createContext({ id: "parent-1" })
          const handle = yield* harness.detachedSpawn(double, 21, parent)
          assert.strictEqual(yield* handle.await, 42)
        }))
      const after = yield* host((harness) => reattachLiveChildren(harness))
      assert.deepStrictEqual(after.handles.map((h) => h.stepId), [])
    }).pipe(Effect.provide(Storage)))

  it.effect("a step's own subprocess adapter is an adapter, not anything: a layer is refused at compile time", () =>
    Effect.gen(function*() {
      const storage = yield* StorageAdapter.StorageAdapter
      const own = yield* InMemorySubprocessAdapter.make({ storage })
      const step = runCode("own", (n: number) => Effect.succeed(n + 1), { subprocess: own })
      // @ts-expect-error a Layer is not an adapter (it used to compile, then die in detachedSpawn)
      runCode("wrong", (n: number) => Effect.succeed(n), { subprocess: InMemorySubprocessAdapter.layer() })
      const harness = yield* AgentHarness.make({ name: "own" })
      const handle = yield* harness.detachedSpawn(step, 1, yield* harness.createContext())
      assert.isTrue(Option.isSome(yield* own.get(handle.handleId)))
      assert.strictEqual(yield* handle.await, 2)
    }).pipe(Effect.provide(Storage)))

  it.effect("a child still running when its host stopped is re-run by the next host, with its parent restored", () =>
    Effect.gen(function*() {
      yield* host((harness) =>
        Effect.gen(function*() {
          const parent = yield* harness.createContext({ id: "parent-2" })
          yield* harness.checkpoint(parent)
          yield* harness.detachedSpawn(double, 5, parent, { handleId: "child-2" })
        }))
      const output = yield* host((harness) =>
        Effect.gen(function*() {
          const { contexts, failures, handles } = yield* reattachLiveChildren(harness)
          assert.deepStrictEqual(handles.map((h) => h.handleId), ["child-2"])
          assert.strictEqual(contexts.get("child-2")?.id, "parent-2")
          assert.strictEqual(failures.length, 0)
          return yield* handles[0]!.await
        }))
      assert.strictEqual(output, 10)
    }).pipe(Effect.provide(Storage)))
})
