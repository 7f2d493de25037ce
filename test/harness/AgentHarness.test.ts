import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option, Random } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { StorageError, Io } from "../../src/Errors.ts"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { callModel, conditional, inParallel, invokeTool, loop, runCode, spawn } from "../../src/harness/Step.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as ScriptedModel from "../../src/layers/ScriptedModel.ts"
import { snapshotKey } from "../../src/schema/CheckpointSnapshot.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import { makeMemory as makeMemorySubprocessAdapter, type SubprocessAdapterShape } from "../../src/services/SubprocessAdapter.ts"

/** Storage that counts writes, around a real backend. */
const counting = (storage: StorageAdapterShape) => {
  const writes: Array<string> = []
  const wrapped: StorageAdapterShape = {
    ...storage,
    set: (key, value) => Effect.andThen(Effect.sync(() => writes.push(key)), storage.set(key, value)),
    delete: (key) => Effect.andThen(Effect.sync(() => writes.push(`delete ${key}`)), storage.delete(key))
  }
  return { storage: wrapped, writes }
}

/** Builds a durable harness over `storage` (a fresh one per call, like a restarted host). */
const durableHarness = <const G extends Parameters<typeof AgentHarness.make>[0]["agentGraph"]>(
  storage: StorageAdapterShape,
  options: Omit<AgentHarness.AgentHarnessOptions<G>, "name"> & { readonly name?: string }
) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    return yield* AgentHarness.make<G>({ name: "test", ...options }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })

const snapshotsSaved = (writes: ReadonlyArray<string>, executionId: string) =>
  writes.filter((key) => key === snapshotKey(executionId)).length

describe("AgentHarness", () => {
  describe("configuration errors", () => {
    it.effect("execute without a graph fails with NO_STEP_CONFIGURED", () =>
      Effect.gen(function*() {
        const harness = yield* AgentHarness.make({ name: "empty" })
        const error = yield* Effect.flip(harness.execute(undefined as never))
        assert.strictEqual(error._tag, "NoStepConfigured")
        if (error._tag === "NoStepConfigured") assert.strictEqual(error.code, "NO_STEP_CONFIGURED")
      }))

    it.effect("an empty step id fails with EMPTY_STEP_ID, in the graph or dispatched at run time", () =>
      Effect.gen(function*() {
        // The builder refuses it (noetic's builders throw at build time); a step whose id
        // was emptied after building is still refused by the harness and at dispatch.
        assert.throws(() => runCode("  ", () => Effect.succeed(1)), /non-empty id/)
        const bad = { ...runCode("x", () => Effect.succeed(1)), id: "" }
        const atBuild = yield* Effect.flip(
          AgentHarness.make({ name: "bad", agentGraph: loop("outer", bad, { until: () => true }) })
        )
        assert.strictEqual(atBuild.code, "EMPTY_STEP_ID")
        const harness = yield* AgentHarness.make({
          name: "dynamic",
          agentGraph: runCode("root", (_: void, ctx) => ctx.run(bad, undefined))
        })
        const atRun = yield* Effect.flip(harness.execute(undefined))
        assert.strictEqual(atRun._tag, "EmptyStepId")
      }))
  })

  describe("zero-config", () => {
    it.effect("runs the graph, writes nothing, checkpoint is a no-op and restore is none", () =>
      Effect.gen(function*() {
        const { storage, writes } = counting(yield* makeMemory)
        let runs = 0
        const harness = yield* AgentHarness.make({
          name: "plain",
          agentGraph: runCode("root", (n: number, ctx) =>
            Effect.gen(function*() {
              runs++
              yield* ctx.append([{ type: "note", text: "hi" }])
              return n + 1
            }))
        })
        const result = yield* harness.execute(41)
        assert.strictEqual(result.output, 42)
        assert.strictEqual(runs, 1)
        assert.isFalse(harness.durable)
        const ctx = yield* harness.createContext()
        yield* harness.checkpoint(ctx)
        assert.isTrue(Option.isNone(yield* harness.restore(result.executionId)))
        assert.isTrue(Option.isNone(yield* harness.resume(result.executionId)))
        assert.deepStrictEqual(writes, [])
        // Nothing could have been written anywhere: the harness was never given storage.
        assert.deepStrictEqual(yield* storage.list(""), [])
      }))
  })

  describe("onRootDispatch", () => {
    it.effect("is called once per execute, after the first checkpoint and just before the root's body, tracing on or off", () =>
      Effect.gen(function*() {
        const { storage, writes } = counting(yield* makeMemory)
        const events: Array<string> = []
        const inner = runCode("inner", (n: number) => Effect.sync(() => events.push(`inner ${n}`)))
        const harness = yield* durableHarness(storage, {
          agentGraph: runCode("root", (n: number, ctx) =>
            Effect.gen(function*() {
              events.push(`body ${n}`)
              yield* ctx.run(inner, n)
              return n
            }))
        })
        const onRootDispatch = () => events.push(`dispatched, ${writes.length} writes`)
        const first = yield* harness.execute(1, { onRootDispatch })
        // The root in flight is checkpointed (the index key, then the snapshot) first.
        assert.deepStrictEqual(events, ["dispatched, 2 writes", "body 1", "inner 1"])
        assert.strictEqual(snapshotsSaved(writes.slice(0, 2), first.executionId), 1)
        events.length = 0
        writes.length = 0
        yield* harness.execute(2, { onRootDispatch }).pipe(Effect.withTracerEnabled(false))
        assert.deepStrictEqual(events, ["dispatched, 2 writes", "body 2", "inner 2"])
      }))

    it.effect("is not called when the run fails before the root is dispatched", () =>
      Effect.gen(function*() {
        let dispatched = 0
        const harness = yield* AgentHarness.make({ name: "empty" })
        yield* Effect.flip(harness.execute(undefined as never, { onRootDispatch: () => dispatched++ }))
        assert.strictEqual(dispatched, 0)
      }))
  })

  describe("checkpoint boundaries", () => {
    it.effect("after an execute turn that changed the item log, and not again when it did not", () =>
      Effect.gen(function*() {
        const { storage, writes } = counting(yield* makeMemory)
        const harness = yield* durableHarness(storage, {
          agentGraph: runCode("root", (append: boolean, ctx) =>
            append
              ? Effect.as(ctx.append([{ type: "note", text: "new" }]), "changed")
              : Effect.succeed("unchanged"))
        })
        const changed = yield* harness.execute(true)
        // At the start of the turn (root in flight), after the append pipeline, and at
        // the end of the turn (the item log changed).
        assert.strictEqual(snapshotsSaved(writes, changed.executionId), 3)
        const unchanged = yield* harness.execute(false)
        assert.strictEqual(snapshotsSaved(writes, unchanged.executionId), 1)
      }))

    it.effect("after the append pipeline resolves: the snapshot holds the new items", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const store = yield* CheckpointStore.makeWith(storage)
        let seenInSnapshot: ReadonlyArray<unknown> = []
        const harness = yield* AgentHarness.make({
          name: "append",
          agentGraph: runCode("root", (_: void, ctx) =>
            Effect.gen(function*() {
              yield* ctx.append([{ type: "note", id: "n1", text: "first" }])
              const snapshot = yield* store.load(ctx.id)
              seenInSnapshot = Option.isSome(snapshot) ? snapshot.value.itemLog.items : []
            }))
        }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store))
        yield* harness.execute(undefined)
        assert.deepStrictEqual(seenInSnapshot, [{ type: "note", id: "n1", text: "first" }])
      }))

    it.effect("when an ask-user prompt is enqueued: the snapshot holds the pending prompt", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const store = yield* CheckpointStore.makeWith(storage)
        const harness = yield* AgentHarness.make({
          name: "ask",
          agentGraph: runCode("root", (_: void, ctx) => ctx.askUser({ question: "proceed?" }))
        }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store))
        const fiber = yield* Effect.forkChild(harness.execute(undefined, { executionId: "ask-1" }))
        let pending: ReadonlyArray<{ id: string; input: unknown }> = []
        while (pending.length === 0) {
          yield* Effect.yieldNow
          const snapshot = yield* store.load("ask-1")
          pending = Option.isSome(snapshot) ? snapshot.value.askUser : []
        }
        assert.deepStrictEqual(pending[0]!.input, { question: "proceed?" })
        yield* harness.answerAskUser("ask-1", pending[0]!.id, "yes")
        const result = yield* Fiber.await(fiber)
        assert.deepStrictEqual(result, Exit.succeed({ executionId: "ask-1", output: "yes" }))
      }))

    it.effect("after a detached spawn settles, on success and on failure", () =>
      Effect.gen(function*() {
        const { storage, writes } = counting(yield* makeMemory)
        const harness = yield* durableHarness(storage, {})
        const parent = yield* harness.createContext({ id: "parent" })
        // Each spawn also records the parent before the child starts (a crash then leaves it restorable).
        const ok = yield* harness.detachedSpawn(runCode("child", (n: number) => Effect.succeed(n * 2)), 21, parent)
        assert.strictEqual(yield* ok.await, 42)
        for (let i = 0; i < 10 && snapshotsSaved(writes, "parent") < 2; i++) yield* Effect.yieldNow
        assert.strictEqual(snapshotsSaved(writes, "parent"), 2)
        const failing = yield* harness.detachedSpawn(runCode("boom", () => Effect.fail("no")), undefined, parent)
        const error = yield* Effect.flip(failing.await)
        assert.strictEqual(error.reason._tag, "ChildFailed")
        for (let i = 0; i < 10 && snapshotsSaved(writes, "parent") < 4; i++) yield* Effect.yieldNow
        assert.strictEqual(snapshotsSaved(writes, "parent"), 4)
      }))

    it.effect("saves from parallel branches of one context land in order: a slower, older save never lands last", () =>
      Effect.gen(function*() {
        const base = yield* makeMemory
        const blocked = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const bAppending = yield* Deferred.make<void>()
        let armed = false
        // The snapshot write of branch a stalls (a slow disk) until the gate opens.
        const storage: StorageAdapterShape = {
          ...base,
          set: (key, value) =>
            key === snapshotKey("race") && armed
              ? Effect.suspend(() => {
                armed = false
                return Effect.andThen(
                  Effect.andThen(Deferred.succeed(blocked, undefined), Deferred.await(gate)),
                  base.set(key, value)
                )
              })
              : base.set(key, value)
        }
        const a = runCode("a", (_: void, ctx) =>
          Effect.andThen(Effect.sync(() => (armed = true)), ctx.append([{ type: "note", id: "a" }])))
        const b = runCode("b", (_: void, ctx) =>
          Effect.gen(function*() {
            yield* Deferred.await(blocked)
            yield* Deferred.succeed(bAppending, undefined)
            yield* ctx.append([{ type: "note", id: "b" }])
          }))
        const harness = yield* durableHarness(storage, {
          agentGraph: runCode("root", (_: void, ctx) =>
            Effect.andThen(ctx.run(inParallel("fan", [a, b] as const), undefined), Effect.die("host crashed")))
        })
        const run = yield* Effect.forkChild(Effect.exit(harness.execute(undefined, { executionId: "race" })))
        yield* Deferred.await(bAppending)
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(run)
        const restored = Option.getOrThrow(yield* harness.restore("race"))
        assert.deepStrictEqual(restored.items.map((item) => item.id).sort(), ["a", "b"])
      }))

    it.effect("a failing save is logged and swallowed: the step still succeeds", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const broken: StorageAdapterShape = {
          ...storage,
          set: (key) =>
            Effect.fail(new StorageError({ operation: "set", reason: new Io({ key, message: "disk full", cause: null }) }))
        }
        const harness = yield* durableHarness(broken, {
          agentGraph: runCode("root", (_: void, ctx) =>
            Effect.as(ctx.append([{ type: "note", text: "x" }]), "done"))
        })
        const result = yield* harness.execute(undefined)
        assert.strictEqual(result.output, "done")
      }))
  })

  describe("restore", () => {
    it.effect("rebuilds item log, layer state, cwd, pending prompts and frontier; the snapshot wins", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const first = yield* durableHarness(storage, {})
        const ctx = yield* first.createContext({ id: "exec-r", threadId: "t1", resourceId: "r1", cwd: "/a" })
        yield* ctx.setCwd("/b")
        yield* ctx.append([{ type: "message", role: "user", content: "hello", responseId: "resp-1" }])
        yield* ctx.updateLayer("scratchpad", () => ({ plan: "ship it" }))
        ctx.enterStep("/root#0", { stepId: "root", input: { task: 1 }, state: { path: "/root#0" } })
        yield* Effect.forkChild(ctx.askUser({ q: "ok?" }, { id: "prompt-1" }))
        yield* Effect.yieldNow
        yield* first.checkpoint(ctx)

        const second = yield* durableHarness(storage, {})
        const hostState = { queue: "wired" }
        const restored = yield* second.restore("exec-r", { state: hostState })
        assert.isTrue(Option.isSome(restored))
        const back = Option.getOrThrow(restored)
        assert.strictEqual(back.id, "exec-r")
        assert.strictEqual(back.threadId, "t1")
        assert.strictEqual(back.resourceId, "r1")
        assert.strictEqual(back.state, hostState)
        assert.deepStrictEqual(back.cwd, { current: "/b", previous: "/a" })
        assert.deepStrictEqual(back.items, [{ type: "message", role: "user", content: "hello", responseId: "resp-1" }])
        // Restored state is not overwritten by the layers' init.
        assert.deepStrictEqual(back.layerState("scratchpad"), { plan: "ship it" })
        assert.deepStrictEqual(
          back.layerState<{ items: ReadonlyArray<unknown> }>("history")?.items,
          [{ type: "message", role: "user", content: "hello", responseId: "resp-1" }]
        )
        assert.deepStrictEqual(back.pendingAskUser.map((p) => [p.id, p.input]), [["prompt-1", { q: "ok?" }]])
        assert.deepStrictEqual(back.restoredFrontier, [{ stepId: "root", input: { task: 1 }, state: { path: "/root#0" } }])
        // The log's response-id dedupe survives the restore.
        const added = yield* back.append([{ type: "message", role: "assistant", content: "again", responseId: "resp-1" }])
        assert.deepStrictEqual(added, [])
      }))

    it.effect("a restored context that checkpoints before it runs keeps the snapshot's frontier, so resume still works", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        let crash = true
        const graph = runCode("root", (task: string) => crash ? Effect.die("host crashed") : Effect.succeed(`did ${task}`))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        yield* Effect.exit(first.execute("the task", { executionId: "parent-1" }))

        // A restarted host restores the parent (reattachLiveChildren does) and it
        // checkpoints before anything runs on it: a child settles, or the host appends.
        crash = false
        const second = yield* durableHarness(storage, { agentGraph: graph })
        const parent = Option.getOrThrow(yield* second.restore("parent-1"))
        yield* parent.append([{ type: "note", text: "child done" }])
        yield* second.checkpoint(parent)

        const third = yield* durableHarness(storage, { agentGraph: graph })
        const again = Option.getOrThrow(yield* third.restore("parent-1"))
        assert.deepStrictEqual(again.restoredFrontier.map((entry) => entry.input), ["the task"])
        const resumed = Option.getOrThrow(yield* third.resume("parent-1"))
        assert.strictEqual(resumed.output, "did the task")
      }))

    it.effect("returns none when nothing is recorded, and a bad snapshot is CHECKPOINT_SCHEMA_MISMATCH", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const harness = yield* durableHarness(storage, {})
        assert.isTrue(Option.isNone(yield* harness.restore("missing")))
        yield* storage.set(snapshotKey("v1"), {
          schemaVersion: 1,
          executionId: "v1",
          layers: { "working-context": {}, "static-content": {}, "history-window": {} }
        })
        const error = yield* Effect.flip(harness.restore("v1"))
        assert.strictEqual(error._tag, "CheckpointSchemaMismatch")
        if (error._tag === "CheckpointSchemaMismatch") assert.strictEqual(error.seenVersion, 1)
      }))
  })

  describe("ask-user across a restart", () => {
    it.live("an answer whose snapshot read outlasts the run going live still reaches the restored prompt", () =>
      Effect.gen(function*() {
        const memory = yield* makeMemory
        let asked = 0
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            asked++
            return yield* ctx.askUser({ question: "ship it?" })
          }))
        const first = yield* durableHarness(memory, { agentGraph: graph })
        const running = yield* Effect.forkChild(first.execute(undefined, { executionId: "racing" }))
        const store = yield* CheckpointStore.makeWith(memory)
        let promptId: string | undefined
        while (promptId === undefined) {
          yield* Effect.yieldNow
          const snapshot = yield* store.load("racing")
          promptId = Option.isSome(snapshot) ? snapshot.value.askUser[0]?.id : undefined
        }
        yield* Fiber.interrupt(running)

        // The answer's snapshot read is slow; resume goes live and asks again meanwhile.
        const gate = yield* Deferred.make<void>()
        let holdNextRead = true
        const storage: StorageAdapterShape = {
          ...memory,
          get: (key) => {
            if (!holdNextRead || key !== snapshotKey("racing")) return memory.get(key)
            holdNextRead = false
            return Effect.andThen(Deferred.await(gate), memory.get(key))
          }
        }
        const second = yield* durableHarness(storage, { agentGraph: graph })
        const answering = yield* Effect.forkChild(second.answerAskUser("racing", promptId, "yes"))
        const resuming = yield* Effect.forkChild(second.resume("racing"))
        while (asked < 2) yield* Effect.yieldNow
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(answering)
        const resumed = yield* Fiber.join(resuming).pipe(Effect.timeout("2 seconds"))
        assert.strictEqual(Option.getOrThrow(resumed).output, "yes")
      }))

    it.effect("an answer given before resume is handed to the restored prompt when the run goes live", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        let asked = 0
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            asked++
            return yield* ctx.askUser({ question: "ship it?" })
          }))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        const running = yield* Effect.forkChild(first.execute(undefined, { executionId: "early" }))
        const store = yield* CheckpointStore.makeWith(storage)
        let promptId: string | undefined
        while (promptId === undefined) {
          yield* Effect.yieldNow
          const snapshot = yield* store.load("early")
          promptId = Option.isSome(snapshot) ? snapshot.value.askUser[0]?.id : undefined
        }
        // The host dies while the prompt waits.
        yield* Fiber.interrupt(running)

        const second = yield* durableHarness(storage, { agentGraph: graph })
        const unknownPrompt = yield* Effect.flip(second.answerAskUser("early", "no-such-prompt", "x"))
        assert.strictEqual(unknownPrompt._tag, "UnknownAskUserPrompt")
        yield* second.answerAskUser("early", promptId, "yes")
        const resumed = yield* second.resume("early")
        assert.strictEqual(Option.getOrThrow(resumed).output, "yes")
        assert.strictEqual(asked, 2)
      }))
  })

  describe("step-level replay", () => {
    it.effect("completed steps replay their recorded output; recorded randomness flows downstream", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const bodies: Record<string, number> = {}
        const count = (id: string) => (bodies[id] = (bodies[id] ?? 0) + 1)
        let crash = true
        const roll = runCode("roll", () => Effect.tap(Random.nextIntBetween(0, 1_000_000), () => Effect.sync(() => count("roll"))))
        const double = runCode("double", (n: number) => Effect.sync(() => (count("double"), n * 2)))
        const fragile = runCode("fragile", (n: number) =>
          Effect.suspend(() => {
            count("fragile")
            return crash ? Effect.die("host crashed") : Effect.succeed(n + 1)
          }))
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const rolled = yield* ctx.run(roll, undefined)
            const doubled = yield* ctx.run(double, rolled)
            return { rolled, final: yield* ctx.run(fragile, doubled) }
          }))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        const exit = yield* Effect.exit(first.execute(undefined, { executionId: "replay-1" }))
        assert.isTrue(Exit.isFailure(exit))

        crash = false
        const second = yield* durableHarness(storage, { agentGraph: graph })
        const resumed = Option.getOrThrow(yield* second.resume("replay-1"))
        assert.deepStrictEqual(bodies, { roll: 1, double: 1, fragile: 2 })
        assert.strictEqual(resumed.output.final, resumed.output.rolled * 2 + 1)

        // A finished composite replays wholesale: nothing below it runs again.
        const third = yield* durableHarness(storage, { agentGraph: graph })
        const again = Option.getOrThrow(yield* third.resume("replay-1"))
        assert.deepStrictEqual(again.output, resumed.output)
        assert.deepStrictEqual(bodies, { roll: 1, double: 1, fragile: 2 })
      }))

    it.effect("loop iterations and parallel branches have distinct paths and each replays", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const paths: Array<string> = []
        let crashAt = 6
        const tick = runCode("tick", (n: number, ctx) =>
          Effect.suspend(() => {
            if (--crashAt === 0) return Effect.die("crash")
            paths.push(ctx.path)
            return Effect.succeed(n + 1)
          }))
        const graph = inParallel("fan", [loop("count", tick, { until: (n) => n >= 3 }), tick, tick] as const)
        const first = yield* durableHarness(storage, { agentGraph: graph })
        yield* Effect.exit(first.execute(0, { executionId: "paths" }))
        crashAt = Infinity
        const second = yield* durableHarness(storage, { agentGraph: graph })
        const result = Option.getOrThrow(yield* second.resume("paths"))
        assert.deepStrictEqual(result.output, [3, 1, 1])
        assert.deepStrictEqual([...paths].sort(), [
          "/fan#0[0]/count#0/tick#0",
          "/fan#0[0]/count#0/tick#1",
          "/fan#0[0]/count#0/tick#2",
          "/fan#0[1]/tick#0",
          "/fan#0[2]/tick#0"
        ])
      }))

    it.effect("a replayed step's changes to cwd and layer state are in the restored context", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        let crash = true
        let setups = 0
        const setup = runCode("setup", (_: void, ctx) =>
          Effect.gen(function*() {
            setups++
            yield* ctx.setCwd("/repo")
            yield* ctx.updateLayer("scratchpad", () => ({ plan: "ship it" }))
            return "ready"
          }))
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            yield* ctx.run(setup, undefined)
            if (crash) return yield* Effect.die("host crashed")
            return { cwd: ctx.cwd?.current, plan: ctx.layerState<{ plan?: string }>("scratchpad")?.plan }
          }))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        yield* Effect.exit(first.execute(undefined, { executionId: "setup-1" }))
        crash = false
        const second = yield* durableHarness(storage, { agentGraph: graph })
        const resumed = Option.getOrThrow(yield* second.resume("setup-1"))
        // setup replayed rather than ran, so only its snapshot can carry what it changed.
        assert.strictEqual(setups, 1)
        assert.deepStrictEqual(resumed.output, { cwd: "/repo", plan: "ship it" })
      }))

    it.effect("harness.run from different step bodies of one context numbers on: no path collides, nothing replays wrongly", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const square = runCode("square", (n: number) => Effect.succeed(n * n))
        let run!: AgentHarness.AgentHarness["run"]
        // Each body hands harness.run its own view of the context.
        const viaHarness = (id: string, n: number) => runCode(id, (_: void, ctx) => run(square, n, ctx))
        const harness = yield* durableHarness(storage, {
          agentGraph: runCode("root", (_: void, ctx) =>
            Effect.all([ctx.run(viaHarness("first", 2), undefined), ctx.run(viaHarness("second", 3), undefined)]))
        })
        run = harness.run
        const result = yield* harness.execute(undefined)
        assert.deepStrictEqual(result.output, [4, 9])
      }))

    it.effect("a step whose id or kind changed at a recorded path runs fresh; its old subtree is discarded", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const ran: Array<string> = []
        const composite = (childValue: string) =>
          runCode("step", (_: void, inner) =>
            inner.run(runCode("child", () => Effect.sync(() => (ran.push(childValue), childValue))), undefined))
        const crashingRoot = (step: ReturnType<typeof composite>) =>
          runCode("root", (_: void, ctx) => Effect.andThen(ctx.run(step, undefined), Effect.die("crash")))
        const first = yield* durableHarness(storage, { agentGraph: crashingRoot(composite("old")) })
        yield* Effect.exit(first.execute(undefined, { executionId: "ident" }))
        assert.deepStrictEqual(ran, ["old"])

        // Same path "/root#0/step#0", now an invokeTool: another identity. It runs fresh
        // (and fails), which durably discards the recorded composite and its child.
        const second = yield* durableHarness(storage, {
          agentGraph: runCode("root", (_: void, ctx) => ctx.run(invokeTool("step", "flaky"), "input")),
          tools: { flaky: () => Effect.fail("tool down") }
        })
        const toolError = yield* Effect.flip(second.execute(undefined, { executionId: "ident" }))
        assert.strictEqual(toolError._tag, "ToolFailed")

        // The original composite is back: nothing of its old run may replay.
        const third = yield* durableHarness(storage, {
          agentGraph: runCode("root", (_: void, ctx) => ctx.run(composite("new"), undefined))
        })
        const result = Option.getOrThrow(yield* third.resume("ident"))
        assert.strictEqual(result.output, "new")
        assert.deepStrictEqual(ran, ["old", "new"])
      }))

    it.effect("an oversized output is not recorded, so that step runs again", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        let bigRuns = 0
        let crash = true
        const big = runCode("big", () => Effect.sync(() => (bigRuns++, "x".repeat(200 * 1024))))
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const out = yield* ctx.run(big, undefined)
            if (crash) return yield* Effect.die("crash")
            return out.length
          }))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        yield* Effect.exit(first.execute(undefined, { executionId: "big" }))
        crash = false
        const second = yield* durableHarness(storage, { agentGraph: graph })
        assert.strictEqual(Option.getOrThrow(yield* second.resume("big")).output, 200 * 1024)
        assert.strictEqual(bigRuns, 2)
      }))

    it.effect("conditional, race and settle replay like any composite", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const harness = yield* durableHarness(storage, {
          agentGraph: inParallel("modes", [
            conditional("check", {
              if: (n: number) => n > 0,
              then: runCode("pos", (n: number) => Effect.succeed(`pos ${n}`)),
              else: runCode("neg", (n: number) => Effect.succeed(`neg ${n}`))
            }),
            inParallel("race", [runCode("slow", () => Effect.never), runCode("fast", (n: number) => Effect.succeed(n))], {
              mode: "race"
            }),
            inParallel("settle", [runCode("ok", (n: number) => Effect.succeed(n)), runCode("bad", () => Effect.fail("nope"))], {
              mode: "settle"
            })
          ] as const)
        })
        const result = yield* harness.execute(5)
        assert.deepStrictEqual(result.output, [
          "pos 5",
          5,
          [
            { _tag: "Success", stepId: "ok", status: "fulfilled", value: 5 },
            { _tag: "Failure", stepId: "bad", status: "rejected", error: "nope" }
          ]
        ])
      }))
  })

  describe("callModel", () => {
    it.effect("goes through the LanguageModel service and appends the turn; a re-issued identical response is not doubled", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        const harness = yield* durableHarness(storage, {
          agentGraph: loop("chat", callModel("ask"), { until: (_, i) => i >= 1 })
        })
        const result = yield* harness.execute("hi").pipe(
          Effect.provide(ScriptedModel.layer([{ id: "r1", text: "hello" }, { id: "r1", text: "hello" }]))
        )
        assert.deepStrictEqual(result.output, { responseId: "r1", text: "hello" })
        const ctx = Option.getOrThrow(yield* harness.restore(result.executionId))
        const assistant = ctx.items.filter((item) => item.role === "assistant")
        assert.strictEqual(assistant.length, 1)
      }))

    it.effect("on resume a recorded model turn replays: the model is not called again", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        let crash = true
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const turn = yield* ctx.run(callModel("ask"), "question")
            if (crash) return yield* Effect.die("crash")
            return turn.text
          }))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        yield* Effect.exit(first.execute(undefined, { executionId: "model" }).pipe(
          Effect.provide(ScriptedModel.layer([{ id: "r1", text: "first answer" }]))
        ))
        crash = false
        const second = yield* durableHarness(storage, { agentGraph: graph })
        // The script is empty: any call would fail.
        const resumed = yield* second.resume("model").pipe(Effect.provide(ScriptedModel.layer([])))
        assert.strictEqual(Option.getOrThrow(resumed).output, "first answer")
      }))

    it.effect("a re-issued turn of a provider without response ids: a different answer is a new turn in the log", () =>
      Effect.gen(function*() {
        const base = yield* makeMemory
        // The first host's ledger writes fail (a full disk), so the turn is appended but never recorded.
        const noLedger: StorageAdapterShape = {
          ...base,
          set: (key, value) =>
            key.includes(":ledger:")
              ? Effect.fail(new StorageError({ operation: "set", reason: new Io({ key, message: "disk full", cause: null }) }))
              : base.set(key, value)
        }
        let crash = true
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const turn = yield* ctx.run(callModel("ask"), "question")
            if (crash) return yield* Effect.die("host crashed")
            return turn.text
          }))
        const first = yield* durableHarness(noLedger, { agentGraph: graph })
        yield* Effect.exit(first.execute(undefined, { executionId: "no-ids" }).pipe(
          Effect.provide(ScriptedModel.layer([{ text: "first answer" }]))
        ))
        crash = false
        const second = yield* durableHarness(base, { agentGraph: graph })
        const resumed = yield* second.resume("no-ids").pipe(Effect.provide(ScriptedModel.layer([{ text: "second answer" }])))
        assert.strictEqual(Option.getOrThrow(resumed).output, "second answer")
        // What flowed downstream is in the log the next prompt is built from.
        const ctx = Option.getOrThrow(yield* second.restore("no-ids"))
        const answers = ctx.items.filter((item) => item.role === "assistant").map((item) => item.content)
        assert.deepStrictEqual(answers, ["first answer", "second answer"])
      }))
  })

  describe("spawn", () => {
    it.effect("runs a child agent in a child context whose parent is the caller's", () =>
      Effect.gen(function*() {
        const harness = yield* AgentHarness.make({
          name: "spawner",
          agentGraph: runCode("root", (_: void, ctx) =>
            ctx.run(spawn("sub", runCode("child", (_: void, child) => Effect.succeed(child.parent?.id === ctx.id))), undefined))
        })
        assert.isTrue((yield* harness.execute(undefined)).output)
      }))

    it.effect("a child agent's ask-user prompt can be answered through the harness while it runs", () =>
      Effect.gen(function*() {
        const harness = yield* AgentHarness.make({
          name: "asker",
          agentGraph: runCode("root", (_: void, ctx) =>
            ctx.run(spawn("sub", runCode("child", (_: void, child) => child.askUser("deploy?"))), undefined))
        })
        const run = yield* Effect.forkChild(harness.execute(undefined, { executionId: "ask" }))
        const childId = "ask/root#0/sub#0"
        let pending: ReadonlyArray<{ readonly id: string }> = []
        for (let i = 0; i < 50 && pending.length === 0; i++) {
          yield* Effect.yieldNow
          pending = Option.match(harness.liveContext(childId), { onNone: () => [], onSome: (ctx) => ctx.pendingAskUser })
        }
        assert.strictEqual(pending.length, 1)
        yield* harness.answerAskUser(childId, pending[0]!.id, "yes")
        assert.deepStrictEqual(yield* Fiber.join(run), { executionId: "ask", output: "yes" })
        assert.isTrue(Option.isNone(harness.liveContext(childId)))
      }))

    it.effect("a resumed child agent gets back the item log of its replayed steps", () =>
      Effect.gen(function*() {
        const storage = yield* makeMemory
        let crash = true
        let notes = 0
        const note = runCode("note", (_: void, child) =>
          Effect.andThen(Effect.sync(() => notes++), Effect.as(child.append([{ type: "note", text: "seen" }]), "noted")))
        const child = runCode("child", (_: void, child) =>
          Effect.gen(function*() {
            yield* child.run(note, undefined)
            if (crash) return yield* Effect.die("crash")
            return child.items.map((item) => item.text)
          }))
        const graph = runCode("root", (_: void, ctx) => ctx.run(spawn("sub", child), undefined))
        const first = yield* durableHarness(storage, { agentGraph: graph })
        yield* Effect.exit(first.execute(undefined, { executionId: "spawned" }))
        crash = false
        const second = yield* durableHarness(storage, { agentGraph: graph })
        const resumed = Option.getOrThrow(yield* second.resume("spawned"))
        // The note step replayed rather than ran; what it appended is still in the child's log.
        assert.strictEqual(notes, 1)
        assert.deepStrictEqual(resumed.output, ["seen"])
      }))

    it.effect("the harness default adapter gets nested runCode and spawn dispatches unless it runs them in place", () =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const inPlace = yield* makeMemorySubprocessAdapter
        // An adapter of the host's own: it records each request and runs it in-process.
        const recording: SubprocessAdapterShape = {
          ...inPlace,
          nestedInProcess: undefined,
          spawn: (request) => Effect.andThen(Effect.sync(() => seen.push(request.stepId)), inPlace.spawn(request))
        }
        const graph = runCode("root", (n: number, ctx) =>
          Effect.flatMap(
            ctx.run(runCode("inc", (x: number) => Effect.succeed(x + 1)), n),
            (x) => ctx.run(spawn("sub", runCode("twice", (y: number) => Effect.succeed(y * 2))), x)
          ))
        const routed = yield* AgentHarness.make({ name: "routed", agentGraph: graph, subprocess: recording })
        assert.strictEqual((yield* routed.execute(1)).output, 4)
        // The root too; the spawn's child is a dispatch inside the spawn, routed as well.
        assert.deepStrictEqual(seen, ["root", "inc", "twice", "twice"])
        seen.length = 0
        const inPlaceHarness = yield* AgentHarness.make({
          name: "in-place",
          agentGraph: graph,
          subprocess: { ...recording, nestedInProcess: true }
        })
        assert.strictEqual((yield* inPlaceHarness.execute(1)).output, 4)
        assert.deepStrictEqual(seen, [])
      }))
  })

  describe("file storage", () => {
    it.effect("crash and resume on file storage replay completed steps", () =>
      Effect.gen(function*() {
        const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-harness-"))
        let runs = 0
        let crash = true
        const graph = runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const a = yield* ctx.run(runCode("a", () => Effect.sync(() => ++runs)), undefined)
            if (crash) return yield* Effect.die("crash")
            return a
          }))
        const first = yield* durableHarness(yield* FileStorage.make({ root }), { agentGraph: graph })
        yield* Effect.exit(first.execute(undefined, { executionId: "file-1" }))
        crash = false
        const second = yield* durableHarness(yield* FileStorage.make({ root }), { agentGraph: graph })
        assert.strictEqual(Option.getOrThrow(yield* second.resume("file-1")).output, 1)
        assert.strictEqual(runs, 1)
        yield* second.clearCheckpoint("file-1")
        assert.isTrue(Option.isNone(yield* second.restore("file-1")))
      }))
  })
})
