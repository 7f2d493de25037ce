/**
 * The `callModel` step (docs/runtime.md#the-tool-loop). With a `ModelProvider` in
 * context, a step is noetic's model call: the string input is appended to the item
 * log as a user message, the log goes to the provider, the reply's items are appended,
 * the function calls it asks for run and their outputs are appended, and the provider
 * is asked again, until a reply asks for none. Every model round and every tool call
 * is a child step of the `callModel` step (`model-round#n`, `tool-call#n`), so each is
 * recorded in the step ledger as it completes: a run killed mid loop resumes without
 * asking the model again for the rounds that completed, and without re-running the
 * tool calls that completed (docs/runtime.md#durability-of-the-tool-loop).
 *
 * Without a provider, a step asks the `effect/ai` `LanguageModel` for one turn.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Hash from "effect/Hash"
import * as Option from "effect/Option"
import type * as LanguageModel from "effect/ai/LanguageModel"
import {
  type Item as ModelItem,
  type ModelDelta,
  ModelParseError,
  ModelProvider,
  type ModelProviderShape,
  ModelStreamStalled,
  NoModelProvider,
  ofStep,
  type ModelResponse,
  publish,
  type RunEvent,
  StreamIdleTimeout,
  type ToolSpec
} from "../services/ModelProvider.ts"
import type { AgentContext, Item } from "./AgentContext.ts"
import { ModelOutputInvalid, SteeringDenied } from "./HarnessError.ts"
import type { ModelResponse as LayerModelResponse } from "./LayerHooks.ts"
import * as LayerLifecycle from "./LayerLifecycle.ts"
import { type CallModel, type EmitOption, type Lazy, runCode, type StandardSchema, type StepContext } from "./Step.ts"
import { checkResponseItems, checkToolResult } from "../services/ItemSchemas.ts"
import { outputConstraint } from "./OutputSchema.ts"
import { endsWithUserText, noSession, SessionTurn, toolLoopStep, turnOf } from "./SessionTurn.ts"
import type { StepMeta as StepMetaOf } from "./StepMeta.ts"

/** noetic's bound on the rounds of one model call. */
export const MAX_TOOL_ROUNDS = 32

/**
 * A tool the model may call: what the model is told of it, and how it runs. `execute`
 * gets the arguments parsed from the call's JSON; what it returns (a string, or JSON of
 * anything else) is the function call's output.
 */
export interface ModelTool {
  readonly name: string
  readonly description?: string | undefined
  readonly parameters: Readonly<Record<string, unknown>>
  readonly execute: (
    args: unknown,
    ctx: StepContext,
    call: { readonly callId: string; readonly name: string }
  ) => Effect.Effect<unknown, unknown>
}

/** The harness's tools: those a `callModel` without `tools` may call (noetic's harness `tools`). */
export class ModelTools extends Context.Service<ModelTools, ReadonlyArray<ModelTool>>()("noetic-effect/ModelTools") {}

/** What the last `callModel` on a context produced (noetic's `StepMeta`); defined in `StepMeta.ts`. */
export type StepMeta = StepMetaOf

/**
 * What a provider-backed `callModel` records in the ledger: its output and its meta,
 * so a replayed step restores the meta a loop's `until` reads (`until.noToolCalls()`).
 */
export interface ModelTurnRecord {
  readonly _noeticModelTurn: 1
  readonly output: unknown
  readonly meta: StepMeta
}

const isTurnRecord = (u: unknown): u is ModelTurnRecord =>
  typeof u === "object" && u !== null && (u as { _noeticModelTurn?: unknown })._noeticModelTurn === 1 && "meta" in u

const metas = new WeakMap<AgentContext, StepMeta>()

/** The meta of the last `callModel` that settled on `ctx` (or on the context a step's view of it is made from). */
export const lastStepMeta = (ctx: AgentContext): StepMeta | undefined => {
  // A step's context is a view whose prototype is the context itself.
  for (let at: object | null = ctx; at !== null && at !== Object.prototype; at = Object.getPrototypeOf(at)) {
    const meta = metas.get(at as AgentContext)
    if (meta !== undefined) return meta
  }
  return undefined
}

/** A `callModel` dispatch's settled value: its meta noted on `ctx`, its output returned. */
export const settle = (ctx: AgentContext, value: unknown): unknown => {
  if (!isTurnRecord(value)) return value
  metas.set(ctx, value.meta)
  return value.output
}

/** A value, or what a Promise of it resolves with. */
const awaited = <T>(value: T | PromiseLike<T>): Effect.Effect<T> =>
  typeof (value as { then?: unknown })?.then === "function"
    ? Effect.promise(() => Promise.resolve(value))
    : Effect.succeed(value as T)

const resolveLazy = <T>(value: Lazy<T>, ctx: StepContext): T =>
  typeof value === "function" ? (value as (ctx: StepContext) => T)(ctx) : value

/** The text of the last assistant message among `items` (noetic's response text). */
export const responseText = (items: ReadonlyArray<ModelItem>): string => {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i]!
    if (item.type !== "message" || item.role !== "assistant") continue
    const content = item.content
    if (typeof content === "string") return content
    if (Array.isArray(content)) {
      return content.map((part) => (part?.type === "output_text" && typeof part.text === "string" ? part.text : "")).join("")
    }
  }
  return ""
}

/** The step's `output` schema applied to the reply's text, parsed as JSON. */
export const parseOutput = (step: CallModel<any, any, any>, text: string) =>
  Effect.gen(function*() {
    const invalid = (issues: ReadonlyArray<string>) => new ModelOutputInvalid({ stepId: step.id, raw: text, issues })
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      return yield* invalid([`not JSON: ${String(error)}`])
    }
    const schema = step.output as StandardSchema
    const result = yield* Effect.promise(async () => schema["~standard"].validate(json))
    if (result.issues !== undefined) return yield* invalid(result.issues.map((issue) => issue.message))
    return result.value
  })

/** The `callModel` step: through the `ModelProvider` when there is one, else the `LanguageModel`. */
export const callModelStep = (
  step: CallModel<any, any, any>,
  input: unknown,
  ctx: StepContext,
  root: AgentContext
): Effect.Effect<unknown, unknown, unknown> =>
  Effect.flatMap(
    Effect.serviceOption(ModelProvider),
    (provider) =>
      Option.isSome(provider) ? toolLoop(step, input, ctx, root, provider.value) : languageModelTurn(step, input, ctx, root)
  )

/** One turn through the `effect/ai` `LanguageModel` (no tools), appended to the log. */
const languageModelTurn = (step: CallModel<any, any, any>, input: unknown, ctx: StepContext, root: AgentContext) =>
  Effect.gen(function*() {
    // The LanguageModel path runs no tools: a step with tools fails rather than ignore them.
    if (Array.isArray(step.tools) ? step.tools.length > 0 : step.tools !== undefined) {
      return yield* new NoModelProvider({ stepId: step.id })
    }
    // Loaded at the first model turn: a graph without one never loads `effect/ai`.
    const { LanguageModel: LanguageModelService } = yield* Effect.promise(
      (): Promise<typeof LanguageModel> => import("effect/ai/LanguageModel")
    )
    const model = yield* LanguageModelService
    const response = yield* model.generateText({ prompt: step.prompt(input, ctx) })
    const metadata = response.content.find((part) => part.type === "response-metadata")
    const text = response.text
    // Without a provider id, the made-up one also names the text: a turn re-issued
    // after a crash that returns the same answer is not doubled, and one that
    // returns another answer is a new turn in the log, as it is downstream.
    const responseId = metadata?.id ?? `${root.id}${ctx.path}:${(Hash.string(text) >>> 0).toString(16)}`
    // A session turn has already put its text input in the log as a user message.
    const inputLogged = typeof input === "string" && endsWithUserText(root.items, input)
    const turn: Array<Item> = [
      ...(inputLogged ? [] : [{ type: "message", role: "user", id: `${root.id}${ctx.path}:input`, content: input }]),
      { type: "message", role: "assistant", responseId, content: text }
    ]
    yield* root.append(turn)
    if (step.result === "turn") return { responseId, text }
    if (step.result === "text") return text
    return yield* parseOutput(step, text)
  })

/** What a tool call recorded: its output as the model sees it, and whether it failed. */
interface ToolCallOutcome {
  readonly output: string
  readonly error: boolean
}

const stringify = (value: unknown): string => {
  if (typeof value === "string") return value
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "object" && error !== null && "message" in error
    ? String((error as { message: unknown }).message)
    : String(error)

/** Failures that stop the run rather than become a tool call's error output. */
const isRunFailure = (error: unknown): boolean => {
  const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
  if (tag === "StepCancelled" || tag === "HarnessClosed" || tag === "ExecutionLeaseLost") return true
  const kind = typeof error === "object" && error !== null
    ? (error as { noeticError?: { kind?: unknown } }).noeticError?.kind
    : undefined
  return kind === "cancelled"
}

/** Runs one function call: unknown tools and malformed arguments answer an error output, as noetic's do. */
const runTool = (
  tools: ReadonlyArray<ModelTool>,
  call: { readonly callId: string; readonly name: string; readonly arguments: string },
  ctx: StepContext
): Effect.Effect<ToolCallOutcome, unknown> => {
  const tool = tools.find((candidate) => candidate.name === call.name)
  if (tool === undefined) {
    return Effect.succeed({
      output: `Error: unknown tool ${JSON.stringify(call.name)}; known tools: ${tools.map((t) => t.name).join(", ") || "(none)"}`,
      error: true
    })
  }
  let args: unknown
  try {
    args = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments)
  } catch {
    return Effect.succeed({ output: `Error: malformed JSON in tool arguments: ${call.arguments}`, error: true })
  }
  return Effect.suspend(() => tool.execute(args, ctx, { callId: call.callId, name: call.name })).pipe(
    Effect.map((result): ToolCallOutcome => ({ output: stringify(result), error: false })),
    Effect.catch((error) =>
      isRunFailure(error) ? Effect.fail(error) : Effect.succeed({ output: `Error: ${messageOf(error)}`, error: true })
    )
  )
}

/** The events of one round's stream that are not deltas: its first event, its stall. */
type RoundSignal =
  | { readonly type: "model_call_first_event"; readonly model: string; readonly round: number }
  | { readonly type: "model_call_stalled"; readonly model: string; readonly round: number; readonly idleTimeoutMs: number }

/**
 * A provider call with an abort signal that fires when the fiber is interrupted, under
 * noetic's stream-idle watchdog: every event of the provider's stream re-arms it (the
 * first is announced as `model_call_first_event`); `StreamIdleTimeout` milliseconds
 * without one announce `model_call_stalled` and fail the round with `ModelStreamStalled`,
 * aborting the request (docs/runtime.md#run-events).
 */
const callProvider = (
  provider: ModelProviderShape,
  request: Omit<Parameters<ModelProviderShape["call"]>[0], "signal">,
  emit: (delta: ModelDelta) => Effect.Effect<void>,
  round: number,
  signal: (event: RoundSignal) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<ModelResponse, unknown, unknown> =>
  Effect.gen(function*() {
    const idleTimeoutMs = yield* StreamIdleTimeout
    let lastEventAt = yield* Clock.currentTimeMillis
    let seen = false
    const onDelta = (delta: ModelDelta): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        lastEventAt = now
        const first = seen ? Effect.void : Effect.ignore(signal({ type: "model_call_first_event", model: request.model, round }))
        seen = true
        return Effect.andThen(first as Effect.Effect<void>, delta.type === "provider_event" ? Effect.void : emit(delta))
      })
    const controller = new AbortController()
    const call = provider.call({ ...request, signal: controller.signal }, onDelta).pipe(
      Effect.onInterrupt(() => Effect.sync(() => controller.abort(new Error("the model call was interrupted"))))
    )
    const watchdog = Effect.gen(function*() {
      for (;;) {
        const wait = lastEventAt + idleTimeoutMs - (yield* Clock.currentTimeMillis)
        if (wait <= 0) break
        yield* Effect.sleep(Duration.millis(wait))
      }
      yield* signal({ type: "model_call_stalled", model: request.model, round, idleTimeoutMs })
      return yield* new ModelStreamStalled({ model: request.model, idleTimeoutMs })
    })
    const response = yield* Effect.raceFirst(call, watchdog)
    // As noetic does, the answer's items are checked (docs/runtime.md#item-schemas).
    const items = yield* checkResponseItems(response.items)
    return items === response.items ? response : { ...response, items }
  })

/** A function call the model asked for, as a tool runs it. */
interface ToolCall {
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/** What one model call's rounds do, told apart where the step's loop and `directCall` differ. */
interface Rounds {
  /** The provider answers the whole call (noetic's `_testCallModel`): its tool calls are not run. */
  readonly wholeCall: boolean
  /** Before every round but the first. */
  readonly beforeRound?: ((round: number) => Effect.Effect<unknown, unknown, unknown>) | undefined
  /** One request to the provider (and what comes of its answer: appends, events). */
  readonly callRound: (round: number) => Effect.Effect<ModelResponse, unknown, unknown>
  /** Runs one function call the answer left unanswered. */
  readonly callTool: (call: ToolCall) => Effect.Effect<ToolCallOutcome, unknown, unknown>
  /** Takes the `function_call_output` item of a call that ran. */
  readonly onToolOutput: (output: ModelItem) => Effect.Effect<unknown, unknown, unknown>
  /** Before and after the function calls of a round run (noetic's `tool_round_started` / `_completed`). */
  readonly toolRound?: ((phase: "started" | "completed", round: number, toolCount: number) => Effect.Effect<unknown, unknown, unknown>) | undefined
}

/** What a model call's rounds add up to: every item they produced, the function calls, the usage. */
interface RoundsResult {
  readonly items: ReadonlyArray<ModelItem>
  readonly toolCalls: ReadonlyArray<ModelItem>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
  readonly cost: number | undefined
}

/**
 * noetic's round loop, shared by a `callModel` step and `harness.callModel`: ask the
 * provider, run the function calls its answer leaves unanswered (each answered by a
 * `function_call_output` item), ask again, until an answer asks for none; at most
 * `MAX_TOOL_ROUNDS` rounds, past which it fails "LLM exceeded maximum tool rounds".
 */
const runRounds = (rounds: Rounds): Effect.Effect<RoundsResult, unknown, unknown> =>
  Effect.gen(function*() {
    const items: Array<ModelItem> = []
    const toolCalls: Array<ModelItem> = []
    let usage = { inputTokens: 0, outputTokens: 0 }
    let cost: number | undefined
    for (let round = 0;; round++) {
      if (round >= MAX_TOOL_ROUNDS) {
        return yield* Effect.fail(new Error(`LLM exceeded maximum tool rounds (${MAX_TOOL_ROUNDS})`))
      }
      if (round > 0 && rounds.beforeRound !== undefined) yield* rounds.beforeRound(round)
      const response = yield* rounds.callRound(round)
      usage = {
        inputTokens: usage.inputTokens + response.usage.inputTokens,
        outputTokens: usage.outputTokens + response.usage.outputTokens
      }
      if (response.cost !== undefined) cost = (cost ?? 0) + response.cost
      items.push(...response.items)
      const answered = new Set(
        response.items.filter((item) => item.type === "function_call_output").map((item) => String(item.callId))
      )
      const calls = response.items.filter((item) => item.type === "function_call")
      toolCalls.push(...calls)
      const pending = calls.filter((item) => !answered.has(String(item.callId)))
      if (rounds.wholeCall || pending.length === 0) break
      if (rounds.toolRound !== undefined) yield* rounds.toolRound("started", round, pending.length)
      for (const item of pending) {
        const call: ToolCall = {
          callId: String(item.callId),
          name: String(item.name),
          arguments: typeof item.arguments === "string" ? item.arguments : "{}"
        }
        const outcome = yield* rounds.callTool(call)
        const output: ModelItem = {
          type: "function_call_output",
          id: `fco_${call.callId}`,
          callId: call.callId,
          output: outcome.output,
          status: "completed"
        }
        yield* checkToolResult(output)
        yield* rounds.onToolOutput(output)
        items.push(output)
      }
      if (rounds.toolRound !== undefined) yield* rounds.toolRound("completed", round, pending.length)
    }
    return { items, toolCalls, usage, cost }
  })

/** noetic's model call, its rounds and tool calls recorded as child steps. */
const toolLoop = (
  step: CallModel<any, any, any>,
  input: unknown,
  ctx: StepContext,
  root: AgentContext,
  provider: ModelProviderShape
): Effect.Effect<ModelTurnRecord, unknown, unknown> =>
  Effect.gen(function*() {
    // noetic's Lazy values may be functions of the context, returning a value or a Promise of it.
    const model = yield* awaited(step.model === undefined ? "" : resolveLazy(step.model, ctx))
    if (typeof model !== "string" || model.trim() === "") {
      return yield* new ModelParseError({
        model: String(model),
        stepId: step.id,
        detail: `callModel(${JSON.stringify(step.id)}) resolved model to ${typeof model === "string" ? "an empty string" : typeof model}`
      })
    }
    const instructions = yield* awaited(step.instructions === undefined ? undefined : resolveLazy(step.instructions, ctx))
    const given = yield* awaited(
      typeof step.tools === "function" ? (step.tools as (ctx: StepContext) => unknown)(ctx) : step.tools
    )
    if (given !== undefined && !Array.isArray(given)) {
      return yield* Effect.die(new TypeError(`callModel(${JSON.stringify(step.id)}): tools must resolve to an array of tools`))
    }
    const stepTools: ReadonlyArray<ModelTool> = Array.isArray(given)
      ? given as ReadonlyArray<ModelTool>
      : Option.getOrElse(yield* Effect.serviceOption(ModelTools), () => [])
    // A layer's `provides` functions are tools named `layerId/fnName` (docs/layers-and-channels.md#provides).
    const tools: ReadonlyArray<ModelTool> = [...stepTools, ...LayerLifecycle.layerTools(root).filter((t) =>
      !stepTools.some((own) => own.name === t.name)
    ).map((t): ModelTool => ({
      name: t.name,
      description: t.description,
      parameters: jsonSchemaOf(t.input),
      execute: (args) => t.execute(args)
    }))]
    const specs: ReadonlyArray<ToolSpec> = tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters
    }))
    // A structured output is asked of the provider as a JSON Schema (docs/runtime.md#structured-output).
    const outputJsonSchema = step.result === "output"
      ? yield* outputConstraint(step.id, step.output, step.outputJsonSchema)
      : undefined
    const base = { executionId: root.id, threadId: root.threadId, path: ctx.path }
    // Published to RunEvents, and handed to the session turn the step runs in (docs/architecture.md#sessions).
    const event = (body: DistributiveOmit<RunEvent, "executionId" | "threadId" | "path">) =>
      Effect.suspend(() => {
        const published = { ...base, ...body } as RunEvent
        return Effect.andThen(publish(published), SessionTurn.use((turn) => turn.runEvent(published, step.emit)))
      })

    // The input is logged once: not when the turn (a session) already put it last, nor
    // when a resumed loop finds it last but for the tool calls of its own earlier rounds.
    const beforeToolCalls = root.items.filter((item) =>
      item.type !== "function_call" && item.type !== "function_call_output" && item.type !== "reasoning"
    )
    if (typeof input === "string" && input !== "" && !endsWithUserText(beforeToolCalls, input)) {
      yield* root.append([{
        type: "message",
        id: `${root.id}${ctx.path}:input`,
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: input }]
      }])
    }

    const { items: responseItems, toolCalls, usage, cost } = yield* runRounds({
      wholeCall: provider.mode === "whole-call",
      // The session's between-rounds messages join the log before every round but the first.
      beforeRound: (round) => SessionTurn.use((turn) => turn.betweenRounds(root, round)),
      callRound: (round) =>
        Effect.gen(function*() {
          let replayed = true
          const roundStep = toolLoopStep(runCode({
            id: "model-round",
            module: null,
            execute: () =>
              Effect.gen(function*() {
                replayed = false
                // Layer hooks of a model call (docs/layers-and-channels.md#hook-order): recall and
                // projectHistory build the items sent; afterModelCall may deny the reply or guide a retry.
                for (let retries = 0;; retries++) {
                  const view = yield* LayerLifecycle.assembleView(root, { query: typeof input === "string" ? input : "" })
                  yield* event({ type: "model_call_started", model, round, messageCount: view.items.length, toolCount: specs.length })
                  const response = yield* callProvider(provider, {
                    model,
                    instructions,
                    items: [...view.items] as ReadonlyArray<ModelItem>,
                    tools: specs,
                    params: step.params,
                    outputJsonSchema
                  }, (delta) => event(delta as DistributiveOmit<RunEvent, "executionId" | "threadId" | "path">), round, event)
                  // noetic's GenAI span attributes, on the round's span (docs/runtime.md#tracing).
                  yield* Effect.annotateCurrentSpan({
                    "gen_ai.system": provider.name,
                    "gen_ai.request.model": model,
                    "gen_ai.usage.input_tokens": response.usage.inputTokens,
                    "gen_ai.usage.output_tokens": response.usage.outputTokens,
                    ...(response.usage.cachedTokens === undefined ? {} : { "gen_ai.usage.cached_input_tokens": response.usage.cachedTokens }),
                    ...(response.cost === undefined ? {} : { "gen_ai.cost": response.cost })
                  })
                  root.meter.lastLayerUsage = LayerLifecycle.layerUsage(root, model, view, { instructions, tools: specs })
                  const decision = yield* LayerLifecycle.afterModelCallLayers(root, response as LayerModelResponse)
                  if (decision.action === "deny") {
                    return yield* new SteeringDenied({ stepId: step.id, guidance: decision.guidance ?? "steering rule violation" })
                  }
                  if (decision.action === "guide" && retries < MAX_STEERING_RETRIES) {
                    yield* root.append([LayerLifecycle.message(decision.guidance ?? "Please adjust your response.", "developer")])
                    continue
                  }
                  return response
                }
              })
          }))
          const response = (yield* Effect.mapError(ctx.run(roundStep, round), (error) => ofStep(error, step.id))) as ModelResponse
          yield* event({
            type: "model_call_completed",
            model,
            round,
            itemCount: response.items.length,
            usage: response.usage,
            cost: response.cost,
            replayed
          })
          yield* root.append(response.items as ReadonlyArray<Item>)
          LayerLifecycle.meterUsage(root, response.usage, response.cost)
          // store runs after the append and waits for the write-through of what it changed.
          if (!replayed) yield* LayerLifecycle.storeLayers(root, response as LayerModelResponse)
          for (const item of response.items) yield* event({ type: "item", item })
          return response
        }),
      callTool: (call) =>
        Effect.gen(function*() {
          let ran = false
          const toolStep = toolLoopStep(runCode({
            id: "tool-call",
            module: null,
            execute: (_: unknown, toolCtx: StepContext) =>
              Effect.suspend(() => {
                ran = true
                return Effect.andThen(
                  Effect.andThen(Effect.annotateCurrentSpan("tool.name", call.name), event({ type: "tool_call_started", ...call })),
                  Effect.flatMap(
                    LayerLifecycle.beforeToolCallLayers(root, { toolName: call.name, toolArgs: argsOf(call.arguments), callId: call.callId }),
                    (decision): Effect.Effect<ToolCallOutcome, unknown> =>
                      decision.action === "deny"
                        ? Effect.succeed({ output: `Tool call denied: ${decision.guidance ?? "steering rule violation"}`, error: true })
                        : decision.action === "guide"
                        ? Effect.succeed({ output: `Tool call redirected: ${decision.guidance}`, error: true })
                        : runTool(tools, call, toolCtx)
                  )
                )
              })
          }))
          const outcome = (yield* ctx.run(toolStep, call)) as ToolCallOutcome
          yield* event({
            type: "tool_call_completed",
            callId: call.callId,
            name: call.name,
            output: outcome.output,
            error: outcome.error,
            replayed: !ran
          })
          return outcome
        }),
      onToolOutput: (output) => Effect.andThen(root.append([output as Item]), event({ type: "item", item: output })),
      toolRound: (phase, round, toolCount) => event({ type: `tool_round_${phase}`, round, toolCount })
    })
    const text = responseText(responseItems)
    const output = step.result === "turn"
      ? { responseId: String(responseItems.find((item) => item.type === "message")?.id ?? `${root.id}${ctx.path}`), text }
      : step.result === "text"
      ? text
      : yield* parseOutput(step, text)
    return {
      _noeticModelTurn: 1,
      output,
      meta: {
        ...(toolCalls.length === 0 ? {} : { toolCalls }),
        usage,
        ...(cost === undefined ? {} : { cost }),
        responseItems
      }
    } satisfies ModelTurnRecord
  })

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** What `directCall` is asked (noetic's `CallModelRequest`). */
export interface DirectCallRequest {
  readonly model: string
  readonly items: ReadonlyArray<ModelItem>
  readonly instructions?: string | undefined
  readonly params?: CallModel<any, any, any>["params"]
  readonly tools?: ReadonlyArray<ModelTool> | undefined
  /** A structured output asked of the model (noetic's `outputSchema`): sent as its JSON Schema. */
  readonly outputSchema?: unknown
  readonly outputJsonSchema?: Readonly<Record<string, unknown>> | undefined
  /** Gates the call's framework events, as a step's `emit` does (noetic's `CallModelRequest.emit`). */
  readonly emit?: EmitOption | undefined
}

/**
 * noetic's `harness.callModel(request)`: one model call, its tool loop included, on
 * the items given rather than a context's log, and recorded nowhere (it is not a step).
 * Tools run with `ctx` (the context of the step calling it). Resolves with the new
 * items (noetic's `LLMResponse`), usage and cost.
 *
 * Given the context of a session turn (or of a step below one), the call feeds that
 * session's streams as a `callModel` step does, as noetic's direct call feeds the
 * broadcaster its context carries: provider deltas (text, reasoning, function-call
 * arguments), `model_call_*`, `tool_round_*`, `tool_call_*`, and its tool results as
 * `item_appended`. Its usage is not added to the turn's response (only steps charge a
 * context), and between-rounds messages queued on the session join the turn's log and
 * the call's items before every round but the first (docs/runtime.md#harnesscallmodel).
 */
export const directCall = (
  request: DirectCallRequest,
  ctx: StepContext | undefined
): Effect.Effect<ModelResponse, unknown, unknown> =>
  Effect.gen(function*() {
    const found = yield* Effect.serviceOption(ModelProvider)
    if (Option.isNone(found)) return yield* new NoModelProvider({ stepId: "harness.callModel" })
    const provider = found.value
    // Not `??` around a `yield*`: the CommonJS build moves its right side into an arrow function.
    const pool = yield* Effect.serviceOption(ModelTools)
    const tools = request.tools ?? Option.getOrElse(pool, () => [])
    const specs = tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.parameters }))
    const outputJsonSchema = request.outputSchema === undefined && request.outputJsonSchema === undefined
      ? undefined
      : yield* outputConstraint("harness.callModel", request.outputSchema, request.outputJsonSchema)
    const log: Array<ModelItem> = [...request.items]
    const turn = ctx === undefined ? noSession : turnOf(ctx)
    const base = { executionId: ctx?.id ?? "", threadId: ctx?.threadId, path: ctx?.path ?? "" }
    const event = (body: DistributiveOmit<RunEvent, "executionId" | "threadId" | "path">) =>
      Effect.suspend(() => {
        const published = { ...base, ...body } as RunEvent
        return Effect.andThen(publish(published), turn.runEvent(published, request.emit, { counted: false }))
      })
    const { items, usage, cost } = yield* runRounds({
      wholeCall: provider.mode === "whole-call",
      beforeRound: (round) =>
        ctx === undefined
          ? Effect.void
          : Effect.map(turn.betweenRounds(ctx, round), (appended) => void log.push(...appended as ReadonlyArray<ModelItem>)),
      callRound: (round) =>
        Effect.gen(function*() {
          yield* event({ type: "model_call_started", model: request.model, round, messageCount: log.length, toolCount: specs.length })
          const response = yield* callProvider(provider, {
            model: request.model,
            instructions: request.instructions,
            items: [...log],
            tools: specs,
            params: request.params,
            outputJsonSchema
          }, (delta) => event(delta as DistributiveOmit<RunEvent, "executionId" | "threadId" | "path">), round, event)
          log.push(...response.items)
          yield* event({
            type: "model_call_completed",
            model: request.model,
            round,
            itemCount: response.items.length,
            usage: response.usage,
            cost: response.cost,
            replayed: false
          })
          for (const item of response.items) yield* event({ type: "item", item })
          return response
        }),
      callTool: (call) =>
        Effect.gen(function*() {
          yield* event({ type: "tool_call_started", ...call })
          const outcome: ToolCallOutcome = ctx === undefined
            ? { output: "Error: tools of harness.callModel need request.ctx, the context of the calling step", error: true }
            : yield* runTool(tools, call, ctx)
          yield* event({ type: "tool_call_completed", callId: call.callId, name: call.name, output: outcome.output, error: outcome.error, replayed: false })
          return outcome
        }),
      onToolOutput: (output) => Effect.andThen(Effect.sync(() => log.push(output)), event({ type: "item", item: output })),
      toolRound: (phase, round, toolCount) => event({ type: `tool_round_${phase}`, round, toolCount })
    })
    return { items, usage, ...(cost === undefined ? {} : { cost }) }
  })

/** noetic's bound on `afterModelCall` guide retries of one round. */
const MAX_STEERING_RETRIES = 3

const argsOf = (text: string): unknown => {
  try {
    return text.trim() === "" ? {} : JSON.parse(text)
  } catch {
    return text
  }
}

/** A layer function's input schema as JSON Schema for the model: zod 4's `toJSONSchema`, else any object. */
const jsonSchemaOf = (schema: unknown): Readonly<Record<string, unknown>> => {
  const s = schema as { toJSONSchema?: () => unknown; "~standard"?: { jsonSchema?: { input?: (o: unknown) => unknown } } } | undefined
  try {
    const json = s?.["~standard"]?.jsonSchema?.input?.({ target: "draft-2020-12" }) ?? s?.toJSONSchema?.()
    if (typeof json === "object" && json !== null) return json as Record<string, unknown>
  } catch {
    // fall through: the model is told only that the tool takes an object
  }
  return { type: "object" }
}
