/**
 * noetic's context layer definitions (`ContextLayer` with `scope`, `slot` and
 * `hooks`) and their translation to the engine's layers.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import {
  AgentContext as EngineContext,
  type ContextLayer as EngineContextLayer,
  history,
  instructions,
  type Item,
  scratchpad
} from "../harness/AgentContext.ts"
import { NoeticConfigError } from "./errors.ts"
import { createInMemoryStorage, type StorageAdapter } from "./storage.ts"
import { logWarning } from "../internal/diagnostics.ts"

export { history, instructions, scratchpad }
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

/**
 * noetic's layer hooks. This library runs `init` (lazily, before the first step,
 * only for a layer with no restored state) and `onItemAppend`; a layer with any other
 * hook is refused when a harness or context takes it (`UNSUPPORTED_LAYER_HOOK`).
 */
export interface ContextLayerHooks<TState = unknown> {
  init?(params: InitParams): Promise<{ state: TState }>
  onItemAppend?(params: OnItemAppendParams<TState>): Promise<OnItemAppendResult<TState>>
  recall?(params: any): Promise<unknown>
  store?(params: any): Promise<unknown>
  onSpawn?(params: any): Promise<unknown>
  onReturn?(params: any): Promise<unknown>
  onComplete?(params: any): Promise<unknown>
  dispose?(params: any): Promise<void>
  beforeToolCall?(params: any): Promise<unknown>
  afterModelCall?(params: any): Promise<unknown>
  projectHistory?(params: any): Promise<unknown>
  renderDelta?(params: any): Promise<string | null>
}

/** A noetic context layer definition: serialisable state per layer id, kept in snapshots. */
export interface NoeticContextLayer<TState = unknown> {
  id: string
  name?: string
  slot: number
  scope: ContextScope
  hooks: ContextLayerHooks<TState>
  /** `'disable'`: a failing `init` leaves the layer without state instead of failing the run. */
  onInitError?: "throw" | "disable"
  budget?: unknown
  timeouts?: unknown
  provides?: unknown
  placement?: "anchor" | "live" | "auto"
  /** When a re-render this layer asks for without a `timing` happens (default `'batched'`). */
  rerenderTiming?: "immediate" | "batched"
}

/** A context layer: noetic's definition, or this library's `{ id, init, onAppend }` form. */
export type ContextLayer<TState = any> = NoeticContextLayer<TState> | EngineContextLayer<TState>

const RUN_HOOKS = new Set(["init", "onItemAppend"])
const SCOPES = new Set(["thread", "resource", "global", "execution"])

const isNoeticLayer = (layer: ContextLayer): layer is NoeticContextLayer<any> =>
  typeof layer === "object" && layer !== null && "hooks" in layer

const layerConfigError = (code: string, message: string, hint: string) => new NoeticConfigError({ code, message, hint })

/** A storage namespaced under `prefix`. */
const scopedStorage = (storage: StorageAdapter, prefix: string): ScopedStorage => ({
  get: (key) => storage.get(prefix + key),
  set: (key, value) => storage.set(prefix + key, value),
  delete: (key) => storage.delete(prefix + key),
  list: async (sub = "") => (await storage.list(prefix + sub)).map((key) => key.slice(prefix.length)),
  getMany: async <T>(keys: Array<string>) => {
    const found = new Map<string, T>()
    await Promise.all(keys.map(async (key) => {
      const value = await storage.get<T>(prefix + key)
      if (value !== null && value !== undefined) found.set(key, value)
    }))
    return found
  }
})

const executionContextOf = (ctx: EngineContext): ExecutionContext => ({
  executionId: ctx.id,
  threadId: ctx.threadId ?? ctx.id,
  ...(ctx.resourceId === undefined ? {} : { resourceId: ctx.resourceId }),
  depth: ctx.depth,
  stepNumber: 0,
  tokenUsage: { input: 0, output: 0 },
  cost: 0,
  tokenize: (text) => Math.ceil(text.length / 4),
  trace: { setAttribute: () => {}, addEvent: () => {} },
  readLayerState: <T>(layerId: string) => ctx.layerState<T>(layerId)
})

const scopeKeyOf = (scope: ContextScope, ctx: EngineContext): string => {
  switch (scope) {
    case "thread":
      return ctx.threadId ?? ctx.id
    case "resource":
      return ctx.resourceId ?? ctx.threadId ?? ctx.id
    case "global":
      return "global"
    case "execution":
      return ctx.id
  }
}

/**
 * The engine form of a layer. A noetic definition is checked (a hook this library
 * does not run is refused by name) and its `init` gets a `ScopedStorage` over
 * `storage` (the harness's `environment.storage.adapter`, else memory).
 */
export const toEngineLayer = (layer: ContextLayer, storage: StorageAdapter): EngineContextLayer<any> => {
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
  const hooks = layer.hooks ?? {}
  for (const [hook, value] of Object.entries(hooks)) {
    if (value !== undefined && !RUN_HOOKS.has(hook)) {
      throw layerConfigError(
        "UNSUPPORTED_LAYER_HOOK",
        `context layer '${layer.id}' has a '${hook}' hook, which noetic-effect does not run`,
        `Remove '${hook}' from the layer's hooks: this library runs init (state init, skipped when a snapshot restores the state) and onItemAppend only, and refuses a hook rather than ignore it.`
      )
    }
  }
  const init = hooks.init
  const onItemAppend = hooks.onItemAppend
  return {
    id: layer.id,
    slot: layer.slot,
    definition: layer,
    ...(init === undefined ? { init: () => undefined } : {
      initEffect: (ctx: EngineContext) => {
        const scopeKey = scopeKeyOf(layer.scope, ctx)
        const run = Effect.tryPromise({
          try: () =>
            init.call(hooks, {
              storage: scopedStorage(storage, `layer:${layer.id}:${scopeKey}:`),
              scopeKey,
              ctx: executionContextOf(ctx)
            }),
          catch: (cause) => cause
        })
        return layer.onInitError === "disable"
          ? Effect.catch(Effect.map(run, (result) => result?.state), (cause) =>
            Effect.as(logWarning(`context layer '${layer.id}' init failed; it runs disabled`, cause), undefined))
          : Effect.orDie(Effect.map(run, (result) => result?.state))
      }
    }),
    ...(onItemAppend === undefined ? {} : {
      appendEffect: ({ ctx, items, state }) =>
        Effect.orDie(Effect.tryPromise({
          try: () =>
            onItemAppend.call(hooks, {
              items: [...items],
              log: { items: ctx.items },
              ctx: executionContextOf(ctx),
              state
            }),
          catch: (cause) => cause
        })).pipe(Effect.map((result) => ({
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
