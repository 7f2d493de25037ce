/**
 * One engine behind two doors (docs/architecture.md): each scenario runs through the
 * Effect API (`src/index.ts`) and through the Promise facade (`src/promise/index.ts`),
 * and the normalised outcomes (values, error codes, statuses) must be equal.
 */
import { Effect, Exit, Layer } from "effect"
import { describe, expect, it } from "vitest"
import {
  AgentHarness as EffectHarness,
  CheckpointStore,
  InMemorySubprocessAdapter,
  loop as effectLoop,
  runCode as effectRunCode,
  StepLedger,
  StorageAdapter,
  ToolInput,
  Until
} from "../src/index.ts"
import {
  createCheckpointStore,
  createInMemoryStorage,
  createInMemorySubprocessAdapter,
  isNoeticConfigError,
  invokeTool as promiseInvokeTool,
  isNoeticError,
  all as promiseAll,
  any as promiseAny,
  loop as promiseLoop,
  runCode as promiseRunCode,
  until as promiseUntil
} from "../src/promise/index.ts"
import { harness as promiseHarness } from "./promise/harnesses.ts"

/** Runs an Effect-API program that needs a scope (a harness, an adapter). */
const runScoped = <A, E>(program: Effect.Effect<A, E, import("effect").Scope.Scope>): Promise<A> =>
  Effect.runPromise(Effect.scoped(program))

/** An Effect-API harness without storage. */
const effectHarness = EffectHarness.make({ name: "two-doors" })

/** A facade harness without storage. */
const facadeHarness = () => promiseHarness({ name: "two-doors", params: {} })

/** What both doors are compared on: a value, or a failure's message. */
type Outcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly message: string }

const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error)

/** The facade's step failure is noetic's `step_failed` wrapping what the body threw. */
const facadeCause = (error: unknown): unknown =>
  isNoeticError(error) && error.noeticError.kind === "step_failed" ? error.noeticError.cause : error

/** Polls `read` (each poll yields to the event loop) until it gives a value; bounded generously. */
const poll = async <A>(read: () => Promise<A | null | undefined>): Promise<A> => {
  for (let i = 0; i < 10_000; i++) {
    const value = await read()
    if (value !== null && value !== undefined) return value
    await new Promise((resolve) => setImmediate(resolve))
  }
  throw new Error("poll: gave up")
}

describe("two doors: context inheritance", () => {
  const parentOptions = { threadId: "thread-1", resourceId: "resource-1", cwd: "/srv/work" }

  const effectSide = () =>
    runScoped(Effect.gen(function*() {
      const harness = yield* effectHarness
      const parent = yield* harness.createContext(parentOptions)
      const child = yield* harness.createContext({ parent })
      const overridden = yield* harness.createContext({ parent, resourceId: "resource-2", cwd: "/srv/other", threadId: "thread-2" })
      const view = (ctx: typeof child) => ({ threadId: ctx.threadId, resourceId: ctx.resourceId, cwd: ctx.cwd?.current })
      return { child: view(child), overridden: view(overridden) }
    }))

  const promiseSide = async () => {
    const harness = facadeHarness()
    const parent = harness.createContext({
      threadId: parentOptions.threadId,
      resourceId: parentOptions.resourceId,
      cwdInit: parentOptions.cwd
    })
    const child = harness.createContext({ parent })
    const overridden = harness.createContext({ parent, resourceId: "resource-2", cwdInit: "/srv/other", threadId: "thread-2" })
    const view = (ctx: typeof child) => ({ threadId: ctx.threadId, resourceId: ctx.resourceId, cwd: ctx.cwdState.cwd })
    return { child: view(child), overridden: view(overridden) }
  }

  it("a child inherits its parent's threadId, resourceId and cwd unless given, in both doors", async () => {
    const [viaEffect, viaPromise] = [await effectSide(), await promiseSide()]
    expect(viaEffect).toEqual(viaPromise)
    expect(viaEffect).toEqual({
      child: { threadId: "thread-1", resourceId: "resource-1", cwd: "/srv/work" },
      overridden: { threadId: "thread-2", resourceId: "resource-2", cwd: "/srv/other" }
    })
  })
})

describe("two doors: step-ledger retention validation", () => {
  /** `null` when accepted, else the refusal's code (docs/durability.md#retention). */
  const effectSide = (retention: Partial<StepLedger.StepLedgerRetention>) =>
    Effect.runPromise(
      Layer.build(StepLedger.layer({ retention })).pipe(
        Effect.provide(CheckpointStore.layerMemory),
        Effect.scoped,
        Effect.exit,
        Effect.map((exit) => Exit.isSuccess(exit) ? null : Exit.isFailure(exit) ? codeOf(exit) : null)
      )
    )

  const codeOf = (exit: Exit.Exit<unknown, { readonly code: string }>): string =>
    Exit.isFailure(exit) ? exit.cause.reasons.map((r) => r._tag === "Fail" ? r.error.code : r._tag).join(",") : ""

  const promiseSide = async (retention: Partial<StepLedger.StepLedgerRetention>): Promise<string | null> => {
    try {
      const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
      promiseHarness({ name: "retention", params: {}, environment: { storage: { checkpointStore, stepLedgerRetention: retention } } })
      return null
    } catch (error) {
      return isNoeticConfigError(error) ? error.code : `not a config error: ${messageOf(error)}`
    }
  }

  const caps = [0, -1, 0.5, 0.999, Number.NaN, -Infinity, 1, 1.5, 10, Infinity]
  for (const field of ["maxEntries", "maxEntryBytes"] as const) {
    for (const value of caps) {
      it(`${field}: ${value} gives the same decision and code`, async () => {
        const retention = { [field]: value }
        const viaEffect = await effectSide(retention)
        const viaPromise = await promiseSide(retention)
        expect(viaEffect).toEqual(viaPromise)
        // The documented rule: NaN or below 1 is refused, Infinity disables a cap.
        expect(viaEffect).toEqual(value >= 1 ? null : "STEP_LEDGER_RETENTION_INVALID")
      })
    }
  }
})

describe("two doors: clearCheckpoint", () => {
  /** What is left after clearCheckpoint: snapshot present, and ledger keys in each storage. */
  interface Left {
    readonly snapshot: boolean
    readonly ledgerInCheckpoints: number
    readonly ledgerApart: number
  }

  it("discards the snapshot and a ledger kept apart from it, in both doors", async () => {
    const ledgerPrefix = (id: string) => `execution:${id}:ledger:`
    // Effect API: the StepLedger service over a store on another storage than the snapshots.
    const viaEffect = await runScoped(Effect.gen(function*() {
      const checkpoints = yield* StorageAdapter.makeMemory
      const apart = yield* StorageAdapter.makeMemory
      const store = yield* CheckpointStore.makeWith(checkpoints)
      const ledger = yield* StepLedger.makeWith(yield* CheckpointStore.makeWith(apart))
      const harness = yield* EffectHarness.make({
        name: "clear",
        agentGraph: effectRunCode({ id: "root", execute: (n: number) => Effect.succeed(n + 1) })
      }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store), Effect.provideService(StepLedger.StepLedger, ledger))
      const { executionId } = yield* harness.execute(1)
      const before = (yield* apart.list(ledgerPrefix(executionId))).length
      yield* harness.clearCheckpoint(executionId)
      const left: Left = {
        snapshot: (yield* checkpoints.list(`execution:${executionId}:snapshot`)).length > 0,
        ledgerInCheckpoints: (yield* checkpoints.list(ledgerPrefix(executionId))).length,
        ledgerApart: (yield* apart.list(ledgerPrefix(executionId))).length
      }
      return { before, left }
    }))
    // Promise API: noetic's storage.adapter holds the ledger.
    const checkpoints = createInMemoryStorage()
    const apart = createInMemoryStorage()
    const harness = promiseHarness({
      name: "clear",
      params: {},
      agentGraph: promiseRunCode({ id: "root", execute: async (n: number) => n + 1 }),
      environment: { storage: { adapter: apart, checkpointStore: createCheckpointStore({ storage: checkpoints }) } }
    })
    const ctx = harness.createContext()
    await harness.run(harness.agentGraph!, 1, ctx)
    const executionId = ctx.id
    const before = (await apart.list(ledgerPrefix(executionId))).length
    await harness.clearCheckpoint(executionId)
    const viaPromise = {
      before,
      left: {
        snapshot: (await checkpoints.list(`execution:${executionId}:snapshot`)).length > 0,
        ledgerInCheckpoints: (await checkpoints.list(ledgerPrefix(executionId))).length,
        ledgerApart: (await apart.list(ledgerPrefix(executionId))).length
      } satisfies Left
    }
    expect(viaEffect.before).toBeGreaterThan(0)
    expect(viaEffect).toEqual(viaPromise)
    expect(viaEffect.left).toEqual({ snapshot: false, ledgerInCheckpoints: 0, ledgerApart: 0 })
  })
})

describe("two doors: retry", () => {
  /** A body that fails `failures` times, then answers; counts its invocations. */
  const flaky = (failures: number) => {
    let calls = 0
    return {
      calls: () => calls,
      attempt: (): { readonly ok: true; readonly value: string } | { readonly ok: false; readonly error: Error } => {
        calls++
        return calls <= failures ? { ok: false, error: new Error(`failure ${calls}`) } : { ok: true, value: `ok after ${calls}` }
      }
    }
  }

  const effectSide = async (maxAttempts: number, failures: number) => {
    const body = flaky(failures)
    const step = effectRunCode("flaky", () =>
      Effect.suspend(() => {
        const result = body.attempt()
        return result.ok ? Effect.succeed(result.value) : Effect.fail(result.error)
      }), { retry: { maxAttempts, backoff: "fixed", initialDelay: 0 } })
    const exit = await runScoped(Effect.gen(function*() {
      const harness = yield* effectHarness
      const ctx = yield* harness.createContext()
      return yield* Effect.exit(harness.run(step, undefined, ctx))
    }))
    const outcome: Outcome = Exit.isSuccess(exit)
      ? { ok: true, value: exit.value }
      : { ok: false, message: messageOf(exit.cause.reasons.map((r) => r._tag === "Fail" ? r.error : r._tag)[0]) }
    return { outcome, calls: body.calls() }
  }

  const promiseSide = async (maxAttempts: number, failures: number) => {
    const body = flaky(failures)
    const step = promiseRunCode({
      id: "flaky",
      execute: async () => {
        const result = body.attempt()
        if (!result.ok) throw result.error
        return result.value
      },
      retry: { maxAttempts, backoff: "fixed", initialDelay: 0 }
    })
    const harness = facadeHarness()
    let outcome: Outcome
    try {
      outcome = { ok: true, value: await harness.run(step, undefined, harness.createContext()) }
    } catch (error) {
      outcome = { ok: false, message: messageOf(facadeCause(error)) }
    }
    return { outcome, calls: body.calls() }
  }

  // [maxAttempts, failures before success]
  const cases: ReadonlyArray<readonly [number, number]> = [[1, 0], [1, 1], [3, 2], [3, 3], [3, 5], [5, 1]]
  for (const [maxAttempts, failures] of cases) {
    it(`maxAttempts ${maxAttempts}, failing ${failures} time(s): same invocations and outcome`, async () => {
      const viaEffect = await effectSide(maxAttempts, failures)
      const viaPromise = await promiseSide(maxAttempts, failures)
      expect(viaEffect).toEqual(viaPromise)
      expect(viaEffect.calls).toBe(Math.min(failures + 1, maxAttempts))
    })
  }

  // Fractional, Infinity, 0 and NaN attempts: a documented difference
  // (docs/coming-from-noetic.md). The engine's `noeticRetry` reads them as noetic does for
  // the Promise API (a fraction rounds up, Infinity retries for good, below 1 builds and
  // fails unrun); the Effect API's `Step.runCode` refuses them when built.
  const odd: ReadonlyArray<readonly [number, number, number]> = [[2.5, 5, 3], [Infinity, 3, 4], [0, 0, 0], [Number.NaN, 0, 0]]
  for (const [maxAttempts, failures, calls] of odd) {
    it(`maxAttempts ${maxAttempts}: the Effect API refuses it when built, the Promise API reads it as noetic`, async () => {
      const built = (() => {
        try {
          effectRunCode("odd", () => Effect.succeed(1), { retry: { maxAttempts, backoff: "fixed", initialDelay: 0 } })
          return null
        } catch (error) {
          return (error as { readonly code?: string }).code
        }
      })()
      expect(built).toBe("INVALID_RETRY_POLICY")
      const viaPromise = await promiseSide(maxAttempts, failures)
      expect(viaPromise.calls).toBe(calls)
      expect(viaPromise.outcome.ok).toBe(calls > failures)
      if (calls === 0) expect(viaPromise.outcome).toEqual({ ok: false, message: "No attempts executed" })
    })
  }
})

describe("two doors: detached handle status and stop", () => {
  type Kind = "succeeds" | "fails" | "stopped"
  /** Normalised: the settled status (noetic's `completed` is the engine's `succeeded`), the value or failure. */
  interface HandleOutcome {
    readonly status: string
    readonly outcome: Outcome
    /** The reason given to `stop` (noetic's `metadata.stopReason`), kept by the engine's adapter. */
    readonly stopReason: string | undefined
  }

  const effectSide = (kind: Kind) =>
    runScoped(Effect.gen(function*() {
      const harness = yield* effectHarness
      const adapter = yield* InMemorySubprocessAdapter.make()
      const parent = yield* harness.createContext()
      const step = kind === "succeeds"
        ? effectRunCode("child", (n: number) => Effect.succeed(n * 2))
        : kind === "fails"
        ? effectRunCode("child", (_: number) => Effect.fail(new Error("child broke")))
        : effectRunCode("child", (_: number) => Effect.never)
      const handle = yield* harness.detachedSpawn(step, 21, parent, { subprocess: adapter })
      if (kind === "stopped") yield* adapter.stop(handle.handleId, "no longer needed")
      const exit = yield* Effect.exit(handle.await)
      const status = yield* handle.status
      const outcome: Outcome = Exit.isSuccess(exit)
        ? { ok: true, value: exit.value }
        : { ok: false, message: String(exit.cause.reasons.map((r) => r._tag === "Fail" ? r.error.reason._tag : r._tag)[0]) }
      const stopReason = handle.stopReason === undefined ? undefined : yield* handle.stopReason
      return { status, outcome, stopReason } satisfies HandleOutcome
    }))

  const promiseSide = async (kind: Kind): Promise<HandleOutcome> => {
    const harness = facadeHarness()
    const adapter = createInMemorySubprocessAdapter()
    const parent = harness.createContext()
    const step = kind === "succeeds"
      ? promiseRunCode("child", (n: number) => n * 2)
      : kind === "fails"
      ? promiseRunCode("child", (_: number): number => {
        throw new Error("child broke")
      })
      : promiseRunCode("child", (_: number) => new Promise<number>(() => {}))
    const handle = harness.detachedSpawn(step, 21, parent, { subprocess: adapter })
    if (kind === "stopped") {
      await poll(() => adapter.get(handle.handleId))
      expect((await adapter.stop(handle.handleId, "no longer needed")).kind).toBe("stopped")
    }
    let outcome: Outcome
    try {
      outcome = { ok: true, value: await handle.await() }
    } catch (error) {
      outcome = { ok: false, message: facadeClassification(error) }
    }
    const live = await poll(() => adapter.get(handle.handleId))
    const status = live.status === "completed" ? "succeeded" : live.status
    const stopReason = live.metadata.stopReason
    return { status, outcome, stopReason: typeof stopReason === "string" ? stopReason : undefined }
  }

  /** The engine `SubprocessError` reason a facade error carries somewhere on its cause chain. */
  const subprocessReasonTag = (error: unknown): string | undefined => {
    const seen = new Set<unknown>()
    const queue: Array<unknown> = [error]
    while (queue.length > 0) {
      const u = queue.shift()
      if (typeof u !== "object" || u === null || seen.has(u)) continue
      seen.add(u)
      const tagged = u as { readonly _tag?: unknown; readonly reason?: { readonly _tag?: unknown }; readonly cause?: unknown }
      if (tagged._tag === "SubprocessError" && typeof tagged.reason?._tag === "string") return tagged.reason._tag
      queue.push(tagged.cause)
      if (isNoeticError(u) && u.noeticError.kind === "step_failed") queue.push(u.noeticError.cause)
    }
    return undefined
  }

  /**
   * The facade's failure in the engine's terms: the engine reason it carries, else a
   * child's own failure (noetic's `step_failed` with what the body threw) is `ChildFailed`.
   */
  const facadeClassification = (error: unknown): string => {
    if (!isNoeticError(error)) return `not a NoeticError: ${messageOf(error)}`
    const tag = subprocessReasonTag(error)
    if (tag !== undefined) return tag
    const detail = error.noeticError
    if (detail.kind === "step_failed" && messageOf(detail.cause) === "child broke") return "ChildFailed"
    return `${detail.kind}: ${messageOf(error)}`
  }

  for (const kind of ["succeeds", "fails", "stopped"] as const) {
    it(`a child that ${kind === "stopped" ? "is stopped" : kind}: same status and classification`, async () => {
      const viaEffect = await effectSide(kind)
      const viaPromise = await promiseSide(kind)
      expect(viaEffect).toEqual(viaPromise)
      expect(viaEffect.status).toBe(kind === "succeeds" ? "succeeded" : kind === "fails" ? "failed" : "stopped")
      // The reason lives with the engine's handle: both doors report the one `stop` was given.
      expect(viaEffect.stopReason).toBe(kind === "stopped" ? "no longer needed" : undefined)
    })
  }
})

describe("two doors: loop termination predicates", () => {
  /** Each iteration appends one letter; the loop's `until` decides when it stops. */
  const letters = "abcdefghij"
  type Case = { readonly name: string; readonly effect: () => Until.Until<unknown>; readonly promise: () => import("../src/promise/index.ts").Until }
  const cases: ReadonlyArray<Case> = [
    { name: "maxSteps(3)", effect: () => Until.maxSteps(3), promise: () => promiseUntil.maxSteps(3) },
    { name: "outputContains(d)", effect: () => Until.outputContains("d"), promise: () => promiseUntil.outputContains("d") },
    { name: "outputEquals(ab)", effect: () => Until.outputEquals("ab"), promise: () => promiseUntil.outputEquals("ab") },
    {
      name: "any(maxSteps(5), outputContains(c))",
      effect: () => Until.any(Until.maxSteps(5), Until.outputContains("c")),
      promise: () => promiseAny(promiseUntil.maxSteps(5), promiseUntil.outputContains("c"))
    },
    {
      name: "all(maxSteps(2), outputContains(d))",
      effect: () => Until.all(Until.maxSteps(2), Until.outputContains("d")),
      promise: () => promiseAll(promiseUntil.maxSteps(2), promiseUntil.outputContains("d"))
    },
    {
      name: "verified(length 4)",
      effect: () => Until.verified((output) => Effect.succeed({ pass: String(output).length === 4 })),
      promise: () => promiseUntil.verified(async (output) => ({ pass: String(output).length === 4 }))
    }
  ]

  const effectSide = (until: Until.Until<unknown>) =>
    runScoped(Effect.gen(function*() {
      const harness = yield* effectHarness
      const step = effectLoop({
        id: "grow",
        steps: [effectRunCode("append", (text: string) => Effect.succeed(text + letters[text.length]))],
        until,
        maxIterations: 9
      })
      return yield* harness.run(step, "", yield* harness.createContext())
    }))

  const promiseSide = (until: import("../src/promise/index.ts").Until) => {
    const harness = facadeHarness()
    const step = promiseLoop({
      id: "grow",
      steps: [promiseRunCode("append", (text: string) => text + letters[text.length])],
      until,
      maxIterations: 9
    })
    return harness.run(step, "", harness.createContext())
  }

  for (const { effect, name, promise } of cases) {
    it(`${name}: the same output through both doors`, async () => {
      const viaEffect = await effectSide(effect())
      expect(await promiseSide(promise())).toBe(viaEffect)
    })
  }

  it("the predicates are the engine's: a verdict carries the same reason through both doors", async () => {
    const snapshot = {
      stepCount: 3, tokens: { input: 0, output: 0, total: 0 }, elapsed: 0, cost: 0,
      lastOutput: "abc", lastText: "abc", history: [], depth: 0
    }
    const viaEffect = await Effect.runPromise(
      Until.verdictOf(Until.all(Until.maxSteps(3), Until.outputContains("c")), snapshot)
    )
    const viaPromise = await promiseAll(promiseUntil.maxSteps(3), promiseUntil.outputContains("c"))(snapshot)
    expect(viaPromise).toEqual(viaEffect)
    expect(viaEffect).toEqual({ stop: true, reason: "Reached max steps (3); Output contains marker: c" })
  })
})

describe("two doors: tool input validation", () => {
  /** A Standard Schema of `{ n: number }` that doubles `n`, as a vendor's would. */
  const schema = {
    "~standard": {
      version: 1,
      vendor: "two-doors",
      validate: (value: unknown) =>
        typeof value === "object" && value !== null && typeof (value as { n?: unknown }).n === "number"
          ? { value: { n: (value as { n: number }).n * 2 } }
          : { issues: [{ message: "n must be a number", path: [{ key: "n" }] }] }
    }
  }
  const effectSide = (args: unknown) =>
    Effect.runPromise(Effect.match(ToolInput.validate(schema, args, "check"), {
      onSuccess: (value): Outcome => ({ ok: true, value }),
      onFailure: (error): Outcome => ({ ok: false, message: error.message })
    }))
  const promiseSide = async (args: unknown): Promise<Outcome> => {
    const harness = facadeHarness()
    const step = promiseInvokeTool({ id: "check", tool: { name: "check", input: schema, execute: (parsed: unknown) => parsed } })
    try {
      return { ok: true, value: await harness.run(step, args, harness.createContext()) }
    } catch (error) {
      return { ok: false, message: messageOf(facadeCause(error)) }
    }
  }
  for (const args of [{ n: 4 }, { n: "four" }]) {
    it(`${JSON.stringify(args)}: the same parsed input or the same issues`, async () => {
      const viaEffect = await effectSide(args)
      expect(await promiseSide(args)).toEqual(viaEffect)
      expect(viaEffect).toEqual(
        typeof args.n === "number"
          ? { ok: true, value: { n: 8 } }
          : { ok: false, message: expect.stringContaining("Tool input validation failed") }
      )
    })
  }
})
