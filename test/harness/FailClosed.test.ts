/**
 * Fail closed (docs/durability.md#failing-closed), in the Effect API: an at-most-once body
 * runs again only on an explicit `Reconciled.rerun`, is never retried, and a failed
 * ledger write is visible (a warning naming the execution, a `recordFailed` count the
 * CLI reads) or, under `stepLedgerDurability: "strict"`, stops the run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Logger, Option, Scope } from "effect"
import { readLedger } from "../../src/cli/Executions.ts"
import { StepConfigInvalid } from "../../src/Errors.ts"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { invokeTool, Reconciled, runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import * as StepLedger from "../../src/services/StepLedger.ts"
import { FaultyStorage } from "../../src/testing/index.ts"

type Graph = Parameters<typeof AgentHarness.make>[0]["agentGraph"]

/** A durable harness over `storage`: a fresh one per call is a restarted host. */
const harnessOver = (storage: StorageAdapterShape, graph: Graph, options: { strict?: boolean } = {}) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
    AgentHarness.make({
      name: "failclosed",
      agentGraph: graph,
      ...(options.strict === true ? { stepLedgerDurability: "strict" as const } : {})
    }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store)))

/** Runs `effect` with its warnings captured into `warnings`. */
const capturingWarnings = (warnings: Array<string>) =>
  Effect.provide(Logger.layer([
    Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
    })
  ]))

describe("at-most-once: only an explicit Reconciled.rerun runs the body again", () => {
  /**
   * A payment whose first run dies in its body after the intent landed; `answer` is
   * what each resume's reconcile answers (a function of the resume's number).
   */
  const crashedPayment = (executionId: string) =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const counts = { body: 0, reconcile: 0 }
      let crash = true
      let answer: () => Effect.Effect<unknown, unknown> = () => Effect.succeed(Reconciled.rerun)
      const graph = invokeTool({
        id: "pay",
        effects: "at-most-once",
        tool: {
          execute: (amount: number) =>
            Effect.suspend(() => {
              counts.body++
              return crash ? Effect.die("host crashed mid-payment") : Effect.succeed(`paid ${amount}`)
            })
        },
        reconcile: () => Effect.suspend(() => (counts.reconcile++, answer())) as never
      })
      yield* Effect.exit((yield* harnessOver(storage, graph)).execute(42, { executionId }))
      crash = false
      return {
        counts,
        storage,
        graph,
        answerWith: (next: () => Effect.Effect<unknown, unknown>) => void (answer = next),
        resume: Effect.flatMap(harnessOver(storage, graph), (host) => host.resume(executionId))
      }
    })

  it.effect("a plain object (the output itself) is ReconcileAnswerInvalid naming the execution and path; the body does not run", () =>
    Effect.gen(function*() {
      const run = yield* crashedPayment("plain-1")
      assert.strictEqual(run.counts.body, 1)
      run.answerWith(() => Effect.succeed({ receipt: "paid 42" }))
      const error = yield* Effect.flip(run.resume)
      assert.strictEqual(error._tag, "ReconcileAnswerInvalid")
      if (error._tag !== "ReconcileAnswerInvalid") return
      assert.strictEqual(error.executionId, "plain-1")
      assert.strictEqual(error.path, "/pay#0")
      assert.include(error.message, "plain-1")
      assert.include(error.message, "/pay#0")
      assert.deepStrictEqual(run.counts, { body: 1, reconcile: 1 })

      // A hand-made { _tag: "Rerun" } is not Reconciled.rerun either.
      run.answerWith(() => Effect.succeed({ _tag: "Rerun" }))
      assert.strictEqual((yield* Effect.flip(run.resume))._tag, "ReconcileAnswerInvalid")
      assert.deepStrictEqual(run.counts, { body: 1, reconcile: 2 })

      // The intent stayed: a reconcile that answers properly is asked again, and its answer recorded.
      run.answerWith(() => Effect.succeed(Reconciled.completed("found payment of 42")))
      const resumed = yield* run.resume
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("found payment of 42"))
      assert.deepStrictEqual(run.counts, { body: 1, reconcile: 3 })
    }))

  it.effect("a reconcile that fails fails the step with its error; the intent stays and nothing runs", () =>
    Effect.gen(function*() {
      const run = yield* crashedPayment("throws-1")
      run.answerWith(() => Effect.fail("payment provider unreachable"))
      const error = yield* Effect.flip(run.resume)
      assert.strictEqual(error as unknown, "payment provider unreachable")
      assert.deepStrictEqual(run.counts, { body: 1, reconcile: 1 })
      // Still pending: the next resume asks again, and an explicit rerun runs the body.
      run.answerWith(() => Effect.succeed(Reconciled.rerun))
      const resumed = yield* run.resume
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("paid 42"))
      assert.deepStrictEqual(run.counts, { body: 2, reconcile: 2 })
    }))

  it.effect("a reconcile answering after the harness closed is HarnessClosed and records nothing", () =>
    Effect.gen(function*() {
      const run = yield* crashedPayment("closed-1")
      const release = yield* Deferred.make<void>()
      const asked = yield* Deferred.make<void>()
      run.answerWith(() =>
        Effect.andThen(
          Effect.andThen(Deferred.succeed(asked, undefined), Deferred.await(release)),
          Effect.succeed(Reconciled.completed("found payment of 42"))
        )
      )
      const scope = yield* Scope.make()
      const host = yield* harnessOver(run.storage, run.graph).pipe(Scope.provide(scope))
      const resuming = yield* Effect.forkDetach(host.resume("closed-1"))
      yield* Deferred.await(asked)
      yield* Scope.close(scope, Exit.void)
      yield* Deferred.succeed(release, undefined)
      const exit = yield* Fiber.await(resuming)
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
      assert.strictEqual((error as { _tag?: string })?._tag, "HarnessClosed")
      // Nothing recorded: a new host asks reconcile again.
      run.answerWith(() => Effect.succeed(Reconciled.completed("found it later")))
      const resumed = yield* run.resume
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("found it later"))
      assert.deepStrictEqual(run.counts, { body: 1, reconcile: 2 })
    }))
})

describe("at-most-once with retry", () => {
  it("is refused when the step is built: StepConfigInvalid AT_MOST_ONCE_RETRY_CONFLICT", () => {
    let thrown: unknown
    try {
      runCode({
        id: "charge",
        effects: "at-most-once",
        retry: { maxAttempts: 3, backoff: "fixed", initialDelay: 0 },
        execute: () => Effect.succeed("charged")
      })
    } catch (error) {
      thrown = error
    }
    assert.instanceOf(thrown, StepConfigInvalid)
    assert.strictEqual((thrown as StepConfigInvalid).code, "AT_MOST_ONCE_RETRY_CONFLICT")
    assert.include((thrown as StepConfigInvalid).message, "at-most-once")
    // One attempt is no retry; retry without at-most-once is as before.
    runCode({ id: "once", effects: "at-most-once", retry: { maxAttempts: 1, backoff: "fixed", initialDelay: 0 }, execute: () => Effect.void })
    runCode({ id: "again", retry: { maxAttempts: 3, backoff: "fixed", initialDelay: 0 }, execute: () => Effect.void })
  })
})

describe("ledger write failures", () => {
  /** Storage on which every step record (and tombstone, and intent) fails, as a full disk fails it. */
  const fullLedger = (storage: StorageAdapterShape) =>
    FaultyStorage.make(storage, { failWrite: (key) => /:ledger:\d{16}$/.test(key) })

  const graph = (ran: Array<string>) =>
    runCode("root", (_: void, ctx) =>
      Effect.gen(function*() {
        const a = yield* ctx.run(runCode("a", () => Effect.sync(() => (ran.push("a"), 1))), undefined)
        return yield* ctx.run(runCode("b", (n: number) => Effect.sync(() => (ran.push("b"), n + 1))), a)
      }))

  it.effect("best-effort (default): the run goes on, a warning names the execution, recordFailed counts and the CLI shows it", () =>
    Effect.gen(function*() {
      const disk = yield* makeMemory
      const faulty = fullLedger(disk)
      const store = yield* CheckpointStore.makeWith(faulty.storage)
      const ledger = yield* StepLedger.makeWith(store)
      const ran: Array<string> = []
      const host = yield* AgentHarness.make({ name: "failclosed", agentGraph: graph(ran) }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store),
        Effect.provideService(StepLedger.StepLedger, ledger)
      )
      const warnings: Array<string> = []
      const result = yield* host.execute(undefined, { executionId: "full-1" }).pipe(capturingWarnings(warnings))
      assert.strictEqual(result.output, 2)
      assert.deepStrictEqual(ran, ["a", "b"])
      const failed = warnings.filter((w) => w.includes("failed"))
      assert.isAtLeast(failed.length, 3)
      assert.isTrue(failed.every((w) => w.includes("\"full-1\"")), failed.join("\n"))
      assert.strictEqual((yield* ledger.stats).recordFailed, 3)
      const opened = yield* ledger.open("full-1")
      assert.strictEqual((yield* opened.stats).recordFailed, 3)
      // The count is stored beside the ledger: `executions show` reads it.
      const { view } = yield* readLedger(disk, "full-1")
      assert.strictEqual(view.recordFailed, 3)
      // A later host that runs the execution again (nothing replays) adds to it.
      yield* (yield* harnessOver(faulty.storage, graph(ran))).execute(undefined, { executionId: "full-1" }).pipe(
        capturingWarnings([])
      )
      assert.strictEqual((yield* readLedger(disk, "full-1")).view.recordFailed, 6)
      // Clearing the execution removes the count with the ledger.
      yield* store.clear("full-1")
      assert.deepStrictEqual(yield* disk.list("execution:full-1:"), [])
    }))

  it.effect("strict: the step fails with StepLedgerWriteFailed and nothing downstream runs", () =>
    Effect.gen(function*() {
      const faulty = fullLedger(yield* makeMemory)
      const ran: Array<string> = []
      const host = yield* harnessOver(faulty.storage, graph(ran), { strict: true })
      const error = yield* Effect.flip(host.execute(undefined, { executionId: "strict-1" }))
      assert.strictEqual(error._tag, "StepLedgerWriteFailed")
      if (error._tag !== "StepLedgerWriteFailed") return
      assert.strictEqual(error.executionId, "strict-1")
      assert.strictEqual(error.path, "/root#0/a#0")
      assert.include(error.message, "strict-1")
      assert.deepStrictEqual(ran, ["a"])
    }))

  it.effect("an unknown stepLedgerDurability is refused when the harness is built", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        AgentHarness.make({ name: "x", stepLedgerDurability: "strct" as never })
      )
      assert.strictEqual(error._tag, "StepLedgerDurabilityInvalid")
    }))
})
