/**
 * The shapes of noetic's context-layer lifecycle in the engine (hooks return
 * Effects), and what both the context and the lifecycle need of them: scope keys,
 * storage namespaced to a layer and scope, hook timeouts, the defaults noetic uses.
 * The lifecycle itself (recall, store, steering, spawn, complete, dispose) is in
 * `LayerLifecycle.ts`; docs/layers-and-channels.md describes both.
 *
 * @since 0.2.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StorageError } from "../Errors.ts"
import { logWarning } from "../internal/diagnostics.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { AgentContext, ContextLayer, Item } from "./AgentContext.ts"

/** How far a layer's state is shared, and so where it is stored (noetic's `ContextScope`). */
export type ContextScope = "thread" | "resource" | "global" | "execution"

/** Tokens a layer may inject per model call: fixed, a range, or the allocator's choice. */
export type BudgetConfig = number | { readonly min: number; readonly max: number } | "auto"

/** The hooks a timeout applies to (`renderDelta` borrows `recall`'s). */
export type TimedHook =
  | "init"
  | "recall"
  | "store"
  | "onSpawn"
  | "onReturn"
  | "onComplete"
  | "dispose"
  | "beforeToolCall"
  | "afterModelCall"
  | "onItemAppend"
  | "projectHistory"

/** Per-hook timeouts in milliseconds (noetic's `LayerTimeouts`). */
export type LayerTimeouts = { readonly [K in TimedHook]?: number }

/** noetic's defaults, by hook (milliseconds). */
export const DEFAULT_LAYER_TIMEOUTS: { readonly [K in TimedHook]: number } = {
  init: 10_000,
  recall: 5_000,
  store: 30_000,
  onSpawn: 10_000,
  onReturn: 10_000,
  onComplete: 30_000,
  dispose: 5_000,
  beforeToolCall: 5_000,
  afterModelCall: 10_000,
  onItemAppend: 5_000,
  projectHistory: 5_000
}

/** A steering verdict of `beforeToolCall` / `afterModelCall`. */
export interface SteeringDecision {
  readonly action: "allow" | "deny" | "guide"
  readonly guidance?: string | undefined
}

/** A model response as the layer hooks see it (noetic's `LLMResponse`). */
export interface ModelResponse {
  readonly items: ReadonlyArray<Item>
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number; readonly [field: string]: unknown } | undefined
  readonly cost?: number | undefined
  readonly [field: string]: unknown
}

/** What `recall` contributes: items for the prompt and their token count; new state makes the layer live. */
export interface RecallOutput<S> {
  readonly items: ReadonlyArray<Item>
  readonly tokenCount: number
  readonly state?: S
}

/** Storage namespaced to one layer and scope key (noetic's `ScopedStorage`), in Effects. */
export interface ScopedStorage {
  readonly get: (key: string) => Effect.Effect<unknown, StorageError>
  readonly set: (key: string, value: unknown) => Effect.Effect<void, StorageError>
  readonly delete: (key: string) => Effect.Effect<void, StorageError>
  readonly list: (prefix?: string) => Effect.Effect<ReadonlyArray<string>, StorageError>
  readonly getMany: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, unknown>, StorageError>
}

/**
 * noetic's `LayerStateStore`: where a host keeps the live state of context layers,
 * by execution and layer (docs/layers-and-channels.md#a-layer-state-store). The engine
 * writes every state change to it and reads state back from it (what the host
 * sets there is what the next hook sees), reports hook and write failures to
 * `diagnostic`, awaits `flush` wherever it waits for the write-through, and calls
 * `cleanup` once the execution's layers are disposed. Durable write-through stays
 * the engine's: `registerDurable` is not called.
 */
export interface LayerStateStore {
  readonly get: (executionId: string, layerId: string) => unknown
  readonly set: (executionId: string, layerId: string, state: unknown) => void
  readonly cleanup: (executionId: string) => void
  readonly diagnostic: (layerId: string, hook: string, error: unknown) => void
  /** Whether the store holds an entry (a cleared state included); none: an entry is a state not undefined. */
  readonly has?: ((executionId: string, layerId: string) => boolean) | undefined
  readonly flush?: ((executionId: string) => Effect.Effect<void>) | undefined
  readonly disable?: ((executionId: string, layerId: string) => void) | undefined
  readonly isDisabled?: ((executionId: string, layerId: string) => boolean) | undefined
}

/**
 * A context's layer states, by layer id, written through to a host's
 * `LayerStateStore` and read back from it; the map itself keeps the last state the
 * context wrote, which is what a snapshot records when the store holds none.
 */
export class LayerStateMap extends Map<string, unknown> {
  readonly #executionId: string
  readonly #store: LayerStateStore

  constructor(executionId: string, store: LayerStateStore) {
    super()
    this.#executionId = executionId
    this.#store = store
  }

  #held(layerId: string): boolean {
    const store = this.#store
    return store.has !== undefined ? store.has(this.#executionId, layerId) : store.get(this.#executionId, layerId) !== undefined
  }

  override get(layerId: string): unknown {
    return this.#held(layerId) ? this.#store.get(this.#executionId, layerId) : super.get(layerId)
  }

  override has(layerId: string): boolean {
    return super.has(layerId) || this.#held(layerId)
  }

  override set(layerId: string, state: unknown): this {
    super.set(layerId, state)
    this.#store.set(this.#executionId, layerId, state)
    return this
  }

  override delete(layerId: string): boolean {
    const had = super.delete(layerId)
    this.#store.set(this.#executionId, layerId, undefined)
    return had
  }

  override *entries(): MapIterator<[string, unknown]> {
    for (const layerId of super.keys()) yield [layerId, this.get(layerId)]
  }

  override *values(): MapIterator<unknown> {
    for (const layerId of super.keys()) yield this.get(layerId)
  }

  override [Symbol.iterator](): MapIterator<[string, unknown]> {
    return this.entries()
  }

  override forEach(f: (value: unknown, key: string, map: Map<string, unknown>) => void, thisArg?: unknown): void {
    for (const [layerId, state] of this.entries()) f.call(thisArg, state, layerId, this)
  }
}

/** How an execution ended, as `onComplete` is told. */
export type ExecutionOutcome = "success" | "failure" | "aborted"

/**
 * noetic's lifecycle hooks, each an Effect (failures are reported and, but for
 * `init`, skipped: the layer contributes nothing to that phase). The append hook is
 * `ContextLayer.appendEffect`.
 */
export interface LayerHooks<S> {
  readonly init?: (params: {
    readonly storage: ScopedStorage
    readonly scopeKey: string
    readonly ctx: AgentContext
  }) => Effect.Effect<{ readonly state: S }, unknown>
  readonly recall?: (params: {
    readonly log: ReadonlyArray<Item>
    readonly query: string
    readonly ctx: AgentContext
    readonly state: S
    readonly budget: number
  }) => Effect.Effect<RecallOutput<S> | string | null | undefined, unknown>
  readonly renderDelta?: (params: {
    readonly prev: ReadonlyArray<Item>
    readonly next: ReadonlyArray<Item>
    readonly prevState: S | undefined
    readonly state: S | undefined
    readonly ctx: AgentContext
    readonly budget: number
  }) => Effect.Effect<string | null | undefined, unknown>
  readonly projectHistory?: (params: {
    readonly items: ReadonlyArray<Item>
    readonly ctx: AgentContext
    readonly state: S
  }) => Effect.Effect<{ readonly items: ReadonlyArray<Item> }, unknown>
  readonly beforeToolCall?: (params: {
    readonly toolName: string
    readonly toolArgs: unknown
    readonly callId?: string | undefined
    readonly ctx: AgentContext
    readonly state: S
  }) => Effect.Effect<{ readonly decision: SteeringDecision; readonly state?: S }, unknown>
  readonly afterModelCall?: (params: {
    readonly response: ModelResponse
    readonly ctx: AgentContext
    readonly state: S
  }) => Effect.Effect<{ readonly decision: SteeringDecision; readonly state?: S }, unknown>
  /** A result with a `state` key replaces the state (`{ state: undefined }` clears it). */
  readonly store?: (params: {
    readonly newItems: ReadonlyArray<Item>
    readonly log: ReadonlyArray<Item>
    readonly response: ModelResponse
    readonly ctx: AgentContext
    readonly state: S
  }) => Effect.Effect<{ readonly state?: S | undefined } | undefined | void, unknown>
  readonly onSpawn?: (params: {
    readonly parentState: S
    readonly childCtx: AgentContext
  }) => Effect.Effect<{ readonly childState: S | null; readonly items?: ReadonlyArray<Item> } | null | undefined, unknown>
  readonly onReturn?: (params: {
    readonly childState: S
    readonly childLog: ReadonlyArray<Item>
    readonly parentState: S | undefined
    readonly result: unknown
    readonly childCtx: AgentContext
  }) => Effect.Effect<{ readonly parentState?: S; readonly result?: unknown } | undefined | void, unknown>
  readonly onComplete?: (params: {
    readonly log: ReadonlyArray<Item>
    readonly ctx: AgentContext
    readonly state: S
    readonly outcome: ExecutionOutcome
  }) => Effect.Effect<{ readonly state?: S | undefined } | undefined | void, unknown>
  readonly dispose?: (params: { readonly state: S }) => Effect.Effect<void, unknown>
}

/** A value a layer exposes on `ctx.context[layerId]`: read from its state. */
export interface LayerData<S = any> {
  readonly kind: "data"
  readonly read: (state: S) => unknown
}

/** A function a layer exposes on `ctx.context[layerId]` (and to the model as tool `layerId/name`). */
export interface LayerFunction<S = any> {
  readonly kind: "function"
  readonly description: string
  /** Validates the argument (a Standard Schema or anything with `parse`); none: any argument. */
  readonly input?: unknown
  readonly output?: unknown
  readonly execute: (args: any, state: S, ctx: AgentContext) => Effect.Effect<{ readonly result: unknown; readonly state?: S }, unknown>
}

/** What a layer provides, by name. */
export type LayerProvides<S = any> = Readonly<Record<string, LayerData<S> | LayerFunction<S>>>

/** A layer init that failed (or timed out) with `onInitError: 'throw'`: the execution stops. */
export class LayerInitFailed extends Schema.TaggedError<LayerInitFailed>("noetic-effect/LayerInitFailed")(
  "LayerInitFailed",
  { layerId: Schema.String, reason: Schema.String, cause: Schema.Defect() }
) {
  /** The error code. */
  get code(): "LAYER_INIT_FAILED" {
    return "LAYER_INIT_FAILED"
  }
  override get message(): string {
    return `context layer '${this.layerId}' init failed: ${this.reason}`
  }
}

/** A layer hook ran past its timeout. */
export class LayerHookTimeout extends Schema.TaggedError<LayerHookTimeout>("noetic-effect/LayerHookTimeout")(
  "LayerHookTimeout",
  { layerId: Schema.String, hook: Schema.String, timeoutMs: Schema.Number }
) {
  /** The error code. */
  get code(): "LAYER_HOOK_TIMEOUT" {
    return "LAYER_HOOK_TIMEOUT"
  }
  override get message(): string {
    return `context layer '${this.layerId}': ${this.hook} timed out after ${this.timeoutMs} ms`
  }
}

/** The key a layer's state is shared under in `scope` (noetic's `resolveScopeKey`). */
export const scopeKeyOf = (scope: ContextScope, ctx: AgentContext): string => {
  switch (scope) {
    case "thread":
      return ctx.threadId ?? ctx.id
    case "resource":
      return ctx.resourceId ?? ctx.threadId ?? ctx.id
    case "global":
      return "__global__"
    case "execution":
      return ctx.id
  }
}

/** The storage prefix of one layer in one scope key (noetic's, so imported data lines up). */
export const scopedPrefix = (layerId: string, scopeKey: string): string => `layers/${layerId}/${scopeKey}/`

/** The key a non-execution layer's state is written through to (noetic's key `'state'`). */
export const durableStateKey = (layerId: string, scopeKey: string): string => `${scopedPrefix(layerId, scopeKey)}state`

/** `storage` namespaced under one layer and scope key. */
export const scopedStorage = (storage: StorageAdapterShape, layerId: string, scopeKey: string): ScopedStorage => {
  const prefix = scopedPrefix(layerId, scopeKey)
  return {
    get: (key) => Effect.map(storage.get(prefix + key), Option.getOrNull),
    set: (key, value) => storage.set(prefix + key, value),
    delete: (key) => storage.delete(prefix + key),
    list: (sub = "") => Effect.map(storage.list(prefix + sub), (keys) => keys.map((key) => key.slice(prefix.length))),
    getMany: (keys) =>
      Effect.map(storage.getMany(keys.map((key) => prefix + key)), (found) => {
        const out = new Map<string, unknown>()
        for (const [key, value] of found) out.set(key.slice(prefix.length), value)
        return out
      })
  }
}

/** The timeout of `hook` for a layer: its own, else noetic's default; 0 or less: none. */
export const timeoutOf = (timeouts: LayerTimeouts | undefined, hook: TimedHook): number =>
  timeouts?.[hook] ?? DEFAULT_LAYER_TIMEOUTS[hook]

/**
 * Runs a hook's Effect under its timeout: past it the hook's fiber is interrupted and
 * the Effect fails with `LayerHookTimeout` at once (a hook that ignores interruption
 * is left behind, not waited for).
 */
export const withHookTimeout = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  layerId: string,
  hook: string,
  timeoutMs: number
): Effect.Effect<A, E | LayerHookTimeout, R> =>
  !(timeoutMs > 0) || !Number.isFinite(timeoutMs)
    ? effect
    : Effect.timeoutOrElse(effect, {
      duration: timeoutMs,
      orElse: () => Effect.fail(new LayerHookTimeout({ layerId, hook, timeoutMs }))
    })

/** What one hook run gave: its value, or the cause of its failure or timeout. */
export type HookResult<A> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly cause: Cause.Cause<unknown> }

/**
 * Runs one hook of one layer (every runner goes through here): under the hook's
 * timeout (`renderDelta` borrows `recall`'s), with a failure, defect or timeout
 * caught and returned as `{ ok: false }`. `report` (the default) warns of it, as a
 * hook that contributes nothing to its phase, and tells the context's layer-state
 * store (`diagnostic`); `init` reports its own.
 */
export const runHook = <A>(
  ctx: AgentContext,
  layer: ContextLayer<any>,
  hook: TimedHook | "renderDelta",
  effect: () => Effect.Effect<A, unknown>,
  options: { readonly report?: boolean } = {}
): Effect.Effect<HookResult<A>> =>
  Effect.suspend(() =>
    withHookTimeout(
      Effect.suspend(effect),
      layer.id,
      hook,
      timeoutOf(layer.timeouts, hook === "renderDelta" ? "recall" : hook)
    )
  ).pipe(
    Effect.map((value): HookResult<A> => ({ ok: true, value })),
    Effect.catchCause((cause) => {
      const failed: HookResult<A> = { ok: false, cause }
      if (options.report === false) return Effect.succeed(failed)
      ctx.store.layerStateStore?.diagnostic(layer.id, hook, Cause.squash(cause))
      return Effect.as(logWarning(`context layer '${layer.id}': ${hook} failed; it contributes nothing to this phase`, cause), failed)
    })
  )
