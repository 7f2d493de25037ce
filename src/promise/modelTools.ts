/**
 * Tools the model calls, in noetic's shapes (docs/runtime.md#tools): `tool()`,
 * `toolWithGenerator()` (an async generator yields progress events, its return value
 * is the result), and their translation to the engine's `ModelTool` (a tool's second
 * argument is the `ToolExecutionContext` of `context.ts`).
 *
 * @since 0.1.0
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { ModelTool } from "../harness/ToolLoop.ts"
import { publish } from "../services/ModelProvider.ts"
import { type ShellAdapter, ToolExecutionContext, type ToolLayerState } from "./context.ts"
import { NoeticConfigError } from "./errors.ts"
import { type Tool, validToolInput } from "./tools.ts"
import type { ToolContextDeclaration } from "../harness/BuiltinLayers.ts"

export type { ShellAdapter, ToolLayerState }
export { ToolExecutionContext }

/** Options of `tool()` (noetic's `ToolConfig`, the fields this library runs). */
export interface ToolConfig<I = any, O = unknown> {
  readonly name: string
  readonly description?: string
  readonly input?: unknown
  readonly output?: unknown
  /** The parameters' JSON Schema, when `input` cannot give one. */
  readonly inputJsonSchema?: Readonly<Record<string, unknown>>
  /** State the tool keeps in a layer `toolCalls(tools)` makes (noetic's `ToolContextDeclaration`). */
  readonly context?: ToolContextDeclaration
  execute(args: I, toolCtx: ToolExecutionContext): O | Promise<O>
}

/** Options of `toolWithGenerator()`: `execute` is an async generator; it yields events and returns the result. */
export interface GeneratorToolConfig<I = any, E = unknown, O = unknown> extends Omit<ToolConfig<I, O>, "execute"> {
  readonly event?: unknown
  execute(args: I, toolCtx: ToolExecutionContext): AsyncGenerator<E, O>
}

/** The fields of noetic's tool config this library does not run: refused when a tool is built. */
const UNSUPPORTED_TOOL_FIELDS = ["itemSchemas", "decorateResultItem", "needsApproval", "ui", "acp"] as const

const checkTool = (builder: string, config: { readonly name?: unknown; readonly execute?: unknown }) => {
  if (typeof config.name !== "string" || config.name.trim() === "") {
    throw new NoeticConfigError({
      code: "EMPTY_TOOL_NAME",
      message: `${builder}() requires a non-empty name.`,
      hint: `Pass a unique name for the tool, e.g. ${builder}({ name: 'greet', ... }).`
    })
  }
  if (typeof config.execute !== "function") {
    throw new NoeticConfigError({
      code: "MISSING_EXECUTE_FUNCTION",
      message: `${builder}() requires an execute function.`,
      hint: "Provide an async execute function, e.g. execute: async (args, toolCtx) => result."
    })
  }
  for (const field of UNSUPPORTED_TOOL_FIELDS) {
    if ((config as Record<string, unknown>)[field] !== undefined) {
      throw new NoeticConfigError({
        code: "UNSUPPORTED_OPTION",
        message: `${builder}({ name: '${config.name}' }) has '${field}', which noetic-effect does not run`,
        hint: `Remove '${field}': this library refuses an option it would otherwise ignore (docs/runtime.md#not-supported).`
      })
    }
  }
}

/** What a Standard Schema (zod 4, Effect's) validates to; `any` for anything else, as noetic types a tool's `args`. */
export type SchemaOutput<S> = S extends { readonly "~standard": { readonly types?: infer T } }
  ? NonNullable<T> extends { readonly output: infer Out } ? Out : any
  : any

/** A tool (noetic's `tool()`): checked, and returned as the plain object it is; `execute`'s `args` typed by `input`. */
export const tool = <S = unknown, O = unknown>(
  config: ToolConfig<SchemaOutput<S>, O> & { readonly input?: S }
): Tool<SchemaOutput<S>, O> & ToolConfig<SchemaOutput<S>, O> => {
  checkTool("tool", config)
  return { ...config }
}

/** A tool whose `execute` is an async generator (noetic's `toolWithGenerator()`). */
export const toolWithGenerator = <I = any, E = unknown, O = unknown>(
  config: GeneratorToolConfig<I, E, O>
): Tool<I, O> & GeneratorToolConfig<I, E, O> => {
  checkTool("toolWithGenerator", config)
  return { ...config } as never
}

/** The JSON Schema of a tool's parameters: `inputJsonSchema`, else the schema's Standard JSON Schema, else any object. */
export const parametersOf = (tool: { readonly input?: unknown; readonly inputJsonSchema?: unknown }): Record<string, unknown> => {
  if (typeof tool.inputJsonSchema === "object" && tool.inputJsonSchema !== null) {
    return tool.inputJsonSchema as Record<string, unknown>
  }
  const schema = tool.input as { readonly "~standard"?: { readonly jsonSchema?: { readonly input?: unknown } } } | undefined
  const convert = schema?.["~standard"]?.jsonSchema?.input
  if (typeof convert === "function") {
    try {
      const { $schema: _, ...json } = convert({ target: "draft-2020-12" }) as Record<string, unknown>
      return json
    } catch {
      // A schema with no JSON form (a transform): the model is told of an object.
    }
  }
  return { type: "object", additionalProperties: true }
}

const isAsyncIterator = (u: unknown): u is AsyncIterator<unknown, unknown> =>
  typeof u === "object" && u !== null && typeof (u as { next?: unknown }).next === "function" &&
  typeof (u as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === "function"

/**
 * A facade tool as the engine's `ModelTool`: its input validated against `input`, its
 * `execute` called with a `ToolExecutionContext`; a generator's yields are published
 * as `tool_call_progress` events and its return value is the result.
 */
export const toModelTool = (given: Tool): ModelTool => {
  if (typeof given !== "object" || given === null || typeof given.execute !== "function" || typeof given.name !== "string") {
    throw new NoeticConfigError({
      code: "INVALID_TOOL",
      message: "a tool given to callModel or the harness needs a name and an execute function",
      hint: "Build tools with tool({ name, description, input, execute })."
    })
  }
  const name = given.name
  return {
    name,
    ...(given.description === undefined ? {} : { description: given.description }),
    parameters: parametersOf(given as never),
    execute: (args, ctx, call) =>
      Effect.contextWith((services: Context.Context<never>) =>
        Effect.tryPromise({
          try: async (signal) => {
            const parsed = await validToolInput(given.input, args, name)
            const toolCtx = new ToolExecutionContext(ctx, services, signal)
            const result = await (given.execute as (args: unknown, ctx: unknown) => unknown)(parsed, toolCtx)
            if (!isAsyncIterator(result)) return result
            for (;;) {
              const next = await result.next()
              if (next.done === true) return next.value
              await Effect.runPromise(publish({
                executionId: ctx.id,
                threadId: ctx.threadId,
                path: ctx.path,
                type: "tool_call_progress",
                callId: call.callId,
                name: call.name,
                event: next.value
              }).pipe(Effect.provideContext(services)))
            }
          },
          catch: (thrown) => thrown
        }))
  }
}
