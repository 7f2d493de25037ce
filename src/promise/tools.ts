/**
 * Tools in noetic's shapes: `Tool` and `invokeTool`, with input validated against the
 * tool's schema.
 *
 * @since 0.1.0
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Step from "../harness/Step.ts"
import { isNoeticError, bodyFailure, stepFailed } from "./errors.ts"
import { hostCall, StepContext } from "./context.ts"
import { registerPlainBuilder } from "./plainSteps.ts"
import { type AnyStep, build, engineEffects, type EffectsOptions, engineStepOptions, type StepBuildOptions } from "./builders.ts"

/** A tool as noetic declares one: a name and an `execute` returning the result or a Promise of it. */
export interface Tool<I = any, O = unknown> {
  readonly name?: string
  readonly description?: string
  readonly input?: unknown
  readonly output?: unknown
  execute(args: I, ctx: StepContext): O | Promise<O>
}

/** An issue of a Standard Schema (`~standard.validate`) or Zod (`safeParse`) failure. */
interface SchemaIssue {
  readonly message: string
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
}

/**
 * The tool's input: `args` checked against the tool's `input` schema (a Standard Schema,
 * or a Zod schema through `safeParse`) and the schema's output passed on, as noetic
 * does; a tool without one gets `args` as they are. Rejects with `step_failed` for
 * `stepId`, "Tool input validation failed: ..." naming each issue.
 */
export const validToolInput = async (schema: unknown, args: unknown, stepId: string): Promise<any> => {
  // A schema may be a function object (Effect's are).
  if ((typeof schema !== "object" && typeof schema !== "function") || schema === null) return args
  const zod = schema as { readonly safeParse?: unknown }
  const standard = (schema as { readonly "~standard"?: { readonly validate?: unknown } })["~standard"]
  let issues: ReadonlyArray<SchemaIssue> | undefined
  let value: unknown = args
  if (typeof zod.safeParse === "function") {
    const result = (zod.safeParse as (u: unknown) => { success: boolean; data?: unknown; error?: { issues: Array<SchemaIssue> } })(args)
    if (result.success) value = result.data
    else issues = result.error?.issues ?? [{ message: "invalid input" }]
  } else if (typeof standard?.validate === "function") {
    const result = await (standard.validate as (u: unknown) => unknown)(args) as {
      readonly value?: unknown
      readonly issues?: ReadonlyArray<SchemaIssue>
    }
    if (result.issues !== undefined) issues = result.issues
    else value = result.value
  } else {
    return args
  }
  if (issues === undefined) return value
  const described = issues.map((issue) => ({
    code: "custom",
    message: issue.message,
    path: (issue.path ?? []).map((segment) => typeof segment === "object" && segment !== null ? segment.key : segment)
  }))
  throw stepFailed(stepId, new Error(`Tool input validation failed: ${JSON.stringify(described, null, 2)}`))
}

/** Options of `invokeTool` (noetic's `InvokeToolOpts`). */
export interface InvokeToolOptions<I = any, O = unknown> extends StepBuildOptions, EffectsOptions<I, O> {
  readonly id: string
  readonly tool: Tool<I, O>
  readonly args?: Partial<I>
}

/** An `invokeTool` step as noetic shows it (`StepInvokeTool`): `tool` is the tool object. */
export type InvokeToolStep<I, O> = AnyStep<I, Awaited<O>> & {
  readonly kind: "invokeTool"
  readonly tool: Tool<I, O>
  readonly args: Partial<I> | undefined
}

/**
 * Calls a tool directly: `invokeTool({ id, tool, args? })` calls `tool.execute` with
 * the input (an object input gets `args` merged over it). Throws `EMPTY_STEP_ID` /
 * `MISSING_TOOL`. `invokeTool(id, name)` calls the harness's tool of that name.
 */
export function invokeTool<I = any, O = unknown>(options: InvokeToolOptions<I, O>): InvokeToolStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function invokeTool<TContext, I, O>(options: InvokeToolOptions<I, O>): InvokeToolStep<I, O>
export function invokeTool<I = unknown>(id: string, tool: string, options?: StepBuildOptions): AnyStep<I, unknown>
export function invokeTool(
  idOrOptions: string | InvokeToolOptions,
  tool?: string,
  options?: StepBuildOptions
): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() => Step.invokeTool(idOrOptions, tool!, engineStepOptions(options)))
  }
  const given = idOrOptions.tool as Tool | undefined
  const definition: Step.ToolDefinition | undefined =
    typeof given === "object" && given !== null && typeof given.execute === "function"
      ? {
        ...(given.name === undefined ? {} : { name: given.name }),
        execute: (args, ctx) =>
          Effect.contextWith((services: Context.Context<never>) =>
            hostCall(
              (signal) =>
                Promise.resolve()
                  .then(() => validToolInput(given.input, args, idOrOptions.id))
                  .then((parsed) => given.execute(parsed, new StepContext(ctx, services, signal))),
              // noetic: a tool's NoeticError rejects as it is, anything else as the step's failure.
              // (ToolFailed carries it to the facade's error mapping); a cancellation stays one.
              (thrown) =>
                isNoeticError(thrown) && thrown.noeticError.kind === "cancelled"
                  ? bodyFailure(idOrOptions.id, thrown, false)
                  : thrown
            ))
      }
      : undefined
  const built = build(() =>
    Step.invokeTool({
      ...engineStepOptions(idOrOptions),
      id: idOrOptions.id,
      tool: definition ?? (given as never),
      ...(idOrOptions.args === undefined ? {} : { args: idOrOptions.args }),
      ...engineEffects(idOrOptions)
    })
  )
  // noetic's step is plain data: `invokeTool(...).tool` is the tool object given.
  return Step.withPlainFields(built, { tool: given as Tool, args: idOrOptions.args })
}

registerPlainBuilder("invokeTool", invokeTool)
