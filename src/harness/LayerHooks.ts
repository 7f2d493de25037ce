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
export type {
  ContextScope,
  BudgetConfig,
  TimedHook,
  LayerTimeouts,
  SteeringDecision,
  ModelResponse,
  RecallOutput,
  ScopedStorage,
  LayerStateStore,
  ExecutionOutcome,
  HookResult
} from "../internal/contextShapes.ts"
export type { LayerData, LayerFunction, LayerHooks, LayerProvides } from "./AgentContext.ts"
