/**
 * The model side of the facade: `callModel` in noetic's shapes, and the model layer a
 * harness is built with.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LanguageModel from "effect/ai/LanguageModel"
import * as Step from "../harness/Step.ts"
import type * as ScriptedModel from "../layers/ScriptedModel.ts"
import { type AnyStep, build, engineStepOptions, facadeContext, type StepBuildOptions } from "./builders.ts"
import { directCall, type ModelTool, ModelTools } from "../harness/ToolLoop.ts"
import * as Bridge from "./bridge.ts"
import { registerPlainBuilder } from "./plainSteps.ts"
import { type AgentContext, StepContext } from "./context.ts"
import type { ItemLike } from "./itemSchemas.ts"
import { type LlmProviderConfig, type ModelProviderOptions, providerLayer } from "./providers.ts"
import { traceExporterLayer } from "./traceExporter.ts"
import { NoeticConfigError } from "./errors.ts"
import { toModelTool } from "./modelTools.ts"
import { ItemSchemas, type ItemSchemaConfig } from "../services/ItemSchemas.ts"
import type { Tool } from "./tools.ts"

/** Options of `callModel` (noetic's `CallModelOpts`). */
export interface CallModelOptions<I = unknown, O = string> extends StepBuildOptions {
  readonly id: string
  /** The model id: a string, or `(ctx) => string` (or a Promise of it); an empty string throws `MISSING_MODEL`. */
  readonly model: string | ((ctx: StepContext) => string | Promise<string>)
  /** A system message before the history: a string or `(ctx) => string | undefined` (or a Promise of it). */
  readonly instructions?: string | ((ctx: StepContext) => string | undefined | Promise<string | undefined>)
  /**
   * The tools the model may call (docs/runtime.md#tools): a list, or `(ctx) => list` (or a
   * Promise of it); `[]` offers none; absent, the harness's `tools`.
   */
  readonly tools?: ReadonlyArray<Tool> | ((ctx: StepContext) => ReadonlyArray<Tool> | undefined | Promise<ReadonlyArray<Tool> | undefined>)
  /**
   * A Standard Schema (zod, valibot...): the reply's text, parsed as JSON and validated, is
   * the output; its JSON Schema is sent to the provider (docs/runtime.md#structured-output).
   */
  readonly output?: Step.StandardSchema<O>
  /** The JSON Schema sent for a validation-only `output` (noetic's fallback/override). */
  readonly outputJsonSchema?: Readonly<Record<string, unknown>>
  /**
   * The step's framework events on the session streams (docs/runtime.md#sessions):
   * `false` publishes none, `(eventType, data) => boolean` those it allows; default all.
   */
  readonly emit?: boolean | ((eventType: string, data: Record<string, unknown>) => boolean)
  readonly params?: Step.ModelParams
  /** This library's prompt builder, instead of instructions + history + input. */
  readonly prompt?: (input: I, ctx: Step.StepContext) => string | ReadonlyArray<{ role: string; content: string }>
}

/** noetic's `callModel` options this library does not run: refused when the step is built. */
const UNSUPPORTED_CALL_MODEL_OPTIONS = ["projection"] as const

const convertedTools = new WeakMap<object, ModelTool>()

/** A facade tool as the engine's, converted once. */
const modelToolOf = (given: Tool): ModelTool => {
  if (typeof given !== "object" || given === null) return toModelTool(given)
  let converted = convertedTools.get(given)
  if (converted === undefined) {
    converted = toModelTool(given)
    convertedTools.set(given, converted)
  }
  return converted
}

/** The tools of a `callModel` (or a harness) as the engine's: a list, or `(ctx) => list`. */
export const engineTools = (tools: unknown): unknown => {
  if (Array.isArray(tools)) return tools.map(modelToolOf)
  if (typeof tools === "function") {
    return (ctx: Step.StepContext) => {
      const picked = (tools as (ctx: StepContext) => unknown)(facadeContext(ctx))
      const convert = (list: unknown) => (Array.isArray(list) ? list.map(modelToolOf) : list)
      return typeof (picked as { then?: unknown })?.then === "function"
        ? Promise.resolve(picked).then(convert)
        : convert(picked)
    }
  }
  if (tools === undefined) return undefined
  throw new NoeticConfigError({
    code: "INVALID_TOOLS",
    message: "callModel's tools must be an array of tools, or (ctx) => tools",
    hint: "Pass tools: [tool({ name, description, input, execute })]."
  })
}

const lazyOf = <T>(value: T | ((ctx: StepContext) => T) | undefined): Step.Lazy<T> | undefined =>
  typeof value === "function" ? (ctx: Step.StepContext) => (value as (ctx: StepContext) => T)(facadeContext(ctx)) : value

/** A `callModel` step as noetic shows it (`StepCallModel`): the fields it was given. */
export type CallModelStep<I, O> = AnyStep<I, O> & {
  readonly kind: "callModel"
  readonly model: CallModelOptions<I, O>["model"]
  readonly instructions: CallModelOptions<I, O>["instructions"]
  readonly tools: CallModelOptions<I, O>["tools"]
  readonly output: CallModelOptions<I, O>["output"]
  readonly outputJsonSchema: CallModelOptions<I, O>["outputJsonSchema"]
  readonly emit: CallModelOptions<I, O>["emit"]
  readonly params: Step.ModelParams | undefined
}

/**
 * A model turn through the harness's model, appended to the item log. The option
 * form resolves, as noetic's does, with the reply's text, or with `output`'s value of
 * it (a Standard Schema; a reply that does not match rejects kind `model_parse_error`;
 * with a provider, its JSON Schema is sent: docs/runtime.md#structured-output).
 * Throws `EMPTY_STEP_ID` / `MISSING_MODEL`. The positional `callModel(id, options?)`
 * resolves with the whole turn, `{ responseId, text }`.
 */
export function callModel<I = string, O = string>(options: CallModelOptions<I, O>): CallModelStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function callModel<TContext, I, O>(options: CallModelOptions<I, O>): CallModelStep<I, O>
export function callModel<I = string>(
  id: string,
  options?: StepBuildOptions & Partial<Omit<CallModelOptions<I>, "id" | "output">>
): AnyStep<I, Step.ModelTurn>
export function callModel(
  idOrOptions: string | CallModelOptions<any, any>,
  options?: StepBuildOptions & Partial<Omit<CallModelOptions<any>, "id" | "output">>
): AnyStep {
  const opts: Partial<CallModelOptions<any, any>> = typeof idOrOptions === "string" ? { ...options, id: idOrOptions } : idOrOptions
  for (const option of UNSUPPORTED_CALL_MODEL_OPTIONS) {
    if ((opts as Record<string, unknown>)[option] !== undefined) {
      throw new NoeticConfigError({
        code: "UNSUPPORTED_OPTION",
        message: `callModel '${opts.id}' has '${option}', which noetic-effect does not run`,
        hint: `Remove '${option}': this library refuses an option it would otherwise ignore (docs/runtime.md#not-supported).`
      })
    }
  }
  if (opts.emit !== undefined && typeof opts.emit !== "boolean" && typeof opts.emit !== "function") {
    throw new NoeticConfigError({
      code: "INVALID_EMIT",
      message: `callModel '${opts.id}': emit must be a boolean or (eventType, data) => boolean`,
      hint: "Pass emit: false to publish none of the step's framework events, or a filter function."
    })
  }
  const model = lazyOf(opts.model)
  const instructions = lazyOf(opts.instructions)
  const engineOptions = {
    ...engineStepOptions(opts),
    // A Promise a lazy value returns is awaited by the tool loop (src/harness/ToolLoop.ts).
    ...(model === undefined ? {} : { model: model as Step.Lazy<string> }),
    ...(instructions === undefined ? {} : { instructions: instructions as Step.Lazy<string | undefined> }),
    ...(opts.params === undefined ? {} : { params: opts.params }),
    ...(opts.tools === undefined ? {} : { tools: engineTools(opts.tools) }),
    ...(opts.prompt === undefined ? {} : { prompt: opts.prompt as any }),
    ...(opts.emit === undefined ? {} : { emit: opts.emit as Step.EmitOption })
  }
  if (typeof idOrOptions === "string") return build(() => Step.callModel(idOrOptions, engineOptions))
  const built = build(() =>
    Step.callModel({
      ...engineOptions,
      id: opts.id!,
      model: model as Step.Lazy<string>,
      ...(opts.output === undefined ? {} : { output: opts.output }),
      ...(opts.outputJsonSchema === undefined ? {} : { outputJsonSchema: opts.outputJsonSchema })
    })
  )
  // noetic's step is plain data: `callModel(...).tools` is the list given, `output` the schema.
  return Step.withPlainFields(built, {
    model: opts.model,
    instructions: opts.instructions,
    tools: opts.tools,
    output: opts.output,
    outputJsonSchema: opts.outputJsonSchema,
    params: opts.params,
    emit: opts.emit
  })
}

/** A model as a plain object: one `generate` per turn. */
export interface PlainModel {
  generate(request: ScriptedModel.GenerateRequest): Promise<{ readonly text: string; readonly id?: string }>
}

// The model modules (`effect/ai`) load when a harness is built, not when the library is
// imported: a process that only defines steps (a child agent importing its step module)
// never pays for them. Imported once per process: an `import()` resolves the module
// again each time it is called, and a host builds a runtime per harness.
let modelModules: Promise<[typeof LanguageModel, typeof ScriptedModel]> | undefined
const loadModelModules = Effect.promise(() => {
  if (modelModules === undefined) {
    modelModules = Promise.all([
      import("effect/ai/LanguageModel") as Promise<typeof LanguageModel>,
      import("../layers/ScriptedModel.ts") as Promise<typeof ScriptedModel>
    ])
  }
  return modelModules
})

export const modelLayer = (model: PlainModel | Layer.Layer<LanguageModel.LanguageModel> | undefined): Layer.Layer<LanguageModel.LanguageModel> => {
  if (model !== undefined && !("generate" in model)) return model
  return Layer.unwrap(Effect.map(loadModelModules, ([LanguageModel, ScriptedModel]) =>
    model === undefined
      ? ScriptedModel.layerNone
      : Layer.effect(LanguageModel.LanguageModel, ScriptedModel.fromPromise((request) => model.generate(request)))))
}

/**
 * The model side of a harness's runtime: its `ModelProvider` (`callModelDefaults`,
 * `_testCallModel`) and its tool pool (`tools: Tool[]`) as `ModelTools`.
 */
export const modelRuntimeLayer = (options: {
  readonly tools?: unknown
  readonly callModelDefaults?: LlmProviderConfig | undefined
  readonly _testCallModel?: ModelProviderOptions["_testCallModel"]
  readonly itemSchemas?: unknown
  readonly traceExporter?: unknown
}): Layer.Layer<never> => {
  const provider = providerLayer(options)
  const tools = Array.isArray(options.tools)
    ? Layer.succeed(ModelTools, engineTools(options.tools) as ReadonlyArray<ModelTool>)
    : Layer.empty
  const itemSchemas = options.itemSchemas === undefined
    ? Layer.empty
    : Layer.succeed(ItemSchemas, itemSchemaConfig(options.itemSchemas))
  // The harness's spans, exported as they end (docs/runtime.md#tracing).
  const tracing = options.traceExporter === undefined ? Layer.empty : traceExporterLayer(options.traceExporter)
  return Layer.mergeAll(provider ?? Layer.empty, tools, itemSchemas, tracing) as Layer.Layer<never>
}

const CATEGORIES = ["items", "developerMessages", "toolCalls", "toolResults"] as const

const isSchema = (u: unknown): boolean =>
  (typeof u === "object" || typeof u === "function") && u !== null &&
  (typeof (u as { safeParse?: unknown }).safeParse === "function" ||
    typeof (u as { "~standard"?: { validate?: unknown } })["~standard"]?.validate === "function")

/**
 * noetic's harness option `itemSchemas: { schemas?: ItemSchemaExtensions, strict?: boolean }`
 * (docs/runtime.md#item-schemas), checked: anything else throws `NoeticConfigError`
 * `INVALID_ITEM_SCHEMAS` when the harness is built.
 */
const itemSchemaConfig = (given: unknown): ItemSchemaConfig => {
  const invalid = (what: string) =>
    new NoeticConfigError({
      code: "INVALID_ITEM_SCHEMAS",
      message: `itemSchemas ${what}`,
      hint: "Pass itemSchemas: { schemas: { items: [schema], toolResults: [schema], ... }, strict?: boolean }, each schema a Standard Schema (zod's work)."
    })
  if (typeof given !== "object" || given === null || Array.isArray(given)) throw invalid("must be an object")
  const { schemas, strict, ...rest } = given as { schemas?: unknown; strict?: unknown }
  const unknownKey = Object.keys(rest)[0]
  if (unknownKey !== undefined) throw invalid(`has '${unknownKey}'; its fields are schemas and strict`)
  if (strict !== undefined && typeof strict !== "boolean") throw invalid("strict must be a boolean")
  if (schemas !== undefined) {
    if (typeof schemas !== "object" || schemas === null) throw invalid("schemas must be an object")
    for (const [category, list] of Object.entries(schemas)) {
      if (!(CATEGORIES as ReadonlyArray<string>).includes(category)) {
        throw invalid(`schemas has '${category}'; the categories are ${CATEGORIES.join(", ")}`)
      }
      if (list !== undefined && (!Array.isArray(list) || !list.every(isSchema))) {
        throw invalid(`schemas.${category} must be an array of Standard Schemas`)
      }
    }
  }
  return given as ItemSchemaConfig
}

/** A harness's tools by name, for `invokeTool(id, name)`: noetic's `Tool[]` or this library's `{ name: fn }`. */
export const namedTools = (
  tools: unknown
): Readonly<Record<string, (input: unknown, ctx: StepContext) => unknown>> => {
  if (tools === undefined) return {}
  if (!Array.isArray(tools)) return tools as Record<string, (input: unknown, ctx: StepContext) => unknown>
  return Object.fromEntries(
    (tools as ReadonlyArray<Tool>).map((t) => [t.name ?? "", (input: unknown, ctx: StepContext) => t.execute(input, ctx)])
  )
}

/** What `harness.callModel` is asked (noetic's `CallModelRequest`). */
export interface HarnessCallModelRequest {
  readonly model: string
  readonly items: ReadonlyArray<ItemLike>
  readonly instructions?: string
  readonly params?: Step.ModelParams
  /** The tools the model may call; the harness's when absent. */
  readonly tools?: ReadonlyArray<Tool>
  /** The context of the step calling: what the tools run with (required for tools to run). */
  readonly ctx?: AgentContext
  /** A structured output to ask for: its JSON Schema is sent to the provider (nothing is validated). */
  readonly outputSchema?: Step.StandardSchema
  readonly outputJsonSchema?: Readonly<Record<string, unknown>>
  /** Gates the call's framework events on the session streams (`false`, or a filter), as a step's `emit`. */
  readonly emit?: boolean | ((eventType: string, data: Record<string, unknown>) => boolean)
}

/**
 * noetic's `harness.callModel(request)` on the engine: one model call with its tool loop,
 * on `request.items`, recorded nowhere (docs/runtime.md#harnesscallmodel).
 */
export const harnessCallModel = (request: HarnessCallModelRequest) => {
  const tools = request.tools === undefined ? undefined : engineTools(request.tools) as ReadonlyArray<ModelTool>
  // A step's context carries the engine's view of the step, which the tools run with.
  const ctx = request.ctx instanceof StepContext ? Bridge.context.of(request.ctx) as Step.StepContext : undefined
  return directCall({
    model: request.model,
    items: request.items,
    ...(request.instructions === undefined ? {} : { instructions: request.instructions }),
    ...(request.params === undefined ? {} : { params: request.params }),
    ...(tools === undefined ? {} : { tools }),
    ...(request.outputSchema === undefined ? {} : { outputSchema: request.outputSchema }),
    ...(request.outputJsonSchema === undefined ? {} : { outputJsonSchema: request.outputJsonSchema }),
    ...(request.emit === undefined ? {} : { emit: request.emit as Step.EmitOption })
  }, ctx)
}

registerPlainBuilder("callModel", callModel)
