/**
 * The shapes of noetic's context-layer lifecycle in the engine (hooks return
 * Effects), and what both the context and the lifecycle need of them: scope keys,
 * storage namespaced to a layer and scope, hook timeouts, the defaults noetic uses.
 * The lifecycle itself (recall, store, steering, spawn, complete, dispose) is in
 * `LayerLifecycle.ts`; docs/layers-and-channels.md describes both. The hook shapes
 * (`LayerHooks`, `LayerProvides`) are declared beside the context they take
 * (`AgentContext.ts`), the rest in `src/internal/contextShapes.ts`.
 *
 * @since 0.2.0
 */
export {
  DEFAULT_LAYER_TIMEOUTS,
  LayerStateMap,
  LayerInitFailed,
  LayerHookTimeout,
  scopeKeyOf,
  scopedPrefix,
  durableStateKey,
  scopedStorage,
  timeoutOf,
  withHookTimeout,
  runHook
} from "../internal/contextShapes.ts"
import type * as Shapes from "../internal/contextShapes.ts"

// Aliases, not `export type { ... } from`: the declaration bundle would merge a type
// re-export with the value re-export above from the same module, and emit the types as values.
/** How far a layer's state is shared, and so where it is stored (noetic's `ContextScope`). */
export type ContextScope = Shapes.ContextScope
/** Tokens a layer may inject per model call: fixed, a range, or the allocator's choice. */
export type BudgetConfig = Shapes.BudgetConfig
/** The hooks a timeout applies to (`renderDelta` borrows `recall`'s). */
export type TimedHook = Shapes.TimedHook
/** Per-hook timeouts in milliseconds (noetic's `LayerTimeouts`). */
export type LayerTimeouts = Shapes.LayerTimeouts
/** A steering verdict of `beforeToolCall` / `afterModelCall`. */
export type SteeringDecision = Shapes.SteeringDecision
/** A model response as the layer hooks see it (noetic's `LLMResponse`). */
export type ModelResponse = Shapes.ModelResponse
/** What `recall` contributes: items for the prompt and their token count; new state makes the layer live. */
export type RecallOutput<S> = Shapes.RecallOutput<S>
/** Storage namespaced to one layer and scope key (noetic's `ScopedStorage`), in Effects. */
export type ScopedStorage = Shapes.ScopedStorage
/** noetic's `LayerStateStore` (docs/layers-and-channels.md#a-layer-state-store). */
export type LayerStateStore = Shapes.LayerStateStore
/** How an execution ended, as `onComplete` is told. */
export type ExecutionOutcome = Shapes.ExecutionOutcome
/** What one hook run gave: its value, or the cause of its failure or timeout. */
export type HookResult<A> = Shapes.HookResult<A>
export type { LayerData, LayerFunction, LayerHooks, LayerProvides } from "./AgentContext.ts"
