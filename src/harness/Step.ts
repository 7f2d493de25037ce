/**
 * Steps: the units an agent graph is built from, and their builders.
 *
 * A step is a description (its id, its kind, and what it runs); the harness
 * interprets it. Builder names and options follow the noetic framework: `runCode`,
 * `callModel`, `invokeTool`, `conditional`, `inParallel`, `loop`, `spawn`, each taking
 * noetic's option object (`runCode({ id, execute })`) with bodies that return Effects.
 * Each also keeps a positional shorthand (`runCode(id, body)`), an overload of the
 * same builder building the same step. A composite step is a `runCode` whose body
 * runs child steps with `ctx.run(step, input)`.
 *
 * Every builder fails at build time, throwing the `NoeticConfigError`-coded
 * `EmptyStepId` (`EMPTY_STEP_ID`) or `StepConfigInvalid` (`MISSING_EXECUTE_FUNCTION`, ...), as noetic's do.
 *
 * @since 0.1.0
 */
import type { AgentStreamError, StreamWriter } from "./AgentStreams.ts"
import type { Channel } from "./Channels.ts"
import * as Effect from "effect/Effect"
import type * as AiError from "effect/ai/AiError"
import type * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type { EmptyStepId } from "../Errors.ts"
import * as Build from "../internal/stepBuild.ts"
import type { SubprocessAdapterShape } from "../services/SubprocessAdapter.ts"
import type { AgentContext, ContextLayer } from "./AgentContext.ts"
import type { LoopMaxIterations, ModelOutputInvalid, SpawnTimeout, ToolFailed, UnknownTool } from "./HarnessError.ts"
import type { StepMeta } from "./StepMeta.ts"

/** Marks a value as a step. */
export const StepTypeId: typeof Build.StepTypeId = Build.StepTypeId

/** The kinds of step; with the step id they are a step's identity at a path. */
export type StepKind = Build.StepKind

/**
 * What a step's body sees: its execution's context plus the step's own place in the
 * run. `run` dispatches a child step below this one.
 */
export interface StepContext extends AgentContext {
  /** This dispatch's path, e.g. `/agent#0/search#1`. */
  readonly path: string
  /** Runs a child step below this one; its output replays from the ledger when recorded. */
  readonly run: <I, O, E, R>(step: Step<I, O, E, R>, input: I) => Effect.Effect<O, E | EmptyStepId, R>
  /**
   * A writer on the durable stream `executions/<executionId>/<name>` (default `output`):
   * each chunk exactly once across replay and re-run (docs/agent-streams.md).
   */
  readonly stream: (name?: string) => Effect.Effect<StreamWriter, AgentStreamError>
}

/** Where a step was defined, so a child process can load it (see the subprocess adapters). */
export interface StepOptions {
  /**
   * The module that defines the step (`import.meta.url`), imported by a child process.
   * When absent the builder records the file URL of its caller, read from a stack
   * trace captured at build time (and formatted when `module` is first read): the
   * first of the 4 frames below the builder outside this library and `node_modules`.
   * Pass it to pin the module (a step built by a helper in another file records the
   * helper's module, which may not export it; a helper package deeper than that
   * records none). `null` records none: no child process imports a module for it
   * (an adapter's `entry` can still define it).
   */
  readonly module?: string | null | undefined
  /** A subprocess adapter for every detached dispatch of this step. */
  readonly subprocess?: SubprocessAdapterShape | undefined
}

/** noetic's retry policy: attempts (the first included), backoff shape and the first delay in ms. */
export interface RetryPolicy {
  readonly maxAttempts: number
  readonly backoff: "fixed" | "linear" | "exponential"
  readonly initialDelay: number
  /** Upper bound in ms of one delay. */
  readonly maxDelay?: number | undefined
}

/** Parameters handed to the model with a `callModel` turn. */
export interface ModelParams {
  readonly temperature?: number
  readonly topP?: number
  readonly maxTokens?: number
  readonly stopSequences?: ReadonlyArray<string>
}

/** What a loop's `until` sees after each iteration (noetic's `Snapshot`). */
export interface Snapshot {
  /** Iterations completed successfully so far. */
  readonly stepCount: number
  readonly tokens: { readonly input: number; readonly output: number; readonly total: number }
  /** Milliseconds since the loop started. */
  readonly elapsed: number
  readonly cost: number
  readonly lastOutput: unknown
  /** The last output as text: itself when a string, its `text` field, else its JSON. */
  readonly lastText: string
  /** Prior iteration outputs, oldest first (bounded by `maxHistorySize`, default 100). */
  readonly history: Array<unknown>
  /** Nesting depth of the context the loop runs on. */
  readonly depth: number
  /** What the last `callModel` on the context produced: its tool calls, usage, cost (noetic's `StepMeta`). */
  readonly lastStepMeta?: StepMeta | undefined
}

/** A loop's decision after an iteration (noetic's `Verdict`). */
export interface Verdict {
  readonly stop: boolean
  readonly reason?: string
  readonly feedback?: string
}

/** What a loop does when an iteration fails. */
export type LoopErrorAction = "retry" | "skip" | "abort"

interface Variance<I, O, E, R> {
  readonly _I: (input: I) => void
  readonly _O: () => O
  readonly _E: () => E
  readonly _R: () => R
}

/** A step taking `I` and producing `O`, failing with `E` and needing `R`. */
export interface Step<I, O, E = never, R = never, K extends StepKind = StepKind> {
  readonly [StepTypeId]: Variance<I, O, E, R>
  readonly id: string
  readonly kind: K
  readonly module: string | undefined
  readonly subprocess: SubprocessAdapterShape | undefined
}

/**
 * How often a step's body may take effect across crashes and resumes.
 * `at-least-once` (the default): a body interrupted by a crash runs again on resume.
 * `at-most-once`: an intent is recorded durably before the body runs, and a resume
 * that finds it without a completion never calls the body again: it asks the step's
 * `reconcile`, else fails with `ToolOutcomeUnknown`.
 */
export type EffectsPolicy = "at-least-once" | "at-most-once"

/**
 * Marks the values `Reconciled.completed` and `Reconciled.rerun` build: a `reconcile`
 * answer without it (a plain object, the recorded output itself) is refused with
 * `ReconcileAnswerInvalid`, never taken for a rerun. A registered symbol, so two
 * copies of this library (its ESM and CommonJS builds) recognise each other's answers.
 */
export const ReconciledTypeId: unique symbol = Symbol.for("noetic-effect/Reconciled") as never

/** What `reconcile` found out about a body that may have run: its output, or that it must run again. */
export type Reconciled<O> =
  | { readonly [ReconciledTypeId]: typeof ReconciledTypeId; readonly _tag: "Completed"; readonly output: O }
  | { readonly [ReconciledTypeId]: typeof ReconciledTypeId; readonly _tag: "Rerun" }

/** Builds `reconcile`'s answers; only these answers are accepted. */
export const Reconciled = {
  /** The body had taken effect; `output` is recorded as its output. */
  completed: <O>(output: O): Reconciled<O> => ({ [ReconciledTypeId]: ReconciledTypeId, _tag: "Completed", output }),
  /** The body had not taken effect: run it (a fresh intent is recorded first). The only answer that runs it again. */
  rerun: Object.freeze({ [ReconciledTypeId]: ReconciledTypeId, _tag: "Rerun" }) as Reconciled<never>,
  /** Whether `u` is an answer `Reconciled.completed` or `Reconciled.rerun` built. */
  is: (u: unknown): u is Reconciled<unknown> =>
    typeof u === "object" && u !== null && (u as { [ReconciledTypeId]?: unknown })[ReconciledTypeId] === ReconciledTypeId &&
    (((u as { _tag?: unknown })._tag === "Completed" && "output" in u) || (u as { _tag?: unknown })._tag === "Rerun")
} as const

/**
 * Asks the outside world what became of an at-most-once body a crash cut short
 * (look the payment up by its idempotency key, list the sent mails...).
 */
export type Reconcile<I, O> = (input: I, ctx: StepContext) => Effect.Effect<Reconciled<O>, unknown, unknown>

/** The at-most-once fields of `runCode` and `invokeTool`. */
export interface EffectsOptions<I, O> {
  /** `at-least-once` when absent. */
  readonly effects?: EffectsPolicy | undefined
  /** Consulted on resume when an at-most-once body's outcome is unknown. */
  readonly reconcile?: Reconcile<I, O> | undefined
}

/** Runs code. Its body may run child steps through `ctx.run`. */
export interface RunCode<I, O, E, R> extends Step<I, O, E, R, "runCode"> {
  readonly effects: EffectsPolicy
  readonly reconcile: Reconcile<I, O> | undefined
  readonly body: (input: I, ctx: StepContext) => Effect.Effect<O, E, R>
  /** Re-runs a failing body on this schedule; only the final success is recorded. */
  readonly retry: RetryPolicy | undefined
}

/** One model turn and what it produced. */
export interface ModelTurn {
  /** The provider's response id (or one made from the path and the text when the provider gives none). */
  readonly responseId: string
  readonly text: string
}

/** noetic's `emit` option: whether (or which of) a step's framework events are published. */
export type EmitOption = boolean | ((eventType: string, data: Readonly<Record<string, unknown>>) => boolean)

/** Whether `emit` lets the framework event `eventType` (unprefixed) with `data` through. */
export const allowsEvent = (
  emit: EmitOption | undefined,
  eventType: string,
  data: Readonly<Record<string, unknown>>
): boolean => emit === undefined || emit === true ? true : emit === false ? false : emit(eventType, data)

/** A value given eagerly or computed from the step's context when the step runs. */
export type Lazy<T> = T | ((ctx: StepContext) => T)

/** A Standard Schema (zod, valibot, effect's `Schema.toStandardSchemaV1`...): what `callModel`'s `output` takes. */
export interface StandardSchema<O = unknown> {
  readonly "~standard": {
    readonly validate: (value: unknown) =>
      | { readonly value: O; readonly issues?: undefined }
      | { readonly issues: ReadonlyArray<{ readonly message: string }> }
      | PromiseLike<
        | { readonly value: O; readonly issues?: undefined }
        | { readonly issues: ReadonlyArray<{ readonly message: string }> }
      >
  }
}

/**
 * Asks the `LanguageModel` for one turn; the turn's messages go through the append
 * pipeline. The option form resolves with the text, or the `output` schema's value of
 * it; the positional form with the whole `ModelTurn`.
 */
export interface CallModel<I, O = ModelTurn, E = AiError.AiError>
  extends Step<I, O, E, LanguageModel.LanguageModel, "callModel">
{
  /** What the step resolves with: the turn, the text, or the text parsed by `output`. */
  readonly result: "turn" | "text" | "output"
  readonly prompt: (input: I, ctx: StepContext) => Prompt.RawInput
  /** The model id noetic names; the `LanguageModel` in context answers. */
  readonly model: Lazy<string> | undefined
  readonly instructions: Lazy<string | undefined> | undefined
  readonly params: ModelParams | undefined
  readonly tools: unknown
  readonly output: unknown
  /** The structured-output constraint given explicitly (noetic's `outputJsonSchema`). */
  readonly outputJsonSchema: Readonly<Record<string, unknown>> | undefined
  /** Which of this step's framework events a session publishes (noetic's `emit`); all when absent. */
  readonly emit: EmitOption | undefined
}

/** A tool as an object (noetic's `Tool`): a name and an `execute` returning an Effect. */
export interface ToolDefinition<I = any, O = unknown> {
  readonly name?: string
  readonly description?: string
  readonly execute: (args: I, ctx: StepContext) => Effect.Effect<O, unknown, never>
}

/** Calls a tool: a `ToolDefinition` the step carries, or a harness tool named by string. */
export interface InvokeTool<I> extends Step<I, unknown, UnknownTool | ToolFailed, never, "invokeTool"> {
  readonly effects: EffectsPolicy
  readonly reconcile: Reconcile<I, unknown> | undefined
  /** The tool's name (the harness tool it names, or the definition's name). */
  readonly tool: string
  /** The tool the step carries; the harness's tools are looked up when absent. */
  readonly definition: ToolDefinition | undefined
  /** Arguments merged over an object input (noetic's `args`). */
  readonly args: Readonly<Record<string, unknown>> | undefined
}

/** Picks the step to run from the input at run time; `null` passes the input through. */
export interface Conditional<I, O, E, R> extends Step<I, O, E, R, "conditional"> {
  readonly route: (input: I, ctx: StepContext) => Effect.Effect<AnyStep | null, unknown, unknown>
  /** The steps the route can pick that are known when the step is built. */
  readonly branches: ReadonlyArray<AnyStep>
}

/** How `inParallel` combines its branches. */
export type ParallelMode = "all" | "race" | "settle"

/** Runs branches concurrently on the same input. */
export interface InParallel<I, O, E, R> extends Step<I, O, E, R, "inParallel"> {
  /** The branches for an input (noetic's `paths`). */
  readonly paths: (input: I, ctx: StepContext) => Effect.Effect<ReadonlyArray<AnyStep>, unknown, unknown>
  /** The branches known when the step is built (the positional form's list). */
  readonly branches: ReadonlyArray<AnyStep>
  readonly mode: ParallelMode
  /** Combines the outputs (`all`) or settle results (`settle`); without it they are returned as an array. */
  readonly merge: ((results: ReadonlyArray<any>, ctx: StepContext) => Effect.Effect<unknown, unknown, unknown>) | undefined
  /** At most this many branches at once; unbounded when absent. */
  readonly concurrency: number | undefined
}

/** Runs its body steps repeatedly, each iteration on the previous output (or `prepareNext` of it). */
export interface Loop<I, O, E, R> extends Step<I, O, E | LoopMaxIterations, R, "loop"> {
  /** Run in sequence each iteration. */
  readonly steps: ReadonlyArray<AnyStep>
  readonly until: (snapshot: Snapshot) => Effect.Effect<Verdict, unknown, unknown>
  /** Iterations allowed (retries included); one more fails with `LoopMaxIterations`. Default 1000. */
  readonly maxIterations: number
  readonly maxHistorySize: number
  readonly prepareNext: ((output: O, verdict: Verdict, ctx: StepContext) => I) | undefined
  readonly onError: ((error: unknown, ctx: StepContext) => LoopErrorAction) | undefined
  /** When `until` says stop, a message here is appended as a developer message and the loop goes on. */
  readonly inbox?: Channel<any> | undefined
  /** Milliseconds to wait on `inbox` before stopping (0, the default: only what is there). */
  readonly parkTimeout?: number | undefined
}

/** Runs a child agent in a child context whose parent is the caller's. */
export interface Spawn<I, O, E, R> extends Step<I, O, E | SpawnTimeout, R, "spawn"> {
  readonly child: AnyStep
  /** The child context's layers (replacing the parent's); the harness's when absent. */
  readonly context: ReadonlyArray<ContextLayer<any>> | undefined
  /** Milliseconds the child may run before the step fails with `SpawnTimeout`. */
  readonly timeout: number | undefined
}

/** Any step. */
export type AnyStep =
  | RunCode<any, any, any, any>
  | CallModel<any, any, any>
  | InvokeTool<any>
  | Conditional<any, any, any, any>
  | InParallel<any, any, any, any>
  | Loop<any, any, any, any>
  | Spawn<any, any, any, any>

/** The input type of a step. */
export type Input<S> = S extends Step<infer I, any, any, any, any> ? I : never
/** The output type of a step. */
export type Output<S> = S extends Step<any, infer O, any, any, any> ? O : never
/** The error type of a step. */
export type Error<S> = S extends Step<any, any, infer E, any, any> ? E : never
/** The services a step needs. */
export type Services<S> = S extends Step<any, any, any, infer R, any> ? R : never

// -----------------------------------------------------------------------------
// Build-time checks (noetic's codes): src/internal/stepBuild.ts
// -----------------------------------------------------------------------------

const { asEffect, base, withModule } = Build

/** Throws `StepConfigInvalid` for a step option the builder cannot build from. */
export const invalidStep: (kind: StepKind, code: string, message: string, hint: string) => never = Build.invalidStep

/** Throws `EmptyStepId` (code `EMPTY_STEP_ID`) unless `id` is a non-blank string. */
export const checkStepId: (id: unknown, kind: StepKind) => void = Build.checkStepId

/**
 * Runs `build`, a call of a step builder made by `below` (a wrapper of the builders,
 * as the Promise facade's are): a step built in it records the module of the caller
 * of `below`, not of `below`'s own frames.
 *
 * @internal
 */
export const buildingBelow: <A>(below: Build.Builder, build: () => A) => A = Build.buildingBelow

// -----------------------------------------------------------------------------
// runCode
// -----------------------------------------------------------------------------

/** Options of `runCode` (noetic's `RunCodeOpts`, with an Effect-returning `execute`). */
export interface RunCodeOptions<I, O, E, R> extends StepOptions, EffectsOptions<I, O> {
  readonly id: string
  readonly execute: (input: I, ctx: StepContext) => Effect.Effect<O, E, R>
  readonly retry?: RetryPolicy | undefined
}

/**
 * A step that runs an Effect-returning body; a composite when the body calls `ctx.run`.
 * `runCode({ id, execute, retry?, subprocess? })`, or positionally `runCode(id, body, options?)`.
 */
export function runCode<I, O, E = never, R = never>(options: RunCodeOptions<I, O, E, R>): RunCode<I, O, E, R>
export function runCode<I, O, E = never, R = never>(
  id: string,
  body: (input: I, ctx: StepContext) => Effect.Effect<O, E, R>,
  options?: StepOptions & EffectsOptions<I, O> & { readonly retry?: RetryPolicy | undefined }
): RunCode<I, O, E, R>
export function runCode(
  idOrOptions: string | RunCodeOptions<any, any, any, any>,
  body?: (input: any, ctx: StepContext) => Effect.Effect<any, any, any>,
  options?: StepOptions & EffectsOptions<any, any> & { readonly retry?: RetryPolicy | undefined }
): RunCode<any, any, any, any> {
  const opts = typeof idOrOptions === "string" ? { ...options, id: idOrOptions, execute: body } : idOrOptions
  const built = base(opts.id, "runCode", opts)
  const effects = Build.checkRunCode(opts)
  return withModule({ ...built, body: opts.execute!, retry: opts.retry, ...effects }, opts, runCode)
}

// -----------------------------------------------------------------------------
// callModel
// -----------------------------------------------------------------------------

/** Options of `callModel` (noetic's `CallModelOpts`), plus this library's `prompt`. */
export interface CallModelOptions<I, O = string> extends StepOptions {
  readonly id: string
  /** The model id; an empty string throws `MISSING_MODEL`. */
  readonly model: Lazy<string>
  /** A system message put before the history. */
  readonly instructions?: Lazy<string | undefined> | undefined
  readonly tools?: unknown
  /** Parses the reply: its text as JSON, validated by this Standard Schema, is the step's output. */
  readonly output?: StandardSchema<O> | undefined
  /**
   * The JSON Schema sent to a `ModelProvider` as the structured-output constraint when
   * `output` gives none of its own (a validation-only schema); see `OutputSchema.ts`.
   */
  readonly outputJsonSchema?: Readonly<Record<string, unknown>> | undefined
  /**
   * The step's framework events on a session's streams (noetic's `emit`): `false` publishes
   * none, a function those it returns true for (`(eventType, data)`, the name without the
   * harness prefix). Turn events and provider (`sdk`) events are not gated.
   */
  readonly emit?: EmitOption | undefined
  readonly params?: ModelParams | undefined
  /** Builds the prompt instead of the default (instructions, history window, input). */
  readonly prompt?: ((input: I, ctx: StepContext) => Prompt.RawInput) | undefined
}

/** The default prompt of `callModel`: instructions, the history window, then the input as a user message. */
export const defaultPrompt = (input: unknown, ctx: StepContext): Prompt.RawInput => {
  const messages: Array<Prompt.MessageEncoded> = []
  const instructions = ctx.layerState<{ instructions: ReadonlyArray<string> }>("instructions")
  if (
    instructions !== undefined && Array.isArray(instructions.instructions) && instructions.instructions.length > 0
  ) {
    messages.push({ role: "system", content: instructions.instructions.join("\n") })
  }
  const history = ctx.layerState<{ items: ReadonlyArray<{ type: string; role?: unknown; content?: unknown }> }>(
    "history"
  )
  for (const item of Array.isArray(history?.items) ? history.items : []) {
    if (item.type !== "message" || typeof item.content !== "string") continue
    if (item.role === "user") messages.push({ role: "user", content: item.content })
    if (item.role === "assistant") messages.push({ role: "assistant", content: item.content })
  }
  messages.push({ role: "user", content: typeof input === "string" ? input : JSON.stringify(input) })
  return messages
}

const resolveLazy = <T>(value: Lazy<T>, ctx: StepContext): T =>
  typeof value === "function" ? (value as (ctx: StepContext) => T)(ctx) : value

/**
 * A model turn through the `LanguageModel` service; any `effect/ai` provider layer
 * plugs in. `callModel({ id, model, instructions?, ... })`, or `callModel(id, options?)`.
 */
export function callModel<I = string, O = string>(
  options: CallModelOptions<I, O>
): CallModel<I, O, AiError.AiError | ModelOutputInvalid>
export function callModel<I = string>(
  id: string,
  options?: StepOptions & Partial<Omit<CallModelOptions<I, unknown>, "id" | "output">>
): CallModel<I>
export function callModel(
  idOrOptions: string | CallModelOptions<any, any>,
  options?: StepOptions & Partial<Omit<CallModelOptions<any, any>, "id" | "output">>
): CallModel<any, any, any> {
  const opts: Partial<CallModelOptions<any, any>> = typeof idOrOptions === "string"
    ? { ...options, id: idOrOptions }
    : idOrOptions
  const built = base(opts.id!, "callModel", opts)
  Build.checkCallModel(typeof idOrOptions !== "string", opts.model, opts.output)
  const instructions = opts.instructions
  const prompt = opts.prompt ?? (instructions === undefined ? defaultPrompt : (input: unknown, ctx: StepContext) => {
    const text = resolveLazy(instructions, ctx)
    const rest = defaultPrompt(input, ctx) as ReadonlyArray<Prompt.MessageEncoded>
    return text === undefined || text === "" ? rest : [{ role: "system" as const, content: text }, ...rest]
  })
  const output = opts.output
  return withModule({
    ...built,
    result: (typeof idOrOptions === "string" ? "turn" : output === undefined ? "text" : "output") as CallModel<any, any, any>["result"],
    prompt,
    model: opts.model,
    instructions,
    params: opts.params,
    tools: opts.tools,
    output: opts.output,
    outputJsonSchema: opts.outputJsonSchema,
    emit: opts.emit
  }, opts, callModel)
}

// -----------------------------------------------------------------------------
// invokeTool
// -----------------------------------------------------------------------------

/** Options of `invokeTool` (noetic's `InvokeToolOpts`): the tool object and fixed arguments. */
export interface InvokeToolOptions<I> extends StepOptions, EffectsOptions<I, unknown> {
  readonly id: string
  readonly tool: ToolDefinition<I> | string
  readonly args?: Partial<I> | undefined
}

/**
 * A tool call. `invokeTool({ id, tool, args? })` calls the tool object it is given
 * with the input (an object input gets `args` merged over it); `invokeTool(id, name)`
 * calls the harness tool of that name.
 */
export function invokeTool<I = unknown>(options: InvokeToolOptions<I>): InvokeTool<I>
export function invokeTool<I = unknown>(
  id: string,
  tool: string,
  options?: StepOptions & EffectsOptions<I, unknown>
): InvokeTool<I>
export function invokeTool(
  idOrOptions: string | InvokeToolOptions<any>,
  tool?: string,
  options?: StepOptions & EffectsOptions<any, unknown>
): InvokeTool<any> {
  const opts: InvokeToolOptions<any> = typeof idOrOptions === "string"
    ? { ...options, id: idOrOptions, tool: tool! }
    : idOrOptions
  const built = base(opts.id, "invokeTool", opts)
  const given = opts.tool as unknown
  const isDefinition = Build.checkTool(given)
  const definition = isDefinition ? given as ToolDefinition : undefined
  return withModule({
    ...built,
    tool: definition === undefined ? given as string : definition.name ?? opts.id,
    definition,
    args: opts.args as Readonly<Record<string, unknown>> | undefined,
    ...Build.effectsOf("invokeTool", opts)
  }, opts, invokeTool)
}

// -----------------------------------------------------------------------------
// conditional
// -----------------------------------------------------------------------------

/** Options of `conditional` (noetic's): `route` picks the step to run, or `null` to pass the input through. */
export interface ConditionalOptions<I, S extends AnyStep> extends StepOptions {
  readonly id: string
  readonly route: (input: I, ctx: StepContext) => S | null | Effect.Effect<S | null, unknown, unknown>
}

/**
 * Runs the step `route` picks for the input (`null` passes the input through):
 * `conditional({ id, route })`, or `conditional(id, { if, then, else? })`.
 */
export function conditional<I, S extends AnyStep>(
  options: ConditionalOptions<I, S>
): Conditional<I, Output<S> | I, Error<S>, Services<S>>
export function conditional<I, Then extends AnyStep, Otherwise extends AnyStep | undefined = undefined>(
  id: string,
  options: StepOptions & {
    readonly if: (input: I, ctx: StepContext) => boolean
    readonly then: Then
    readonly else?: Otherwise
  }
): Conditional<
  I,
  Output<Then> | (Otherwise extends AnyStep ? Output<Otherwise> : I),
  Error<Then> | Error<Otherwise>,
  Services<Then> | Services<Otherwise>
>
export function conditional(idOrOptions: string | ConditionalOptions<any, AnyStep>, positional?: any): any {
  if (typeof idOrOptions === "string") {
    const built = base(idOrOptions, "conditional", positional)
    const { else: otherwise, if: predicate, then } = positional as {
      if: (input: unknown, ctx: StepContext) => boolean
      then: AnyStep
      else?: AnyStep
    }
    Build.checkRoute(predicate, true)
    return withModule({
      ...built,
      route: (input: unknown, ctx: StepContext) =>
        Effect.sync(() => predicate(input, ctx) ? then : otherwise ?? null),
      branches: otherwise === undefined ? [then] : [then, otherwise]
    }, positional, conditional)
  }
  const built = base(idOrOptions.id, "conditional", idOrOptions)
  const route = idOrOptions.route
  Build.checkRoute(route, false)
  return withModule({
    ...built,
    route: (input: unknown, ctx: StepContext) => Effect.suspend(() => asEffect(route(input, ctx))),
    branches: []
  }, idOrOptions, conditional)
}

// -----------------------------------------------------------------------------
// inParallel
// -----------------------------------------------------------------------------

/** One branch of a `settle` run, shaped as noetic's `SettleResult` (with a `_tag` as well). */
export type Settled<O, E> =
  | {
    readonly _tag: "Success"
    readonly stepId: string
    readonly status: "fulfilled"
    readonly value: O
  }
  | {
    readonly _tag: "Failure"
    readonly stepId: string
    readonly status: "rejected"
    readonly error: E
  }

/** The output of `inParallel` in each mode, when no `merge` is given. */
export type ParallelOutput<S extends ReadonlyArray<AnyStep>, M extends ParallelMode> = M extends "all"
  ? { -readonly [K in keyof S]: Output<S[K]> }
  : M extends "race" ? Output<S[number]>
  : { -readonly [K in keyof S]: Settled<Output<S[K]>, Error<S[K]>> }

/** Options of `inParallel` (noetic's): `paths` gives the branches for an input; `merge` combines their results. */
export type InParallelOptions<I, S extends AnyStep, O> =
  & StepOptions
  & {
    readonly id: string
    readonly paths: (input: I, ctx: StepContext) => ReadonlyArray<S>
    readonly concurrency?: number | undefined
  }
  & (
    | { readonly mode: "race" }
    | {
      readonly mode: "all"
      readonly merge: (results: Array<Output<S>>, ctx: StepContext) => O | Effect.Effect<O, unknown, unknown>
    }
    | {
      readonly mode: "settle"
      readonly merge: (
        results: Array<Settled<Output<S>, Error<S>>>,
        ctx: StepContext
      ) => O | Effect.Effect<O, unknown, unknown>
    }
  )

/**
 * Runs branches concurrently on the same input. `all`: every output, in order (a
 * branch failing fails the step); `race`: the first success (the others are
 * interrupted); `settle`: each branch's `{ stepId, status, value | error }`. Branch
 * `i` dispatches under the path suffix `[i]`. `inParallel({ id, mode, paths, merge?,
 * concurrency? })` (merge required for `all` and `settle`), or
 * `inParallel(id, branches, { mode? })` (results returned as they are).
 */
export function inParallel<I, S extends AnyStep, O = Output<S>>(
  options: InParallelOptions<I, S, O>
): InParallel<I, O, unknown, Services<S>>
export function inParallel<I, const S extends ReadonlyArray<AnyStep>, M extends ParallelMode = "all">(
  id: string,
  branches: S,
  options?: StepOptions & { readonly mode?: M; readonly concurrency?: number | undefined }
): InParallel<I, ParallelOutput<S, M>, M extends "settle" ? never : Error<S[number]>, Services<S[number]>>
export function inParallel(idOrOptions: string | InParallelOptions<any, AnyStep, any>, branches?: any, positional?: any): any {
  if (typeof idOrOptions === "string") {
    const built = base(idOrOptions, "inParallel", positional)
    const list = branches as ReadonlyArray<AnyStep>
    return withModule({
      ...built,
      paths: () => Effect.succeed(list),
      branches: list,
      mode: positional?.mode ?? "all",
      merge: undefined,
      concurrency: Build.checkConcurrency(positional?.concurrency)
    }, positional, inParallel)
  }
  const opts = idOrOptions
  const built = base(opts.id, "inParallel", opts)
  const merge = "merge" in opts ? opts.merge : undefined
  Build.checkParallel(opts.mode, merge, opts.paths)
  return withModule({
    ...built,
    paths: (input: unknown, ctx: StepContext) => Effect.sync(() => opts.paths(input, ctx)),
    branches: [],
    mode: opts.mode,
    merge: merge === undefined
      ? undefined
      : (results: ReadonlyArray<any>, ctx: StepContext) => Effect.suspend(() => asEffect((merge as any)(results, ctx))),
    concurrency: Build.checkConcurrency(opts.concurrency)
  }, opts, inParallel)
}

// -----------------------------------------------------------------------------
// loop
// -----------------------------------------------------------------------------

/** Options of `loop` (noetic's `LoopConfig`, with an `until` that may return an Effect). */
export interface LoopOptions<S extends AnyStep> extends StepOptions {
  readonly id: string
  readonly steps: ReadonlyArray<S>
  readonly until: (snapshot: Snapshot) => Verdict | Effect.Effect<Verdict, unknown, unknown>
  readonly maxIterations?: number | undefined
  readonly maxHistorySize?: number | undefined
  readonly prepareNext?: ((output: Output<S>, verdict: Verdict, ctx: StepContext) => Input<S>) | undefined
  readonly onError?: ((error: unknown, ctx: StepContext) => LoopErrorAction) | undefined
  /** docs/layers-and-channels.md#loop-inbox */
  readonly inbox?: Channel<any> | undefined
  readonly parkTimeout?: number | undefined
  /**
   * A `maxIterations` below 1, NaN or Infinity fails the loop when it runs
   * (`InvalidMaxIterations`, as noetic does) instead of being refused when it is built.
   * @internal The Promise facade's, for noetic's code.
   */
  readonly checkMaxIterationsWhenRun?: boolean | undefined
}

/**
 * Runs the body on the input, then on each output (or on `prepareNext(output,
 * verdict, ctx)`), until `until(snapshot)` says stop; past `maxIterations` (default
 * 1000) it fails with `LoopMaxIterations`. `loop({ id, steps, until, ... })`, or
 * positionally `loop(id, body, { until: (output, iteration) => boolean })`. Each
 * iteration has its own path (`body#0`, `body#1`...).
 */
export function loop<S extends AnyStep>(
  options: LoopOptions<S>
): Loop<Input<S>, Output<S>, Error<S>, Services<S>>
export function loop<S extends AnyStep>(
  id: string,
  body: S,
  options: StepOptions & {
    readonly until: (output: Output<S>, iteration: number) => boolean
    readonly maxIterations?: number
  }
): Loop<Input<S>, Output<S>, Error<S>, Services<S>>
export function loop(idOrOptions: string | LoopOptions<AnyStep>, body?: AnyStep, positional?: any): any {
  const opts: LoopOptions<AnyStep> = typeof idOrOptions === "string"
    ? {
      ...positional,
      id: idOrOptions,
      steps: body === undefined ? [] : [body],
      until: typeof positional?.until === "function"
        ? (snapshot: Snapshot) => ({ stop: positional.until(snapshot.lastOutput, snapshot.stepCount - 1) })
        : undefined
    }
    : idOrOptions
  const built = base(opts.id, "loop", opts)
  const maxIterations = opts.maxIterations ?? 1000
  Build.checkLoop(opts.steps, opts.until, maxIterations, opts.checkMaxIterationsWhenRun === true)
  const until = opts.until
  return withModule({
    ...built,
    steps: opts.steps,
    until: (snapshot: Snapshot) => Effect.suspend(() => asEffect(until(snapshot))),
    maxIterations,
    maxHistorySize: opts.maxHistorySize ?? 100,
    prepareNext: opts.prepareNext,
    onError: opts.onError,
    inbox: opts.inbox,
    parkTimeout: opts.parkTimeout
  }, opts, loop)
}

// -----------------------------------------------------------------------------
// spawn
// -----------------------------------------------------------------------------

/** Options of `spawn` (noetic's `SpawnOpts`). */
export interface SpawnOptions<S extends AnyStep> extends StepOptions {
  readonly id: string
  readonly child: S
  /** The child context's layers, replacing the parent's. */
  readonly context?: ReadonlyArray<ContextLayer<any>> | undefined
  /** Milliseconds before the step fails with `SpawnTimeout` (the child is interrupted). */
  readonly timeout?: number | undefined
}

/**
 * Runs `child` as a child agent: a fresh context whose parent is the caller's.
 * `spawn({ id, child, context?, timeout?, subprocess? })`, or `spawn(id, child, options?)`.
 */
export function spawn<S extends AnyStep>(options: SpawnOptions<S>): Spawn<Input<S>, Output<S>, Error<S>, Services<S>>
export function spawn<S extends AnyStep>(
  id: string,
  child: S,
  options?: StepOptions & { readonly timeout?: number | undefined }
): Spawn<Input<S>, Output<S>, Error<S>, Services<S>>
export function spawn(idOrOptions: string | SpawnOptions<AnyStep>, child?: AnyStep, positional?: any): any {
  const opts: SpawnOptions<AnyStep> = typeof idOrOptions === "string"
    ? { ...positional, id: idOrOptions, child: child! }
    : idOrOptions
  const built = base(opts.id, "spawn", opts)
  Build.checkSpawn(opts.child, opts.timeout)
  return withModule({ ...built, child: opts.child, context: opts.context, timeout: opts.timeout }, opts, spawn)
}

/** The steps a step dispatches that are known when it is built. */
export const staticChildren = (shown: AnyStep): ReadonlyArray<AnyStep> => {
  const step = runsAs(shown)
  switch (step.kind) {
    case "conditional":
    case "inParallel":
      return step.branches
    case "loop":
      return step.steps
    case "spawn":
      return [step.child]
    default:
      return []
  }
}

/** Whether a value is a step. */
export const isStep = (value: unknown): value is AnyStep => Build.hasStepTypeId(value)

/**
 * `step` shown with other fields (noetic's steps are plain data); the interpreter runs
 * it as `step`. See `internal/stepBuild.ts` and docs/runtime.md#step-objects.
 */
export const withPlainFields: <S extends AnyStep, F extends object>(step: S, fields: F) => S & F = Build.withPlainFields

/** The step the interpreter runs for `step`: itself, or the step `withPlainFields` showed. */
export const runsAs: <S extends AnyStep>(step: S) => S = Build.runsAs
