/**
 * What the live context (`harness/AgentContext.ts`), its layers' lifecycle
 * (`harness/LayerLifecycle.ts`) and channels (`harness/Channels.ts`) share, none of
 * it naming the context class: items and the message item, scope keys, storage
 * namespaced to a layer and scope, hook timeouts and the one hook runner, a host's
 * layer-state store, what the last assembly used, the schema check of values. The
 * public modules `harness/LayerHooks.ts` and `harness/LayerLifecycle.ts` re-export
 * it; the hook shapes that take a context are in `harness/AgentContext.ts`. Split so
 * that the context imports nothing that imports it (docs/architecture.md#layers).
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StorageError } from "../Errors.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { logWarning } from "./diagnostics.ts"

/** One entry of the item log: messages, tool calls, events. `responseId` ties it to a model response. */
export interface Item {
  readonly type: string
  readonly id?: string
  readonly responseId?: string
  readonly [field: string]: unknown
}

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
export const scopeKeyOf = (
  scope: ContextScope,
  ctx: { readonly id: string; readonly threadId?: string | undefined; readonly resourceId?: string | undefined }
): string => {
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
  ctx: { readonly store: { readonly layerStateStore?: LayerStateStore | undefined } },
  layer: { readonly id: string; readonly timeouts?: LayerTimeouts | undefined },
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

/** A message item in noetic's shape. */
export const message = (text: string, role: "user" | "assistant" | "system" | "developer"): Item => ({
  type: "message",
  id: `msg_${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`,
  role,
  status: "completed",
  content: [{ type: role === "assistant" ? "output_text" : "input_text", text }]
})

/** Validates `value` with a schema that has `parse` (zod) or `~standard` (Standard Schema); none: as is. */
export const parseWith = (schema: unknown, value: unknown): Effect.Effect<unknown, unknown> => {
  if (schema === undefined || schema === null) return Effect.succeed(value)
  const s = schema as any
  if (typeof s.parse === "function") return Effect.try({ try: () => s.parse(value), catch: (e) => e })
  if (s["~standard"] !== undefined && typeof s["~standard"].validate === "function") {
    return Effect.flatMap(Effect.promise(async () => await s["~standard"].validate(value)), (result: any) =>
      result.issues !== undefined
        ? Effect.fail(new Error(result.issues.map((i: any) => i.message).join("; ")))
        : Effect.succeed(result.value))
  }
  return Effect.succeed(value)
}

/** How one layer's output was served in an assembly (noetic's `LayerServeInfo`). */
export interface ServeInfo {
  readonly placement: "anchor" | "live"
  readonly served: "fresh" | "pinned"
  readonly changed: boolean
  readonly churnRate: number
  readonly rebillTokens: number
}

/** One layer's part of the last assembled request (noetic's `LayerUsageEntry`). */
export interface LayerUsageEntry extends ServeInfo {
  readonly layerId: string
  /** What the layer's `recall` reported. */
  readonly tokenCount: number
  /** The items it contributed to the view the model was sent (a pinned replay's items when pinned). */
  readonly items: ReadonlyArray<Item>
}

/** The context window of the last model call, by bucket (noetic's `LastLayerUsage`). */
export interface LastLayerUsage {
  readonly executionId: string
  readonly modelId: string
  /** Sorted by layer id. */
  readonly layers: ReadonlyArray<LayerUsageEntry>
  readonly systemPromptTokens: number
  readonly toolsTokens: number
  readonly historyTokens: number
  /** The four buckets summed: system prompt, tools, history, layers. */
  readonly totalUsedTokens: number
}
