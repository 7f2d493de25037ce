/**
 * The model side of the runtime (docs/runtime.md): `ModelProvider`, a service that
 * answers one model call with noetic's items, and `RunEvents`, where the deltas a
 * streaming call produces are published for the session streams.
 *
 * A provider speaks noetic's `Item` shapes on both sides (the item log goes in, the
 * response's items come out), so a recorded round replays as the same items.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schema from "effect/Schema"

/** An item of the log in noetic's shape (`message`, `function_call`, `function_call_output`, `reasoning`, ...). */
export interface Item {
  readonly type: string
  readonly id?: string
  readonly [field: string]: unknown
}

/** A tool as the model is told of it: its name, description and parameters as JSON Schema. */
export interface ToolSpec {
  readonly name: string
  readonly description?: string | undefined
  readonly parameters: Readonly<Record<string, unknown>>
}

/** Tokens of one model round (noetic's `RoundUsage`). */
export interface RoundUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedTokens?: number
}

/** Generation parameters (noetic's `ModelParams`). */
export interface ModelParams {
  readonly temperature?: number
  readonly topP?: number
  readonly maxTokens?: number
  readonly stopSequences?: ReadonlyArray<string>
}

/** One model call: the model id, the system prompt, the item log, the tools, the parameters. */
export interface ModelRequest {
  readonly model: string
  readonly instructions?: string | undefined
  readonly items: ReadonlyArray<Item>
  readonly tools: ReadonlyArray<ToolSpec>
  readonly params?: ModelParams | undefined
  /** A JSON Schema the reply must follow (structured output), when the step has one. */
  readonly outputJsonSchema?: Readonly<Record<string, unknown>> | undefined
  /** Aborted when the step is interrupted (an abort, a lost race, a closed harness). */
  readonly signal: AbortSignal
}

/** What a model call answered (noetic's `LLMResponse`): the new items, usage and cost. */
export interface ModelResponse {
  readonly items: ReadonlyArray<Item>
  readonly usage: RoundUsage
  readonly cost?: number | undefined
}

/** A streamed piece of a model call, as it arrives. */
export type ModelDelta =
  | { readonly type: "text_delta"; readonly itemId: string; readonly delta: string }
  | { readonly type: "reasoning_delta"; readonly itemId: string; readonly delta: string }
  | {
    readonly type: "tool_call_delta"
    readonly callId: string
    readonly name: string
    readonly argumentsDelta: string
  }
  /**
   * The provider received an event of its stream (any server-sent event, a delta or
   * not): it re-arms the stream-idle watchdog and marks the first event of a round
   * (docs/runtime.md#run-events). Not published.
   */
  | { readonly type: "provider_event" }

/**
 * What the runtime publishes while it runs model calls and tool calls (docs/runtime.md#run-events).
 * `path` is the dispatch path of the `callModel` step, `executionId` its execution.
 */
export type RunEvent =
  & { readonly executionId: string; readonly threadId: string | undefined; readonly path: string }
  & (
    | Exclude<ModelDelta, { readonly type: "provider_event" }>
    | {
      readonly type: "model_call_started"
      readonly model: string
      readonly round: number
      /** The items sent (the assembled view of the log). */
      readonly messageCount: number
      readonly toolCount: number
    }
    /** The round's first stream event arrived (time to first token). */
    | { readonly type: "model_call_first_event"; readonly model: string; readonly round: number }
    /** No stream event came for `idleTimeoutMs`: the round is about to fail. */
    | { readonly type: "model_call_stalled"; readonly model: string; readonly round: number; readonly idleTimeoutMs: number }
    | {
      readonly type: "model_call_completed"
      readonly model: string
      readonly round: number
      /** The items the round answered. */
      readonly itemCount: number
      readonly usage: RoundUsage
      readonly cost: number | undefined
      /** Whether the round was replayed from the step ledger (no request was made). */
      readonly replayed: boolean
    }
    | { readonly type: "item"; readonly item: Item }
    /** The function calls of round `round` are about to run (`toolCount` of them). */
    | { readonly type: "tool_round_started"; readonly round: number; readonly toolCount: number }
    /** Every function call of round `round` has run. */
    | { readonly type: "tool_round_completed"; readonly round: number; readonly toolCount: number }
    | { readonly type: "tool_call_started"; readonly callId: string; readonly name: string; readonly arguments: string }
    | { readonly type: "tool_call_progress"; readonly callId: string; readonly name: string; readonly event: unknown }
    | {
      readonly type: "tool_call_completed"
      readonly callId: string
      readonly name: string
      readonly output: string
      readonly error: boolean
      readonly replayed: boolean
    }
  )

/**
 * A model provider. `mode: 'round'` providers answer one round (one request to the
 * provider): the runtime runs the tool calls it asks for and calls again
 * (docs/runtime.md#the-tool-loop). A `'whole-call'` provider answers the whole call,
 * tool traffic included (noetic's `_testCallModel` seam): the runtime runs nothing.
 */
export interface ModelProviderShape {
  readonly name: string
  readonly mode: "round" | "whole-call"
  readonly call: (
    request: ModelRequest,
    emit: (delta: ModelDelta) => Effect.Effect<void>
  ) => Effect.Effect<ModelResponse, ModelError>
}

/** The model provider `callModel` steps call. */
export class ModelProvider extends Context.Service<ModelProvider, ModelProviderShape>()("noetic-effect/ModelProvider") {}

/** Where the runtime publishes `RunEvent`s; a session subscribes to it. Optional: without it nothing is published. */
export class RunEvents extends Context.Service<RunEvents, PubSub.PubSub<RunEvent>>()("noetic-effect/RunEvents") {}

/**
 * Milliseconds a model round may go without a stream event before it fails with
 * `ModelStreamStalled` (noetic's stream-idle watchdog: 120 s, re-armed by every event).
 */
export const StreamIdleTimeout: Context.Reference<number> = Context.Reference<number>(
  "noetic-effect/StreamIdleTimeout",
  { defaultValue: () => 120_000 }
)

/** Publishes `event` to `RunEvents` when it is provided. */
export const publish = (event: RunEvent): Effect.Effect<void> =>
  Effect.flatMap(Effect.serviceOption(RunEvents), (found) =>
    Option.isNone(found) ? Effect.void : Effect.asVoid(PubSub.publish(found.value, event)))

// -----------------------------------------------------------------------------
// Errors (noetic's kinds: model_rate_limit, model_refused, model_parse_error)
// -----------------------------------------------------------------------------

/** The provider answered 429: too many requests. `retryAfterMs` from its `Retry-After` header. */
export class ModelRateLimited extends Schema.TaggedError<ModelRateLimited>("noetic-effect/ModelRateLimited")(
  "ModelRateLimited",
  {
    provider: Schema.String,
    model: Schema.String,
    status: Schema.Number,
    retryAfterMs: Schema.optionalKey(Schema.Number),
    detail: Schema.String,
    stepId: Schema.optionalKey(Schema.String)
  }
) {
  /** The error code. */
  get code(): "MODEL_RATE_LIMITED" {
    return "MODEL_RATE_LIMITED"
  }
  readonly noeticKind = "model_rate_limit"
  override get message(): string {
    return `model ${this.model} (${this.provider}) is rate limited (HTTP ${this.status})${
      this.retryAfterMs === undefined ? "" : `; retry after ${this.retryAfterMs} ms`
    }: ${this.detail}`
  }
}

/** The model refused to answer (a `refusal` part, or a content-filter finish). */
export class ModelRefused extends Schema.TaggedError<ModelRefused>("noetic-effect/ModelRefused")(
  "ModelRefused",
  { provider: Schema.String, model: Schema.String, refusal: Schema.String, stepId: Schema.optionalKey(Schema.String) }
) {
  /** The error code. */
  get code(): "MODEL_REFUSED" {
    return "MODEL_REFUSED"
  }
  readonly noeticKind = "model_refused"
  override get message(): string {
    return `model ${this.model} (${this.provider}) refused: ${this.refusal}`
  }
}

/** The model's reply could not be read: a malformed response, or output its schema rejects. */
export class ModelParseError extends Schema.TaggedError<ModelParseError>("noetic-effect/ModelParseError")(
  "ModelParseError",
  { model: Schema.String, detail: Schema.String, raw: Schema.optionalKey(Schema.String), stepId: Schema.optionalKey(Schema.String) }
) {
  /** The error code. */
  get code(): "MODEL_PARSE" {
    return "MODEL_PARSE"
  }
  readonly noeticKind = "model_parse_error"
  override get message(): string {
    return `model ${this.model}: ${this.detail}`
  }
}

/** The provider failed the request (a non-2xx status other than 429, a network failure). */
export class ModelRequestFailed extends Schema.TaggedError<ModelRequestFailed>("noetic-effect/ModelRequestFailed")(
  "ModelRequestFailed",
  {
    provider: Schema.String,
    model: Schema.String,
    status: Schema.optionalKey(Schema.Number),
    detail: Schema.String,
    stepId: Schema.optionalKey(Schema.String)
  }
) {
  /** The error code. */
  get code(): "MODEL_REQUEST_FAILED" {
    return "MODEL_REQUEST_FAILED"
  }
  override get message(): string {
    return `model ${this.model} (${this.provider}) request failed${
      this.status === undefined ? "" : ` (HTTP ${this.status})`
    }: ${this.detail}`
  }
}

/** No stream event came from the provider for `idleTimeoutMs`: the round was aborted (noetic's watchdog). */
export class ModelStreamStalled extends Schema.TaggedError<ModelStreamStalled>("noetic-effect/ModelStreamStalled")(
  "ModelStreamStalled",
  { model: Schema.String, idleTimeoutMs: Schema.Number, stepId: Schema.optionalKey(Schema.String) }
) {
  /** The error code. */
  get code(): "MODEL_STREAM_STALLED" {
    return "MODEL_STREAM_STALLED"
  }
  override get message(): string {
    return `model stream idle timeout after ${this.idleTimeoutMs}ms`
  }
}

/**
 * A `callModel` with tools ran on a harness without a `ModelProvider`: its `LanguageModel`
 * answers text only, and the tools would be ignored (docs/runtime.md#providers).
 */
export class NoModelProvider extends Schema.TaggedError<NoModelProvider>("noetic-effect/NoModelProvider")(
  "NoModelProvider",
  { stepId: Schema.String }
) {
  /** The error code. */
  get code(): "NO_MODEL_PROVIDER" {
    return "NO_MODEL_PROVIDER"
  }
  override get message(): string {
    return `callModel '${this.stepId}' has tools, and this harness has no model provider to run them: ` +
      "build it with callModelDefaults: { provider: 'openrouter', ... } (or _testCallModel in tests)"
  }
}

/** What a model call fails with. */
export type ModelError = ModelRateLimited | ModelRefused | ModelParseError | ModelRequestFailed

/** `error` as the failure of step `stepId` (a provider does not know the step that called it). */
export const ofStep = (error: unknown, stepId: string): unknown => {
  if (error instanceof ModelRateLimited) return new ModelRateLimited({ ...fieldsOf(error), stepId } as never)
  if (error instanceof ModelRefused) return new ModelRefused({ ...fieldsOf(error), stepId } as never)
  if (error instanceof ModelParseError) return new ModelParseError({ ...fieldsOf(error), stepId } as never)
  if (error instanceof ModelRequestFailed) return new ModelRequestFailed({ ...fieldsOf(error), stepId } as never)
  if (error instanceof ModelStreamStalled) return new ModelStreamStalled({ ...fieldsOf(error), stepId } as never)
  return error
}

const fieldsOf = (error: object): Record<string, unknown> => {
  const { _tag: _, ...fields } = { ...error } as Record<string, unknown>
  return fields
}
