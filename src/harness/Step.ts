/**
 * Steps: the units an agent graph is built from, and their builders.
 *
 * A step is a description (its id, its kind, and what it runs); the harness
 * interprets it. Builder names follow the noetic framework: `runCode`, `callModel`,
 * `invokeTool`, `conditional`, `inParallel`, `loop`, `spawn`. A composite step is a
 * `runCode` whose body runs child steps with `ctx.run(step, input)`.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type { AiError, LanguageModel, Prompt } from "effect/ai"
import type { EmptyStepId } from "../Errors.ts"
import { callerModuleUrl } from "../internal/moduleUrl.ts"
import type { SubprocessAdapterShape } from "../services/SubprocessAdapter.ts"
import type { AgentContext } from "./AgentContext.ts"
import type { ToolFailed, UnknownTool } from "./HarnessError.ts"

/** Marks a value as a step. */
export const StepTypeId = "~noetic-effect/Step" as const

/** The kinds of step; with the step id they are a step's identity at a path. */
export type StepKind = "runCode" | "callModel" | "invokeTool" | "conditional" | "inParallel" | "loop" | "spawn"

/**
 * What a step's body sees: its execution's context plus the step's own place in the
 * run. `run` dispatches a child step below this one.
 */
export interface StepContext extends AgentContext {
  /** This dispatch's path, e.g. `/agent#0/search#1`. */
  readonly path: string
  /** Runs a child step below this one; its output replays from the ledger when recorded. */
  readonly run: <I, O, E, R>(step: Step<I, O, E, R>, input: I) => Effect.Effect<O, E | EmptyStepId, R>
}

/** Where a step was defined, so a child process can load it (see the subprocess adapters). */
export interface StepOptions {
  /**
   * The module that defines the step (`import.meta.url`), imported by a child process.
   * When absent the builder records the file URL of its caller, read from a stack
   * trace at build time; pass it to pin the module (a step built by a helper in
   * another file records the helper's caller, which may not export it).
   */
  readonly module?: string | undefined
  /** A subprocess adapter for every detached dispatch of this step. */
  readonly subprocess?: SubprocessAdapterShape | undefined
}

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

/** Runs code. Its body may run child steps through `ctx.run`. */
export interface RunCode<I, O, E, R> extends Step<I, O, E, R, "runCode"> {
  readonly body: (input: I, ctx: StepContext) => Effect.Effect<O, E, R>
}

/** One model turn and what it produced. */
export interface ModelTurn {
  /** The provider's response id (or one made from the path and the text when the provider gives none). */
  readonly responseId: string
  readonly text: string
}

/** Asks the `LanguageModel` for one turn; the turn's messages go through the append pipeline. */
export interface CallModel<I> extends Step<I, ModelTurn, AiError.AiError, LanguageModel.LanguageModel, "callModel"> {
  readonly prompt: (input: I, ctx: StepContext) => Prompt.RawInput
}

/** Calls a tool the harness was given, by name. */
export interface InvokeTool<I> extends Step<I, unknown, UnknownTool | ToolFailed, never, "invokeTool"> {
  readonly tool: string
}

/** Runs `then` or `otherwise` depending on a predicate of the input. */
export interface Conditional<I, O, E, R> extends Step<I, O, E, R, "conditional"> {
  readonly predicate: (input: I, ctx: StepContext) => boolean
  readonly then: AnyStep
  readonly otherwise: AnyStep | undefined
}

/** How `inParallel` combines its branches. */
export type ParallelMode = "all" | "race" | "settle"

/** Runs branches concurrently on the same input. */
export interface InParallel<I, O, E, R> extends Step<I, O, E, R, "inParallel"> {
  readonly branches: ReadonlyArray<AnyStep>
  readonly mode: ParallelMode
}

/** Runs a body repeatedly, each iteration on the previous output. */
export interface Loop<I, O, E, R> extends Step<I, O, E, R, "loop"> {
  readonly body: AnyStep
  readonly until: (output: O, iteration: number) => boolean
  readonly maxIterations: number
}

/** Runs a child agent in a child context whose parent is the caller's. */
export interface Spawn<I, O, E, R> extends Step<I, O, E, R, "spawn"> {
  readonly child: AnyStep
}

/** Any step. */
export type AnyStep =
  | RunCode<any, any, any, any>
  | CallModel<any>
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

const base = <K extends StepKind>(id: string, kind: K, options: StepOptions | undefined) => ({
  // Phantom: carries the type parameters only.
  [StepTypeId]: undefined as any,
  id,
  kind,
  // The first stack frame outside this library is the module that built the step: the
  // one a child process imports to find it again (skipping the facade's builders too).
  module: options?.module ?? callerModuleUrl(),
  subprocess: options?.subprocess
})

/** A step that runs an Effect-returning body; a composite when the body calls `ctx.run`. */
export const runCode = <I, O, E = never, R = never>(
  id: string,
  body: (input: I, ctx: StepContext) => Effect.Effect<O, E, R>,
  options?: StepOptions
): RunCode<I, O, E, R> => ({ ...base(id, "runCode", options), body })

/** The default prompt of `callModel`: instructions, the history window, then the input as a user message. */
export const defaultPrompt = (input: unknown, ctx: StepContext): Prompt.RawInput => {
  const messages: Array<Prompt.MessageEncoded> = []
  const instructions = ctx.layerState<{ instructions: ReadonlyArray<string> }>("instructions")
  if (instructions !== undefined && instructions.instructions.length > 0) {
    messages.push({ role: "system", content: instructions.instructions.join("\n") })
  }
  const history = ctx.layerState<{ items: ReadonlyArray<{ type: string; role?: unknown; content?: unknown }> }>(
    "history"
  )
  for (const item of history?.items ?? []) {
    if (item.type !== "message" || typeof item.content !== "string") continue
    if (item.role === "user") messages.push({ role: "user", content: item.content })
    if (item.role === "assistant") messages.push({ role: "assistant", content: item.content })
  }
  messages.push({ role: "user", content: typeof input === "string" ? input : JSON.stringify(input) })
  return messages
}

/** A model turn through the `LanguageModel` service; any `effect/ai` provider layer plugs in. */
export const callModel = <I = string>(
  id: string,
  options?: StepOptions & { readonly prompt?: (input: I, ctx: StepContext) => Prompt.RawInput }
): CallModel<I> => ({ ...base(id, "callModel", options), prompt: options?.prompt ?? defaultPrompt })

/** A call of the harness tool named `tool` with the step's input. */
export const invokeTool = <I = unknown>(id: string, tool: string, options?: StepOptions): InvokeTool<I> => ({
  ...base(id, "invokeTool", options),
  tool
})

/** Runs `then` when the predicate holds, else `otherwise` (or passes the input through). */
export const conditional = <I, Then extends AnyStep, Otherwise extends AnyStep | undefined = undefined>(
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
> => ({ ...base(id, "conditional", options), predicate: options.if, then: options.then, otherwise: options.else })

/** What one branch of a settled `inParallel` produced. */
export type Settled<O, E> =
  | { readonly _tag: "Success"; readonly value: O }
  | { readonly _tag: "Failure"; readonly error: E }

/** The output of `inParallel` in each mode. */
export type ParallelOutput<S extends ReadonlyArray<AnyStep>, M extends ParallelMode> = M extends "all"
  ? { -readonly [K in keyof S]: Output<S[K]> }
  : M extends "race" ? Output<S[number]>
  : { -readonly [K in keyof S]: Settled<Output<S[K]>, Error<S[K]>> }

/**
 * Runs the branches concurrently on the same input. `all`: every output, in order;
 * `race`: the first success (the others are interrupted); `settle`: each branch's
 * success or failure. Branch `i` dispatches under the path suffix `[i]`.
 */
export const inParallel = <I, const S extends ReadonlyArray<AnyStep>, M extends ParallelMode = "all">(
  id: string,
  branches: S,
  options?: StepOptions & { readonly mode?: M }
): InParallel<I, ParallelOutput<S, M>, M extends "settle" ? never : Error<S[number]>, Services<S[number]>> => ({
  ...base(id, "inParallel", options),
  branches,
  mode: options?.mode ?? "all"
})

/**
 * Runs `body` on the input, then on each output, until `until(output, iteration)`
 * holds or `maxIterations` ran. Each iteration has its own path (`body#0`, `body#1`...).
 */
export const loop = <S extends AnyStep>(
  id: string,
  body: S,
  options: StepOptions & {
    readonly until: (output: Output<S>, iteration: number) => boolean
    readonly maxIterations?: number
  }
): Loop<Input<S>, Output<S>, Error<S>, Services<S>> => ({
  ...base(id, "loop", options),
  body,
  until: options.until,
  maxIterations: options.maxIterations ?? 100
})

/** Runs `child` as a child agent: a fresh context whose parent is the caller's. */
export const spawn = <S extends AnyStep>(
  id: string,
  child: S,
  options?: StepOptions
): Spawn<Input<S>, Output<S>, Error<S>, Services<S>> => ({ ...base(id, "spawn", options), child })

/** The steps a step dispatches that are known when it is built. */
export const staticChildren = (step: AnyStep): ReadonlyArray<AnyStep> => {
  switch (step.kind) {
    case "conditional":
      return step.otherwise === undefined ? [step.then] : [step.then, step.otherwise]
    case "inParallel":
      return step.branches
    case "loop":
      return [step.body]
    case "spawn":
      return [step.child]
    default:
      return []
  }
}

/** Whether a value is a step. */
export const isStep = (value: unknown): value is AnyStep =>
  typeof value === "object" && value !== null && StepTypeId in value
