/**
 * A `LanguageModel` that answers from a script: each call takes the next response.
 * For tests, demos and the Promise facade's `{ generate(request) }` models (`fromPromise`),
 * and the model of a harness built without one (`layerNone`).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"

/** One scripted answer: its text and, optionally, the response id the provider would report. */
export interface ScriptedResponse {
  readonly text: string
  readonly id?: string
}

/** What a plain model object is asked: the prompt as encoded messages. */
export interface GenerateRequest {
  readonly messages: ReadonlyArray<Prompt.MessageEncoded>
}

/** A model as a plain function, the shape the Promise facade accepts. */
export type Generate = (request: GenerateRequest) => Effect.Effect<ScriptedResponse, AiError.AiError>

/** The prompts a scripted model has been asked, oldest first. */
export class ScriptedModelLog extends Context.Service<ScriptedModelLog, {
  readonly requests: ReadonlyArray<GenerateRequest>
}>()("noetic-effect/ScriptedModelLog") {}

const toParts = (response: ScriptedResponse): Array<Response.PartEncoded> => [
  ...(response.id === undefined ? [] : [{ type: "response-metadata" as const, id: response.id }]),
  { type: "text", text: response.text }
]

const toStreamParts = (response: ScriptedResponse): Array<Response.StreamPartEncoded> => [
  ...(response.id === undefined ? [] : [{ type: "response-metadata" as const, id: response.id }]),
  { type: "text-start", id: "0" },
  { type: "text-delta", id: "0", delta: response.text },
  { type: "text-end", id: "0" }
]

const requestOf = (options: LanguageModel.ProviderOptions): GenerateRequest => ({
  messages: options.prompt.content.map((message) => {
    const text = typeof message.content === "string"
      ? message.content
      : message.content.map((part) => ("text" in part ? part.text : "")).join("")
    return { role: message.role, content: text } as Prompt.MessageEncoded
  })
})

/** A `LanguageModel` over a plain `generate` function. */
export const fromGenerate = (generate: Generate): Effect.Effect<LanguageModel.LanguageModel> =>
  LanguageModel.make({
    generateText: (options) => Effect.map(generate(requestOf(options)), toParts),
    streamText: (options) =>
      Stream.unwrap(Effect.map(generate(requestOf(options)), (response) => Stream.fromIterable(toStreamParts(response))))
  })

/** An `AiError` of this module's `method` for an `InvalidRequestError` saying `description`. */
const invalidRequest = (method: string, description: string): AiError.AiError =>
  AiError.make({ module: "AgentHarness", method, reason: new AiError.InvalidRequestError({ description }) })

/**
 * The model of a harness built without one: every call (generate or stream) fails with
 * an `AiError` saying so, never a defect.
 */
export const layerNone: Layer.Layer<LanguageModel.LanguageModel> = Layer.effect(
  LanguageModel.LanguageModel,
  fromGenerate(() => Effect.fail(invalidRequest("callModel", "this harness was built without a model")))
)

/**
 * A `LanguageModel` over a host's `generate` that answers with a Promise (noetic's plain
 * model object). A rejection is an `AiError` (`UnknownError`, its message kept); an
 * answer that is not `{ text: string, id?: string }` is an `AiError`
 * (`InvalidOutputError`) naming what came back, never a defect.
 */
export const fromPromise = (
  generate: (request: GenerateRequest) => PromiseLike<unknown>
): Effect.Effect<LanguageModel.LanguageModel> =>
  fromGenerate((request) =>
    Effect.flatMap(
      Effect.tryPromise({
        try: () => Promise.resolve(generate(request)),
        catch: (cause) =>
          AiError.make({
            module: "AgentHarness",
            method: "generate",
            reason: new AiError.UnknownError({ description: cause instanceof Error ? cause.message : String(cause) })
          })
      }),
      (answer) => {
        const response = answer as { readonly text?: unknown; readonly id?: unknown } | null
        if (
          typeof response === "object" && response !== null && typeof response.text === "string" &&
          (response.id === undefined || typeof response.id === "string")
        ) {
          return Effect.succeed(response as ScriptedResponse)
        }
        return Effect.fail(AiError.make({
          module: "AgentHarness",
          method: "generate",
          reason: new AiError.InvalidOutputError({
            description: `generate() answered ${describe(answer)}, not { text: string, id?: string }`
          })
        }))
      }
    )
  )

const describe = (value: unknown): string => {
  if (value === null) return "null"
  if (Array.isArray(value)) return "an array"
  if (typeof value !== "object") return `a ${typeof value}`
  const text = (value as { readonly text?: unknown }).text
  return text === undefined ? "an object without text" : `an object whose text is a ${typeof text}`
}

/**
 * A scripted model: call `n` answers with `responses[n]`; a call past the end fails
 * with an `AiError` saying the script ran out. The log records every request.
 */
export const layer = (
  responses: ReadonlyArray<string | ScriptedResponse>
): Layer.Layer<LanguageModel.LanguageModel | ScriptedModelLog> =>
  Layer.effectContext(Effect.gen(function*() {
    const requests: Array<GenerateRequest> = []
    const model = yield* fromGenerate((request) =>
      Effect.suspend(() => {
        const next = responses[requests.length]
        requests.push(request)
        if (next === undefined) {
          return Effect.fail(
            AiError.make({
              module: "ScriptedModel",
              method: "generateText",
              reason: new AiError.InvalidRequestError({
                description: `the script has ${responses.length} responses and call ${requests.length} asked for one more`
              })
            })
          )
        }
        return Effect.succeed(typeof next === "string" ? { text: next } : next)
      })
    )
    return Context.make(LanguageModel.LanguageModel, model).pipe(
      Context.add(ScriptedModelLog, ScriptedModelLog.of({ requests }))
    )
  }))
