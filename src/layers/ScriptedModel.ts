/**
 * A `LanguageModel` that answers from a script: each call takes the next response.
 * For tests, demos and the Promise facade's `{ generate(request) }` models.
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
