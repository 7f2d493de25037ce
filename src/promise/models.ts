/**
 * The model side of the facade: `callModel` in noetic's shapes, and the model layer a
 * harness is built with.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as AiError from "effect/ai/AiError"
import type * as LanguageModel from "effect/ai/LanguageModel"
import * as Step from "../harness/Step.ts"
import type * as ScriptedModel from "../layers/ScriptedModel.ts"
import type { StepContext } from "./context.ts"
import { type AnyStep, build, engineStepOptions, facadeContext, type StepBuildOptions } from "./builders.ts"

/** Options of `callModel` (noetic's `CallModelOpts`). */
export interface CallModelOptions<I = unknown, O = string> extends StepBuildOptions {
  readonly id: string
  /** The model id: a string, or `(ctx) => string`; an empty string throws `MISSING_MODEL`. */
  readonly model: string | ((ctx: StepContext) => string)
  /** A system message before the history: a string or `(ctx) => string | undefined`. */
  readonly instructions?: string | ((ctx: StepContext) => string | undefined)
  readonly tools?: unknown
  /** A Standard Schema (zod, valibot...): the reply's text, parsed as JSON and validated, is the output. */
  readonly output?: Step.StandardSchema<O>
  readonly params?: Step.ModelParams
  /** This library's prompt builder, instead of instructions + history + input. */
  readonly prompt?: (input: I, ctx: Step.StepContext) => string | ReadonlyArray<{ role: string; content: string }>
}

const lazyOf = <T>(value: T | ((ctx: StepContext) => T) | undefined): Step.Lazy<T> | undefined =>
  typeof value === "function" ? (ctx: Step.StepContext) => (value as (ctx: StepContext) => T)(facadeContext(ctx)) : value

/**
 * A model turn through the harness's model, appended to the item log. The option
 * form resolves, as noetic's does, with the reply's text, or with `output`'s value of
 * it (a Standard Schema; a reply that does not match rejects `MODEL_OUTPUT_INVALID`).
 * Throws `EMPTY_STEP_ID` / `MISSING_MODEL`. The positional `callModel(id, options?)`
 * resolves with the whole turn, `{ responseId, text }`.
 */
export function callModel<I = string, O = string>(options: CallModelOptions<I, O>): AnyStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function callModel<TContext, I, O>(options: CallModelOptions<I, O>): AnyStep<I, O>
export function callModel<I = string>(
  id: string,
  options?: StepBuildOptions & Partial<Omit<CallModelOptions<I>, "id" | "output">>
): AnyStep<I, Step.ModelTurn>
export function callModel(
  idOrOptions: string | CallModelOptions<any, any>,
  options?: StepBuildOptions & Partial<Omit<CallModelOptions<any>, "id" | "output">>
): AnyStep {
  const opts: Partial<CallModelOptions<any, any>> = typeof idOrOptions === "string" ? { ...options, id: idOrOptions } : idOrOptions
  const model = lazyOf(opts.model)
  const instructions = lazyOf(opts.instructions)
  const engineOptions = {
    ...engineStepOptions(opts),
    ...(model === undefined ? {} : { model }),
    ...(instructions === undefined ? {} : { instructions }),
    ...(opts.params === undefined ? {} : { params: opts.params }),
    ...(opts.tools === undefined ? {} : { tools: opts.tools }),
    ...(opts.prompt === undefined ? {} : { prompt: opts.prompt as any })
  }
  return build(() =>
    typeof idOrOptions === "string"
      ? Step.callModel(idOrOptions, engineOptions)
      : Step.callModel({
        ...engineOptions,
        id: opts.id!,
        model: model as Step.Lazy<string>,
        ...(opts.output === undefined ? {} : { output: opts.output })
      })
  )
}

/** A model as a plain object: one `generate` per turn. */
export interface PlainModel {
  generate(request: ScriptedModel.GenerateRequest): Promise<{ readonly text: string; readonly id?: string }>
}

// The model modules (`effect/ai`) load when a harness is built, not when the library is
// imported: a process that only defines steps (a child agent importing its step module)
// never pays for them.
const loadModelModules = Effect.promise(() =>
  Promise.all([
    import("effect/ai/LanguageModel") as Promise<typeof LanguageModel>,
    import("effect/ai/AiError") as Promise<typeof AiError>,
    import("../layers/ScriptedModel.ts") as Promise<typeof ScriptedModel>
  ])
)

export const modelLayer = (model: PlainModel | Layer.Layer<LanguageModel.LanguageModel> | undefined): Layer.Layer<LanguageModel.LanguageModel> => {
  if (model !== undefined && !("generate" in model)) return model
  return Layer.unwrap(Effect.map(loadModelModules, ([LanguageModel, AiError, ScriptedModel]) => {
    if (model === undefined) {
      return Layer.effect(
        LanguageModel.LanguageModel,
        LanguageModel.make({
          generateText: () =>
            Effect.fail(
              AiError.make({
                module: "AgentHarness",
                method: "callModel",
                reason: new AiError.InvalidRequestError({ description: "this harness was built without a model" })
              })
            ),
          streamText: () => {
            throw new Error("this harness was built without a model")
          }
        })
      )
    }
    return Layer.effect(
      LanguageModel.LanguageModel,
      ScriptedModel.fromGenerate((request) =>
        Effect.tryPromise({
          try: () => model.generate(request),
          catch: (cause) =>
            AiError.make({
              module: "AgentHarness",
              method: "generate",
              reason: new AiError.UnknownError({ description: cause instanceof Error ? cause.message : String(cause) })
            })
        })
      )
    )
  }))
}
