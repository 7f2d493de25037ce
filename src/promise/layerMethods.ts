/**
 * The facade harness's layer methods (noetic's `initLayers`, `recallLayers`,
 * `storeLayers`, `disposeLayers`, `beforeToolCall`, `afterModelCall`,
 * `projectHistory`, `previewRequestItems`, `getLayerState` / `setLayerState`): each
 * translates shapes and runs the engine's `LayerLifecycle`
 * (docs/layers-and-channels.md#hook-order).
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { AgentContext as EngineContext, ContextLayer as EngineContextLayer, Item } from "../harness/AgentContext.ts"
import type * as EngineHarness from "../harness/AgentHarness.ts"
import type { ModelResponse } from "../harness/LayerHooks.ts"
import * as LayerLifecycle from "../harness/LayerLifecycle.ts"
import * as Bridge from "./bridge.ts"
import type { AgentContext } from "./context.ts"

/** What `recallLayers` resolves with, per layer (noetic's `RecallLayerOutput`). */
export interface RecallLayerOutput {
  layerId: string
  items: Array<Item>
  tokenCount: number
  mutatedState?: boolean
}

/** A steering verdict. */
export interface SteeringDecision {
  action: "allow" | "deny" | "guide"
  guidance?: string
}

/** A model response as the layer methods take it. */
export interface LLMResponse {
  readonly items: ReadonlyArray<Item>
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number }
  readonly cost?: number
  readonly [field: string]: unknown
}

export { contextById, latestItems, register } from "./liveContexts.ts"

const engineOf = (engine: EngineHarness.AgentHarness<any>, ctx: AgentContext): EngineContext => {
  const c = Bridge.context.of(ctx)
  c.adopt({ layerStorage: engine.layerStorage, channels: engine.channels })
  return c
}

export const init = (engine: EngineHarness.AgentHarness<any>, ctx: AgentContext) =>
  LayerLifecycle.initLayers(engineOf(engine, ctx))

export const recall = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  query: string
) =>
  Effect.map(
    LayerLifecycle.recallLayers(engineOf(engine, ctx), { query, ...(layers === undefined ? {} : { layers }) }),
    (entries) => entries.map((entry) => ({ ...entry, items: [...entry.items] }))
  )

/**
 * noetic's `recallLayersAtomic` / `recallLayersEventual`: the recall of the layers of
 * one `recallMode` only (atomic: those not `'eventual'`, recalled each time; eventual:
 * served from the recall cache, refreshed after their `store` produced new state),
 * with the given budgets.
 */
export const recallByMode = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  query: string,
  budgets: ReadonlyMap<string, number>,
  mode: "atomic" | "eventual"
) => {
  const c = engineOf(engine, ctx)
  const selected = (layers ?? c.store.layers).filter((layer) => (layer.recallMode === "eventual") === (mode === "eventual"))
  return Effect.map(
    LayerLifecycle.recallLayers(c, { query, layers: selected, budgets }),
    (entries) => entries.map((entry) => ({ ...entry, items: [...entry.items] }))
  )
}

/** A re-render request of the append pipeline (noetic's `RerenderRequest`). */
export interface RerenderRequest {
  readonly layerId: string
  readonly slot: number
  readonly timing: "immediate" | "batched"
  readonly scope: "self" | "slot-after" | "all"
}

/**
 * noetic's `executeRerender`: recall again, fresh (no recall cache), the layers the
 * requests select (`self`: the layer; `slot-after`: those at its slot or after; `all`:
 * every one), in slot order.
 */
export const rerender = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  requests: ReadonlyArray<RerenderRequest>,
  layers: ReadonlyArray<EngineContextLayer<any>>,
  budgets: ReadonlyMap<string, number>,
  query: string
) => {
  if (requests.length === 0) return Effect.succeed([])
  const chosen = new Set<string>()
  for (const request of requests) {
    for (const layer of layers) {
      if (
        request.scope === "all" || (request.scope === "self" && layer.id === request.layerId) ||
        (request.scope === "slot-after" && (layer.slot ?? 0) >= request.slot)
      ) chosen.add(layer.id)
    }
  }
  const selected = layers.filter((layer) => chosen.has(layer.id)).sort((a, b) => (a.slot ?? 0) - (b.slot ?? 0))
  return Effect.map(
    LayerLifecycle.recallLayers(engineOf(engine, ctx), { query, layers: selected, budgets, forceAtomic: true }),
    (entries) => entries.map((entry) => ({ ...entry, items: [...entry.items] }))
  )
}

export const store = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  response: LLMResponse
) => {
  const c = engineOf(engine, ctx)
  return Effect.andThen(c.ensureLayersInit(), LayerLifecycle.storeLayers(c, response as ModelResponse, layers ?? c.store.layers))
}

export const dispose = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined
) => {
  const c = engineOf(engine, ctx)
  return LayerLifecycle.disposeLayers(c, layers ?? c.store.layers)
}

export const beforeTool = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  toolName: string,
  toolArgs: unknown,
  callId: string | undefined
) => {
  const c = engineOf(engine, ctx)
  return Effect.map(
    LayerLifecycle.beforeToolCallLayers(c, { toolName, toolArgs, callId }, layers ?? c.store.layers),
    (d): SteeringDecision => d.guidance === undefined ? { action: d.action } : { action: d.action, guidance: d.guidance }
  )
}

export const afterModel = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  response: LLMResponse
) => {
  const c = engineOf(engine, ctx)
  return Effect.map(
    LayerLifecycle.afterModelCallLayers(c, response as ModelResponse, layers ?? c.store.layers),
    (d): SteeringDecision => d.guidance === undefined ? { action: d.action } : { action: d.action, guidance: d.guidance }
  )
}

export const project = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  items: ReadonlyArray<Item>
) => {
  const c = engineOf(engine, ctx)
  return Effect.andThen(c.ensureLayersInit(), LayerLifecycle.projectHistoryLayers(c, items, layers ?? c.store.layers))
}

export const preview = (engine: EngineHarness.AgentHarness<any>, ctx: AgentContext) =>
  Effect.map(LayerLifecycle.assembleView(engineOf(engine, ctx), { readOnly: true }), (view) => view.items)
