/**
 * noetic's context-layer lifecycle on the engine's contexts: `recall` (atomic and
 * eventual) with budgets, `projectHistory`, the assembled view with anchor / live
 * bands and `renderDelta` supersedes, the steering hooks `afterModelCall` and
 * `beforeToolCall`, `store`, the spawn hooks `onSpawn` / `onReturn`, and the
 * teardown `onComplete` then `dispose`. Each hook runs under its timeout; a hook
 * that fails or times out is reported and contributes nothing (but `init`, see
 * `AgentContext.ensureLayersInit`). Every function that changes layer state waits
 * for its write-through before it returns (docs/layers-and-channels.md#durable-layer-state).
 * Where the runtime calls each: docs/layers-and-channels.md#hook-order.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { AgentContext, ContextLayer, Item, RerenderRequest } from "./AgentContext.ts"
import type * as Shapes from "../internal/contextShapes.ts"
import { message, parseWith } from "../internal/contextShapes.ts"

export { message, parseWith } from "../internal/contextShapes.ts"
// Aliases, not `export type { ... } from`: the declaration bundle would merge a type
// re-export with the value re-export above from the same module, and emit the types as values.
/** How one layer's output was served in an assembly (noetic's `LayerServeInfo`). */
export type ServeInfo = Shapes.ServeInfo
/** One layer's part of the last assembled request (noetic's `LayerUsageEntry`). */
export type LayerUsageEntry = Shapes.LayerUsageEntry
/** The context window of the last model call, by bucket (noetic's `LastLayerUsage`). */
export type LastLayerUsage = Shapes.LastLayerUsage
import {
  type BudgetConfig,
  type ExecutionOutcome,
  type LayerFunction,
  type HookResult,
  type ModelResponse,
  runHook,
  type SteeringDecision,
  scopeKeyOf
} from "./LayerHooks.ts"

/** What one layer's recall contributed. */
export interface RecallEntry {
  readonly layerId: string
  readonly items: ReadonlyArray<Item>
  readonly tokenCount: number
  /** `recall` returned new state: the render cannot be replayed, so the layer renders live. */
  readonly mutatedState?: boolean
}

/** noetic's projection policy: the token budget the layers and history share. */
export interface ProjectionPolicy {
  readonly tokenBudget: number
  readonly responseReserve: number
}

/** noetic's default projection policy. */
export const DEFAULT_PROJECTION: ProjectionPolicy = { tokenBudget: 128_000, responseReserve: 4_000 }

/** A rough token count (noetic's `estimateTokens`: four characters a token). */
export const estimateTokens = (text: string): number => Math.ceil(text.length / 4)

const bySlot = (layers: ReadonlyArray<ContextLayer<any>>): Array<ContextLayer<any>> =>
  [...layers].sort((a, b) => (a.slot ?? 0) - (b.slot ?? 0))

const activeWith = (ctx: AgentContext, layers: ReadonlyArray<ContextLayer<any>>, hook: string) =>
  bySlot(layers).filter((layer) => (layer.lifecycle as any)?.[hook] !== undefined && !ctx.isLayerDisabled(layer))

// -----------------------------------------------------------------------------
// init, budgets, recall
// -----------------------------------------------------------------------------

/**
 * Runs `init` of the layers that have neither state nor a run of it yet (noetic's
 * `harness.initLayers`); the execution fails on an init failure unless the layer
 * says `onInitError: 'disable'`.
 */
export const initLayers = (ctx: AgentContext): Effect.Effect<void> => ctx.ensureLayersInit()

const budgetMin = (budget: BudgetConfig | undefined): number =>
  typeof budget === "object" && budget !== null ? budget.min : 0
const budgetMax = (budget: BudgetConfig | undefined): number =>
  budget === undefined || budget === "auto" ? Infinity : typeof budget === "number" ? budget : budget.max

/** A layer budget that is not a number >= 0, a `{ min, max }` range, or `'auto'`. */
export const budgetProblem = (budget: unknown): string | undefined => {
  if (budget === undefined || budget === "auto") return undefined
  if (typeof budget === "number") return budget >= 0 ? undefined : `${budget} is not a token count >= 0`
  if (typeof budget === "object" && budget !== null && "min" in budget && "max" in budget) {
    const { min, max } = budget as { min: unknown; max: unknown }
    if (typeof min === "number" && typeof max === "number" && min >= 0 && max >= min) return undefined
  }
  return `${JSON.stringify(budget)} is not a number, { min, max } with 0 <= min <= max, or 'auto'`
}

/**
 * Splits the recall budget across layers as noetic's `allocateBudgets`: minimums
 * first (scaled down when they overcommit), then 60% of what remains as a pool
 * shared by headroom (finite layers half of it when `'auto'` layers are present),
 * the rest left to history.
 */
export const allocateBudgets = (
  layers: ReadonlyArray<ContextLayer<any>>,
  policy: ProjectionPolicy = DEFAULT_PROJECTION,
  systemPromptTokens = 0
): Map<string, number> => {
  const available = policy.tokenBudget - policy.responseReserve - systemPromptTokens
  const out = new Map<string, number>()
  if (!(available > 0)) {
    for (const layer of layers) out.set(layer.id, 0)
    return out
  }
  const mins = layers.map((layer) => budgetMin(layer.budget))
  const totalMin = mins.reduce((a, b) => a + b, 0)
  if (totalMin > available) {
    layers.forEach((layer, i) => out.set(layer.id, Math.floor(mins[i]! * available / totalMin)))
    return out
  }
  const pool = (available - totalMin) * 0.6
  const headrooms = layers.map((layer, i) => budgetMax(layer.budget) - mins[i]!)
  const infinite = headrooms.filter((h) => !Number.isFinite(h)).length
  const finiteTotal = headrooms.reduce((sum, h) => Number.isFinite(h) ? sum + h : sum, 0)
  const finitePool = infinite === 0 ? pool : pool * 0.5
  const finiteShares = headrooms.map((h) =>
    !Number.isFinite(h) || finiteTotal === 0 ? 0 : Math.min(h, h / finiteTotal * finitePool)
  )
  const left = pool - finiteShares.reduce((a, b) => a + b, 0)
  layers.forEach((layer, i) => {
    const share = Number.isFinite(headrooms[i]!) ? finiteShares[i]! : left / infinite
    out.set(layer.id, Math.floor(mins[i]! + share))
  })
  return out
}

// Eventual recall is served from here: by layer, then by scope key, so it outlives the turn.
const recallCache = new WeakMap<ContextLayer<any>, Map<string, { entry: RecallEntry; stale: boolean }>>()

const recallOne = (
  ctx: AgentContext,
  layer: ContextLayer<any>,
  query: string,
  budget: number
): Effect.Effect<RecallEntry | undefined> =>
  Effect.map(
    runHook(ctx, layer, "recall", () =>
      layer.lifecycle!.recall!({ log: ctx.items, query, ctx, state: ctx.layerState(layer.id), budget })),
    (result) => {
      if (!result.ok || result.value === null || result.value === undefined) return undefined
      const value = result.value
      if (typeof value === "string") {
        return { layerId: layer.id, items: [message(value, "developer")], tokenCount: estimateTokens(value) }
      }
      const mutatedState = value.state !== undefined
      if (mutatedState) ctx.setLayerStateValue(layer.id, value.state)
      return { layerId: layer.id, items: [...value.items], tokenCount: value.tokenCount, mutatedState }
    }
  )

/**
 * noetic's `executeRerender`: recalls again, fresh (no recall cache), the layers the
 * append pipeline's re-render requests select (`self`: the layer; `slot-after`: those at
 * its slot or after; `all`: every one), in slot order. No request: nothing runs.
 */
export const rerenderLayers = (
  ctx: AgentContext,
  requests: ReadonlyArray<RerenderRequest>,
  options: {
    readonly query?: string
    readonly layers?: ReadonlyArray<ContextLayer<any>>
    readonly budgets?: ReadonlyMap<string, number>
  } = {}
): Effect.Effect<ReadonlyArray<RecallEntry>> => {
  if (requests.length === 0) return Effect.succeed([])
  const selects = (request: RerenderRequest, layer: ContextLayer<any>) =>
    request.scope === "all" || (request.scope === "self" && layer.id === request.layerId) ||
    (request.scope === "slot-after" && (layer.slot ?? 0) >= request.slot)
  const layers = (options.layers ?? ctx.store.layers)
    .filter((layer) => requests.some((request) => selects(request, layer)))
    .sort((a, b) => (a.slot ?? 0) - (b.slot ?? 0))
  return recallLayers(ctx, { ...options, layers, forceAtomic: true })
}

/**
 * Runs `recall` of every active layer in slot order: `atomic` layers each time,
 * `eventual` ones from a cache refreshed after their `store` produced new state
 * (`forceAtomic`: every layer each time; `mode`: the layers of that `recallMode` only,
 * noetic's `recallLayersAtomic` / `recallLayersEventual`). A recall that returns state
 * is written through.
 */
export const recallLayers = (
  ctx: AgentContext,
  options: {
    readonly query?: string
    readonly layers?: ReadonlyArray<ContextLayer<any>>
    readonly budgets?: ReadonlyMap<string, number>
    readonly policy?: ProjectionPolicy
    readonly forceAtomic?: boolean
    readonly mode?: "atomic" | "eventual"
  } = {}
): Effect.Effect<ReadonlyArray<RecallEntry>> =>
  Effect.gen(function*() {
    yield* ctx.ensureLayersInit()
    const given = options.layers ?? ctx.store.layers
    const mode = options.mode
    const layers = mode === undefined
      ? given
      : given.filter((layer) => (layer.recallMode === "eventual") === (mode === "eventual"))
    const budgets = options.budgets ?? allocateBudgets(layers, options.policy)
    const out: Array<RecallEntry> = []
    for (const layer of activeWith(ctx, layers, "recall")) {
      const budget = budgets.get(layer.id) ?? 0
      if (layer.recallMode === "eventual" && options.forceAtomic !== true) {
        let byScope = recallCache.get(layer)
        if (byScope === undefined) recallCache.set(layer, byScope = new Map())
        const key = scopeKeyOf(layer.scope ?? "execution", ctx)
        const cached = byScope.get(key)
        if (cached !== undefined && !cached.stale) {
          out.push({ ...cached.entry, mutatedState: false })
          continue
        }
        const entry = yield* recallOne(ctx, layer, options.query ?? "", budget)
        if (entry !== undefined) {
          byScope.set(key, { entry, stale: false })
          out.push(entry)
        }
        continue
      }
      const entry = yield* recallOne(ctx, layer, options.query ?? "", budget)
      if (entry !== undefined) out.push(entry)
    }
    yield* ctx.persistLayerState()
    return out
  })

/** Runs `projectHistory` of every active layer in slot order, each on the previous one's items; the log is not touched. */
export const projectHistoryLayers = (
  ctx: AgentContext,
  items: ReadonlyArray<Item>,
  layers: ReadonlyArray<ContextLayer<any>> = ctx.store.layers
): Effect.Effect<ReadonlyArray<Item>> =>
  Effect.gen(function*() {
    let current = items
    for (const layer of activeWith(ctx, layers, "projectHistory")) {
      const result = yield* runHook(ctx, layer, "projectHistory", () =>
        layer.lifecycle!.projectHistory!({ items: current, ctx, state: ctx.layerState(layer.id) }))
      if (result.ok && Array.isArray(result.value?.items)) current = result.value.items
    }
    return current
  })

// -----------------------------------------------------------------------------
// The assembled view: anchor band, history, live band, supersedes
// -----------------------------------------------------------------------------

interface Pin {
  readonly items: ReadonlyArray<Item>
  readonly state: unknown
  readonly json: string
  /** Assemblies that watched this pin, and those in which the layer's output differed from it. */
  observed: number
  changed: number
  /** Tokens the changed outputs would have re-billed had the pin not held. */
  rebillTokens: number
}

// The pins of anchored layers, by layer and thread: what the first assembly rendered.
const pins = new WeakMap<ContextLayer<any>, Map<string, Pin>>()

/** The bands of one assembly. */
export interface AssembledView {
  /** Everything, in order: system messages, anchor band, history, live band, supersedes. */
  readonly items: ReadonlyArray<Item>
  readonly anchor: ReadonlyArray<RecallEntry>
  readonly live: ReadonlyArray<RecallEntry>
  readonly history: ReadonlyArray<Item>
  /** By layer id: its band, whether a pin was replayed, and the pin's churn. */
  readonly serveInfo: ReadonlyMap<string, ServeInfo>
}

/**
 * Builds the items a model call sends (noetic's `assembleView`): the log's system
 * messages, then the anchor band (layers placed `anchor` or `auto`, slot order),
 * the history as `projectHistory` left it, the live band (`live` layers and any
 * whose recall changed its state), then one `<context_updates>` developer message
 * for anchored layers whose output no longer matches the render pinned on the
 * thread's first assembly (`renderDelta` may describe the change). `readOnly`
 * (a preview) pins nothing.
 */
export const assembleView = (
  ctx: AgentContext,
  options: {
    readonly query?: string
    readonly history?: ReadonlyArray<Item>
    readonly layers?: ReadonlyArray<ContextLayer<any>>
    readonly policy?: ProjectionPolicy
    readonly readOnly?: boolean
    readonly forceAtomic?: boolean
  } = {}
): Effect.Effect<AssembledView> =>
  Effect.gen(function*() {
    const layers = options.layers ?? ctx.store.layers
    const budgets = allocateBudgets(layers, options.policy)
    const recalled = yield* recallLayers(ctx, {
      layers,
      budgets,
      ...(options.query === undefined ? {} : { query: options.query }),
      ...(options.forceAtomic === undefined ? {} : { forceAtomic: options.forceAtomic })
    })
    const projected = yield* projectHistoryLayers(ctx, options.history ?? ctx.items, layers)
    const system = projected.filter((item) => item.type === "message" && item.role === "system")
    const history = projected.filter((item) => !(item.type === "message" && item.role === "system"))
    const byId = new Map(layers.map((layer) => [layer.id, layer]))
    const anchor: Array<RecallEntry> = []
    const live: Array<RecallEntry> = []
    const updates: Array<string> = []
    const lineage = ctx.threadId ?? ctx.id
    const serveInfo = new Map<string, ServeInfo>()
    const fresh = (placement: "anchor" | "live"): ServeInfo => ({ placement, served: "fresh", changed: false, churnRate: 0, rebillTokens: 0 })
    for (const entry of recalled) {
      const layer = byId.get(entry.layerId)!
      if (layer.placement === "live" || entry.mutatedState === true) {
        live.push(entry)
        serveInfo.set(layer.id, fresh("live"))
        continue
      }
      let byThread = pins.get(layer)
      if (byThread === undefined) pins.set(layer, byThread = new Map())
      const pin = byThread.get(lineage)
      const json = JSON.stringify(entry.items.map(textOf))
      if (pin === undefined) {
        if (options.readOnly !== true) {
          byThread.set(lineage, { items: entry.items, state: ctx.layerState(layer.id), json, observed: 0, changed: 0, rebillTokens: 0 })
        }
        anchor.push(entry)
        serveInfo.set(layer.id, fresh("anchor"))
        continue
      }
      anchor.push({ ...entry, items: pin.items })
      const changed = pin.json !== json
      if (options.readOnly !== true) {
        pin.observed++
        if (changed) {
          pin.changed++
          pin.rebillTokens += entry.tokenCount
        }
      }
      serveInfo.set(layer.id, {
        placement: "anchor",
        served: "pinned",
        changed,
        churnRate: pin.observed === 0 ? 0 : pin.changed / pin.observed,
        rebillTokens: pin.rebillTokens
      })
      if (!changed) continue
      let text: string | null | undefined = null
      if (layer.lifecycle?.renderDelta !== undefined) {
        const delta = yield* runHook(ctx, layer, "renderDelta", () =>
          layer.lifecycle!.renderDelta!({
            prev: pin.items,
            next: entry.items,
            prevState: pin.state,
            state: ctx.layerState(layer.id),
            ctx,
            budget: budgets.get(layer.id) ?? 0
          }))
        if (delta.ok) text = delta.value
      }
      updates.push(
        `<update layer="${layer.id}" action="replace">\n${text ?? entry.items.map(textOf).join("\n")}\n</update>`
      )
    }
    for (const [layerId, layer] of byId) {
      const pin = pins.get(layer)?.get(lineage)
      if (pin !== undefined && layer.placement !== "live" && !recalled.some((entry) => entry.layerId === layerId)) {
        anchor.push({ layerId, items: pin.items, tokenCount: 0 })
        serveInfo.set(layerId, {
          placement: "anchor",
          served: "pinned",
          changed: true,
          churnRate: pin.observed === 0 ? 0 : pin.changed / pin.observed,
          rebillTokens: pin.rebillTokens
        })
        updates.push(`<update layer="${layerId}" action="retract">\n</update>`)
      }
    }
    const delta = updates.length === 0 ? [] : [
      message(
        `<context_updates>\nThese supersede the blocks with the same layer id earlier in this context.\nWhere they disagree, these are correct.\n${
          updates.join("\n")
        }\n</context_updates>`,
        "developer"
      )
    ]
    return {
      items: [...system, ...anchor.flatMap((e) => e.items), ...history, ...live.flatMap((e) => e.items), ...delta],
      anchor,
      live,
      history,
      serveInfo
    }
  })

const textOf = (item: Item): string => {
  const content = item.content
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content.map((part) => typeof part?.text === "string" ? part.text : JSON.stringify(part)).join("")
  }
  return JSON.stringify(item)
}

// -----------------------------------------------------------------------------
// Model-call hooks: steering and store
// -----------------------------------------------------------------------------

/** The most restrictive of several verdicts: any deny, else guide (guidances joined), else allow. */
export const mostRestrictive = (decisions: ReadonlyArray<SteeringDecision>): SteeringDecision => {
  const guidances: Array<string> = []
  let guide = false
  for (const decision of decisions) {
    if (decision.action === "deny") return decision
    if (decision.action === "guide") {
      guide = true
      if (decision.guidance) guidances.push(decision.guidance)
    }
  }
  return guide ? { action: "guide", guidance: guidances.length > 0 ? guidances.join("\n") : undefined } : { action: "allow" }
}

/**
 * Runs one steering hook of every active layer in slot order: the first deny wins,
 * guidances are joined, a returned state is written back (and through, before this
 * returns). `onFailure` says what a failed or timed-out hook decides (none: nothing).
 */
const steer = (
  ctx: AgentContext,
  layers: ReadonlyArray<ContextLayer<any>>,
  hook: "afterModelCall" | "beforeToolCall",
  run: (layer: ContextLayer<any>) => Effect.Effect<{ readonly decision: SteeringDecision; readonly state?: unknown }, unknown>,
  onFailure: (layer: ContextLayer<any>) => SteeringDecision | undefined = () => undefined
): Effect.Effect<SteeringDecision> =>
  Effect.gen(function*() {
    const decisions: Array<SteeringDecision> = []
    try {
      for (const layer of activeWith(ctx, layers, hook)) {
        const result = yield* runHook(ctx, layer, hook, () => run(layer))
        if (!result.ok) {
          const decided = onFailure(layer)
          if (decided !== undefined) return decided
          continue
        }
        if (result.value.state !== undefined) ctx.setLayerStateValue(layer.id, result.value.state)
        if (result.value.decision?.action === "deny") return result.value.decision
        if (result.value.decision !== undefined) decisions.push(result.value.decision)
      }
      return mostRestrictive(decisions)
    } finally {
      yield* ctx.persistLayerState()
    }
  })

/**
 * Runs `afterModelCall` of every active layer in slot order after a model response
 * (before it is appended): the first deny wins, guidances are joined.
 */
export const afterModelCallLayers = (
  ctx: AgentContext,
  response: ModelResponse,
  layers: ReadonlyArray<ContextLayer<any>> = ctx.store.layers
): Effect.Effect<SteeringDecision> =>
  steer(ctx, layers, "afterModelCall", (layer) =>
    layer.lifecycle!.afterModelCall!({ response, ctx, state: ctx.layerState(layer.id) }))

/**
 * Runs `beforeToolCall` of every active layer in slot order before a tool runs:
 * the first deny wins. A layer with `onBeforeToolCallError: 'deny'` whose hook fails
 * or times out denies the call.
 */
export const beforeToolCallLayers = (
  ctx: AgentContext,
  call: { readonly toolName: string; readonly toolArgs: unknown; readonly callId?: string | undefined },
  layers: ReadonlyArray<ContextLayer<any>> = ctx.store.layers
): Effect.Effect<SteeringDecision> =>
  steer(
    ctx,
    layers,
    "beforeToolCall",
    (layer) => layer.lifecycle!.beforeToolCall!({ ...call, ctx, state: ctx.layerState(layer.id) }),
    (layer) =>
      layer.onBeforeToolCallError === "deny"
        ? { action: "deny", guidance: `tool call denied: gating layer '${layer.id}' failed` }
        : undefined
  )

/** Writes back the state a hook returned under a `state` key (`{ state: undefined }` clears it); true when it did. */
const takeState = (ctx: AgentContext, layer: ContextLayer<any>, result: HookResult<unknown>): boolean => {
  if (!result.ok || typeof result.value !== "object" || result.value === null || !("state" in result.value)) return false
  ctx.setLayerStateValue(layer.id, (result.value as { readonly state: unknown }).state)
  return true
}

/**
 * Runs `store` of every active layer concurrently, each on its own state, after a
 * model response was appended; then writes the changed states through and waits
 * for the writes, so a crash after this returns loses none of it. An eventual
 * layer whose store gave new state recalls afresh next time.
 */
export const storeLayers = (
  ctx: AgentContext,
  response: ModelResponse,
  layers: ReadonlyArray<ContextLayer<any>> = ctx.store.layers
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const active = activeWith(ctx, layers, "store")
    yield* Effect.forEach(active, (layer) => {
      const state = ctx.layerState(layer.id)
      return Effect.map(
        runHook(ctx, layer, "store", () =>
          layer.lifecycle!.store!({ newItems: response.items, log: ctx.items, response, ctx, state })),
        (result) => {
          if (!takeState(ctx, layer, result)) return
          if (layer.recallMode === "eventual") {
            const cached = recallCache.get(layer)?.get(scopeKeyOf(layer.scope ?? "execution", ctx))
            if (cached !== undefined) cached.stale = true
          }
        }
      )
    }, { concurrency: "unbounded", discard: true })
    yield* ctx.persistLayerState()
  })

// -----------------------------------------------------------------------------
// Spawn, return, complete, dispose
// -----------------------------------------------------------------------------

/**
 * Runs `onSpawn` of the child's layers in slot order with the parent's state: a
 * `childState` (not null) becomes the child's state of that layer, and the items
 * returned are appended to the child's log. Returns those items.
 */
export const spawnLayers = (
  parent: AgentContext,
  child: AgentContext,
  layers: ReadonlyArray<ContextLayer<any>> = child.store.layers
): Effect.Effect<ReadonlyArray<Item>> =>
  Effect.gen(function*() {
    const items: Array<Item> = []
    for (const layer of activeWith(parent, layers, "onSpawn")) {
      const result = yield* runHook(parent, layer, "onSpawn", () =>
        layer.lifecycle!.onSpawn!({ parentState: parent.layerState(layer.id), childCtx: child }))
      if (!result.ok || result.value === null || result.value === undefined || result.value.childState === null) continue
      child.store.pendingInit.delete(layer.id)
      child.setLayerStateValue(layer.id, result.value.childState)
      items.push(...(result.value.items ?? []))
    }
    yield* child.persistLayerState()
    return items
  })

/**
 * Runs `onReturn` of the child's layers in slot order once the child completed:
 * each may merge the child's state into the parent's and transform the result
 * the spawn step returns.
 */
export const returnLayers = <A>(
  parent: AgentContext,
  child: AgentContext,
  result: A,
  layers: ReadonlyArray<ContextLayer<any>> = child.store.layers
): Effect.Effect<A> =>
  Effect.gen(function*() {
    let current: unknown = result
    for (const layer of bySlot(layers)) {
      if (layer.lifecycle?.onReturn === undefined) continue
      const childState = child.layerState(layer.id)
      if (childState === undefined) continue
      const outcome = yield* runHook(parent, layer, "onReturn", () =>
        layer.lifecycle!.onReturn!({
          childState,
          childLog: child.items,
          parentState: parent.layerState(layer.id),
          result: current,
          childCtx: child
        }))
      if (!outcome.ok || outcome.value === undefined || outcome.value === null) continue
      if (outcome.value.parentState !== undefined) parent.setLayerStateValue(layer.id, outcome.value.parentState)
      if (outcome.value.result !== undefined) current = outcome.value.result
    }
    yield* parent.persistLayerState()
    return current as A
  })

/** A spawned child's run between its spawn hooks: `onSpawn` (a `fresh` child only, its items appended), then `onReturn`. */
export const aroundSpawn = <A, E, R>(
  parent: AgentContext,
  child: AgentContext,
  fresh: boolean,
  run: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.andThen(
    fresh
      ? Effect.flatMap(spawnLayers(parent, child), (items) => items.length === 0 ? Effect.void : Effect.asVoid(child.append(items)))
      : Effect.void,
    Effect.flatMap(run, (output) => returnLayers(parent, child, output))
  )

/** Runs `onComplete` of every active layer in array order with how the execution ended. */
export const completeLayers = (
  ctx: AgentContext,
  outcome: ExecutionOutcome,
  layers: ReadonlyArray<ContextLayer<any>> = ctx.store.layers
): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (const layer of layers) {
      if (layer.lifecycle?.onComplete === undefined || ctx.isLayerDisabled(layer)) continue
      const result = yield* runHook(ctx, layer, "onComplete", () =>
        layer.lifecycle!.onComplete!({ log: ctx.items, ctx, state: ctx.layerState(layer.id), outcome }))
      takeState(ctx, layer, result)
    }
    yield* ctx.persistLayerState()
  })

/**
 * Runs `dispose` of every active layer in reverse array order, after the last
 * write-through; the context's layer state stays (a snapshot may still need it),
 * but its init runs again if the context is used after this. A host's layer-state
 * store is flushed and then told to `cleanup` the execution, as noetic does.
 */
export const disposeLayers = (
  ctx: AgentContext,
  layers: ReadonlyArray<ContextLayer<any>> = ctx.store.layers
): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* ctx.persistLayerState()
    for (const layer of [...layers].reverse()) {
      if (layer.lifecycle?.dispose === undefined || ctx.isLayerDisabled(layer)) continue
      yield* runHook(ctx, layer, "dispose", () => layer.lifecycle!.dispose!({ state: ctx.layerState(layer.id) }))
    }
    const store = ctx.store.layerStateStore
    if (store !== undefined) {
      if (store.flush !== undefined) yield* store.flush(ctx.id)
      store.cleanup(ctx.id)
    }
  })

/** `onComplete` with `outcome`, then `dispose`: the teardown of an execution (and of a cancelled one). */
export const teardownLayers = (ctx: AgentContext, outcome: ExecutionOutcome): Effect.Effect<void> =>
  Effect.andThen(completeLayers(ctx, outcome), disposeLayers(ctx))

// -----------------------------------------------------------------------------
// Context members fed by model calls
// -----------------------------------------------------------------------------

/** Adds a model round's provider usage and cost to the context's `tokens` / `cost`. */
export const meterUsage = (
  ctx: AgentContext,
  usage: { readonly inputTokens: number; readonly outputTokens: number; readonly cachedTokens?: number | undefined } | undefined,
  cost: number | undefined
): void => {
  const meter = ctx.meter
  if (usage !== undefined) {
    meter.tokens.input += usage.inputTokens
    meter.tokens.output += usage.outputTokens
    meter.tokens.total += usage.inputTokens + usage.outputTokens
    if (typeof usage.cachedTokens === "number") meter.tokens.cached = (meter.tokens.cached ?? 0) + usage.cachedTokens
  }
  if (typeof cost === "number") meter.cost += cost
}

const estimateJsonTokens = (value: unknown): number => {
  try {
    return estimateTokens(JSON.stringify(value) ?? "")
  } catch {
    return 0
  }
}

/**
 * noetic's `ctx.lastLayerUsage` of one assembly: what each layer contributed, the
 * band it landed in and whether a pin was replayed; the tokens of the instructions
 * and tool definitions sent with it, and of the log's items (four characters a
 * token, as noetic's `estimateTokens`; the log's items as JSON).
 */
export const layerUsage = (
  ctx: AgentContext,
  modelId: string,
  view: AssembledView,
  request: { readonly instructions?: string | undefined; readonly tools?: ReadonlyArray<unknown> | undefined } = {}
): LastLayerUsage => {
  const layers = [...view.anchor, ...view.live].map((entry): LayerUsageEntry => ({
    layerId: entry.layerId,
    tokenCount: entry.tokenCount,
    items: entry.items,
    ...(view.serveInfo.get(entry.layerId) ?? { placement: "anchor", served: "fresh", changed: false, churnRate: 0, rebillTokens: 0 })
  })).sort((a, b) => a.layerId < b.layerId ? -1 : a.layerId > b.layerId ? 1 : 0)
  const historyTokens = ctx.items.reduce((sum, item) => sum + estimateJsonTokens(item), 0)
  const systemPromptTokens = request.instructions ? estimateTokens(request.instructions) : 0
  const toolsTokens = request.tools !== undefined && request.tools.length > 0 ? estimateJsonTokens(request.tools) : 0
  const layerTokens = layers.reduce((sum, entry) => sum + entry.tokenCount, 0)
  return {
    executionId: ctx.id,
    modelId,
    layers,
    systemPromptTokens,
    toolsTokens,
    historyTokens,
    totalUsedTokens: systemPromptTokens + toolsTokens + historyTokens + layerTokens
  }
}

// -----------------------------------------------------------------------------
// provides: ctx.context and layer tools
// -----------------------------------------------------------------------------

/**
 * `ctx.context`: by layer id, each `provides` entry of an active layer, a data
 * entry read from the current state on access and a function entry that runs with
 * the state and writes back (and through) the state it returns.
 */
export const contextView = <F>(
  ctx: AgentContext,
  call: (run: Effect.Effect<unknown, unknown>) => F
): Readonly<Record<string, Readonly<Record<string, unknown>>>> => {
  const view: Record<string, Record<string, unknown>> = {}
  for (const layer of ctx.store.layers) {
    if (layer.provides === undefined) continue
    const entry: Record<string, unknown> = {}
    for (const [name, decl] of Object.entries(layer.provides)) {
      if (decl.kind === "data") {
        Object.defineProperty(entry, name, { enumerable: true, get: () => decl.read(ctx.layerState(layer.id)) })
      } else {
        entry[name] = (args: unknown) => call(runLayerFunction(ctx, layer, decl, args))
      }
    }
    view[layer.id] = entry
  }
  return view
}

/** Runs one `provides` function of a layer: validates its argument, runs it, writes back and through its state. */
export const runLayerFunction = (
  ctx: AgentContext,
  layer: ContextLayer<any>,
  decl: LayerFunction,
  args: unknown
): Effect.Effect<unknown, unknown> =>
  Effect.gen(function*() {
    yield* ctx.ensureLayersInit()
    const parsed = yield* parseWith(decl.input, args)
    const out = yield* decl.execute(parsed, ctx.layerState(layer.id), ctx)
    if (out.state !== undefined) {
      ctx.setLayerStateValue(layer.id, out.state)
      yield* ctx.persistLayerState()
    }
    return out.result
  })

/** The tools a context's layers provide to the model, named `layerId/fnName`. */
export const layerTools = (
  ctx: AgentContext
): ReadonlyArray<{
  readonly name: string
  readonly description: string
  readonly input: unknown
  readonly execute: (args: unknown) => Effect.Effect<unknown, unknown>
}> =>
  ctx.store.layers.flatMap((layer) =>
    Object.entries(layer.provides ?? {}).flatMap(([name, decl]) =>
      decl.kind === "function" && !ctx.isLayerDisabled(layer)
        ? [{
          name: `${layer.id}/${name}`,
          description: decl.description,
          input: decl.input,
          execute: (args: unknown) => runLayerFunction(ctx, layer, decl, args)
        }]
        : []
    )
  )
