/**
 * noetic's context layer definitions (`ContextLayer` with `scope`, `slot` and
 * `hooks`) and their translation to the engine's layers.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { AgentContext as EngineContext, type ContextLayer as EngineContextLayer, type Item } from "../harness/AgentContext.ts"
import * as LayerHooks from "../harness/LayerHooks.ts"
import * as LayerLifecycle from "../harness/LayerLifecycle.ts"
import { NoeticConfigError } from "./errors.ts"
import { createInMemoryStorage, type StorageAdapter } from "./storage.ts"

export type { Item }

// -----------------------------------------------------------------------------
// Context layers (noetic's definitions)
// -----------------------------------------------------------------------------

/** How a layer's state is keyed and shared (noetic's `ContextScope`). */
export type ContextScope = "thread" | "resource" | "global" | "execution"

/** Storage namespaced to one layer and scope key, handed to `init` (noetic's `ScopedStorage`). */
export interface ScopedStorage {
  get<T>(key: string): Promise<T | null>
  set<T>(key: string, value: T): Promise<void>
  delete(key: string): Promise<void>
  list(prefix?: string): Promise<Array<string>>
  getMany<T>(keys: Array<string>): Promise<Map<string, T>>
}

/** What a layer hook is told about the execution (noetic's `ExecutionContext`, the fields this library has). */
export interface ExecutionContext {
  executionId: string
  threadId: string
  resourceId?: string
  depth: number
  stepNumber: number
  tokenUsage: { input: number; output: number }
  cost: number
  tokenize(text: string): number
  trace: {
    setAttribute(key: string, value: string | number | boolean): void
    addEvent(name: string, attributes?: Record<string, string | number | boolean>): void
  }
  /** A sibling layer's state, by layer id. */
  readLayerState<T>(layerId: string): T | undefined
}

/** What `init` is given. */
export interface InitParams {
  storage: ScopedStorage
  scopeKey: string
  ctx: ExecutionContext
}

/** What `onItemAppend` is given: items on their way into the log, in slot order. */
export interface OnItemAppendParams<TState> {
  items: Array<Item>
  log: { readonly items: ReadonlyArray<Item> }
  ctx: ExecutionContext
  state: TState
}

/** A re-render a layer's `onItemAppend` asked for, as `runAppendPipeline` reports it. */
export interface RerenderRequest {
  layerId: string
  slot: number
  timing: "immediate" | "batched"
  scope: "self" | "slot-after" | "all"
}

/** What `runAppendPipeline` resolves with: the items to append, and the re-renders asked for. */
export interface AppendPipelineResult {
  items: Array<Item>
  rerenderRequests: Array<RerenderRequest>
}

/** What `onItemAppend` returns: the items to append (filtered, changed or added to) and the new state. */
export interface OnItemAppendResult<TState> {
  items: Array<Item>
  state?: TState
  rerender?: boolean
  timing?: "immediate" | "batched"
  scope?: "self" | "slot-after" | "all"
}

/** A steering verdict (noetic's `SteeringDecision`). */
export interface SteeringDecision {
  action: "allow" | "deny" | "guide"
  guidance?: string
}

/** A model response as layer hooks see it (noetic's `LLMResponse`). */
export interface LLMResponse {
  items: Array<Item>
  usage?: { inputTokens: number; outputTokens: number; cachedTokens?: number; cacheWriteTokens?: number }
  cost?: number
  [field: string]: unknown
}

/** What `recall` returns: items for the prompt and their token count; new `state` makes the layer live. */
export interface RecallResult<TState> {
  items: Array<Item>
  tokenCount: number
  state?: TState
}

/** How an execution ended, as `onComplete` is told. */
export type ExecutionOutcome = "success" | "failure" | "aborted"

/** Per-hook timeouts in milliseconds (noetic's `LayerTimeouts`). */
export type LayerTimeouts = LayerHooks.LayerTimeouts

/** Tokens a layer may inject: fixed, a range, or `'auto'` (noetic's `BudgetConfig`). */
export type BudgetConfig = number | { min: number; max: number } | "auto"

/** noetic's layer hooks; every one runs, at noetic's points (docs/layers-and-channels.md#hook-order). */
export interface ContextLayerHooks<TState = unknown> {
  init?(params: InitParams): Promise<{ state: TState }>
  recall?(params: {
    log: { readonly items: ReadonlyArray<Item> }
    query: string
    ctx: ExecutionContext
    state: TState
    budget: number
  }): Promise<RecallResult<TState> | string | null>
  renderDelta?(params: {
    prev: ReadonlyArray<Item>
    next: ReadonlyArray<Item>
    prevState: TState | undefined
    state: TState | undefined
    ctx: ExecutionContext
    budget: number
  }): Promise<string | null>
  projectHistory?(params: { items: ReadonlyArray<Item>; ctx: ExecutionContext; state: TState }): Promise<{ items: ReadonlyArray<Item> }>
  onItemAppend?(params: OnItemAppendParams<TState>): Promise<OnItemAppendResult<TState>>
  beforeToolCall?(params: {
    toolName: string
    toolArgs: unknown
    callId?: string
    ctx: ExecutionContext
    state: TState
  }): Promise<{ decision: SteeringDecision; state?: TState }>
  afterModelCall?(params: { response: LLMResponse; ctx: ExecutionContext; state: TState }): Promise<{ decision: SteeringDecision; state?: TState }>
  store?(params: {
    newItems: Array<Item>
    log: { readonly items: ReadonlyArray<Item> }
    response: LLMResponse
    ctx: ExecutionContext
    state: TState
  }): Promise<{ state?: TState } | undefined | void>
  onSpawn?(params: { parentState: TState; childCtx: ExecutionContext }): Promise<{ childState: TState | null; items?: Array<Item> } | null>
  onReturn?(params: {
    childState: TState
    childLog: { readonly items: ReadonlyArray<Item> }
    parentState: TState
    result: unknown
    childCtx: ExecutionContext
  }): Promise<{ parentState?: TState; result?: unknown } | undefined | void>
  onComplete?(params: {
    log: { readonly items: ReadonlyArray<Item> }
    ctx: ExecutionContext
    state: TState
    outcome: ExecutionOutcome
  }): Promise<void | { state: TState }>
  dispose?(params: { state: TState }): Promise<void>
}

/** A value a layer exposes on `ctx.context[layerId]` (noetic's `LayerDataDecl`). */
export interface LayerDataDecl<T = unknown, TState = any> {
  kind: "data"
  read: (state: TState) => T
}

/** A function a layer exposes on `ctx.context[layerId]` and as tool `layerId/name` (noetic's `LayerFunctionDecl`). */
export interface LayerFunctionDecl<TInput = any, TOutput = unknown, TState = any> {
  kind: "function"
  description: string
  input?: unknown
  output?: unknown
  execute(args: TInput, state: TState, ctx: ExecutionContext): Promise<{ result: TOutput; state?: TState }>
}

/** noetic's `LayerProvides`. */
export type LayerProvides = Record<string, LayerDataDecl<any, any> | LayerFunctionDecl<any, any, any>>

/** noetic's `layerData`. */
export const layerData = <T, TState = any>(opts: { read: (state: TState) => T }): LayerDataDecl<T, TState> => ({
  kind: "data",
  read: opts.read
})

/** noetic's `layerFunction`. */
export const layerFunction = <TInput, TOutput, TState = any>(opts: {
  description: string
  input?: unknown
  output?: unknown
  execute: (args: TInput, state: TState, ctx: ExecutionContext) => Promise<{ result: TOutput; state?: TState }>
}): LayerFunctionDecl<TInput, TOutput, TState> => ({ kind: "function", ...opts })

/** A noetic context layer definition. */
export interface NoeticContextLayer<TState = unknown> {
  id: string
  name?: string
  slot: number
  scope: ContextScope
  hooks: ContextLayerHooks<TState>
  /** `'disable'`: a failing `init` runs the execution without the layer; `'throw'` (default) stops it. */
  onInitError?: "throw" | "disable"
  /** `'deny'`: a `beforeToolCall` that fails or times out denies the call. */
  onBeforeToolCallError?: "allow" | "deny"
  budget?: BudgetConfig
  timeouts?: Partial<LayerTimeouts>
  recallMode?: "atomic" | "eventual"
  provides?: LayerProvides
  placement?: "anchor" | "live" | "auto"
  /** Item schemas this layer's items are checked with (noetic's `ItemSchemaRegistry` entries). */
  itemSchemas?: unknown
  /** When a re-render this layer asks for without a `timing` happens (default `'batched'`). */
  rerenderTiming?: "immediate" | "batched"
}

/** A context layer: noetic's definition, or this library's `{ id, init, onAppend }` form. */
export type ContextLayer<TState = any> = NoeticContextLayer<TState> | EngineContextLayer<TState>

/** noetic's `ContextConfig`: layers collected by `context([...])`, with a phantom shape. */
export interface ContextConfig<TLayers extends ReadonlyArray<ContextLayer> = ReadonlyArray<ContextLayer>> {
  layers: TLayers
  _shape: InferContextShape<TLayers>
}

/** Maps each layer's `provides` to the shape of `ctx.context[layerId]`. */
export type InferContextShape<TLayers extends ReadonlyArray<ContextLayer>> = {
  [L in TLayers[number] as L extends { id: infer Id extends string } ? Id : never]: L extends { provides: infer P }
    ? {
      [K in keyof P]: P[K] extends LayerDataDecl<infer T, any> ? T
        : P[K] extends LayerFunctionDecl<infer I, infer O, any> ? (args: I) => Promise<O>
        : never
    }
    : Record<string, unknown>
}

/** The shape of a `ContextConfig` (noetic's `InferContext`). */
export type InferContext<T extends { readonly _shape: unknown }> = T["_shape"]

/** The default context shape (noetic's `ContextData`). */
export type ContextData = Readonly<Record<string, Record<string, unknown>>>

/** noetic's `context()`: an array of layers as a typed `ContextConfig`. */
export const context = <const T extends ReadonlyArray<ContextLayer>>(layers: T): ContextConfig<T> =>
  ({ layers } as ContextConfig<T>)

/** Whether `value` is a `ContextConfig` (`{ layers }`) rather than an array of layers. */
export const isContextConfig = (value: unknown): value is ContextConfig =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Array.isArray((value as { layers?: unknown }).layers)

/** A `spawn.context` / `contextLayers` value: an array of layers or a `ContextConfig`. */
export const layersOf = (value: ReadonlyArray<ContextLayer> | ContextConfig | undefined): ReadonlyArray<ContextLayer> | undefined =>
  value === undefined ? undefined : isContextConfig(value) ? value.layers : value

/** @internal The scope names noetic accepts. */
export const SCOPES: ReadonlySet<string> = new Set(["thread", "resource", "global", "execution"])
const HOOKS = new Set([
  "init",
  "recall",
  "renderDelta",
  "projectHistory",
  "onItemAppend",
  "beforeToolCall",
  "afterModelCall",
  "store",
  "onSpawn",
  "onReturn",
  "onComplete",
  "dispose"
])
const OPTIONS = new Set([
  "id",
  "name",
  "slot",
  "scope",
  "hooks",
  "onInitError",
  "onBeforeToolCallError",
  "budget",
  "timeouts",
  "recallMode",
  "provides",
  "placement",
  "itemSchemas",
  "rerenderTiming"
])

const isNoeticLayer = (layer: ContextLayer): layer is NoeticContextLayer<any> =>
  typeof layer === "object" && layer !== null && "hooks" in layer

/** @internal A `NoeticConfigError` of a layer definition. */
export const layerConfigError = (code: string, message: string, hint: string) => new NoeticConfigError({ code, message, hint })

/** noetic's `ScopedStorage` (Promises) over the engine's. */
const promiseScoped = (storage: LayerHooks.ScopedStorage): ScopedStorage => ({
  get: <T>(key: string) => Effect.runPromise(storage.get(key)) as Promise<T | null>,
  set: (key, value) => Effect.runPromise(storage.set(key, value)),
  delete: (key) => Effect.runPromise(storage.delete(key)),
  list: async (prefix) => [...await Effect.runPromise(storage.list(prefix))],
  getMany: async <T>(keys: Array<string>) => new Map(await Effect.runPromise(storage.getMany(keys))) as Map<string, T>
})

/** noetic's `ExecutionContext` of an engine context, its counters read live. */
export const executionContextOf = (ctx: EngineContext): ExecutionContext => ({
  executionId: ctx.id,
  threadId: ctx.threadId ?? ctx.id,
  ...(ctx.resourceId === undefined ? {} : { resourceId: ctx.resourceId }),
  depth: ctx.depth,
  get stepNumber() {
    return ctx.meter.stepCount
  },
  get tokenUsage() {
    return { input: ctx.meter.tokens.input, output: ctx.meter.tokens.output }
  },
  get cost() {
    return ctx.meter.cost
  },
  tokenize: (text) => Math.ceil(text.length / 4),
  trace: { setAttribute: () => {}, addEvent: () => {} },
  readLayerState: <T>(layerId: string) => ctx.layerState<T>(layerId)
})

/** A Promise-returning hook as an Effect (its rejection is the Effect's failure). */
/** @internal */
export const lift = <A>(f: (signal: AbortSignal) => PromiseLike<A> | A): Effect.Effect<A, unknown> =>
  Effect.tryPromise({ try: async (signal) => await f(signal), catch: (cause) => cause })

const logOf = (items: ReadonlyArray<Item>) => ({ items })

/**
 * The engine form of a layer. A noetic definition is checked (bad id, scope, budget,
 * timeouts, hook or option names are refused with `INVALID_CONTEXT_LAYER` /
 * `UNSUPPORTED_OPTION`), and each of its Promise hooks becomes an Effect hook of the
 * engine's lifecycle. Storage comes from the context (the harness's
 * `environment.storage.adapter`, else its checkpoint store's storage, else memory).
 */
export const toEngineLayer = (layer: ContextLayer, _storage?: StorageAdapter): EngineContextLayer<any> => {
  if (!isNoeticLayer(layer)) {
    if (typeof layer !== "object" || layer === null || typeof layer.id !== "string" || layer.id.trim() === "") {
      throw layerConfigError(
        "INVALID_CONTEXT_LAYER",
        "a context layer needs a non-empty string id",
        "Give every layer a unique id: its state is stored under it in snapshots."
      )
    }
    return layer
  }
  if (typeof layer.id !== "string" || layer.id.trim() === "") {
    throw layerConfigError(
      "INVALID_CONTEXT_LAYER",
      "a context layer needs a non-empty string id",
      "Give every layer a unique id: its state is stored under it in snapshots."
    )
  }
  if (!SCOPES.has(layer.scope)) {
    throw layerConfigError(
      "INVALID_CONTEXT_LAYER",
      `context layer '${layer.id}' has scope ${JSON.stringify(layer.scope)}`,
      "Use one of 'thread', 'resource', 'global' or 'execution'."
    )
  }
  for (const key of Object.keys(layer)) {
    if (!OPTIONS.has(key) && (layer as unknown as Record<string, unknown>)[key] !== undefined) {
      throw layerConfigError(
        "UNSUPPORTED_OPTION",
        `context layer '${layer.id}' has option '${key}', which noetic-effect does not know`,
        `Remove '${key}': a layer takes ${[...OPTIONS].join(", ")}.`
      )
    }
  }
  const hooks = layer.hooks ?? {}
  for (const [hook, value] of Object.entries(hooks)) {
    if (value !== undefined && !HOOKS.has(hook)) {
      throw layerConfigError(
        "UNSUPPORTED_OPTION",
        `context layer '${layer.id}' has a hook '${hook}', which noetic does not document`,
        `Remove '${hook}': the hooks are ${[...HOOKS].join(", ")}.`
      )
    }
  }
  const budget = LayerLifecycle.budgetProblem(layer.budget)
  if (budget !== undefined) {
    throw layerConfigError("INVALID_BUDGET_INPUT", `context layer '${layer.id}': budget ${budget}`, "Use a token count, { min, max } or 'auto'.")
  }
  for (const [hook, ms] of Object.entries(layer.timeouts ?? {})) {
    if (!(hook in LayerHooks.DEFAULT_LAYER_TIMEOUTS) || typeof ms !== "number" || Number.isNaN(ms)) {
      throw layerConfigError(
        "INVALID_CONTEXT_LAYER",
        `context layer '${layer.id}' has timeout ${JSON.stringify(hook)}: ${JSON.stringify(ms)}`,
        `Give milliseconds for any of ${Object.keys(LayerHooks.DEFAULT_LAYER_TIMEOUTS).join(", ")}.`
      )
    }
  }
  for (const [field, allowed] of [
    ["recallMode", ["atomic", "eventual"]],
    ["placement", ["anchor", "live", "auto"]],
    ["onInitError", ["throw", "disable"]],
    ["onBeforeToolCallError", ["allow", "deny"]]
  ] as const) {
    const value = (layer as unknown as Record<string, unknown>)[field]
    if (value !== undefined && !(allowed as ReadonlyArray<unknown>).includes(value)) {
      throw layerConfigError(
        "INVALID_CONTEXT_LAYER",
        `context layer '${layer.id}' has ${field} ${JSON.stringify(value)}`,
        `Use one of ${allowed.map((a) => `'${a}'`).join(", ")}.`
      )
    }
  }
  const h = hooks as ContextLayerHooks<any>
  const x = executionContextOf
  const lifecycle: LayerHooks.LayerHooks<any> = {
    ...(h.init && { init: ({ storage, scopeKey, ctx }) => lift(() => h.init!.call(hooks, { storage: promiseScoped(storage), scopeKey, ctx: x(ctx) })) }),
    ...(h.recall && {
      recall: ({ log, query, ctx, state, budget }) => lift(() => h.recall!.call(hooks, { log: logOf(log), query, ctx: x(ctx), state, budget }))
    }),
    ...(h.renderDelta && {
      renderDelta: ({ ctx, ...rest }) => lift(() => h.renderDelta!.call(hooks, { ...rest, ctx: x(ctx) }))
    }),
    ...(h.projectHistory && {
      projectHistory: ({ ctx, items, state }) => lift(() => h.projectHistory!.call(hooks, { items, ctx: x(ctx), state }))
    }),
    ...(h.beforeToolCall && {
      beforeToolCall: ({ ctx, callId, toolName, toolArgs, state }) =>
        lift(() => h.beforeToolCall!.call(hooks, { toolName, toolArgs, state, ...(callId === undefined ? {} : { callId }), ctx: x(ctx) }))
    }),
    ...(h.afterModelCall && {
      afterModelCall: ({ ctx, response, state }) =>
        lift(() => h.afterModelCall!.call(hooks, { response: response as LLMResponse, ctx: x(ctx), state }))
    }),
    ...(h.store && {
      store: ({ ctx, newItems, log, response, state }) =>
        lift(() => h.store!.call(hooks, { newItems: [...newItems], log: logOf(log), response: response as LLMResponse, ctx: x(ctx), state }))
    }),
    ...(h.onSpawn && {
      onSpawn: ({ parentState, childCtx }) => lift(() => h.onSpawn!.call(hooks, { parentState, childCtx: x(childCtx) }))
    }),
    ...(h.onReturn && {
      onReturn: ({ childLog, childCtx, ...rest }) =>
        lift(() => h.onReturn!.call(hooks, { ...rest, childLog: logOf(childLog), childCtx: x(childCtx) }))
    }),
    ...(h.onComplete && {
      onComplete: ({ log, ctx, state, outcome }) => lift(() => h.onComplete!.call(hooks, { log: logOf(log), ctx: x(ctx), state, outcome }))
    }),
    ...(h.dispose && { dispose: ({ state }) => lift(() => h.dispose!.call(hooks, { state })) })
  }
  const provides: LayerHooks.LayerProvides | undefined = layer.provides === undefined ? undefined : Object.fromEntries(
    Object.entries(layer.provides).map(([name, decl]) => [
      name,
      decl.kind === "data"
        ? { kind: "data", read: decl.read }
        : {
          kind: "function",
          description: decl.description,
          input: decl.input,
          output: decl.output,
          execute: (args: unknown, state: unknown, ctx: EngineContext) => lift(() => decl.execute(args, state, x(ctx)))
        }
    ])
  ) as LayerHooks.LayerProvides
  const onItemAppend = hooks.onItemAppend
  return {
    id: layer.id,
    slot: layer.slot,
    definition: layer,
    scope: layer.scope,
    lifecycle,
    ...(layer.name === undefined ? {} : { name: layer.name }),
    ...(layer.budget === undefined ? {} : { budget: layer.budget }),
    ...(layer.timeouts === undefined ? {} : { timeouts: layer.timeouts }),
    ...(layer.onInitError === undefined ? {} : { onInitError: layer.onInitError }),
    ...(layer.onBeforeToolCallError === undefined ? {} : { onBeforeToolCallError: layer.onBeforeToolCallError }),
    ...(layer.recallMode === undefined ? {} : { recallMode: layer.recallMode }),
    ...(layer.placement === undefined ? {} : { placement: layer.placement }),
    ...(provides === undefined ? {} : { provides }),
    ...(h.init === undefined ? { init: () => undefined } : {}),
    ...(onItemAppend === undefined ? {} : {
      appendEffect: ({ ctx, items, state }) =>
        LayerHooks.withHookTimeout(
          lift(() =>
            onItemAppend.call(hooks, {
              items: [...items],
              log: { items: ctx.items },
              ctx: x(ctx),
              state
            })
          ),
          layer.id,
          "onItemAppend",
          LayerHooks.timeoutOf(layer.timeouts, "onItemAppend")
        ).pipe(Effect.orDie, Effect.map((result) => ({
          items: result.items,
          state: result.state,
          rerender: result.rerender === true
            ? { timing: result.timing ?? layer.rerenderTiming ?? "batched", scope: result.scope ?? "slot-after" }
            : undefined
        })))
    })
  }
}

// Layers of spawn steps are built without a harness: their init storage is this one.
let defaultLayerStorage: StorageAdapter | undefined
export const layerStorageDefault = (): StorageAdapter => (defaultLayerStorage ??= createInMemoryStorage())
