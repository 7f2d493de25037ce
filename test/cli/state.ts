/**
 * Real runs that leave state for the CLI to read, on any storage: a finished run with
 * nested and parallel steps, a run that failed midway, a run whose step changed
 * identity at a recorded path (a tombstone), a run past the ledger's retention
 * (evictions), and a durable queue with acked and pending frames.
 */
import { Effect, References } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { inParallel, invokeTool, runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import * as DurableOutboundQueue from "../../src/services/DurableOutboundQueue.ts"
import * as StepLedger from "../../src/services/StepLedger.ts"
import type { StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

const fetchStep = runCode("fetch", (url: string) => Effect.succeed({ url, body: "x".repeat(100) }))
const parseStep = runCode("parse", (page: { readonly body: string }) => Effect.succeed(page.body.length))

/** Root of the finished run: two nested steps and a parallel pair; it appends nothing. */
const pipeline = runCode("pipeline", (url: string, ctx) =>
  Effect.gen(function*() {
    const page = yield* ctx.run(fetchStep, url)
    const length = yield* ctx.run(parseStep, page)
    const both = yield* ctx.run(
      inParallel("both", [runCode("left", () => Effect.succeed("L")), runCode("right", () => Effect.succeed("R"))]),
      undefined
    )
    return { length, both }
  }))

class Boom extends Error {}

/** Root of the failed run: records `first`, appends an item, then fails. */
const failing = runCode("pipeline", (_: void, ctx) =>
  Effect.gen(function*() {
    yield* ctx.run(runCode("first", () => Effect.succeed(1)), undefined)
    yield* ctx.append([{ type: "note", text: "about to fail" }])
    return yield* Effect.die(new Boom("boom"))
  }))

/** First version of a job: `x` is code, then the root fails, so `x` stays recorded. */
const jobV1 = runCode("job", (_: void, ctx) =>
  Effect.andThen(ctx.run(runCode("x", () => Effect.succeed("v1")), undefined), Effect.fail("stop" as const)))

/** Second version: `x` is a tool now (a new identity at the same path), and the root finishes. */
const jobV2 = runCode("job", (_: void, ctx) => ctx.run(invokeTool("x", "echo"), "v2"))

/** A root running five steps, under a ledger that keeps three records. */
const many = runCode("many", (_: void, ctx) =>
  Effect.gen(function*() {
    for (let i = 0; i < 5; i++) yield* ctx.run(runCode(`step${i}`, () => Effect.succeed(i)), undefined)
    return "done"
  }))

const harnessOn = (store: CheckpointStore.CheckpointStoreShape, root: Parameters<typeof AgentHarness.make>[0]["agentGraph"], ledger?: StepLedger.StepLedgerShape) =>
  AgentHarness.make({ name: "cli-state", agentGraph: root, tools: { echo: (input) => Effect.succeed(input) } }).pipe(
    Effect.provideService(CheckpointStore.CheckpointStore, store),
    ledger === undefined ? (effect) => effect : Effect.provideService(StepLedger.StepLedger, ledger)
  )

/** Leaves the executions `done`, `crashed`, `changed` and `evicted`, and the queue `demo-queue`. */
export const recordState = (storage: StorageAdapterShape) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    const done = yield* harnessOn(store, pipeline)
    yield* done.execute("https://example.com", { executionId: "done", threadId: "thread-1" })

    const crashed = yield* harnessOn(store, failing)
    yield* Effect.exit(crashed.execute(undefined, { executionId: "crashed", threadId: "thread-2" }))

    const v1 = yield* harnessOn(store, jobV1)
    yield* Effect.exit(v1.execute(undefined, { executionId: "changed" }))
    const v2 = yield* harnessOn(store, jobV2)
    yield* v2.execute(undefined, { executionId: "changed" })

    const small = yield* StepLedger.makeWith(store, { retention: { maxEntries: 3 } })
    const evicting = yield* harnessOn(store, many, small)
    // Its eviction warning is expected here.
    yield* evicting.execute(undefined, { executionId: "evicted" }).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))

    const queue = yield* DurableOutboundQueue.makeWith(storage, { socketId: "demo-queue" })
    yield* queue.appendAll([JSON.stringify({ type: "item", n: 1 }), JSON.stringify({ type: "item", n: 2 }), JSON.stringify({ type: "item", n: 3 })])
    yield* queue.ackUpTo(1)
    yield* queue.close
  })
