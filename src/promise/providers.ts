/**
 * The model provider a facade harness is built with (docs/runtime.md#providers):
 * `callModelDefaults: { provider: 'openrouter', apiKey?, baseUrl? }` (the key from
 * `OPENROUTER_API_KEY` when not given), or noetic's testing seam `_testCallModel`
 * (a function answering each model call with noetic's `LLMResponse`). And the
 * harness options noetic documents that this library does not run, refused by name.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as OpenRouterModel from "../layers/OpenRouterModel.ts"
import {
  type Item,
  type ModelError,
  ModelProvider,
  type ModelRequest,
  ModelRequestFailed,
  type ModelParams,
  type RoundUsage,
  type ToolSpec
} from "../services/ModelProvider.ts"
import { NoeticConfigError } from "./errors.ts"

/** noetic's `LlmProviderConfig`, the fields this library runs. */
export interface LlmProviderConfig {
  /** `'openrouter'`; noetic's default, `'noetic'` (its hosted platform), is refused. */
  readonly provider?: "noetic" | "openrouter"
  /** The API key; for `'openrouter'`, `process.env.OPENROUTER_API_KEY` when absent. */
  readonly apiKey?: string
  /** The API root (a local server in tests); OpenRouter's own when absent. */
  readonly baseUrl?: string
}

/** What noetic's testing seam `_testCallModel` is asked (noetic's `CallModelRequest`, the fields this library has). */
export interface CallModelRequest {
  readonly model: string
  readonly items: ReadonlyArray<Item>
  readonly instructions?: string | undefined
  readonly params?: ModelParams | undefined
  readonly tools?: ReadonlyArray<ToolSpec> | undefined
  /** The structured-output constraint the call asks for, as JSON Schema. */
  readonly outputJsonSchema?: Readonly<Record<string, unknown>> | undefined
  readonly signal: AbortSignal
}

/** What a model call answers (noetic's `LLMResponse`). */
export interface LLMResponse {
  readonly items: ReadonlyArray<Item>
  readonly usage?: RoundUsage
  readonly rounds?: ReadonlyArray<RoundUsage>
  readonly cost?: number
}

/** The model options of a harness. */
export interface ModelProviderOptions {
  readonly callModelDefaults?: LlmProviderConfig | undefined
  /** noetic's testing seam: answers every model call; tool calls in its answer are not run. */
  readonly _testCallModel?: ((request: CallModelRequest) => Promise<LLMResponse>) | undefined
}

const unsupported = (option: string, hint: string) =>
  new NoeticConfigError({
    code: "UNSUPPORTED_OPTION",
    message: `${option} is not supported by noetic-effect`,
    hint: `${hint} This library refuses an option it would otherwise ignore (docs/runtime.md#not-supported).`
  })

const KNOWN_PROVIDER_FIELDS = new Set(["provider", "apiKey", "baseUrl"])

// The provider's HTTP stack loads when a harness is built with one, not when the library is imported.
const loadOpenRouter = Effect.promise(() => import("../layers/OpenRouterModel.ts") as Promise<typeof OpenRouterModel>)

/**
 * The `ModelProvider` layer of a harness's options, or none (its `callModel`s then use
 * the `model` option's `LanguageModel`). Throws `NoeticConfigError` `UNSUPPORTED_OPTION`
 * for the `'noetic'` provider and for a config field this library does not run.
 */
export const providerLayer = (options: ModelProviderOptions): Layer.Layer<ModelProvider> | undefined => {
  const seam = options._testCallModel
  if (seam !== undefined) {
    if (typeof seam !== "function") {
      throw new NoeticConfigError({
        code: "INVALID_TEST_CALL_MODEL",
        message: "_testCallModel must be a function (request) => Promise<LLMResponse>",
        hint: "Pass a scripted model function, e.g. one answering from an array of responses."
      })
    }
    return Layer.succeed(ModelProvider, {
      name: "_testCallModel",
      mode: "whole-call",
      call: (request: ModelRequest) =>
        Effect.map(
          Effect.tryPromise({
            try: () =>
              seam({
                model: request.model,
                items: request.items,
                ...(request.instructions === undefined ? {} : { instructions: request.instructions }),
                ...(request.params === undefined ? {} : { params: request.params }),
                ...(request.tools.length === 0 ? {} : { tools: request.tools }),
                ...(request.outputJsonSchema === undefined ? {} : { outputJsonSchema: request.outputJsonSchema }),
                signal: request.signal
              }),
            // What the seam throws (a NoeticError of a model kind, say) is what the step fails with.
            catch: (thrown) => thrown as ModelError
          }),
          (response) => response
        ).pipe(Effect.map((response) => ({
          // The tool loop checks the items against the harness's item schemas (docs/runtime.md#item-schemas).
          items: Array.isArray(response?.items) ? response.items : [],
          usage: response?.usage ?? { inputTokens: 0, outputTokens: 0 },
          ...(typeof response?.cost === "number" ? { cost: response.cost } : {})
        })))
    })
  }
  const config = options.callModelDefaults
  if (config === undefined) return undefined
  for (const field of Object.keys(config)) {
    if (!KNOWN_PROVIDER_FIELDS.has(field) && (config as Record<string, unknown>)[field] !== undefined) {
      throw unsupported(`callModelDefaults.${field}`, `Remove '${field}'; the fields run are provider, apiKey and baseUrl.`)
    }
  }
  if (config.provider !== "openrouter") {
    throw unsupported(
      `callModelDefaults.provider ${JSON.stringify(config.provider ?? "noetic")} (the Noetic platform)`,
      "Use provider: 'openrouter' (with apiKey, or OPENROUTER_API_KEY in the environment)."
    )
  }
  const apiKey = config.apiKey ?? process.env.OPENROUTER_API_KEY
  if (apiKey === undefined || apiKey === "") {
    // As in noetic, a harness builds without a key; its first model call fails.
    return Layer.succeed(ModelProvider, {
      name: "openrouter",
      mode: "round",
      call: (request) =>
        Effect.fail(
          new ModelRequestFailed({
            provider: "openrouter",
            model: request.model,
            detail: "no API key: pass callModelDefaults.apiKey or set OPENROUTER_API_KEY"
          })
        )
    })
  }
  return Layer.unwrap(Effect.map(loadOpenRouter, (OpenRouter) =>
    OpenRouter.layer({ apiKey, ...(config.baseUrl === undefined ? {} : { baseUrl: config.baseUrl }) })))
}

/** noetic's harness options this library does not run. */
const UNSUPPORTED_HARNESS_OPTIONS: ReadonlyArray<readonly [string, string]> = [
  ["contextCache", "Prompt-cache anchoring is not tuned here: anchored layers are pinned per thread and superseded by <context_updates> (docs/layers-and-channels.md#the-assembled-view); drop contextCache."],
  ["projection", "The projection policy is noetic's default (tokenBudget 128000, responseReserve 4000) and not configurable here; drop projection."],
  ["storage", "noetic's constructor takes the storage adapter as environment.storage.adapter (it shows as config.storage); pass it there."],
  ["forceAtomicRecall", "Every layer's recallMode is honoured; to recall a layer each time, give it recallMode 'atomic'."]
]

/** Throws `NoeticConfigError` `UNSUPPORTED_OPTION` naming the first harness option given that this library does not run. */
export const refuseUnsupportedHarnessOptions = (options: object): void => {
  for (const [option, hint] of UNSUPPORTED_HARNESS_OPTIONS) {
    if ((options as Record<string, unknown>)[option] !== undefined) throw unsupported(`AgentHarness option '${option}'`, hint)
  }
}
