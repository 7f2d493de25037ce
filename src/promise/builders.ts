/**
 * The step builders in noetic's shapes (`runCode`, `conditional`, `inParallel`, `loop`,
 * `spawn`): option objects, bodies returning values or Promises, and noetic's plain
 * step objects built once with the builder of their kind.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Step from "../harness/Step.ts"
import { noeticRetry } from "../internal/stepBuild.ts"
import {
  isConfigError,
  bodyFailure,
  hostThrown,
  type NoeticErrorPayload,
  toFacadeError,
  payloadOf
} from "./errors.ts"
import * as Bridge from "./bridge.ts"
import { type SubprocessAdapter } from "./subprocess.ts"
import { toEngineSubprocessShape } from "./subprocessBridge.ts"
import type { Channel } from "./channels.ts"
import type { Channel as EngineChannel } from "../harness/Channels.ts"
import { type ContextConfig, type ContextLayer, layersOf, layerStorageDefault, toEngineLayer } from "./layers.ts"
import { type AgentContext, hostCall, StepContext } from "./context.ts"
import { type AnyStep, asStep, asSteps, registerPlainBuilder } from "./plainSteps.ts"

export type { RetryPolicy, Snapshot, Verdict } from "../harness/Step.ts"
export { type AnyStep, asStep, asSteps }

// -----------------------------------------------------------------------------
// Step builders
// -----------------------------------------------------------------------------

/** noetic's name for a step, `Step<TContext, I, O>`; the context type parameter is accepted and not used. */
export type NoeticStep<_TContext = any, I = any, O = any> = AnyStep<I, O>

/** noetic's name for a context, `Context<TContext, TState>`: this library's `AgentContext`. */
export type NoeticContext<_TContext = any, _TState = unknown> = AgentContext

/** The subprocess adapter a facade step was built with (`runCode`/`spawn` option `subprocess`). */


/** The subprocess adapter a step was built with, if any: `detachedSpawn` dispatches it there. */
export const subprocessOf = (step: AnyStep): SubprocessAdapter | undefined =>
  Bridge.stepSubprocess.get(step) as SubprocessAdapter | undefined

/** Options every builder's positional form takes. */
export interface StepBuildOptions {
  /**
   * The module that defines the step (`import.meta.url`), imported by a child process;
   * `null` records none (a child process then needs the adapter's `registryEntry`).
   */
  readonly module?: string | null
  /** A subprocess adapter for every detached dispatch of this step. */
  readonly subprocess?: SubprocessAdapter
}

/** Builds with the engine builder, turning its config failure into `NoeticConfigError`. */
export const build = <A extends object>(f: () => A, subprocess?: SubprocessAdapter): A => {
  let built: A
  try {
    // The step's module is that of the caller of the facade's builder, which called this.
    built = Step.buildingBelow(build, f)
  } catch (error) {
    if (isConfigError(error)) throw toFacadeError(error)
    throw error
  }
  if (subprocess !== undefined) Bridge.stepSubprocess.attach(built, subprocess)
  return built
}

export const engineStepOptions = (options: StepBuildOptions | undefined): Step.StepOptions => ({
  ...(options?.module === undefined ? {} : { module: options.module }),
  // The engine dispatches a runCode or spawn with its own adapter through it (see subprocessBridge);
  // one the engine cannot use throws NoeticConfigError here, when the step is built.
  ...(options?.subprocess === undefined
    ? {}
    : { subprocess: toEngineSubprocessShape(options.subprocess, "the step's subprocess option") })
})

/**
 * A Promise-returning body as an Effect body. What it throws rejects, as in noetic,
 * as a `step_failed` NoeticError of step `stepId` whose cause is the thrown value.
 */
export const effectBody = <I, O>(
  body: (input: I, ctx: StepContext) => O | PromiseLike<O>,
  stepId: string,
  retriesExhausted: boolean
) =>
(input: I, ctx: Step.StepContext): Effect.Effect<Awaited<O>, unknown> =>
  Effect.contextWith((services: Context.Context<never>) =>
    hostCall(
      // On a later tick, as before: the body never runs inside the engine's own step.
      (signal) => Promise.resolve().then(() => body(input, new StepContext(ctx, services, signal))),
      (thrown) => bodyFailure(stepId, thrown, retriesExhausted)
    ))

/** A signal that never aborts, for a facade context made outside a running body. */
export const neverAborted: AbortSignal = new AbortController().signal

/** A facade context for a function the engine calls outside a body (lazy options, loop hooks). */
export const facadeContext = (ctx: Step.StepContext): StepContext => new StepContext(ctx, Context.empty(), neverAborted)

/** A value or a Promise as an Effect failing with what was thrown. */
export const fromPromise = <A>(f: () => A | PromiseLike<A>): Effect.Effect<Awaited<A>, unknown> =>
  Effect.tryPromise({ try: () => Promise.resolve().then(f) as Promise<Awaited<A>>, catch: hostThrown })


/** What `reconcile` answers: `Reconciled.completed(output)` or `Reconciled.rerun`. */
export type Reconciled<O> = Step.Reconciled<O>

/** Builds `reconcile`'s answers: `Reconciled.completed(output)`, `Reconciled.rerun`. */
export const Reconciled = Step.Reconciled

/**
 * At-most-once options of `runCode` and `invokeTool`. With `effects: 'at-most-once'`
 * an intent is recorded durably before the body runs; a resume that finds it without
 * a completion never calls the body again: it calls `reconcile(input, ctx)`, or
 * rejects with a `NoeticError` code `TOOL_OUTCOME_UNKNOWN` when there is none.
 */
export interface EffectsOptions<I, O> {
  /** `'at-least-once'` (default): a body a crash cut short runs again on resume. */
  readonly effects?: Step.EffectsPolicy
  /** Finds out what became of a body a crash cut short. */
  readonly reconcile?: (input: I, ctx: StepContext) => Reconciled<O> | Promise<Reconciled<O>>
}

/** The engine's form of an at-most-once option pair. */
export const engineEffects = <I, O>(
  opts: EffectsOptions<I, O>
): { readonly effects?: Step.EffectsPolicy; readonly reconcile?: Step.Reconcile<I, O> } => {
  const reconcile = opts.reconcile
  return {
    ...(opts.effects === undefined ? {} : { effects: opts.effects }),
    ...(reconcile === undefined ? {} : {
      reconcile: typeof reconcile === "function"
        ? (input: I, ctx: Step.StepContext) =>
          Effect.contextWith((services: Context.Context<never>) =>
            fromPromise(() => reconcile(input, new StepContext(ctx, services, neverAborted))))
        : reconcile as never
    })
  }
}

/** Options of `runCode` (noetic's `RunCodeOpts`). */
export interface RunCodeOptions<I, O> extends StepBuildOptions, EffectsOptions<I, O> {
  readonly id: string
  readonly execute: (input: I, ctx: StepContext) => O | Promise<O>
  readonly retry?: Step.RetryPolicy
}

/** A `runCode` step as noetic shows it (`StepRunCode`): the step, with the fields it was given. */
export type RunCodeStep<I, O> = AnyStep<I, Awaited<O>> & {
  readonly kind: "runCode"
  readonly execute: (input: I, ctx: StepContext) => O | Promise<O>
  readonly retry: Step.RetryPolicy | undefined
}

/**
 * A step that runs `execute`; a composite when it calls `ctx.run` (or
 * `ctx.harness.run(step, input, ctx)`). `retry` re-runs a failing body on its
 * schedule, recording only the final success. Throws `NoeticConfigError`
 * `EMPTY_STEP_ID` / `MISSING_EXECUTE_FUNCTION`. The positional `runCode(id, body,
 * options?)` builds the same step.
 */
export function runCode<I, O>(options: RunCodeOptions<I, O>): RunCodeStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function runCode<TContext, I, O>(options: RunCodeOptions<I, O>): RunCodeStep<I, O>
export function runCode<I, O>(
  id: string,
  body: (input: I, ctx: StepContext) => O | Promise<O>,
  options?: StepBuildOptions & { readonly retry?: Step.RetryPolicy }
): AnyStep<I, Awaited<O>>
export function runCode(
  idOrOptions: string | RunCodeOptions<any, any>,
  body?: (input: any, ctx: StepContext) => unknown,
  options?: StepBuildOptions & { readonly retry?: Step.RetryPolicy }
): AnyStep {
  const opts = typeof idOrOptions === "string" ? { ...options, id: idOrOptions, execute: body! } : idOrOptions
  const { noAttempts, retry } = noeticRetry(opts.retry)
  const execute = noAttempts && typeof opts.execute === "function"
    ? () => Promise.reject(new Error("No attempts executed"))
    : opts.execute
  const built = build(() =>
    Step.runCode({
      ...engineStepOptions(opts),
      id: opts.id,
      execute: (typeof execute === "function"
        ? effectBody(execute, opts.id, (retry?.maxAttempts ?? 1) > 1)
        : execute) as any,
      ...(retry === undefined ? {} : { retry }),
      ...engineEffects(opts)
    }), opts.subprocess)
  // noetic's step is plain data: `runCode(...).execute` is the function it was given.
  return Step.withPlainFields(built, { execute: opts.execute, retry: opts.retry })
}

/** Options of `conditional` (noetic's): `route` picks the next step, or `null` to pass the input through. */
export interface ConditionalOptions<I, O> extends StepBuildOptions {
  readonly id: string
  readonly route: (input: I, ctx: StepContext) => AnyStep<I, O> | null | Promise<AnyStep<I, O> | null>
}

/** A `conditional` step as noetic shows it (`StepConditional`). */
export type ConditionalStep<I, O> = AnyStep<I, O> & {
  readonly kind: "conditional"
  readonly route: ConditionalOptions<I, O>["route"]
}

/**
 * Runs the step `route` picks at run time (`null` passes the input through). Throws
 * `EMPTY_STEP_ID` / `MISSING_ROUTE_FUNCTION`. `conditional(id, { if, then, else? })`
 * is the positional form.
 */
export function conditional<I, O>(options: ConditionalOptions<I, O>): ConditionalStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function conditional<TContext, I, O>(options: ConditionalOptions<I, O>): ConditionalStep<I, O>
export function conditional<I, O>(
  id: string,
  options: StepBuildOptions & {
    readonly if: (input: I) => boolean
    readonly then: AnyStep<I, O>
    readonly else?: AnyStep<I, O>
  }
): AnyStep<I, O>
export function conditional(idOrOptions: string | ConditionalOptions<any, any>, positional?: any): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() => Step.conditional(idOrOptions, { ...positional, ...engineStepOptions(positional) }))
  }
  const route = idOrOptions.route
  return Step.withPlainFields(build(() =>
    Step.conditional({
      ...engineStepOptions(idOrOptions),
      id: idOrOptions.id,
      route: (typeof route === "function"
        ? (input: unknown, ctx: Step.StepContext) =>
          Effect.contextWith((services: Context.Context<never>) =>
            Effect.map(
              fromPromise(() => route(input, new StepContext(ctx, services, neverAborted))),
              (picked) => (picked === null || picked === undefined ? picked : asStep(picked))
            ))
        : route) as any
    })
  ), { route })
}

/** One path's outcome in a `settle` inParallel (noetic's `SettleResult`). */
export interface SettleResult<O> {
  stepId: string
  status: "fulfilled" | "rejected"
  value?: O
  error?: NoeticErrorPayload
}

/** Options of `inParallel` (noetic's; `merge` required for `all` and `settle`). */
export type InParallelOptions<I, O> =
  & StepBuildOptions
  & {
    readonly id: string
    readonly paths: (input: I, ctx: StepContext) => Array<AnyStep<I, O>> | ReadonlyArray<AnyStep<I, O>>
    readonly concurrency?: number
  }
  & (
    | { readonly mode: "race" }
    | { readonly mode: "all"; readonly merge: (results: Array<O>, ctx: StepContext) => O | Promise<O> }
    | { readonly mode: "settle"; readonly merge: (results: Array<SettleResult<O>>, ctx: StepContext) => O | Promise<O> }
  )

/** An `inParallel` step as noetic shows it (`StepInParallel`): `paths(input, ctx)` gives the array its function gives. */
export type InParallelStep<I, O> = AnyStep<I, O> & {
  readonly kind: "inParallel"
  readonly mode: "race" | "all" | "settle"
  readonly paths: InParallelOptions<I, O>["paths"]
  readonly merge: ((results: Array<any>, ctx: StepContext) => O | Promise<O>) | undefined
  readonly concurrency: number | undefined
}

/**
 * Runs paths concurrently on the same input: `all` (merge of every output; a failing
 * path fails the step), `race` (the first success), `settle` (merge of `{ stepId,
 * status, value?, error? }`). Throws `EMPTY_STEP_ID` / `MISSING_MERGE_FUNCTION`.
 * `inParallel(id, branches, { mode? })` is the positional form (results unmerged).
 */
export function inParallel<I, O>(options: InParallelOptions<I, O>): InParallelStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function inParallel<TContext, I, O>(options: InParallelOptions<I, O>): InParallelStep<I, O>
export function inParallel<I>(
  id: string,
  branches: ReadonlyArray<AnyStep<I>>,
  options?: StepBuildOptions & { readonly mode?: Step.ParallelMode; readonly concurrency?: number }
): AnyStep<I, any>
export function inParallel(
  idOrOptions: string | InParallelOptions<any, any>,
  branches?: ReadonlyArray<AnyStep>,
  positional?: StepBuildOptions & { readonly mode?: Step.ParallelMode; readonly concurrency?: number }
): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() =>
      Step.inParallel(idOrOptions, asSteps(branches ?? []) as ReadonlyArray<Step.AnyStep>, {
        ...engineStepOptions(positional),
        ...(positional?.mode === undefined ? {} : { mode: positional.mode }),
        ...(positional?.concurrency === undefined ? {} : { concurrency: positional.concurrency })
      })
    )
  }
  const opts = idOrOptions
  const paths = opts.paths
  const merge = "merge" in opts ? opts.merge : undefined
  return Step.withPlainFields(build(() =>
    Step.inParallel({
      ...engineStepOptions(opts),
      id: opts.id,
      mode: opts.mode,
      ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
      paths: (typeof paths === "function"
        ? (input: unknown, ctx: Step.StepContext) => asSteps(paths(input, facadeContext(ctx))) as ReadonlyArray<Step.AnyStep>
        : paths) as any,
      ...(merge === undefined ? {} : {
        merge: typeof merge === "function"
          ? (results: Array<any>, ctx: Step.StepContext) =>
            fromPromise(() =>
              (merge as (results: Array<unknown>, ctx: StepContext) => unknown)(
                opts.mode === "settle"
                  ? results.map((result: Step.Settled<unknown, unknown>): SettleResult<unknown> =>
                    result.status === "fulfilled"
                      ? { stepId: result.stepId, status: "fulfilled", value: result.value }
                      : { stepId: result.stepId, status: "rejected", error: payloadOf(result.error, result.stepId) }
                  )
                  : results,
                facadeContext(ctx)
              )
            )
          : merge
      })
    } as any)
  ), { mode: opts.mode, paths, merge, concurrency: opts.concurrency })
}

/** Options of `loop` (noetic's `LoopConfig`). */
export interface LoopOptions<I, O> extends StepBuildOptions {
  readonly id: string
  /** Run in sequence each iteration, each on the previous one's output. */
  readonly steps: ReadonlyArray<AnyStep<I, O>>
  readonly until: (snapshot: Step.Snapshot) => Step.Verdict | Promise<Step.Verdict>
  /** Iterations allowed, retries included (default 1000); one more rejects with a `step_failed` NoeticError. */
  readonly maxIterations?: number
  readonly maxHistorySize?: number
  readonly prepareNext?: (output: O, verdict: Step.Verdict, ctx: StepContext) => I
  readonly onError?: (error: NoeticErrorPayload, ctx: StepContext) => "retry" | "skip" | "abort"
  /** When `until` says stop, a message here becomes a developer message and the loop goes on. */
  readonly inbox?: Channel<any>
  /** Milliseconds to wait on `inbox` before stopping (default 0: only what is there). */
  readonly parkTimeout?: number
}

/** A `loop` step as noetic shows it (`StepLoop`): the fields it was given. */
export type LoopStep<I, O> = AnyStep<I, O> & {
  readonly kind: "loop"
  readonly steps: ReadonlyArray<AnyStep<I, O>>
  readonly until: LoopOptions<I, O>["until"]
  readonly maxIterations: number | undefined
  readonly maxHistorySize: number | undefined
  readonly inbox: Channel<any> | undefined
  readonly parkTimeout: number | undefined
  readonly prepareNext: LoopOptions<I, O>["prepareNext"]
  readonly onError: LoopOptions<I, O>["onError"]
}

/**
 * Runs `steps` in sequence, then `until(snapshot)`; stops when the verdict says so,
 * else runs again on the output (or `prepareNext(output, verdict, ctx)`). Throws
 * `EMPTY_STEP_ID` / `MISSING_LOOP_BODY` / `MISSING_UNTIL_PREDICATE`. The positional
 * `loop(id, body, { until: (output, iteration) => boolean })` builds the same step.
 */
export function loop<I, O = I>(options: LoopOptions<I, O>): LoopStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function loop<TContext, I, O>(options: LoopOptions<I, O>): LoopStep<I, O>
export function loop<I>(
  id: string,
  body: AnyStep<I, I>,
  options: StepBuildOptions & {
    readonly until: (output: I, iteration: number) => boolean
    readonly maxIterations?: number
  }
): AnyStep<I, I>
export function loop(idOrOptions: string | LoopOptions<any, any>, body?: AnyStep, positional?: any): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() =>
      Step.loop(idOrOptions, asStep(body!) as Step.AnyStep, { ...positional, ...engineStepOptions(positional) })
    )
  }
  const opts = idOrOptions
  const until = opts.until
  const prepareNext = opts.prepareNext
  const onError = opts.onError
  const stepId = opts.id
  return Step.withPlainFields(build(() =>
    Step.loop({
      ...engineStepOptions(opts),
      id: opts.id,
      steps: asSteps(opts.steps) as ReadonlyArray<Step.AnyStep>,
      until: (typeof until === "function" ? (snapshot: Step.Snapshot) => fromPromise(() => until(snapshot)) : until) as any,
      ...(opts.maxIterations === undefined ? {} : { maxIterations: opts.maxIterations }),
      // noetic builds any maxIterations and fails the loop when it runs with a bad one.
      checkMaxIterationsWhenRun: true,
      ...(opts.maxHistorySize === undefined ? {} : { maxHistorySize: opts.maxHistorySize }),
      ...(opts.inbox === undefined ? {} : { inbox: opts.inbox as EngineChannel<any> }),
      ...(opts.parkTimeout === undefined ? {} : { parkTimeout: opts.parkTimeout }),
      ...(prepareNext === undefined ? {} : {
        prepareNext: (output: unknown, verdict: Step.Verdict, ctx: Step.StepContext) =>
          prepareNext(output, verdict, facadeContext(ctx))
      }),
      ...(onError === undefined ? {} : {
        onError: (error: unknown, ctx: Step.StepContext) => onError(payloadOf(error, stepId), facadeContext(ctx))
      })
    })
  ), {
    steps: opts.steps,
    until,
    maxIterations: opts.maxIterations,
    maxHistorySize: opts.maxHistorySize,
    inbox: opts.inbox,
    parkTimeout: opts.parkTimeout,
    prepareNext,
    onError
  })
}

/** Options of `spawn` (noetic's `SpawnOpts`). */
export interface SpawnOptions<I, O> extends StepBuildOptions {
  readonly id: string
  readonly child: AnyStep<I, O>
  /** The child context's layers, instead of the harness's: an array, or a `ContextConfig` from `context([...])`. */
  readonly context?: ReadonlyArray<ContextLayer> | ContextConfig
  /** Milliseconds the child may run; past it the step rejects with a `NoeticError` code `SPAWN_TIMEOUT`. */
  readonly timeout?: number
}

/** A `spawn` step as noetic shows it (`StepSpawn`): the fields it was given. */
export type SpawnStep<I, O> = AnyStep<I, O> & {
  readonly kind: "spawn"
  readonly child: AnyStep<I, O>
  readonly context: ReadonlyArray<ContextLayer> | ContextConfig | undefined
  readonly timeout: number | undefined
}

/**
 * Runs `child` as a child agent in a context whose parent is the caller's. Throws
 * `EMPTY_STEP_ID` / `MISSING_CHILD_STEP`. `spawn(id, child, options?)` is the
 * positional form.
 */
export function spawn<I, O>(options: SpawnOptions<I, O>): SpawnStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function spawn<TContext, I, O>(options: SpawnOptions<I, O>): SpawnStep<I, O>
export function spawn<I, O>(
  id: string,
  child: AnyStep<I, O>,
  options?: StepBuildOptions & { readonly timeout?: number }
): AnyStep<I, O>
export function spawn(idOrOptions: string | SpawnOptions<any, any>, child?: AnyStep, positional?: any): AnyStep {
  const opts: SpawnOptions<any, any> = typeof idOrOptions === "string"
    ? { ...positional, id: idOrOptions, child: child! }
    : idOrOptions
  const context = layersOf(opts.context)?.map((layer) => toEngineLayer(layer, layerStorageDefault()))
  const built = build(() =>
    Step.spawn({
      ...engineStepOptions(opts),
      id: opts.id,
      child: asStep(opts.child) as Step.AnyStep,
      ...(context === undefined ? {} : { context }),
      ...(opts.timeout === undefined ? {} : { timeout: opts.timeout })
    }), opts.subprocess)
  // The positional form is this library's own; noetic's is shown with the fields it was given.
  return typeof idOrOptions === "string"
    ? built
    : Step.withPlainFields(built, { child: opts.child, context: opts.context, timeout: opts.timeout })
}

/**
 * noetic's `execute(step, input, ctx)`: runs `step` on `ctx` through its harness, below
 * the calling step when `ctx` is a running step's context (`ctx.harness.run(step, input, ctx)`).
 */
export const execute = <I, O>(step: AnyStep<I, O>, input: I, ctx: AgentContext): Promise<O> =>
  ctx.harness.run(step, input, ctx)

registerPlainBuilder("runCode", runCode)
registerPlainBuilder("spawn", spawn)
registerPlainBuilder("loop", loop)
registerPlainBuilder("inParallel", inParallel)
registerPlainBuilder("conditional", conditional)
