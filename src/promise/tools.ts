/**
 * Tools in noetic's shapes: `Tool` and `invokeTool`, with input validated against the
 * tool's schema.
 *
 * @since 0.1.0
 */
import type * as Context from "effect/Context"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Step from "../harness/Step.ts"
import * as ToolInput from "../harness/ToolInput.ts"
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

/**
 * The tool's input: `args` checked against the tool's `input` schema by the engine
 * (`harness/ToolInput.ts`: a Standard Schema, or a Zod schema through `safeParse`) and
 * the schema's output passed on, as noetic does; a tool without one gets `args` as they
 * are. Rejects with `step_failed` for `stepId`, "Tool input validation failed: ..."
 * naming each issue.
 */
export const validToolInput = (schema: unknown, args: unknown, stepId: string): Promise<any> =>
  Effect.runPromiseExit(ToolInput.validate(schema, args, stepId)).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    const invalid = Cause.findErrorOption(exit.cause)
    if (Option.isSome(invalid)) throw stepFailed(stepId, new Error(invalid.value.message))
    throw Cause.squash(exit.cause)
  })

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
