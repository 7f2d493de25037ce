/**
 * Agent streams in one process (docs/agent-streams.md): what a step writes, the final
 * event, replay writes nothing, a re-run attempt adds no duplicate, and the typed
 * refusals (bad name, write after close, too large, reserved shapes, no storage).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { AgentStreamError, streamPath } from "../../src/harness/AgentStreams.ts"
import { runCode, type StepContext } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import * as DurableStreams from "../../src/services/DurableStreams.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const host = (storage: StorageAdapterShape, root: Parameters<typeof AgentHarness.make>[0]["agentGraph"]) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    return yield* AgentHarness.make({ name: "agent-streams", agentGraph: root }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })

/** Every message of the stream, and whether it is closed. */
const contents = (storage: StorageAdapterShape, executionId: string, name = "output") =>
  Effect.gen(function*() {
    const streams = yield* DurableStreams.forStorage(storage)
    const read = yield* streams.read(streamPath(executionId, name), "-1")
    return { messages: read.messages.map((text) => JSON.parse(text)), closed: read.closed }
  })

const writeAll = (ctx: StepContext, chunks: ReadonlyArray<unknown>, name?: string) =>
  Effect.gen(function*() {
    const out = yield* ctx.stream(name)
    for (const chunk of chunks) yield* out.write(chunk as never)
    yield* out.close()
  })

describe("agent streams", () => {
  it.effect("a step's chunks, in order, then the final event; the stream is closed", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const root = runCode("root", (_: null, ctx) =>
        Effect.gen(function*() {
          yield* writeAll(ctx, ["a", { tool: "search" }, [1, 2], new Uint8Array([1, 2, 3])])
          yield* writeAll(ctx, ["side"], "log")
          return "ok"
        }))
      yield* (yield* host(storage, root)).execute(null, { executionId: "plain" })
      const output = yield* contents(storage, "plain")
      assert.deepStrictEqual(output.messages, ["a", { tool: "search" }, [1, 2], { $bytes: "AQID" }, { $end: "succeeded" }])
      assert.isTrue(output.closed)
      assert.deepStrictEqual(yield* contents(storage, "plain", "log"), { messages: ["side", { $end: "succeeded" }], closed: true })
    }))

  it.effect("a failed execution ends its stream with a failed event", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const root = runCode("root", (_: null, ctx) =>
        Effect.andThen(writeAll(ctx, ["x"]), Effect.fail(new Error("the model refused"))))
      const exit = yield* Effect.exit((yield* host(storage, root)).execute(null, { executionId: "failing" }))
      assert.isTrue(Exit.isFailure(exit))
      const output = yield* contents(storage, "failing")
      assert.deepStrictEqual(output.messages, ["x", { $end: "failed", error: "the model refused" }])
      assert.isTrue(output.closed)
    }))

  it.effect("replay writes nothing: a resumed run whose streaming step is in the ledger adds no chunk", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      let firstRuns = 0
      let secondRuns = 0
      const started = yield* Deferred.make<void>()
      const never = yield* Deferred.make<void>()
      // It writes one more chunk each time it runs: a second run would show.
      const first = runCode("first", (_: null, ctx) =>
        Effect.suspend(() => {
          firstRuns++
          return writeAll(ctx, Array.from({ length: firstRuns }, (_, i) => `first ${i + 1}`))
        }))
      const second = runCode("second", (_: null, ctx) =>
        Effect.gen(function*() {
          secondRuns++
          yield* writeAll(ctx, ["second"])
          if (secondRuns === 1) {
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(never)
          }
        }))
      const root = runCode("root", (_: null, ctx) => Effect.andThen(ctx.run(first, null), ctx.run(second, null)))
      const fiber = yield* Effect.forkChild((yield* host(storage, root)).execute(null, { executionId: "replayed" }))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      // Interrupted, not finished: no final event yet.
      assert.deepStrictEqual(yield* contents(storage, "replayed"), { messages: ["first 1", "second"], closed: false })
      yield* (yield* host(storage, root)).resume("replayed")
      assert.strictEqual(firstRuns, 1, "the recorded step replayed")
      assert.strictEqual(secondRuns, 2, "the unrecorded step ran again")
      // The re-run of `second` rewrote chunk 0 of its producer: a duplicate, not stored.
      assert.deepStrictEqual(yield* contents(storage, "replayed"), {
        messages: ["first 1", "second", { $end: "succeeded" }],
        closed: true
      })
    }))

  it.effect("a resume ends the streams the earlier run opened and those it opens itself, listing them once, up front", () =>
    Effect.gen(function*() {
      const memory = yield* makeMemory
      // When the execution's streams are listed: how many times the root had run by then.
      let runs = 0
      const listedAt: Array<number> = []
      const storage: StorageAdapterShape = {
        ...memory,
        list: (prefix) => {
          if (prefix.includes("/executions/resumed/")) listedAt.push(runs)
          return memory.list(prefix)
        }
      }
      const started = yield* Deferred.make<void>()
      const never = yield* Deferred.make<void>()
      const root = runCode("root", (_: null, ctx) =>
        Effect.gen(function*() {
          runs++
          yield* writeAll(ctx, [`output ${runs}`])
          if (runs === 1) {
            yield* Deferred.succeed(started, undefined)
            return yield* Deferred.await(never)
          }
          // Opened by the resumed run only: no listing at its start could find it.
          yield* writeAll(ctx, ["late"], "late")
          return yield* Effect.fail(new Error("gave up"))
        }))
      const fiber = yield* Effect.forkChild((yield* host(storage, root)).execute(null, { executionId: "resumed" }))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      listedAt.length = 0
      const exit = yield* Effect.exit((yield* host(storage, root)).resume("resumed"))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(listedAt, [1], "listed once, with the resume's first reads (before its run), not again at its end")
      const ended = { $end: "failed", error: "gave up" }
      // The re-run's chunk 0 of `output` is a duplicate of the first run's.
      assert.deepStrictEqual(yield* contents(storage, "resumed"), { messages: ["output 1", ended], closed: true })
      assert.deepStrictEqual(yield* contents(storage, "resumed", "late"), { messages: ["late", ended], closed: true })
    }))

  it.effect("bad input: a typed error, nothing written", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const errors: Array<AgentStreamError> = []
      const attempt = (effect: Effect.Effect<unknown, AgentStreamError>) =>
        Effect.catch(effect, (error) => Effect.sync(() => void errors.push(error)))
      const root = runCode("root", (_: null, ctx) =>
        Effect.gen(function*() {
          for (const name of ["a/b", "..", "a\0b", "x".repeat(201), ""]) yield* attempt(ctx.stream(name))
          const out = yield* ctx.stream()
          yield* attempt(out.write({ $end: "succeeded" }))
          yield* attempt(out.write("y".repeat(16 * 1024 * 1024 + 1)))
          yield* out.write("kept")
          yield* out.close()
          yield* attempt(out.write("after close"))
        }))
      yield* (yield* host(storage, root)).execute(null, { executionId: "bad" })
      assert.deepStrictEqual(errors.map((error) => error.reason), [
        "InvalidName",
        "InvalidName",
        "InvalidName",
        "InvalidName",
        "InvalidName",
        "InvalidChunk",
        "TooLarge",
        "Closed"
      ])
      assert.isTrue(errors.every((error) => error instanceof AgentStreamError))
      assert.deepStrictEqual((yield* contents(storage, "bad")).messages, ["kept", { $end: "succeeded" }])
      const keys = yield* storage.list("durable-streams/p/")
      assert.deepStrictEqual(keys, ["durable-streams/p//executions/bad/output"])
    }))

  it.effect("a harness without durable storage refuses with Unsupported", () =>
    Effect.gen(function*() {
      const root = runCode("root", (_: null, ctx) => Effect.flip(ctx.stream()))
      const harness = yield* AgentHarness.make({ name: "no-storage", agentGraph: root })
      const { output } = yield* harness.execute(null)
      assert.strictEqual((output as AgentStreamError).reason, "Unsupported")
    }))
})
