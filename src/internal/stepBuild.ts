/**
 * How `harness/Step.ts` builds a step: its identity fields, the module that defined
 * it, and the build-time checks every builder makes, throwing noetic's codes
 * (`EMPTY_STEP_ID`, then `StepConfigInvalid` with `MISSING_EXECUTE_FUNCTION`,
 * `INVALID_RETRY_POLICY`, ...). The public builders, and the types of the steps they
 * build, are `Step.ts`'s; the options are read here through the few fields each check
 * looks at.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { EmptyStepId, StepConfigInvalid } from "../Errors.ts"
import { callerModuleUrlLater } from "./moduleUrl.ts"

/** Marks a value as a step (`Step.StepTypeId`). */
export const StepTypeId = "~noetic-effect/Step" as const

/** The kinds of step (`Step.StepKind`). */
export type StepKind = "runCode" | "callModel" | "invokeTool" | "conditional" | "inParallel" | "loop" | "spawn"

/** Throws `StepConfigInvalid` for a step option the builder cannot build from. */
export const invalidStep = (kind: StepKind, code: string, message: string, hint: string): never => {
  throw new StepConfigInvalid({ kind, code, message: `${kind}() ${message}`, hint })
}

/** Throws `EmptyStepId` (code `EMPTY_STEP_ID`) unless `id` is a non-blank string. */
export const checkStepId = (id: unknown, kind: StepKind): void => {
  if (typeof id !== "string" || id.trim() === "") {
    throw new EmptyStepId({
      kind,
      message: `${kind}() requires a non-empty id.`,
      hint: `Pass a unique string as the id field, e.g. ${kind}({ id: "my-step", ... }); it names the step's path in the ledger.`
    })
  }
}

/** The fields every step has, its id checked. */
export const base = <K extends StepKind, A>(id: string, kind: K, options: { readonly subprocess?: A } | undefined) => {
  checkStepId(id, kind)
  return {
    // Phantom: carries the type parameters only.
    [StepTypeId]: undefined as any,
    id,
    kind,
    subprocess: options?.subprocess
  }
}

/** Whether a value carries the step mark. */
export const hasStepTypeId = (value: unknown): boolean =>
  typeof value === "object" && value !== null && StepTypeId in value

/** A step builder, or a wrapper of one: a function on the stack while a step is built. */
export type Builder = (...args: ReadonlyArray<never>) => unknown

/** The wrapper of a step builder running now, if any (see {@link buildingBelow}). */
let wrapper: Builder | undefined

/**
 * Runs `build`, a call of a step builder made by `below` (a wrapper of the builders,
 * as the Promise facade's are): a step built in it records the module of the caller
 * of `below`, not of `below`'s own frames.
 */
export const buildingBelow = <A>(below: Builder, build: () => A): A => {
  const outer = wrapper
  wrapper = below
  try {
    return build()
  } finally {
    wrapper = outer
  }
}

/**
 * The step with its `module` property: `options.module` when given, else the first
 * module outside this library among the callers of `builder` (or of the wrapper it
 * runs below), read from frames captured now and formatted on first access.
 * Formatting a stack trace costs far more than capturing it, and only a step
 * dispatched through a subprocess adapter needs its module; a step built inside a
 * loop, once per iteration, would otherwise pay it every time.
 */
export const withModule = <S extends object>(
  step: S,
  options: { readonly module?: string | null | undefined } | undefined,
  builder: Builder
): S & { readonly module: string | undefined } => {
  const given = options?.module
  // `callerModuleUrlLater` formats the captured frames once, on the first read.
  const moduleOf = given === null
    ? () => undefined
    : given !== undefined
    ? () => given
    : callerModuleUrlLater(wrapper ?? builder)
  return Object.defineProperty(step, "module", {
    enumerable: true,
    configurable: true,
    get: moduleOf
  }) as S & { readonly module: string | undefined }
}

/** A plain value or an Effect, as an Effect. */
export const asEffect = <A>(value: A | Effect.Effect<A, unknown, unknown>): Effect.Effect<A, unknown, unknown> =>
  Effect.isEffect(value) ? value : Effect.succeed(value as A)

/** The at-most-once fields of `runCode` and `invokeTool`, checked: `at-least-once` when absent. */
export const effectsOf = <P, R>(kind: StepKind, opts: { readonly effects?: P | undefined; readonly reconcile?: R | undefined }) => {
  const effects = opts.effects ?? "at-least-once"
  if (effects !== "at-least-once" && effects !== "at-most-once") {
    invalidStep(
      kind,
      "INVALID_EFFECTS_POLICY",
      `effects must be 'at-least-once' or 'at-most-once', got ${JSON.stringify(effects)}.`,
      "Leave effects out for at-least-once, or pass 'at-most-once' for a body that must never run twice."
    )
  }
  if (opts.reconcile !== undefined && typeof opts.reconcile !== "function") {
    invalidStep(kind, "INVALID_RECONCILE", "reconcile must be a function.", "Pass reconcile: (input, ctx) => Effect.succeed(Reconciled.rerun).")
  }
  return { effects: effects as P | "at-least-once", reconcile: opts.reconcile }
}

/** The retry policy's fields a check reads. */
interface RetryFields {
  readonly maxAttempts: number
  readonly backoff: string
  readonly initialDelay: number
}

const checkRetry = (retry: RetryFields): void => {
  if (!(Number.isInteger(retry.maxAttempts) && retry.maxAttempts >= 1)) {
    invalidStep(
      "runCode",
      "INVALID_RETRY_POLICY",
      `retry.maxAttempts must be a whole number of at least 1, got ${String(retry.maxAttempts)}.`,
      "Pass the total number of attempts, the first included, e.g. retry: { maxAttempts: 3, backoff: 'exponential', initialDelay: 100 }."
    )
  }
  if (!(retry.initialDelay >= 0 && Number.isFinite(retry.initialDelay))) {
    invalidStep(
      "runCode",
      "INVALID_RETRY_POLICY",
      `retry.initialDelay must be a finite number of milliseconds of at least 0, got ${String(retry.initialDelay)}.`,
      "Pass the delay before the first retry in milliseconds."
    )
  }
  if (!["fixed", "linear", "exponential"].includes(retry.backoff)) {
    invalidStep(
      "runCode",
      "INVALID_RETRY_POLICY",
      `retry.backoff must be 'fixed', 'linear' or 'exponential', got ${JSON.stringify(retry.backoff)}.`,
      "Pick one of the three backoff shapes."
    )
  }
}

/**
 * noetic's reading of a retry policy, which the Promise API keeps: noetic runs
 * `attempt < maxAttempts` attempts, so a count below 1 (or NaN) builds and makes none
 * (`noAttempts`: the step fails when it runs), a fraction rounds up and Infinity retries
 * for good. The Effect API's `runCode` refuses such a policy when built
 * (`INVALID_RETRY_POLICY`, docs/coming-from-noetic.md#differences-from-noetic).
 */
export const noeticRetry = <R extends { readonly maxAttempts: number }>(
  retry: R | undefined
): { readonly retry: R | undefined; readonly noAttempts: boolean } => {
  const attempts = retry?.maxAttempts
  const noAttempts = attempts !== undefined && !(attempts >= 1)
  if (retry === undefined || noAttempts) return { retry: undefined, noAttempts }
  return { retry: { ...retry, maxAttempts: attempts === Infinity ? Number.MAX_SAFE_INTEGER : Math.ceil(retry.maxAttempts) }, noAttempts }
}

/**
 * `runCode`'s checks, in noetic's order: a body, a valid retry policy, the
 * at-most-once fields, and no retry of an at-most-once body. Returns those fields.
 */
export const checkRunCode = <P, R>(opts: {
  readonly execute?: unknown
  readonly retry?: RetryFields | undefined
  readonly effects?: P | undefined
  readonly reconcile?: R | undefined
}) => {
  if (typeof opts.execute !== "function") {
    invalidStep(
      "runCode",
      "MISSING_EXECUTE_FUNCTION",
      "requires an execute function.",
      "Provide an execute function, e.g. execute: (input, ctx) => Effect.succeed(result)."
    )
  }
  const retry = opts.retry
  if (retry !== undefined) checkRetry(retry)
  const effects = effectsOf("runCode", opts)
  if (effects.effects === "at-most-once" && retry !== undefined && retry.maxAttempts > 1) {
    // A retry would run the body again under the intent of its first attempt, which
    // may have taken effect before it failed: see docs/durability.md#failing-closed.
    invalidStep(
      "runCode",
      "AT_MOST_ONCE_RETRY_CONFLICT",
      `cannot retry an at-most-once body (retry.maxAttempts is ${retry.maxAttempts}): a failed attempt may have taken effect, and only reconcile may decide to run it again.`,
      "Drop retry (a failed at-most-once step stays pending and is reconciled on resume), or retry inside the body where an idempotency key makes a second attempt safe."
    )
  }
  return effects
}

/** `callModel`'s checks: a model (required by the options form, never blank) and a Standard Schema `output`. */
export const checkCallModel = (optionsForm: boolean, model: unknown, output: unknown): void => {
  if (optionsForm && model === undefined) {
    invalidStep("callModel", "MISSING_MODEL", "requires a model.", "Pass a model identifier, e.g. model: 'openai/gpt-4o'.")
  }
  if (typeof model === "string" && model.trim() === "") {
    invalidStep(
      "callModel",
      "MISSING_MODEL",
      "requires a non-empty model.",
      "Pass a model identifier, e.g. model: 'openai/gpt-4o'."
    )
  }
  const validate = (output as { readonly "~standard"?: { readonly validate?: unknown } } | undefined)?.["~standard"]?.validate
  if (output !== undefined && typeof validate !== "function") {
    invalidStep(
      "callModel",
      "INVALID_OUTPUT_SCHEMA",
      "output must be a Standard Schema (an object with ~standard.validate).",
      "Pass a zod or valibot schema, or Schema.toStandardSchemaV1(schema) of an Effect schema."
    )
  }
}

/** Whether `invokeTool`'s `tool` is a tool object (else it must name a harness tool, which is checked). */
export const checkTool = (given: unknown): boolean => {
  const isDefinition = typeof given === "object" && given !== null &&
    typeof (given as { readonly execute?: unknown }).execute === "function"
  if (!isDefinition && (typeof given !== "string" || given === "")) {
    invalidStep(
      "invokeTool",
      "MISSING_TOOL",
      "requires a tool.",
      "Provide a tool object with an execute function (or the name of a harness tool)."
    )
  }
  return isDefinition
}

/** `conditional`'s check: the route (or the positional form's `if`) is a function. */
export const checkRoute = (route: unknown, positional: boolean): void => {
  if (typeof route === "function") return
  if (positional) {
    invalidStep("conditional", "MISSING_ROUTE_FUNCTION", "requires an if predicate.", "Pass if: (input) => boolean.")
  }
  invalidStep(
    "conditional",
    "MISSING_ROUTE_FUNCTION",
    "requires a route function.",
    "Provide a route function that selects the next step at runtime."
  )
}

/** `inParallel`'s checks of the options form: a known mode, a merge where the mode needs one, a paths function. */
export const checkParallel = (mode: unknown, merge: unknown, paths: unknown): void => {
  if (typeof mode !== "string" || !["all", "race", "settle"].includes(mode)) {
    invalidStep(
      "inParallel",
      "INVALID_PARALLEL_MODE",
      `mode must be 'all', 'race' or 'settle', got ${JSON.stringify(mode)}.`,
      "Pick one of the three modes."
    )
  }
  if ((mode === "all" || mode === "settle") && typeof merge !== "function") {
    invalidStep(
      "inParallel",
      "MISSING_MERGE_FUNCTION",
      `mode '${String(mode)}' requires a merge function.`,
      "Provide a merge function that combines path results into a single output."
    )
  }
  if (typeof paths !== "function") {
    invalidStep("inParallel", "MISSING_PATHS_FUNCTION", "requires a paths function.", "Pass paths: (input, ctx) => [step, ...].")
  }
}

/** `inParallel`'s concurrency: absent (every path at once) or a whole number of at least 1. */
export const checkConcurrency = (concurrency: unknown): number | undefined => {
  if (concurrency === undefined) return undefined
  if (typeof concurrency !== "number" || !(Number.isInteger(concurrency) && concurrency >= 1)) {
    return invalidStep(
      "inParallel",
      "INVALID_CONCURRENCY",
      `concurrency must be a whole number of at least 1, got ${String(concurrency)}.`,
      "Omit it to run every path at once."
    )
  }
  return concurrency
}

/**
 * `loop`'s checks: a body, an `until`, and a `maxIterations` (default 1000) that is a
 * finite number of at least 1 unless `whenRun` defers that check to the run.
 */
export const checkLoop = (steps: unknown, until: unknown, maxIterations: unknown, whenRun: boolean): void => {
  if (!Array.isArray(steps) || steps.length === 0) {
    invalidStep("loop", "MISSING_LOOP_BODY", "requires at least one body step.", "Add at least one step to the steps array.")
  }
  if (typeof until !== "function") {
    invalidStep(
      "loop",
      "MISSING_UNTIL_PREDICATE",
      "requires an until predicate.",
      "Provide an until predicate, e.g. until: (snapshot) => ({ stop: snapshot.stepCount >= 10 })."
    )
  }
  // As noetic: any finite number of at least 1 (a fractional cap allows its whole part).
  if (!(typeof maxIterations === "number" && Number.isFinite(maxIterations) && maxIterations >= 1) && !whenRun) {
    invalidStep(
      "loop",
      "INVALID_MAX_ITERATIONS",
      `maxIterations must be a finite number of at least 1, got ${String(maxIterations)}.`,
      "Omit it for the default of 1000."
    )
  }
}

/** `spawn`'s checks: a child step, and a positive timeout when one is given. */
export const checkSpawn = (child: unknown, timeout: number | undefined): void => {
  if (!hasStepTypeId(child)) {
    invalidStep(
      "spawn",
      "MISSING_CHILD_STEP",
      "requires a child step.",
      "Provide a child step to execute in the isolated child context."
    )
  }
  if (timeout !== undefined && !(timeout > 0)) {
    invalidStep(
      "spawn",
      "INVALID_TIMEOUT",
      `timeout must be a positive number of milliseconds, got ${String(timeout)}.`,
      "Omit it to let the child run as long as it needs."
    )
  }
}

/**
 * The key under which a step shown as plain data keeps the step it runs as. A
 * registered symbol, so the ESM and CommonJS builds of this library read each other's.
 */
const RunsAsTypeId: unique symbol = Symbol.for("noetic-effect/Step/runsAs") as never

/**
 * `step` shown with other fields: noetic's steps are plain data (`inParallel(...).paths`
 * is the function given, `invokeTool(...).tool` the tool object), where the engine's
 * fields are Effect-returning (docs/runtime.md#step-objects). The result is a step
 * (its prototype is `step`, so `id`, `module`... are `step`'s) whose own enumerable
 * fields are `kind`, `id` and `fields`; the interpreter runs it as `step`.
 */
export const withPlainFields = <S extends { readonly kind: string; readonly id: string }, F extends object>(step: S, fields: F): S & F => {
  const shown = Object.create(step) as S & F
  Object.defineProperty(shown, RunsAsTypeId, { value: runsAs(step) })
  return Object.assign(shown, { kind: step.kind, id: step.id }, fields)
}

/** The step the interpreter runs for `step`: itself, or the step `withPlainFields` showed. */
export const runsAs = <S extends object>(step: S): S => (step as { readonly [RunsAsTypeId]?: S })[RunsAsTypeId] ?? step
