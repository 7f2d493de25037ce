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
import type { RerenderRequest } from "./layers.ts"

export type { RerenderRequest } from "./layers.ts"

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

/** Recall entries as the facade hands them out: each with an item array of its own. */
const copyEntries = (entries: ReadonlyArray<LayerLifecycle.RecallEntry>): Array<RecallLayerOutput> =>
  entries.map((entry) => ({ ...entry, items: [...entry.items] }))

export const recall = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  query: string
) =>
  Effect.map(
    LayerLifecycle.recallLayers(engineOf(engine, ctx), { query, ...(layers === undefined ? {} : { layers }) }),
    copyEntries
  )

/** noetic's `recallLayersAtomic` / `recallLayersEventual`: the engine's recall of one `recallMode`, with the given budgets. */
export const recallByMode = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  query: string,
  budgets: ReadonlyMap<string, number>,
  mode: "atomic" | "eventual"
) =>
  Effect.map(
    LayerLifecycle.recallLayers(engineOf(engine, ctx), { query, budgets, mode, ...(layers === undefined ? {} : { layers }) }),
    copyEntries
  )

/** noetic's `executeRerender`: the engine's fresh recall of the layers the requests select. */
export const rerender = (
  engine: EngineHarness.AgentHarness<any>,
  ctx: AgentContext,
  requests: ReadonlyArray<RerenderRequest>,
  layers: ReadonlyArray<EngineContextLayer<any>> | undefined,
  budgets: ReadonlyMap<string, number>,
  query: string
) =>
  Effect.map(
    LayerLifecycle.rerenderLayers(engineOf(engine, ctx), requests, { query, budgets, ...(layers === undefined ? {} : { layers }) }),
    copyEntries
  )

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

/** An engine verdict as noetic's `SteeringDecision`: no `guidance` key when it has none. */
const decisionOf = (d: { readonly action: SteeringDecision["action"]; readonly guidance?: string | undefined }): SteeringDecision =>
  d.guidance === undefined ? { action: d.action } : { action: d.action, guidance: d.guidance }

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
    decisionOf
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
    decisionOf
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
