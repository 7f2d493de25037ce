/**
 * A `ModelProvider` speaking OpenRouter's HTTP API: OpenAI-compatible chat completions
 * (`POST {baseUrl}/chat/completions`), streamed as server-sent events, over
 * `effect/http`'s `HttpClient` (docs/runtime.md#providers). One request per model
 * round: the runtime runs the tool calls it answers with and calls again.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import {
  type Item,
  type ModelDelta,
  type ModelError,
  ModelParseError,
  ModelProvider,
  type ModelProviderShape,
  ModelRateLimited,
  ModelRefused,
  type ModelRequest,
  ModelRequestFailed,
  type ModelResponse
} from "../services/ModelProvider.ts"

/** OpenRouter's API root. */
export const DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"

/** How to reach the provider. */
export interface OpenRouterOptions {
  readonly apiKey: string
  /** The API root, `https://openrouter.ai/api/v1` unless given (a local server in tests). */
  readonly baseUrl?: string | undefined
  /** The provider name errors and events carry. */
  readonly name?: string | undefined
}

type ChatMessage =
  | { role: "system" | "user"; content: string }
  | {
    role: "assistant"
    content: string | null
    tool_calls?: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }>
  }
  | { role: "tool"; tool_call_id: string; content: string }

/** The text of an item's `content`: a string (this library's items), or noetic's content parts. */
const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return content === undefined || content === null ? "" : JSON.stringify(content)
  return content.map((part) => {
    if (typeof part === "string") return part
    if (typeof part !== "object" || part === null) return ""
    const p = part as { text?: unknown; refusal?: unknown }
    return typeof p.text === "string" ? p.text : typeof p.refusal === "string" ? p.refusal : ""
  }).join("")
}

/** The item log as chat messages: tool calls join the assistant message before them. */
export const toMessages = (request: Pick<ModelRequest, "instructions" | "items">): Array<ChatMessage> => {
  const messages: Array<ChatMessage> = []
  if (request.instructions !== undefined && request.instructions !== "") {
    messages.push({ role: "system", content: request.instructions })
  }
  for (const item of request.items) {
    if (item.type === "message") {
      const role = item.role
      const text = textOf(item.content)
      if (role === "assistant") messages.push({ role: "assistant", content: text })
      else messages.push({ role: role === "user" ? "user" : "system", content: text })
    } else if (item.type === "function_call") {
      const call = {
        id: String(item.callId),
        type: "function" as const,
        function: { name: String(item.name), arguments: typeof item.arguments === "string" ? item.arguments : "{}" }
      }
      const last = messages[messages.length - 1]
      if (last !== undefined && last.role === "assistant") {
        last.tool_calls = [...(last.tool_calls ?? []), call]
      } else {
        messages.push({ role: "assistant", content: null, tool_calls: [call] })
      }
    } else if (item.type === "function_call_output") {
      messages.push({ role: "tool", tool_call_id: String(item.callId), content: textOf(item.output) })
    }
    // Reasoning and other item kinds are the provider's own; they are not sent back.
  }
  return messages
}

const requestBody = (request: ModelRequest) => ({
  model: request.model,
  messages: toMessages(request),
  stream: true,
  stream_options: { include_usage: true },
  usage: { include: true },
  ...(request.tools.length === 0 ? {} : {
    tools: request.tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description === undefined ? {} : { description: tool.description }),
        parameters: tool.parameters
      }
    }))
  }),
  ...(request.params?.temperature === undefined ? {} : { temperature: request.params.temperature }),
  ...(request.params?.topP === undefined ? {} : { top_p: request.params.topP }),
  ...(request.params?.maxTokens === undefined ? {} : { max_tokens: request.params.maxTokens }),
  ...(request.params?.stopSequences === undefined ? {} : { stop: request.params.stopSequences }),
  ...(request.outputJsonSchema === undefined ? {} : {
    // noetic's constraint: named `output`, not strict (a strict schema must list every property as required).
    response_format: { type: "json_schema", json_schema: { name: "output", schema: request.outputJsonSchema } }
  })
})

/** What the chunks of one response add up to. */
interface Accumulated {
  id: string | undefined
  text: string
  reasoning: string
  refusal: string
  finishReason: string | undefined
  toolCalls: Array<{ id: string; name: string; arguments: string }>
  usage: { inputTokens: number; outputTokens: number; cachedTokens?: number } | undefined
  cost: number | undefined
  error: string | undefined
}

const emptyAccumulated = (): Accumulated => ({
  id: undefined,
  text: "",
  reasoning: "",
  refusal: "",
  finishReason: undefined,
  toolCalls: [],
  usage: undefined,
  cost: undefined,
  error: undefined
})

type Json = Record<string, any>

/** Folds one chunk (a streamed `chat.completion.chunk`, or a whole `chat.completion`) in; returns its deltas. */
const absorb = (acc: Accumulated, chunk: Json): Array<ModelDelta> => {
  const deltas: Array<ModelDelta> = []
  if (typeof chunk.id === "string") acc.id ??= chunk.id
  if (typeof chunk.error === "object" && chunk.error !== null) {
    acc.error = typeof chunk.error.message === "string" ? chunk.error.message : JSON.stringify(chunk.error)
  }
  if (typeof chunk.usage === "object" && chunk.usage !== null) {
    const cached = chunk.usage.prompt_tokens_details?.cached_tokens
    acc.usage = {
      inputTokens: Number(chunk.usage.prompt_tokens ?? 0),
      outputTokens: Number(chunk.usage.completion_tokens ?? 0),
      ...(typeof cached === "number" ? { cachedTokens: cached } : {})
    }
    if (typeof chunk.usage.cost === "number") acc.cost = chunk.usage.cost
  }
  const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined
  if (choice === undefined || choice === null) return deltas
  if (typeof choice.finish_reason === "string") acc.finishReason = choice.finish_reason
  const part: Json | undefined = choice.delta ?? choice.message
  if (part === undefined || part === null) return deltas
  const itemId = `msg_${acc.id ?? "0"}`
  if (typeof part.content === "string" && part.content !== "") {
    acc.text += part.content
    deltas.push({ type: "text_delta", itemId, delta: part.content })
  }
  const reasoning = typeof part.reasoning === "string" ? part.reasoning : part.reasoning_content
  if (typeof reasoning === "string" && reasoning !== "") {
    acc.reasoning += reasoning
    deltas.push({ type: "reasoning_delta", itemId: `rs_${acc.id ?? "0"}`, delta: reasoning })
  }
  if (typeof part.refusal === "string") acc.refusal += part.refusal
  if (Array.isArray(part.tool_calls)) {
    for (const [position, call] of part.tool_calls.entries()) {
      const index = typeof call.index === "number" ? call.index : position
      const known = acc.toolCalls[index] ??= { id: "", name: "", arguments: "" }
      if (typeof call.id === "string") known.id = call.id
      if (typeof call.function?.name === "string") known.name += call.function.name
      const args = call.function?.arguments
      if (typeof args === "string") known.arguments += args
      deltas.push({ type: "tool_call_delta", callId: known.id, name: known.name, argumentsDelta: typeof args === "string" ? args : "" })
    }
  }
  return deltas
}

/** The response's items in noetic's shapes: reasoning, the assistant message, the function calls. */
const itemsOf = (acc: Accumulated, fallbackId: string): Array<Item> => {
  const id = acc.id ?? fallbackId
  const items: Array<Item> = []
  if (acc.reasoning !== "") {
    items.push({ type: "reasoning", id: `rs_${id}`, summary: [{ type: "summary_text", text: acc.reasoning }] })
  }
  if (acc.text !== "") {
    items.push({
      type: "message",
      id: `msg_${id}`,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: acc.text, annotations: [] }]
    })
  }
  acc.toolCalls.forEach((call, i) => {
    const callId = call.id === "" ? `call_${id}_${i}` : call.id
    items.push({
      type: "function_call",
      id: `fc_${callId}`,
      callId,
      name: call.name,
      arguments: call.arguments === "" ? "{}" : call.arguments,
      status: "completed"
    })
  })
  return items
}

const retryAfterMs = (value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, Math.round(seconds * 1000))
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now())
}

/** The provider over an `HttpClient`. */
export const make = (options: OpenRouterOptions): Effect.Effect<ModelProviderShape, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const name = options.name ?? "openrouter"
    const url = `${(options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "")}/chat/completions`
    const call = (
      request: ModelRequest,
      emit: (delta: ModelDelta) => Effect.Effect<void>
    ): Effect.Effect<ModelResponse, ModelError> =>
      Effect.gen(function*() {
        const failed = (detail: string, status?: number) =>
          new ModelRequestFailed({ provider: name, model: request.model, detail, ...(status === undefined ? {} : { status }) })
        const http = HttpClientRequest.post(url).pipe(
          HttpClientRequest.bearerToken(options.apiKey),
          HttpClientRequest.setHeader("accept", "text/event-stream"),
          HttpClientRequest.bodyJsonUnsafe(requestBody(request))
        )
        const response = yield* Effect.mapError(client.execute(http), (error) => failed(error.message))
        if (response.status === 429) {
          const detail = yield* Effect.orElseSucceed(response.text, () => "")
          const after = retryAfterMs(response.headers["retry-after"])
          return yield* new ModelRateLimited({
            provider: name,
            model: request.model,
            status: 429,
            detail: detail.slice(0, 500),
            ...(after === undefined ? {} : { retryAfterMs: after })
          })
        }
        if (response.status < 200 || response.status >= 300) {
          const detail = yield* Effect.orElseSucceed(response.text, () => "")
          return yield* failed(detail.slice(0, 500), response.status)
        }
        const acc = emptyAccumulated()
        const parse = (raw: string) =>
          Effect.try({
            try: () => JSON.parse(raw) as Json,
            catch: () => new ModelParseError({ model: request.model, detail: "the provider sent a chunk that is not JSON", raw: raw.slice(0, 500) })
          })
        const contentType = response.headers["content-type"] ?? ""
        if (contentType.includes("text/event-stream")) {
          yield* response.stream.pipe(
            Stream.decodeText,
            Stream.splitLines,
            Stream.mapError((error) => failed(error.message)),
            Stream.runForEach((line) => {
              if (line.trim() === "") return Effect.void
              // Every line (an event, or a `: keep-alive` comment) says the stream is alive.
              const alive = emit({ type: "provider_event" })
              if (!line.startsWith("data:")) return alive
              const data = line.slice(5).trim()
              if (data === "" || data === "[DONE]") return alive
              return Effect.andThen(
                alive,
                Effect.flatMap(parse(data), (chunk) => Effect.forEach(absorb(acc, chunk), emit, { discard: true }))
              )
            })
          )
        } else {
          const body = yield* Effect.mapError(response.text, (error) => failed(error.message))
          yield* emit({ type: "provider_event" })
          const deltas = absorb(acc, yield* parse(body))
          yield* Effect.forEach(deltas, emit, { discard: true })
        }
        if (acc.error !== undefined) return yield* failed(acc.error)
        if (acc.refusal !== "" || acc.finishReason === "content_filter") {
          return yield* new ModelRefused({
            provider: name,
            model: request.model,
            refusal: acc.refusal === "" ? "the provider's content filter stopped the reply" : acc.refusal
          })
        }
        if (acc.finishReason === undefined && acc.text === "" && acc.toolCalls.length === 0) {
          return yield* new ModelParseError({ model: request.model, detail: "the provider's response has no choices" })
        }
        return {
          items: itemsOf(acc, `${Date.now().toString(36)}`),
          usage: acc.usage ?? { inputTokens: 0, outputTokens: 0 },
          ...(acc.cost === undefined ? {} : { cost: acc.cost })
        } satisfies ModelResponse
      })
    return { name, mode: "round", call }
  })

/** The provider as a layer, over the platform's `fetch`. */
export const layer = (options: OpenRouterOptions): Layer.Layer<ModelProvider> =>
  Layer.effect(ModelProvider, make(options)).pipe(Layer.provide(FetchHttpClient.layer))
