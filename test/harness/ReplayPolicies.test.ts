import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Option, Tracer } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { invokeTool, Reconciled, runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

/** A durable harness over `storage`: a fresh one per call is a restarted host. */
const durableHarness = <const G extends Parameters<typeof AgentHarness.make>[0]["agentGraph"]>(
  storage: StorageAdapterShape,
  options: Omit<AgentHarness.AgentHarnessOptions<G>, "name">
) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    return yield* AgentHarness.make<G>({ name: "policies", ...options }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })

/**
 * A first host runs `executionId` until it dies; its exit is dropped, as a crashed
 * host's would be. Every graph of this file takes no input.
 */
const crashedRun = <const G extends Parameters<typeof AgentHarness.make>[0]["agentGraph"]>(
  storage: StorageAdapterShape,
  options: Omit<AgentHarness.AgentHarnessOptions<G>, "name">,
  executionId: string
) => Effect.flatMap(durableHarness(storage, options), (host) => Effect.exit(host.execute(undefined as never, { executionId })))

/** A restarted host with `options` resumes `executionId`. */
const resumedOn = <const G extends Parameters<typeof AgentHarness.make>[0]["agentGraph"]>(
  storage: StorageAdapterShape,
  options: Omit<AgentHarness.AgentHarnessOptions<G>, "name">,
  executionId: string
) => Effect.flatMap(durableHarness(storage, options), (host) => host.resume(executionId))

/** Runs `effect` with its warnings captured into `warnings`. */
const capturingWarnings = (warnings: Array<string>) =>
  Effect.provide(Logger.layer([
    Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
    })
  ]))

/** A tracer that keeps every span it starts. */
const capturingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

describe("divergence policy", () => {
  const recordedRun = (storage: StorageAdapterShape, executionId: string) =>
    Effect.gen(function*() {
      // First host: "fetch" completes, then the host dies in "write".
      const harness = yield* durableHarness(storage, {
        agentGraph: runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            yield* ctx.run(runCode("fetch", () => Effect.succeed("v1")), undefined)
            return yield* ctx.run(runCode("write", () => Effect.die("host crashed")), undefined)
          }))
      })
      yield* Effect.exit(harness.execute(undefined, { executionId }))
    })

  it.effect("'fail': a renamed step at a recorded path fails with ReplayDiverged naming the path, discarding nothing", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      yield* recordedRun(storage, "div-1")
      // The same path with another identity: the runCode "fetch" became an invokeTool "fetch".
      const counts = { load: 0 }
      const harness = yield* durableHarness(storage, {
        onDivergence: "fail",
        agentGraph: runCode("root", (_: void, ctx) =>
          ctx.run(invokeTool({ id: "fetch", tool: { execute: () => Effect.sync(() => ++counts.load) } }), undefined))
      })
      const error = yield* Effect.flip(harness.resume("div-1"))
      assert.strictEqual(error._tag, "ReplayDiverged")
      if (error._tag !== "ReplayDiverged") return
      assert.strictEqual(error.path, "/root#0/fetch#0")
      assert.deepStrictEqual(error.recorded, { stepId: "fetch", kind: "runCode" })
      assert.deepStrictEqual(error.current, { stepId: "fetch", kind: "invokeTool" })
      assert.include(error.message, "/root#0/fetch#0")
      assert.strictEqual(counts.load, 0)
      // Nothing was discarded: the original workflow still replays its recorded step.
      let fetched = 0
      const original = yield* durableHarness(storage, {
        onDivergence: "fail",
        agentGraph: runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const v = yield* ctx.run(runCode("fetch", () => Effect.sync(() => `ran ${++fetched}`)), undefined)
            yield* ctx.run(runCode("write", () => Effect.void), undefined)
            return v
          }))
      })
      const resumed = yield* original.resume("div-1")
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("v1"))
      assert.strictEqual(fetched, 0)
    }))

  it.effect("default: the changed step runs fresh, with one warning naming the path and both identities", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      yield* recordedRun(storage, "div-2")
      const warnings: Array<string> = []
      const counts = { load: 0 }
      // "fetch" changed kind at the same path.
      const harness = yield* durableHarness(storage, {
        agentGraph: runCode("root", (_: void, ctx) =>
          Effect.gen(function*() {
            const out = yield* ctx.run(
              invokeTool({ id: "fetch", tool: { execute: () => Effect.sync(() => `tool ${++counts.load}`) } }),
              undefined
            )
            yield* ctx.run(runCode("write", () => Effect.void), undefined)
            return out
          }))
      })
      const resumed = yield* harness.resume("div-2").pipe(capturingWarnings(warnings))
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("tool 1"))
      const divergence = warnings.filter((w) => w.includes("diverged"))
      assert.strictEqual(divergence.length, 1)
      assert.include(divergence[0]!, "/root#0/fetch#0")
      assert.include(divergence[0]!, "runCode \"fetch\"")
      assert.include(divergence[0]!, "invokeTool \"fetch\"")
      // The fresh output is what is recorded now: a second resume replays it without a warning.
      const again: Array<string> = []
      const second = yield* harness.execute(undefined, { executionId: "div-2" }).pipe(capturingWarnings(again))
      assert.strictEqual(second.output, "tool 1")
      assert.strictEqual(counts.load, 1)
      assert.isFalse(again.some((w) => w.includes("diverged")))
    }))
})

describe("divergence: a renamed step", () => {
  const original = (written: { count: number }) =>
    runCode("root", (_: void, ctx) =>
      Effect.gen(function*() {
        const data = yield* ctx.run(runCode("fetch", () => Effect.succeed("recorded data")), undefined)
        return yield* ctx.run(runCode("write", (d: string) => Effect.suspend(() => {
          written.count++
          return written.count === 1 ? Effect.die("host crashed") : Effect.succeed(`wrote ${d}`)
        })), data)
      }))
  const renamed = (fetched: { count: number }) =>
    runCode("root", (_: void, ctx) =>
      Effect.gen(function*() {
        const data = yield* ctx.run(runCode("load", () => Effect.sync(() => `fresh data ${++fetched.count}`)), undefined)
        return yield* ctx.run(runCode("write", (d: string) => Effect.succeed(`wrote ${d}`)), data)
      }))

  it.effect("'fail': ReplayDiverged names the recorded path, the new one and both identities", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      yield* crashedRun(storage, { agentGraph: original({ count: 0 }) }, "rename-1")
      const fetched = { count: 0 }
      const edited = yield* durableHarness(storage, { onDivergence: "fail", agentGraph: renamed(fetched) })
      const error = yield* Effect.flip(edited.resume("rename-1"))
      assert.strictEqual(error._tag, "ReplayDiverged")
      if (error._tag !== "ReplayDiverged") return
      assert.strictEqual(error.path, "/root#0/fetch#0")
      assert.strictEqual(error.currentPath, "/root#0/load#0")
      assert.deepStrictEqual(error.recorded, { stepId: "fetch", kind: "runCode" })
      assert.deepStrictEqual(error.current, { stepId: "load", kind: "runCode" })
      assert.strictEqual(fetched.count, 0)
    }))

  it.effect("default: the renamed step runs fresh with one warning, and the rest of the run goes on", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      yield* crashedRun(storage, { agentGraph: original({ count: 0 }) }, "rename-2")
      const fetched = { count: 0 }
      const warnings: Array<string> = []
      const resumed = yield* resumedOn(storage, { agentGraph: renamed(fetched) }, "rename-2").pipe(capturingWarnings(warnings))
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("wrote fresh data 1"))
      const divergence = warnings.filter((w) => w.includes("diverged"))
      assert.strictEqual(divergence.length, 1)
      assert.include(divergence[0]!, "/root#0/fetch#0")
      assert.include(divergence[0]!, "runCode \"fetch\"")
      assert.include(divergence[0]!, "runCode \"load\"")
    }))

  it.effect("an unchanged workflow resumes without a divergence, concurrent children included", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      let crash = true
      const runs: Record<string, number> = {}
      const count = (id: string) => Effect.sync(() => (runs[id] = (runs[id] ?? 0) + 1))
      const graph = runCode("root", (_: void, ctx) =>
        Effect.gen(function*() {
          const [a, b] = yield* Effect.all([
            ctx.run(runCode("a", () => Effect.as(count("a"), 1)), undefined),
            ctx.run(runCode("b", () => Effect.andThen(count("b"), crash ? Effect.die("host crashed") : Effect.succeed(2))), undefined)
          ], { concurrency: "unbounded" })
          return (a as number) + (b as number)
        }))
      yield* crashedRun(storage, { agentGraph: graph, onDivergence: "fail" }, "same")
      crash = false
      const resumed = yield* resumedOn(storage, { agentGraph: graph, onDivergence: "fail" }, "same")
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some(3))
      assert.deepStrictEqual(runs, { a: 1, b: 2 })
    }))
})

describe("divergence: no false alarms", () => {
  it.effect("a child that failed (caught by its parent) leaves no gap that looks like a rename", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      let crash = true
      const runs: Record<string, number> = {}
      const count = (id: string) => Effect.sync(() => (runs[id] = (runs[id] ?? 0) + 1))
      const graph = runCode("root", (_: void, ctx) =>
        Effect.gen(function*() {
          yield* ctx.run(runCode("a", () => Effect.as(count("a"), "a")), undefined)
          // "flaky" fails on the first run only; the parent carries on without it.
          yield* Effect.ignore(ctx.run(runCode("flaky", () => Effect.andThen(count("flaky"), Effect.suspend(() => runs.flaky === 1 ? Effect.fail("no") : Effect.succeed("ok")))), undefined))
          yield* ctx.run(runCode("b", () => Effect.as(count("b"), "b")), undefined)
          if (crash) return yield* Effect.die("host crashed")
          return "done"
        }))
      yield* crashedRun(storage, { agentGraph: graph, onDivergence: "fail" }, "gap")
      crash = false
      const resumed = yield* resumedOn(storage, { agentGraph: graph, onDivergence: "fail" }, "gap")
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("done"))
      // "flaky" runs again (it never completed); "a" and "b" replay.
      assert.deepStrictEqual(runs, { a: 1, flaky: 2, b: 1 })
    }))
})

describe("replay-aware tracing", () => {
  it.effect("a crashed run resumed shows replay hit on its completed steps and miss on the rest", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      let crash = true
      const graph = runCode("root", (_: void, ctx) =>
        Effect.gen(function*() {
          const a = yield* ctx.run(runCode("a", () => Effect.succeed(1)), undefined)
          const b = yield* ctx.run(invokeTool({ id: "b", tool: { execute: (n: number) => Effect.succeed(n + 1) } }), a)
          const c = yield* ctx.run(runCode("c", (n: number) => crash ? Effect.die("host crashed") : Effect.succeed(n * 10)), b as number)
          return yield* ctx.run(runCode("d", (n: number) => Effect.succeed(n + 1)), c)
        }))
      const first = capturingTracer()
      const harness = yield* durableHarness(storage, { agentGraph: graph })
      yield* Effect.exit(harness.execute(undefined, { executionId: "traced" }).pipe(Effect.withTracer(first.tracer)))
      const firstSteps = first.spans.filter((span) => span.attributes.has("replay"))
      assert.deepStrictEqual(
        firstSteps.map((span) => [span.name, span.attributes.get("replay")]),
        [["runCode root", "miss"], ["runCode a", "miss"], ["invokeTool b", "miss"], ["runCode c", "miss"]]
      )

      crash = false
      const second = capturingTracer()
      const resumed = yield* resumedOn(storage, { agentGraph: graph }, "traced").pipe(Effect.withTracer(second.tracer))
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some(21))
      const steps = second.spans.filter((span) => span.attributes.has("replay"))
      assert.deepStrictEqual(
        steps.map((span) => [span.name, span.attributes.get("replay"), span.attributes.get("path")]),
        [
          ["runCode root", "miss", "/root#0"],
          ["runCode a", "hit", "/root#0/a#0"],
          ["invokeTool b", "hit", "/root#0/b#0"],
          ["runCode c", "miss", "/root#0/c#0"],
          ["runCode d", "miss", "/root#0/d#0"]
        ]
      )
      for (const span of steps) assert.strictEqual(span.attributes.get("executionId"), "traced")
      // Step spans sit under the resume span; the ledger's own spans under the step.
      const resume = second.spans.find((span) => span.name === "AgentHarness.resume")
      assert.isDefined(resume)
      const root = steps[0]!
      assert.strictEqual(Option.getOrUndefined(root.parent)?.spanId !== undefined, true)
      const ancestors = (span: Tracer.AnySpan): Array<string> => {
        const names: Array<string> = []
        let parent: Option.Option<Tracer.AnySpan> = span._tag === "Span" ? span.parent : Option.none()
        while (Option.isSome(parent)) {
          const id = parent.value.spanId
          const found = second.spans.find((s) => s.spanId === id)
          if (found === undefined) break
          names.push(found.name)
          parent = found.parent
        }
        return names
      }
      assert.deepStrictEqual(ancestors(steps[1]!).slice(0, 1), ["runCode root"])
      assert.include(ancestors(root), "AgentHarness.resume")
      const record = second.spans.find((span) => span.name === "StepLedger.record")
      assert.isDefined(record)
      assert.isTrue(ancestors(record!)[0]!.startsWith("runCode "))
      for (const name of ["AgentHarness.restore", "AgentHarness.checkpoint"]) {
        assert.isTrue(second.spans.some((span) => span.name === name), name)
      }
      assert.isTrue(first.spans.some((span) => span.name === "AgentHarness.execute"))
    }))
})

describe("at-most-once steps", () => {
  /** A graph whose "pay" step is at-most-once; `crash` says where the first host dies. */
  const paying = (
    counts: { body: number; reconcile: number; after: number },
    crash: { inBody: boolean; beforeIntent: boolean },
    reconcile?: "completed" | "rerun"
  ) =>
    runCode("root", (_: void, ctx) =>
      Effect.gen(function*() {
        yield* ctx.run(runCode("prepare", () => crash.beforeIntent ? Effect.die("host crashed") : Effect.succeed("ready")), undefined)
        const receipt = yield* ctx.run(
          invokeTool({
            id: "pay",
            effects: "at-most-once",
            tool: {
              execute: (amount: number) =>
                Effect.suspend(() => {
                  counts.body++
                  return crash.inBody ? Effect.die("host crashed mid-payment") : Effect.succeed(`paid ${amount}`)
                })
            },
            ...(reconcile === undefined ? {} : {
              reconcile: (amount: number) =>
                Effect.sync(() => {
                  counts.reconcile++
                  return reconcile === "completed" ? Reconciled.completed(`found payment of ${amount}`) : Reconciled.rerun
                })
            })
          }),
          42
        )
        counts.after++
        return receipt
      }))

  /**
   * A first host runs a payment of 42 as `executionId` and dies where `crashAt` says;
   * the restarted host's graph is the same, and dies nowhere.
   */
  const crashedPayment = (executionId: string, crashAt: "inBody" | "beforeIntent", reconcile?: "completed" | "rerun") =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const counts = { body: 0, reconcile: 0, after: 0 }
      const crash = { inBody: crashAt === "inBody", beforeIntent: crashAt === "beforeIntent" }
      const graph = paying(counts, crash, reconcile)
      yield* crashedRun(storage, { agentGraph: graph }, executionId)
      const bodiesBeforeCrash = counts.body
      crash.inBody = false
      crash.beforeIntent = false
      return { storage, counts, graph, bodiesBeforeCrash, resume: resumedOn(storage, { agentGraph: graph }, executionId) }
    })

  it.effect("a crash inside the body after the intent: resume calls reconcile once and never the body", () =>
    Effect.gen(function*() {
      const { bodiesBeforeCrash, counts, graph, resume, storage } = yield* crashedPayment("pay-1", "inBody", "completed")
      assert.strictEqual(bodiesBeforeCrash, 1)
      const resumed = yield* resume
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("found payment of 42"))
      assert.deepStrictEqual(counts, { body: 1, reconcile: 1, after: 1 })
      // The reconciled output is recorded: running the execution again replays it, asking nobody.
      const third = yield* durableHarness(storage, { agentGraph: graph })
      const again = yield* third.execute(undefined, { executionId: "pay-1" })
      assert.strictEqual(again.output, "found payment of 42")
      assert.deepStrictEqual(counts, { body: 1, reconcile: 1, after: 1 })
    }))

  it.effect("reconcile may say the body never took effect: it runs once more", () =>
    Effect.gen(function*() {
      const { counts, resume } = yield* crashedPayment("pay-2", "inBody", "rerun")
      const resumed = yield* resume
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("paid 42"))
      assert.deepStrictEqual(counts, { body: 2, reconcile: 1, after: 1 })
    }))

  it.effect("without reconcile the resume fails with ToolOutcomeUnknown naming the path, and the body is not called", () =>
    Effect.gen(function*() {
      const { counts, resume } = yield* crashedPayment("pay-3", "inBody")
      const error = yield* Effect.flip(resume)
      assert.strictEqual(error._tag, "ToolOutcomeUnknown")
      if (error._tag !== "ToolOutcomeUnknown") return
      assert.strictEqual(error.path, "/root#0/pay#0")
      assert.deepStrictEqual(error.step, { stepId: "pay", kind: "invokeTool" })
      assert.include(error.message, "/root#0/pay#0")
      assert.deepStrictEqual(counts, { body: 1, reconcile: 0, after: 0 })
    }))

  it.effect("a crash before the intent is recorded: the body runs on resume (reconcile is not asked)", () =>
    Effect.gen(function*() {
      const { bodiesBeforeCrash, counts, resume } = yield* crashedPayment("pay-4", "beforeIntent", "completed")
      assert.strictEqual(bodiesBeforeCrash, 0)
      const resumed = yield* resume
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("paid 42"))
      assert.deepStrictEqual(counts, { body: 1, reconcile: 0, after: 1 })
    }))

  it.effect("the default at-least-once runs a body cut short again, as the seed does; runCode takes effects too", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      let bodies = 0
      let crash = true
      const graph = (effects?: "at-most-once") =>
        runCode("root", (_: void, ctx) =>
          ctx.run(
            runCode({
              id: "send",
              ...(effects === undefined ? {} : { effects }),
              execute: () =>
                Effect.suspend(() => {
                  bodies++
                  return crash ? Effect.die("host crashed") : Effect.succeed("sent")
                })
            }),
            undefined
          ))
      yield* crashedRun(storage, { agentGraph: graph() }, "send-1")
      crash = false
      const resumed = yield* resumedOn(storage, { agentGraph: graph() }, "send-1")
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("sent"))
      assert.strictEqual(bodies, 2)

      crash = true
      bodies = 0
      const once = yield* durableHarness(storage, { agentGraph: graph("at-most-once") })
      yield* Effect.exit(once.execute(undefined, { executionId: "send-2" }))
      crash = false
      const error = yield* Effect.flip(resumedOn(storage, { agentGraph: graph("at-most-once") }, "send-2"))
      assert.strictEqual(error._tag, "ToolOutcomeUnknown")
      assert.strictEqual(bodies, 1)
    }))
})

describe("a recorded output found damaged on resume", () => {
  /**
   * `storage` whose `scanText` hands out the completion record of the step at `path`
   * with its output's value cut short: the record still reads as that step's, its
   * output is not JSON (a torn or bit-flipped row).
   */
  const damagedAt = (storage: StorageAdapterShape, path: string): StorageAdapterShape => ({
    ...storage,
    scanText: (prefix) =>
      Effect.map(storage.scanText!(prefix), (rows) =>
        rows.map(([key, text]) =>
          [
            key,
            text.startsWith("{\"_tag\":\"StepRecorded\"") && text.includes(`"path":${JSON.stringify(path)}`)
              ? text.slice(0, -4) + "}}"
              : text
          ] as const
        ))
  })

  /** Root runs `first` (counted), then `then`, which dies on the first host. */
  const graph = (counts: { first: number; reconcile: number }, crash: { then: boolean }, effects?: "at-most-once") =>
    runCode("root", (_: void, ctx) =>
      Effect.gen(function*() {
        const first = yield* ctx.run(
          runCode({
            id: "first",
            ...(effects === undefined ? {} : {
              effects,
              reconcile: () => Effect.sync(() => (counts.reconcile++, Reconciled.completed({ done: "reconciled first" })))
            }),
            execute: () => Effect.sync(() => (counts.first++, { done: "first output" }))
          }),
          undefined
        )
        const then = yield* ctx.run(runCode("then", () => crash.then ? Effect.die("host crashed") : Effect.succeed("then")), undefined)
        return [first, then]
      }))

  /**
   * Runs the graph until its second step crashes the host, damages the first step's
   * recorded output, and resumes: what the resume returned and how often each body ran.
   */
  const resumedOverDamage = (executionId: string, effects?: "at-most-once") =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const counts = { first: 0, reconcile: 0 }
      const crash = { then: true }
      yield* crashedRun(storage, { agentGraph: graph(counts, crash, effects) }, executionId)
      crash.then = false
      const resumed = yield* resumedOn(
        damagedAt(storage, "/root#0/first#0"),
        { agentGraph: graph(counts, crash, effects) },
        executionId
      )
      return { resumed, counts }
    })

  it.effect("the step runs again, with a warning naming the path, and the run goes on", () => {
    const warnings: Array<string> = []
    return Effect.gen(function*() {
      const { counts, resumed } = yield* resumedOverDamage("damaged-1")
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some([{ done: "first output" }, "then"]))
      assert.deepStrictEqual(counts, { first: 2, reconcile: 0 })
      assert.strictEqual(warnings.length, 1)
      assert.include(warnings[0]!, "/root#0/first#0")
      assert.include(warnings[0]!, "running the step again")
    }).pipe(capturingWarnings(warnings))
  })

  it.effect("an at-most-once step is reconciled, as if its completion were lost; its body does not run twice", () => {
    const warnings: Array<string> = []
    return Effect.gen(function*() {
      const { counts, resumed } = yield* resumedOverDamage("damaged-2", "at-most-once")
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some([{ done: "reconciled first" }, "then"]))
      assert.deepStrictEqual(counts, { first: 1, reconcile: 1 })
      assert.strictEqual(warnings.length, 1)
      assert.include(warnings[0]!, "reconciling the step")
    }).pipe(capturingWarnings(warnings))
  })
})
