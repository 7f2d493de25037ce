/**
 * The live context of one execution: its item log, context layers, cwd, pending
 * ask-user prompts and the steps in flight. Everything here but `state` and `parent`
 * is what a snapshot persists.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import { randomId } from "../internal/randomId.ts"
import type { AskUserPrompt, Cwd, FrontierEntry } from "../schema/CheckpointSnapshot.ts"
import { AskUserCancelled, UnknownAskUserPrompt } from "./HarnessError.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { makeMemory as makeMemoryStorage, type StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { ChannelHub } from "./Channels.ts"
import {
  type BudgetConfig,
  type ContextScope,
  durableStateKey,
  type ExecutionOutcome,
  type Item,
  type LastLayerUsage,
  LayerInitFailed,
  type LayerStateStore,
  type LayerTimeouts,
  LayerStateMap,
  type ModelResponse,
  type RecallOutput,
  scopedStorage,
  type ScopedStorage,
  runHook,
  scopeKeyOf,
  type SteeringDecision
} from "../internal/contextShapes.ts"

export type { Item } from "../internal/contextShapes.ts"


/** What an effectful append hook is given: the items on their way in and the layer's state. */
export interface AppendHookParams<S> {
  readonly items: ReadonlyArray<Item>
  readonly state: S
  readonly ctx: AgentContext
}

/**
 * A context layer: serialisable state kept with the context, updated from every
 * append. `init` (or `initEffect`, run before the first step, append or checkpoint
 * of the context) runs only for layers that have no restored state.
 */
export interface ContextLayer<S = unknown> {
  readonly id: string
  /** The initial state, made when the context is built. */
  readonly init?: () => S
  /** The initial state, made lazily by an Effect (a layer whose init reads storage). */
  readonly initEffect?: (ctx: AgentContext) => Effect.Effect<S>
  /** Folds appended items into the state. */
  readonly onAppend?: (state: S, items: ReadonlyArray<Item>) => S
  /**
   * Sees items before they are appended and may replace them (filter, transform,
   * inject) and the state; runs in `slot` order, each on the previous one's items.
   */
  readonly appendEffect?: (params: AppendHookParams<S>) => Effect.Effect<{
    readonly items: ReadonlyArray<Item>
    readonly state?: S | undefined
    /** The layer asks for its context to be rendered again (noetic's re-render request). */
    readonly rerender?: RerenderAsk | undefined
  }>
  /** Orders the append hooks (lower first). */
  readonly slot?: number
  /** What the host gave (a noetic layer definition); `layerDefinitions` hands it back. */
  readonly definition?: unknown
  /** A display name. */
  readonly name?: string | undefined
  /**
   * Where the state is shared and kept (docs/layers-and-channels.md#durable-layer-state):
   * a layer of scope `thread`, `resource` or `global` has its state written through to
   * the layer storage at every change; `execution` (and none) lives in snapshots only.
   */
  readonly scope?: ContextScope | undefined
  /** noetic's lifecycle hooks (docs/layers-and-channels.md#hook-order), as Effects. */
  readonly lifecycle?: LayerHooks<S> | undefined
  readonly budget?: BudgetConfig | undefined
  readonly timeouts?: LayerTimeouts | undefined
  /** `'disable'`: a failing `init` runs the execution without this layer; `'throw'` (default) stops it. */
  readonly onInitError?: "throw" | "disable" | undefined
  /** `'deny'`: a `beforeToolCall` that fails or times out denies the call (a gate fails closed). */
  readonly onBeforeToolCallError?: "allow" | "deny" | undefined
  /** `'eventual'`: recall is served from a cache refreshed after `store` produces new state. */
  readonly recallMode?: "atomic" | "eventual" | undefined
  /** The band of the assembled view: before history (`anchor`, `auto`) or after it (`live`). */
  readonly placement?: "anchor" | "live" | "auto" | undefined
  /** Values and functions exposed on `ctx.context[id]`. */
  readonly provides?: LayerProvides<S> | undefined
}

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

/** When and how widely a layer's append hook asks for a re-render. */
export interface RerenderAsk {
  readonly timing: "immediate" | "batched"
  readonly scope: "self" | "slot-after" | "all"
}

/** A re-render request of `appendPipeline`: the asking layer, its slot, when and how widely. */
export interface RerenderRequest extends RerenderAsk {
  readonly layerId: string
  readonly slot: number
}

/** The layers of `layers` that have an append hook, in the order the hooks run (slot, lowest first). */
const appendHooks = <L extends ContextLayer<any>>(layers: ReadonlyArray<L>): Array<L> =>
  layers.filter((layer) => layer.appendEffect !== undefined).sort((a, b) => (a.slot ?? 0) - (b.slot ?? 0))

/** What `appendPipeline` hands back: the items to append, and the re-renders asked for. */
export interface AppendPipelineResult {
  readonly items: ReadonlyArray<Item>
  readonly rerenderRequests: ReadonlyArray<RerenderRequest>
}

/** Free-form notes a step keeps for later steps. */
export const scratchpad: ContextLayer<Readonly<Record<string, unknown>>> = {
  id: "scratchpad",
  init: () => ({})
}

/** Standing instructions for the model. */
export const instructions = (
  initial: ReadonlyArray<string> = []
): ContextLayer<{ readonly instructions: ReadonlyArray<string> }> => ({
  id: "instructions",
  init: () => ({ instructions: [...initial] })
})

/** The window of recent items that model prompts are built from. */
export const history = (options: { readonly window?: number } = {}): ContextLayer<{
  readonly items: ReadonlyArray<Item>
}> => {
  const window = options.window ?? 50
  return {
    id: "history",
    init: () => ({ items: [] }),
    onAppend: (state, items) => ({ items: [...state.items, ...items].slice(-window) })
  }
}

/** The layers every context has unless the caller replaces them by id. */
export const defaultLayers = (): ReadonlyArray<ContextLayer<any>> => [scratchpad, instructions(), history()]

/** Token usage as noetic's context reports it. */
export interface TokenUsage {
  input: number
  output: number
  total: number
  cached?: number
}

/** Counters and marks of one context (noetic's `stepCount`, `tokens`, `cost`, `complete()` ...). */
export interface ContextMeter {
  stepCount: number
  readonly tokens: TokenUsage
  cost: number
  readonly startedAt: number
  lastStepMeta: unknown
  /** The context window of the last model call (docs/layers-and-channels.md#context-members). */
  lastLayerUsage: LastLayerUsage | undefined
  completed: boolean
  completionValue: unknown
}

const newMeter = (): ContextMeter => ({
  stepCount: 0,
  tokens: { input: 0, output: 0, total: 0 },
  cost: 0,
  startedAt: Date.now(),
  lastStepMeta: null,
  lastLayerUsage: undefined,
  completed: false,
  completionValue: undefined
})

/** What a context is built from. */
export interface AgentContextOptions {
  readonly id: string
  readonly threadId?: string | undefined
  readonly resourceId?: string | undefined
  readonly parent?: AgentContext | undefined
  readonly state?: unknown
  readonly layers: ReadonlyArray<ContextLayer<any>>
  readonly layerState?: Readonly<Record<string, unknown>> | undefined
  readonly items?: ReadonlyArray<unknown> | undefined
  readonly cwd?: Cwd | null | undefined
  readonly askUser?: ReadonlyArray<AskUserPrompt> | undefined
  readonly frontier?: ReadonlyArray<FrontierEntry> | undefined
  /** Where `init` storage and the write-through of non-execution layer state go (none: nowhere). */
  readonly layerStorage?: StorageAdapterShape | undefined
  /** The channels `send` / `recv` use (the harness's; a child shares its parent's). */
  readonly channels?: ChannelHub | undefined
  /** A host's store of live layer state (docs/layers-and-channels.md#a-layer-state-store); a child shares its parent's. */
  readonly layerStateStore?: LayerStateStore | undefined
  /** Saves a snapshot of this context; the harness supplies it (a no-op without storage). */
  readonly checkpoint: (context: AgentContext) => Effect.Effect<void>
}

/** @internal The mutable state of a context, shared by every view of it. */
export interface ContextStore {
  readonly checkpoint: (context: AgentContext) => Effect.Effect<void>
  readonly items: Array<Item>
  readonly itemIds: Set<string>
  readonly responseIds: Set<string>
  readonly layers: ReadonlyArray<ContextLayer<any>>
  readonly layerState: Map<string, unknown>
  cwd: Cwd | null
  readonly pending: Map<string, PendingPrompt>
  /** Restored prompts settled before their step asked again: that step takes the answer. */
  readonly settledRestored: Map<string, PendingPrompt["answer"]>
  readonly inFlight: Map<string, FrontierEntry>
  /** Host wiring; assignable, never persisted. */
  state: unknown
  /** Layers whose `initEffect` has not run yet. */
  readonly pendingInit: Set<string>
  /** Layers whose init failed under `onInitError: 'disable'`: every later hook skips them. */
  readonly disabled: Set<string>
  layerStorage: StorageAdapterShape | undefined
  /** The state last written through to the layer storage, by layer id. */
  readonly persisted: Map<string, unknown>
  channels: ChannelHub | undefined
  /** A host's store the layer state is written to and read from, if any. */
  readonly layerStateStore: LayerStateStore | undefined
  /** Counters and marks noetic's context carries (docs/layers-and-channels.md#context-members). */
  readonly meter: ContextMeter
  aborted: boolean
  abortReason: string | undefined
  /** Whether no step has entered since the restore: the snapshot's frontier still stands. */
  frontierRestored: boolean
  version: number
}

interface PendingPrompt {
  readonly prompt: AskUserPrompt
  readonly answer: Deferred.Deferred<unknown, AskUserCancelled>
  /** Restored from a snapshot, and no step has asked it since. */
  restored: boolean
}

const itemOf = (value: unknown): Item =>
  typeof value === "object" && value !== null && "type" in value && typeof value.type === "string"
    ? value as Item
    : { type: "value", value }

/** The live context of one execution. */
export class AgentContext {
  /** The execution id. */
  readonly id: string
  readonly threadId: string | undefined
  readonly resourceId: string | undefined
  /** The context that spawned this one, if any. */
  readonly parent: AgentContext | undefined
  /** The frontier recorded in the snapshot this context was restored from (empty when fresh). */
  readonly restoredFrontier: ReadonlyArray<FrontierEntry>

  // All mutable state sits in one object so that views made with Object.create(context)
  // (a step's StepContext) read and write the same state as the context itself.
  /** @internal */
  readonly store: ContextStore

  constructor(options: AgentContextOptions) {
    this.id = options.id
    this.threadId = options.threadId
    this.resourceId = options.resourceId
    this.parent = options.parent
    this.restoredFrontier = options.frontier ?? []
    const layerStateStore = options.layerStateStore ?? options.parent?.store.layerStateStore
    this.store = {
      checkpoint: options.checkpoint,
      items: [],
      itemIds: new Set(),
      responseIds: new Set(),
      layers: options.layers,
      layerState: layerStateStore === undefined ? new Map() : new LayerStateMap(options.id, layerStateStore),
      layerStateStore,
      cwd: options.cwd ?? null,
      pending: new Map(),
      settledRestored: new Map(),
      inFlight: new Map(),
      state: options.state,
      pendingInit: new Set(),
      aborted: false,
      abortReason: undefined,
      frontierRestored: this.restoredFrontier.length > 0,
      version: 0,
      disabled: new Set(),
      layerStorage: options.layerStorage ?? options.parent?.store.layerStorage,
      persisted: new Map(),
      channels: options.channels ?? options.parent?.store.channels,
      meter: newMeter()
    }
    for (const layer of options.layers) {
      const restored = options.layerState
      // Restored state wins: init must not overwrite what the snapshot brought back.
      if (restored !== undefined && layer.id in restored) this.store.layerState.set(layer.id, restored[layer.id])
      else if (layer.initEffect !== undefined || layer.lifecycle?.init !== undefined) this.store.pendingInit.add(layer.id)
      else this.store.layerState.set(layer.id, layer.init === undefined ? undefined : layer.init())
    }

    // State of layers this host no longer configures is kept, so a later snapshot does not lose it.
    for (const [id, state] of Object.entries(options.layerState ?? {})) {
      if (!this.store.layerState.has(id)) this.store.layerState.set(id, state)
    }
    for (const item of options.items ?? []) this.push(itemOf(item))
    for (const prompt of options.askUser ?? []) {
      this.store.pending.set(prompt.id, { prompt, answer: Deferred.makeUnsafe(), restored: true })
    }
  }

  /** Host wiring (queues, broadcasters); assignable, never persisted. */
  get state(): unknown {
    return this.store.state
  }
  set state(value: unknown) {
    this.store.state = value
  }

  /** How many parents this context has: 0 at the root. */
  get depth(): number {
    return this.parent === undefined ? 0 : this.parent.depth + 1
  }

  /** The layers of this context, as the host gave them (noetic layer definitions stay themselves). */
  get layerDefinitions(): ReadonlyArray<unknown> {
    return this.store.layers.map((layer) => layer.definition ?? layer)
  }

  /** Whether `abort` was called on this context or an ancestor. */
  get aborted(): boolean {
    // Read through the parents rather than pushed down to children: an abort reaches
    // every context made under this one, with no registry of children to keep.
    return this.store.aborted || (this.parent?.aborted ?? false)
  }

  /** The reason given to the first `abort` of this context, else of the nearest aborted ancestor. */
  get abortReason(): string | undefined {
    return this.store.aborted ? this.store.abortReason : this.parent?.abortReason
  }

  /**
   * Cancels this context and every context made under it: the next step dispatched on
   * any of them fails with `StepCancelled`. The first call wins; it never travels up.
   */
  abort(reason?: string): void {
    if (this.store.aborted) return
    this.store.aborted = true
    this.store.abortReason = reason
  }

  /** Runs the `initEffect` of layers that have neither restored state nor run it yet. */
  ensureLayersInit(): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.store.pendingInit.size === 0) return Effect.void
      const pending = this.store.layers.filter((layer) => this.store.pendingInit.has(layer.id))
      // Sequential, in array order, as noetic's initLayers.
      return Effect.forEach(pending, (layer) =>
        layer.initEffect !== undefined
          ? Effect.flatMap(layer.initEffect(this), (state) =>
            Effect.sync(() => {
              // Another caller may have got here first.
              if (!this.store.pendingInit.delete(layer.id)) return
              this.store.layerState.set(layer.id, state)
              this.store.version++
            }))
          : this.runHookInit(layer), { discard: true })
    })
  }

  /**
   * Runs a layer's `hooks.init` under its timeout with storage namespaced to the
   * layer and scope key. Its state becomes the baseline of the write-through (a
   * rehydrated state is not written back). A failure or timeout stops the
   * execution (`LayerInitFailed`, a defect) unless the layer says `onInitError: 'disable'`.
   */
  private runHookInit(layer: ContextLayer<any>): Effect.Effect<void> {
    const scope = layer.scope ?? "execution"
    const scopeKey = scopeKeyOf(scope, this)
    const storage = this.store.layerStorage
    const init = layer.lifecycle!.init!
    // A context without layer storage (made before any harness ran it) gives init an empty one.
    const run = runHook(this, layer, "init", () =>
      Effect.flatMap(storage === undefined ? makeMemoryStorage : Effect.succeed(storage), (s) =>
        init({ storage: scopedStorage(s, layer.id, scopeKey), scopeKey, ctx: this })), { report: false })
    return Effect.flatMap(run, (result) => {
      if (result.ok) {
        return Effect.sync(() => {
          if (!this.store.pendingInit.delete(layer.id)) return
          const state = result.value?.state
          this.store.layerState.set(layer.id, state)
          this.store.persisted.set(layer.id, state)
          this.store.version++
        })
      }
      // A defect or an interruption is not an init failure: it goes on as it was.
      const failure = result.cause.reasons.find(Cause.isFailReason)
      if (failure === undefined) return Effect.failCause(result.cause as Cause.Cause<never>)
      if (!this.store.pendingInit.delete(layer.id)) return Effect.void
      const cause = failure.error
      const reason = cause instanceof Error ? cause.message : String(cause)
      if (layer.onInitError === "disable") {
        this.store.disabled.add(layer.id)
        this.store.layerStateStore?.disable?.(this.id, layer.id)
        this.store.layerStateStore?.diagnostic(layer.id, "init", cause)
        return logWarning(`context layer '${layer.id}' init failed (${reason}); it runs disabled`)
      }
      return Effect.die(new LayerInitFailed({ layerId: layer.id, reason, cause }))
    })
  }

  /**
   * Whether a layer's hooks are skipped in this execution: its init failed under
   * `onInitError: 'disable'`, or it has an init that has not given it state.
   */
  isLayerDisabled(layer: ContextLayer<any>): boolean {
    if (this.store.disabled.has(layer.id)) return true
    if (this.store.layerStateStore?.isDisabled?.(this.id, layer.id) === true) return true
    const hasInit = layer.initEffect !== undefined || layer.lifecycle?.init !== undefined
    return hasInit && !this.store.layerState.has(layer.id)
  }

  /** @internal Gives a context built before its harness the harness's layer storage and channels (when it has none). */
  adopt(from: { readonly layerStorage?: StorageAdapterShape | undefined; readonly channels?: ChannelHub | undefined }): void {
    if (this.store.layerStorage === undefined) this.store.layerStorage = from.layerStorage
    if (this.store.channels === undefined) this.store.channels = from.channels
  }

  /** Sets a layer's state (as a hook, `provides` function or `setLayerState` does); written through at the next persist. */
  setLayerStateValue(layerId: string, state: unknown): void {
    this.store.layerState.set(layerId, state)
    this.store.version++
  }

  /**
   * Writes the state of every `thread`, `resource` and `global` layer that changed
   * since it was last written to the layer storage, at `layers/<id>/<scopeKey>/state`
   * (state `undefined` deletes the key), and waits for the writes: once this
   * succeeds a host crash loses none of it (docs/layers-and-channels.md#durable-layer-state).
   * A failing write is warned of and retried at the next persist; it never fails the run.
   */
  persistLayerState(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const storage = this.store.layerStorage
      const writes: Array<Effect.Effect<void>> = []
      for (const layer of storage === undefined ? [] : this.store.layers) {
        const scope = layer.scope ?? "execution"
        if (scope === "execution" || !this.store.layerState.has(layer.id)) continue
        const state = this.store.layerState.get(layer.id)
        if (this.store.persisted.has(layer.id) && this.store.persisted.get(layer.id) === state) continue
        const key = durableStateKey(layer.id, scopeKeyOf(scope, this))
        const write = state === undefined ? storage!.delete(key) : storage!.set(key, state)
        writes.push(Effect.matchEffect(write, {
          onSuccess: () => Effect.sync(() => void this.store.persisted.set(layer.id, state)),
          onFailure: (error) => {
            this.store.layerStateStore?.diagnostic(layer.id, "persist", error)
            return logWarning(`context layer '${layer.id}': writing its state to storage failed`, error)
          }
        }))
      }
      const flush = this.store.layerStateStore?.flush
      if (flush !== undefined) writes.push(flush(this.id))
      return writes.length === 0 ? Effect.void : Effect.all(writes, { concurrency: "unbounded", discard: true })
    })
  }

  /** noetic's context counters: steps, tokens, cost, completion (docs/layers-and-channels.md#context-members). */
  get meter(): ContextMeter {
    return this.store.meter
  }

  /** The item log, oldest first. */
  get items(): ReadonlyArray<Item> {
    return this.store.items
  }

  /** Bumped by every change a snapshot would record. */
  get version(): number {
    return this.store.version
  }

  /** The working directory: current and previous. */
  get cwd(): Cwd | null {
    return this.store.cwd
  }

  /** The state of every context layer, by layer id. */
  get layers(): Readonly<Record<string, unknown>> {
    return Object.fromEntries(this.store.layerState)
  }

  /** The ask-user prompts waiting for an answer, oldest first. */
  get pendingAskUser(): ReadonlyArray<AskUserPrompt> {
    return Array.from(this.store.pending.values(), (pending) => pending.prompt)
  }

  /**
   * The steps in flight right now, outermost first. A restored context reports its
   * snapshot's frontier until a step enters on it, so a checkpoint taken before the
   * run resumes (a reattached child settling, an append) does not erase what resume needs.
   */
  get frontier(): ReadonlyArray<FrontierEntry> {
    return this.store.frontierRestored ? this.restoredFrontier : Array.from(this.store.inFlight.values())
  }

  /** The state of one layer. */
  layerState<S>(layerId: string): S | undefined {
    return this.store.layerState.get(layerId) as S | undefined
  }

  /** Replaces a layer's state. */
  updateLayer<S>(layerId: string, f: (state: S | undefined) => S): Effect.Effect<void> {
    return Effect.andThen(
      Effect.sync(() => {
        this.store.layerState.set(layerId, f(this.store.layerState.get(layerId) as S | undefined))
        this.store.version++
      }),
      this.persistLayerState()
    )
  }

  /** Changes the working directory, remembering the previous one. */
  setCwd(path: string | null): Effect.Effect<void> {
    return Effect.sync(() => {
      this.store.cwd = { current: path, previous: this.store.cwd?.current ?? null }
      this.store.version++
    })
  }

  /**
   * The append pipeline: adds items to the log (dropping any whose `id` or
   * `responseId` the log already holds), feeds them to each layer's append hook, then
   * checkpoints. Returns the items that were added.
   */
  append(items: ReadonlyArray<Item>): Effect.Effect<ReadonlyArray<Item>> {
    return Effect.gen({ self: this }, function*() {
      yield* this.ensureLayersInit()
      let incoming = items
      for (const layer of appendHooks(this.store.layers)) {
        const result = yield* layer.appendEffect!({ items: incoming, state: this.store.layerState.get(layer.id), ctx: this })
        incoming = result.items
        if (result.state !== undefined) {
          this.store.layerState.set(layer.id, result.state)
          this.store.version++
        }
      }
      const heldIds = new Set(this.store.itemIds)
      const heldResponses = new Set(this.store.responseIds)
      const added = incoming.filter((item) =>
        !(item.id !== undefined && heldIds.has(item.id)) &&
        !(item.responseId !== undefined && heldResponses.has(item.responseId))
      )
      for (const item of added) this.push(item)
      if (added.length > 0) {
        for (const layer of this.store.layers) {
          if (layer.onAppend !== undefined) {
            this.store.layerState.set(layer.id, layer.onAppend(this.store.layerState.get(layer.id), added))
          }
        }
      }
      yield* this.checkpoint()
      return added
    })
  }

  /**
   * noetic's append pipeline without the append: runs the append hooks of `layers` (in
   * slot order, each on the previous one's items, with this context's state for each
   * layer id) and hands back the items and re-render requests; the caller appends what
   * it keeps. As in noetic, a layer whose `initEffect` left no state is skipped, the pipeline
   * stops once no items are left, and a failing hook passes its items on unchanged (with
   * a warning). The layer states it changed are checkpointed before it returns.
   */
  appendPipeline(layers: ReadonlyArray<ContextLayer<any>>, items: ReadonlyArray<Item>): Effect.Effect<AppendPipelineResult> {
    return Effect.gen({ self: this }, function*() {
      yield* this.ensureLayersInit()
      let current = items
      const rerenderRequests: Array<RerenderRequest> = []
      for (const layer of appendHooks(layers)) {
        if (current.length === 0) break
        const state = this.store.layerState.get(layer.id)
        // An effectful init that left no state (a layer that runs disabled, or one this
        // context never initialised) is skipped, as noetic skips a layer with an init but no state.
        if (state === undefined && layer.initEffect !== undefined) continue
        const exit = yield* Effect.exit(layer.appendEffect!({ items: current, state, ctx: this }))
        if (exit._tag === "Failure") {
          yield* logWarning(`context layer '${layer.id}': its append hook failed; its items pass on unchanged`, exit.cause)
          continue
        }
        current = exit.value.items
        if (exit.value.state !== undefined) {
          this.store.layerState.set(layer.id, exit.value.state)
          this.store.version++
        }
        if (exit.value.rerender !== undefined) {
          rerenderRequests.push({ layerId: layer.id, slot: layer.slot ?? 0, ...exit.value.rerender })
        }
      }
      yield* this.checkpoint()
      return { items: current, rerenderRequests }
    })
  }

  /**
   * Saves a snapshot now; a no-op without a checkpoint store, and never fails. Once
   * it is saved, the channel records this context's steps took leave storage.
   */
  checkpoint(): Effect.Effect<void> {
    return Effect.andThen(
      Effect.andThen(this.persistLayerState(), this.store.checkpoint(this)),
      Effect.suspend(() => this.store.channels?.flushTaken() ?? Effect.void)
    )
  }

  /**
   * Enqueues an ask-user prompt (checkpointing it) and waits for its answer. A prompt
   * with the same id that is already pending (one restored from a snapshot) is joined
   * rather than asked again.
   */
  askUser(input: unknown, options: { readonly id?: string } = {}): Effect.Effect<unknown, AskUserCancelled> {
    return Effect.gen({ self: this }, function*() {
      const id = options.id !== undefined ? options.id : yield* randomId
      const settled = this.store.settledRestored.get(id)
      if (settled !== undefined) {
        this.store.settledRestored.delete(id)
        return yield* Deferred.await(settled)
      }
      const existing = this.store.pending.get(id)
      if (existing !== undefined) {
        existing.restored = false
        return yield* Deferred.await(existing.answer)
      }
      const createdAt = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const pending: PendingPrompt = { prompt: { id, input, createdAt }, answer: Deferred.makeUnsafe(), restored: false }
      this.store.pending.set(id, pending)
      this.store.version++
      yield* this.checkpoint()
      return yield* Deferred.await(pending.answer)
    })
  }

  /** Answers a pending prompt; the asking step continues with `output`. */
  resolveAskUser(promptId: string, output: unknown): Effect.Effect<void, UnknownAskUserPrompt> {
    return this.settlePrompt(promptId, Effect.succeed(output))
  }

  /** Cancels a pending prompt; the asking step fails with `AskUserCancelled`. */
  cancelAskUser(promptId: string, reason?: string): Effect.Effect<void, UnknownAskUserPrompt> {
    return this.settlePrompt(
      promptId,
      Effect.fail(new AskUserCancelled(reason === undefined ? { promptId } : { promptId, reason }))
    )
  }

  private settlePrompt(promptId: string, outcome: Effect.Effect<unknown, AskUserCancelled>) {
    return Effect.suspend(() => {
      const pending = this.store.pending.get(promptId)
      if (pending === undefined) {
        return Effect.fail(new UnknownAskUserPrompt({ executionId: this.id, promptId }))
      }
      this.store.pending.delete(promptId)
      // Its step has not asked again since the restore (it may be re-running earlier work): keep the answer for it.
      if (pending.restored) this.store.settledRestored.set(promptId, pending.answer)
      this.store.version++
      return Deferred.complete(pending.answer, outcome)
    })
  }

  /** @internal Marks a dispatch in flight (its path is the key). */
  enterStep(path: string, entry: FrontierEntry): void {
    this.store.meter.stepCount++
    this.store.frontierRestored = false
    this.store.inFlight.set(path, entry)
  }

  /** @internal Counts a dispatch that settles at once (a replay): it is never in flight. */
  passStep(): void {
    this.store.meter.stepCount++
    this.store.frontierRestored = false
  }

  /** @internal Marks a dispatch settled. */
  exitStep(path: string): void {
    this.store.inFlight.delete(path)
  }

  private push(item: Item): void {
    this.store.items.push(item)
    if (item.id !== undefined) this.store.itemIds.add(item.id)
    if (item.responseId !== undefined) this.store.responseIds.add(item.responseId)
    this.store.version++
  }
}

/** The append pipeline as a function: `ctx.append(items)`. */
export const runAppendPipeline = (
  context: AgentContext,
  items: ReadonlyArray<Item>
): Effect.Effect<ReadonlyArray<Item>> => context.append(items)

/** Random ids from the `Random` service (tests can seed them): execution ids, handle ids. */
export { randomId, randomUuid } from "../internal/randomId.ts"
