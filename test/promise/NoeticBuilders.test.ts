/**
 * The step builders written as noetic documents them (option objects, Promise
 * bodies): what each runs, and the NoeticConfigError codes each throws at build time.
 */
import { Schema, SchemaTransformation } from "effect"
import { describe, expect, it } from "vitest"
import {
  type AnyStep,
  callModel,
  conditional,
  createCheckpointStore,
  createInMemoryStorage,
  inParallel,
  invokeTool,
  isNoeticConfigError,
  isNoeticError,
  loop,
  type NoeticConfigError,
  type NoeticError,
  runCode,
  type SettleResult,
  type Snapshot,
  spawn,
  all,
  any,
  until
} from "../../src/promise/index.ts"
import { runsAs } from "../../src/harness/Step.ts"
import { harness } from "./harnesses.ts"
import { runTurn } from "./turns.ts"


const codeOf = (f: () => unknown): string => {
  try {
    f()
  } catch (error) {
    if (isNoeticConfigError(error)) {
      expect((error as NoeticConfigError).hint.length).toBeGreaterThan(0)
      return error.code
    }
    throw error
  }
  throw new Error("expected a NoeticConfigError")
}

const rejection = async (promise: Promise<unknown>): Promise<NoeticError> => {
  const error = await promise.then(() => undefined, (e: unknown) => e)
  expect(isNoeticError(error)).toBe(true)
  return error as NoeticError
}

/** Runs `step` on `input` as the graph of a fresh zero-config harness. */
const runStep = <I, O>(step: AnyStep<I, O>, input: I): Promise<O> =>
  runTurn(harness({ name: "builders", params: {}, agentGraph: step }), input).then((r) => r.output as O)

describe("noetic builders: runCode", () => {
  it("runCode({ id, execute }) runs execute with the input and a context", async () => {
    const step = runCode({ id: "double", execute: async (n: number, ctx) => ({ n: n * 2, depth: ctx.depth }) })
    expect(step.id).toBe("double")
    expect(step.kind).toBe("runCode")
    expect(await runStep(step, 21)).toEqual({ n: 42, depth: 0 })
  })

  it("throws EMPTY_STEP_ID for an empty or blank id and MISSING_EXECUTE_FUNCTION without execute", () => {
    expect(codeOf(() => runCode({ id: "", execute: async () => 1 }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => runCode({ id: "   ", execute: async () => 1 }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => runCode({ id: "x" } as never))).toBe("MISSING_EXECUTE_FUNCTION")
    // The positional shorthand is the same builder: same checks.
    expect(codeOf(() => runCode(" ", () => 1))).toBe("EMPTY_STEP_ID")
  })

  it("retry re-runs a failing body on its schedule until it succeeds, and rejects once attempts run out", async () => {
    let calls = 0
    const flaky = runCode({
      id: "flaky",
      retry: { maxAttempts: 3, backoff: "exponential", initialDelay: 1 },
      execute: async () => {
        calls++
        if (calls < 3) throw new Error(`attempt ${calls} failed`)
        return "ok"
      }
    })
    expect(await runStep(flaky, undefined)).toBe("ok")
    expect(calls).toBe(3)

    let attempts = 0
    const hopeless = runCode({
      id: "hopeless",
      retry: { maxAttempts: 2, backoff: "fixed", initialDelay: 1 },
      execute: async () => {
        attempts++
        throw new Error("always")
      }
    })
    await expect(runStep(hopeless, undefined)).rejects.toThrow("always")
    expect(attempts).toBe(2)
  })

  it("retry.maxAttempts as noetic counts it: below 1 builds and fails the step unrun, a fraction rounds up", async () => {
    let calls = 0
    const none = runCode({
      id: "none",
      retry: { maxAttempts: 0, backoff: "fixed", initialDelay: 1 },
      execute: async () => ++calls
    })
    const error = await runStep(none, undefined).then(() => undefined, (e: unknown) => e)
    expect((error as NoeticError).noeticError).toMatchObject({ kind: "step_failed", stepId: "none" })
    expect((error as Error).message).toContain("No attempts executed")
    expect(calls).toBe(0)
    const partial = runCode({
      id: "partial",
      retry: { maxAttempts: 2.5, backoff: "fixed", initialDelay: 1 },
      execute: async () => {
        calls++
        throw new Error("again")
      }
    })
    await expect(runStep(partial, undefined)).rejects.toThrow("again")
    expect(calls).toBe(3)
  })

  it("a retried step records only its final success, and a resumed run replays it without calling the body", async () => {
    const storage = createInMemoryStorage()
    let flakyCalls = 0
    let crash = true
    const flaky = runCode({
      id: "flaky",
      retry: { maxAttempts: 4, backoff: "linear", initialDelay: 1 },
      execute: async () => {
        flakyCalls++
        if (flakyCalls < 3) throw new Error("transient")
        return `value after ${flakyCalls} calls`
      }
    })
    const agent = runCode({
      id: "agent",
      execute: async (_: void, ctx) => {
        const value = await ctx.harness.run(flaky, undefined, ctx)
        if (crash) throw new Error("host died")
        return value
      }
    })
    const build = () =>
      harness({
        name: "retry-replay",
        params: {},
        agentGraph: agent,
        environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
      })
    await expect(runTurn(build(), undefined, { executionId: "r1" })).rejects.toThrow("host died")
    expect(flakyCalls).toBe(3)
    const ledgerKeys = (await storage.list("execution:r1:ledger:")).length
    expect(ledgerKeys).toBe(1)
    crash = false
    const resumed = await build().resume("r1")
    expect(resumed?.output).toBe("value after 3 calls")
    expect(flakyCalls).toBe(3)
  })
})

describe("noetic builders: callModel", () => {
  it("callModel({ id, model, instructions, params }) asks the model with the instructions first", async () => {
    const prompts: Array<unknown> = []
    const h = harness({
      name: "chat",
      params: {},
      agentGraph: callModel({
        id: "ask",
        model: "openai/gpt-4o",
        instructions: (ctx) => `be brief (depth ${ctx.depth})`,
        params: { temperature: 0 }
      }),
      model: {
        generate: async (request) => {
          prompts.push(request.messages)
          return { id: "r1", text: "hi" }
        }
      }
    })
    const { output } = await runTurn(h, "hello")
    // noetic's callModel resolves with the reply's text.
    expect(output).toBe("hi")
    expect(prompts).toEqual([[{ role: "system", content: "be brief (depth 0)" }, { role: "user", content: "hello" }]])
  })

  it("with an output Standard Schema, the reply's JSON is validated and becomes the output", async () => {
    const Verdict = Schema.toStandardSchemaV1(Schema.Struct({ score: Schema.Number }))
    const replies = ['{"score": 7}', '{"score": "high"}']
    const model = { generate: async () => ({ text: replies.shift()! }) }
    const step = callModel({ id: "grade", model: "m", output: Verdict })
    const h = harness({ name: "structured", params: {}, agentGraph: step, model })
    expect((await runTurn(h, "essay")).output).toEqual({ score: 7 })
    const error = await rejection(runTurn(h, "essay"))
    expect(error.code).toBe("MODEL_OUTPUT_INVALID")
    expect(error.noeticError).toMatchObject({ kind: "model_parse_error", stepId: "grade", raw: '{"score": "high"}' })
  })

  it("throws EMPTY_STEP_ID and MISSING_MODEL for an empty eager model", () => {
    expect(codeOf(() => callModel({ id: "", model: "m" }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => callModel({ id: "ask", model: "" }))).toBe("MISSING_MODEL")
    expect(codeOf(() => callModel({ id: "ask", model: "  " }))).toBe("MISSING_MODEL")
  })
})

describe("noetic builders: invokeTool", () => {
  it("invokeTool({ id, tool, args }) calls the tool with the input and args merged over it", async () => {
    const seen: Array<unknown> = []
    const search = {
      name: "search",
      description: "searches",
      execute: async (args: { query: string; limit: number }) => {
        seen.push(args)
        return [`${args.query}:${args.limit}`]
      }
    }
    const step = invokeTool({ id: "find", tool: search, args: { limit: 2 } })
    expect(await runStep(step, { query: "rl", limit: 10 })).toEqual(["rl:2"])
    expect(seen).toEqual([{ query: "rl", limit: 2 }])
  })

  it("checks the args against the tool's input schema (a Standard Schema) and passes the parsed value on", async () => {
    const seen: Array<unknown> = []
    const input = Schema.toStandardSchemaV1(
      Schema.Struct({ q: Schema.String.pipe(Schema.decodeTo(Schema.String, SchemaTransformation.transform({
        decode: (q: string) => q.toUpperCase(),
        encode: (q: string) => q.toLowerCase()
      }))) })
    )
    const shout = { name: "shout", input, execute: async (args: { q: string }) => (seen.push(args), args.q) }
    expect(await runStep(invokeTool({ id: "ok", tool: shout }), { q: "hi" })).toBe("HI")
    const failure = await runStep(invokeTool({ id: "bad", tool: shout }), { q: 42 } as never).then(
      () => undefined,
      (error: unknown) => error
    )
    expect(isNoeticError(failure)).toBe(true)
    expect((failure as NoeticError).noeticError).toMatchObject({ kind: "step_failed", stepId: "bad" })
    expect((failure as Error).message).toMatch(/Tool input validation failed/)
    // The tool never saw the bad input.
    expect(seen).toEqual([{ q: "HI" }])
  })

  it("throws EMPTY_STEP_ID and MISSING_TOOL", () => {
    const tool = { name: "t", execute: async () => 1 }
    expect(codeOf(() => invokeTool({ id: "", tool }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => invokeTool({ id: "t" } as never))).toBe("MISSING_TOOL")
  })
})

describe("noetic builders: spawn", () => {
  it("spawn({ id, child }) runs the child in a child context of the caller's", async () => {
    const child = runCode({
      id: "child",
      execute: async (n: number, ctx) => ({ n: n + 1, depth: ctx.depth, parentId: ctx.parent?.id })
    })
    const agent = runCode({
      id: "agent",
      execute: async (n: number, ctx) => ({ own: ctx.id, child: await ctx.run(spawn({ id: "sub", child }), n) })
    })
    const result = await runStep(agent, 1) as { own: string; child: { n: number; depth: number; parentId: string } }
    expect(result.child).toEqual({ n: 2, depth: 1, parentId: result.own })
  })

  it("a child running past timeout fails the step with a typed timeout error", async () => {
    const slow = runCode({ id: "slow", execute: () => new Promise<never>(() => {}) })
    const error = await rejection(runStep(spawn({ id: "bounded", child: slow, timeout: 30 }), undefined))
    expect(error.code).toBe("SPAWN_TIMEOUT")
    expect(error.noeticError).toMatchObject({ kind: "step_failed", stepId: "bounded" })
  })

  it("throws EMPTY_STEP_ID and MISSING_CHILD_STEP", () => {
    const child = runCode({ id: "c", execute: async () => 1 })
    expect(codeOf(() => spawn({ id: "", child }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => spawn({ id: "s" } as never))).toBe("MISSING_CHILD_STEP")
  })
})

describe("noetic builders: loop", () => {
  it("loop({ id, steps, until }) hands until noetic's snapshot and stops on its verdict", async () => {
    const snapshots: Array<Snapshot> = []
    const step = loop({
      id: "count",
      steps: [runCode({ id: "inc", execute: async (n: number) => n + 1 }), runCode({ id: "twice", execute: async (n: number) => n * 2 })],
      until: (snapshot) => {
        snapshots.push(snapshot)
        return { stop: snapshot.stepCount >= 3, reason: "enough" }
      }
    })
    // 0 -> 2 -> 6 -> 14
    expect(await runStep(step, 0)).toBe(14)
    expect(snapshots.map((s) => [s.stepCount, s.lastOutput, s.lastText, s.history.length, s.depth])).toEqual([
      [1, 2, "2", 1, 0],
      [2, 6, "6", 2, 0],
      [3, 14, "14", 3, 0]
    ])
    expect(snapshots[2]!.tokens).toEqual({ input: 0, output: 0, total: 0 })
    expect(typeof snapshots[2]!.elapsed).toBe("number")
  })

  it("maxIterations defaults to 1000, and a loop exceeding it rejects", async () => {
    const never = loop({ id: "forever", steps: [runCode({ id: "id", execute: async (n: number) => n })], until: async () => ({ stop: false }) })
    // As noetic's plain object, the step shows maxIterations as given (none); the engine step behind it caps at 1000.
    expect(never.maxIterations).toBeUndefined()
    expect((runsAs(never as never) as { maxIterations: number }).maxIterations).toBe(1000)
    const bounded = loop({
      id: "bounded",
      steps: [runCode({ id: "id", execute: async (n: number) => n })],
      until: () => ({ stop: false }),
      maxIterations: 3
    })
    const error = await rejection(runStep(bounded, 1))
    expect(error.code).toBe("LOOP_MAX_ITERATIONS")
    expect(error.message).toBe("Step 'bounded' failed: Loop exceeded maximum iterations (3)")
    expect(error.noeticError).toMatchObject({ kind: "step_failed", stepId: "bounded" })
    // A fractional cap is accepted, as noetic accepts it: 2.5 allows two iterations.
    let runs = 0
    const fractional = loop({
      id: "fractional",
      steps: [runCode({ id: "count", execute: async (n: number) => (runs++, n) })],
      until: () => ({ stop: false }),
      maxIterations: 2.5
    })
    expect((await rejection(runStep(fractional, 1))).code).toBe("LOOP_MAX_ITERATIONS")
    expect(runs).toBe(2)
    // As in noetic, a cap below 1, NaN or Infinity builds, and fails the loop when it runs, body unrun.
    for (const bad of [0, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const built = loop({ id: "bad", steps: [runCode({ id: "count", execute: async (n: number) => (runs++, n) })], until: () => ({ stop: true }), maxIterations: bad })
      const failed = await rejection(runStep(built, 1))
      expect(failed.noeticError).toMatchObject({ kind: "step_failed", stepId: "bad" })
      expect(failed.message).toBe(`Step 'bad' failed: Invalid maxIterations: ${bad}`)
    }
    expect(runs).toBe(2)
  })

  it("prepareNext builds the next input from the output and verdict; onError retries or skips", async () => {
    const step = loop({
      id: "refine",
      steps: [runCode({ id: "draft", execute: async (input: { text: string; feedback?: string }) => `${input.text}+` })],
      until: (snapshot) => ({ stop: snapshot.stepCount >= 2, feedback: `round ${snapshot.stepCount}` }),
      prepareNext: (output: string, verdict) => ({ text: output, feedback: verdict.feedback! })
    })
    expect(await runStep(step, { text: "a", feedback: "" })).toBe("a++")

    let calls = 0
    const errors: Array<unknown> = []
    const flaky = loop({
      id: "flaky-loop",
      steps: [runCode({
        id: "sometimes",
        execute: async (n: number) => {
          calls++
          if (calls === 2) throw new Error("hiccup")
          return n + 1
        }
      })],
      until: (snapshot) => ({ stop: snapshot.stepCount >= 2 }),
      onError: (error) => {
        errors.push(error)
        return "retry"
      }
    })
    expect(await runStep(flaky, 0)).toBe(2)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ kind: "step_failed" })
  })

  it("noetic's until predicates and any/all combinators decide from the snapshot", async () => {
    const inc = runCode({ id: "inc", execute: async (n: number) => n + 1 })
    expect(await runStep(loop({ id: "max", steps: [inc], until: until.maxSteps(4) }), 0)).toBe(4)
    expect(await runStep(loop({ id: "marker", steps: [inc], until: until.outputEquals("3") }), 0)).toBe(3)
    const clamp = runCode({ id: "clamp", execute: async (n: number) => Math.min(n + 1, 2) })
    expect(await runStep(loop({ id: "conv", steps: [clamp], until: until.converged() }), 0)).toBe(2)
    const either = any(until.outputContains("5"), until.maxSteps(100))
    expect(await runStep(loop({ id: "any", steps: [inc], until: either }), 0)).toBe(5)
    const both = all(until.maxSteps(2), until.verified(async (out) => ({ pass: (out as number) % 3 === 0 })))
    expect(await runStep(loop({ id: "all", steps: [inc], until: both }), 0)).toBe(3)
    const verdict = await until.verified(async () => ({ pass: false, feedback: "more detail" }))({
      stepCount: 1, tokens: { input: 0, output: 0, total: 0 }, elapsed: 0, cost: 0, lastOutput: 1, lastText: "1", history: [1], depth: 0
    })
    expect(verdict).toEqual({ stop: false, feedback: "more detail" })
  })

  it("throws EMPTY_STEP_ID, MISSING_LOOP_BODY and MISSING_UNTIL_PREDICATE", () => {
    const body = runCode({ id: "b", execute: async (n: number) => n })
    const until = () => ({ stop: true })
    expect(codeOf(() => loop({ id: " ", steps: [body], until }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => loop({ id: "l", steps: [], until }))).toBe("MISSING_LOOP_BODY")
    expect(codeOf(() => loop({ id: "l", steps: [body] } as never))).toBe("MISSING_UNTIL_PREDICATE")
  })
})

describe("noetic builders: inParallel", () => {
  it("settle hands merge noetic's { stepId, status, value?, error? } results", async () => {
    let merged: Array<SettleResult<number>> = []
    const step = inParallel({
      id: "both",
      mode: "settle",
      paths: (n: number) => [
        runCode({ id: "ok", execute: async () => n }),
        runCode({ id: "bad", execute: async (): Promise<number> => { throw new Error("nope") } })
      ],
      merge: (results) => {
        merged = results
        return results.filter((r) => r.status === "fulfilled").length
      }
    })
    expect(await runStep(step, 5)).toBe(1)
    expect(merged[0]).toEqual({ stepId: "ok", status: "fulfilled", value: 5 })
    expect(merged[1]).toMatchObject({ stepId: "bad", status: "rejected", error: { kind: "step_failed", stepId: "bad" } })
    expect(merged[1]!.error && "cause" in merged[1]!.error ? (merged[1]!.error.cause as Error).message : "").toBe("nope")
  })

  it("all merges every output; race takes the first; concurrency bounds how many run at once", async () => {
    let running = 0
    let peak = 0
    const work = (id: string, n: number) =>
      runCode({
        id,
        execute: async () => {
          running++
          peak = Math.max(peak, running)
          await new Promise((resolve) => setTimeout(resolve, 5))
          running--
          return n
        }
      })
    const all = inParallel({
      id: "sum",
      mode: "all",
      concurrency: 1,
      paths: () => [work("a", 1), work("b", 2), work("c", 3)],
      merge: (results: Array<number>) => results.reduce((a, b) => a + b, 0)
    })
    expect(await runStep(all, undefined)).toBe(6)
    expect(peak).toBe(1)
    const race = inParallel({
      id: "first",
      mode: "race",
      paths: () => [runCode({ id: "never", execute: () => new Promise<number>(() => {}) }), work("fast", 7)]
    })
    expect(await runStep(race, undefined)).toBe(7)
  })

  it("a failed all or race rejects with noetic's fork_partial: what succeeded, and what failed with what", async () => {
    const ok = runCode({ id: "ok", execute: async (n: number) => n })
    const bad = runCode({ id: "bad", execute: async (): Promise<number> => { throw new Error("nope") } })
    const slow = runCode({ id: "slow", execute: () => new Promise<number>(() => {}) })
    const failure = (step: AnyStep<number, unknown>) => runStep(step, 1).then(() => undefined, (error: unknown) => error)

    const all = await failure(inParallel({ id: "P", mode: "all", paths: () => [ok, bad, slow], merge: (r: Array<number>) => r.length }))
    expect(isNoeticError(all)).toBe(true)
    const payload = (all as NoeticError).noeticError as {
      kind: string
      stepId: string
      succeeded: Array<{ stepId: string; value: unknown }>
      failed: Array<{ stepId: string; error: { kind: string; stepId?: string; cause?: Error } }>
    }
    expect(payload.kind).toBe("fork_partial")
    expect(payload.stepId).toBe("P")
    expect(payload.succeeded).toEqual([{ stepId: "ok", value: 1 }])
    // The failing path with its own error; the path still running, interrupted, as cancelled.
    expect(payload.failed.map((f) => [f.stepId, f.error.kind])).toEqual([["bad", "step_failed"], ["slow", "cancelled"]])
    expect(payload.failed[0]!.error.cause!.message).toBe("nope")
    expect((all as Error).message).toBe("Fork 'P' partial failure: 1 succeeded, 2 failed")

    const race = await failure(inParallel({ id: "R", mode: "race", paths: () => [bad, bad] }))
    expect((race as NoeticError).noeticError).toMatchObject({ kind: "fork_partial", stepId: "R", succeeded: [] })
    expect(((race as NoeticError).noeticError as unknown as { failed: Array<unknown> }).failed).toHaveLength(2)
  })

  it("throws EMPTY_STEP_ID, and MISSING_MERGE_FUNCTION for all and settle without merge", () => {
    const paths = () => [runCode({ id: "p", execute: async () => 1 })]
    expect(codeOf(() => inParallel({ id: "", mode: "race", paths }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => inParallel({ id: "x", mode: "all", paths } as never))).toBe("MISSING_MERGE_FUNCTION")
    expect(codeOf(() => inParallel({ id: "x", mode: "settle", paths } as never))).toBe("MISSING_MERGE_FUNCTION")
  })
})

describe("noetic builders: conditional", () => {
  it("conditional({ id, route }) runs the routed step, and null passes the input through", async () => {
    const shout = runCode({ id: "shout", execute: async (s: string) => s.toUpperCase() })
    const step = conditional({ id: "maybe", route: async (s: string) => (s.startsWith("!") ? shout : null) })
    expect(await runStep(step, "!hey")).toBe("!HEY")
    expect(await runStep(step, "calm")).toBe("calm")
  })

  it("throws EMPTY_STEP_ID and MISSING_ROUTE_FUNCTION", () => {
    expect(codeOf(() => conditional({ id: "", route: () => null }))).toBe("EMPTY_STEP_ID")
    expect(codeOf(() => conditional({ id: "c" } as never))).toBe("MISSING_ROUTE_FUNCTION")
  })
})
