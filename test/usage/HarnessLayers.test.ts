/**
 * A user's program: layers composed once at the edge, a durable harness on file
 * storage with a scripted model, a crash, and a resume that replays.
 */
import { assert, describe, expectTypeOf, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import type { AiError, LanguageModel } from "effect/ai"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  AgentHarness,
  callModel,
  CheckpointSchemaMismatch,
  CheckpointStore,
  type EmptyStepId,
  type ExecutionLeaseHeld,
  FileStorage,
  inParallel,
  runCode,
  StepLedger,
  type StepLedgerRetentionInvalid,
  StorageAdapter,
  type StorageError
} from "../../src/index.ts"
import { crashOnTick, isHostCrash, ScriptedModel } from "../../src/testing/index.ts"

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-usage-"))

const Durable = StepLedger.layer({ retention: { maxEntries: 100 } }).pipe(
  Layer.provideMerge(CheckpointStore.layer),
  Layer.provideMerge(FileStorage.layer({ root }))
)

describe("usage: a durable harness composed from layers", () => {
  layer(Layer.merge(Durable, ScriptedModel.layer(["first answer", "second answer"])))((it) => {
    it.effect("execute, crash, resume: completed steps replay", () =>
      Effect.gen(function*() {
        const crash = crashOnTick(1)
        let plans = 0
        const agent = runCode("agent", (topic: string, ctx) =>
          Effect.gen(function*() {
            const plan = yield* ctx.run(runCode("plan", (t: string) => Effect.sync(() => `survey ${t} ${++plans}`)), topic)
            expectTypeOf(plan).toEqualTypeOf<string>()
            const answer = yield* ctx.run(callModel("ask"), plan)
            yield* crash.tick
            return { plan, answer: answer.text }
          }))
        const harness = yield* AgentHarness.make({ name: "usage", agentGraph: agent })
        const program = harness.execute("rl", { executionId: "usage-1" })
        expectTypeOf(program).toEqualTypeOf<
          Effect.Effect<
            AgentHarness.ExecuteResult<{ plan: string; answer: string }>,
            | AiError.AiError
            | EmptyStepId
            | StorageError
            | import("../../src/index.ts").NoStepConfigured
            | CheckpointSchemaMismatch
            | import("../../src/index.ts").ItemSchemas.ItemSchemaMismatch
            | import("../../src/index.ts").HarnessError.ReplayDiverged
            | import("../../src/index.ts").HarnessError.ToolOutcomeUnknown
            | AgentHarness.LeaseError,
            LanguageModel.LanguageModel
          >
        >()
        const first = yield* Effect.exit(program)
        assert.isTrue(isHostCrash(first))
        const resumed = yield* harness.resume("usage-1")
        assert.isTrue(Option.isSome(resumed))
        assert.deepStrictEqual(Option.getOrThrow(resumed).output, { plan: "survey rl 1", answer: "first answer" })
        assert.strictEqual(plans, 1)
      }))

    it.effect("a harness without callModel needs no LanguageModel", () =>
      Effect.gen(function*() {
        const harness = yield* AgentHarness.make({
          name: "pure",
          agentGraph: inParallel("both", [
            runCode("a", (n: number) => Effect.succeed(n + 1)),
            runCode("b", (n: number) => Effect.succeed(String(n)))
          ])
        })
        const run = harness.execute(1)
        expectTypeOf<Effect.Services<typeof run>>().toEqualTypeOf<never>()
        const { output } = yield* run
        expectTypeOf(output).toEqualTypeOf<[number, string]>()
        assert.deepStrictEqual(output, [2, "1"])
      }))

    it.effect("a record of another schema version is a CheckpointSchemaMismatch a user can catch", () =>
      Effect.gen(function*() {
        const storage = yield* StorageAdapter.StorageAdapter
        yield* storage.set("execution:old-1:snapshot", { schemaVersion: 1, executionId: "old-1" })
        const harness = yield* AgentHarness.make({
          name: "old",
          agentGraph: runCode("root", (n: number) => Effect.succeed(n))
        })
        const caught = yield* harness.resume("old-1").pipe(
          Effect.map(() => "resumed"),
          Effect.catchTag("CheckpointSchemaMismatch", (e) => Effect.succeed(`mismatch ${String(e.seenVersion)}`))
        )
        assert.strictEqual(caught, "mismatch 1")
        const store = yield* CheckpointStore.CheckpointStore
        const loaded = yield* store.load("old-1").pipe(
          Effect.catchTag("CheckpointSchemaMismatch", (e) => Effect.succeed(e.code))
        )
        assert.strictEqual(loaded, "CHECKPOINT_SCHEMA_MISMATCH")
      }))
  })

  it.effect("StepLedger.layer fails to build on a bad cap, with StepLedgerRetentionInvalid", () =>
    Effect.gen(function*() {
      const bad = StepLedger.layer({ retention: { maxEntries: 0 } }).pipe(Layer.provide(CheckpointStore.layerMemory))
      expectTypeOf(bad).toEqualTypeOf<Layer.Layer<StepLedger.StepLedger, StepLedgerRetentionInvalid>>()
      const error = yield* Effect.flip(Effect.asVoid(Layer.build(bad)))
      assert.strictEqual(error.code, "STEP_LEDGER_RETENTION_INVALID")
      assert.strictEqual(error.field, "maxEntries")
    }))

  it.effect("a lease held by another host is ExecutionLeaseHeld", () =>
    Effect.gen(function*() {
      const makeHost = (owner: string) =>
        AgentHarness.make({
          name: "leased",
          agentGraph: runCode("root", (_: void) => Effect.never),
          lease: { owner, ttl: "10 seconds" }
        })
      const a = yield* makeHost("a")
      const b = yield* makeHost("b")
      yield* Effect.forkChild(a.execute(undefined, { executionId: "leased-1" }))
      yield* Effect.yieldNow
      const exit = yield* Effect.exit(
        b.execute(undefined, { executionId: "leased-1" }).pipe(Effect.timeout("2 seconds"))
      )
      assert.isTrue(Exit.isFailure(exit))
      const held = yield* Effect.flip(b.execute(undefined, { executionId: "leased-1" })).pipe(
        Effect.flatMap((e) => e._tag === "ExecutionLeaseHeld" ? Effect.succeed(e) : Effect.die(e))
      )
      expectTypeOf(held).toEqualTypeOf<ExecutionLeaseHeld>()
    }).pipe(Effect.provide(CheckpointStore.layerMemory)))
})
