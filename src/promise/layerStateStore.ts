/**
 * noetic's `environment.storage.layerStateStore` (docs/layers-and-channels.md#a-layer-state-store):
 * a host's store of live layer state, handed to the engine (`AgentHarness.make({ layerStateStore })`)
 * with its Promise-returning `flush` as an Effect. Every context of the harness writes
 * each layer state change to it and reads state back from it.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { LayerStateStore as EngineLayerStateStore } from "../harness/LayerHooks.ts"
import { NoeticConfigError } from "./errors.ts"

/** noetic's `LayerStateStore`, as a host writes it. */
export interface LayerStateStore {
  get<T>(executionId: string, layerId: string): T | undefined
  set<T>(executionId: string, layerId: string, state: T): void
  /** Whether the store holds an entry (a cleared state included). */
  has?(executionId: string, layerId: string): boolean
  cleanup(executionId: string): void
  diagnostic: (layerId: string, hook: string, error: unknown) => void
  /** Not called: the durable write-through of layer state is the engine's. */
  registerDurable?(executionId: string, layerId: string, target: unknown): void
  /** Awaited wherever the engine waits for the write-through of layer state. */
  flush?(executionId: string): Promise<void>
  disable?(executionId: string, layerId: string): void
  isDisabled?(executionId: string, layerId: string): boolean
}

const REQUIRED = ["get", "set", "cleanup", "diagnostic"] as const
const OPTIONAL = ["has", "flush", "disable", "isDisabled"] as const

/**
 * The engine's view of a host's store. Throws `NoeticConfigError`
 * `INVALID_LAYER_STATE_STORE` when a method noetic's interface requires is missing
 * (or one it names is not a function).
 */
export const toEngineLayerStateStore = (store: LayerStateStore): EngineLayerStateStore => {
  const given = store as unknown as Record<string, unknown>
  const bad = [...REQUIRED.filter((name) => typeof given?.[name] !== "function"),
    ...OPTIONAL.filter((name) => given?.[name] !== undefined && typeof given[name] !== "function")]
  if (typeof store !== "object" || store === null || bad.length > 0) {
    throw new NoeticConfigError({
      code: "INVALID_LAYER_STATE_STORE",
      message: `environment.storage.layerStateStore is not a LayerStateStore: ${bad.join(", ") || "not an object"}`,
      hint: "Give an object with get, set, cleanup and diagnostic (and optionally has, flush, disable, isDisabled)."
    })
  }
  const flush = store.flush
  return {
    get: (executionId, layerId) => store.get(executionId, layerId),
    set: (executionId, layerId, state) => store.set(executionId, layerId, state),
    cleanup: (executionId) => store.cleanup(executionId),
    diagnostic: (layerId, hook, error) => store.diagnostic(layerId, hook, error),
    ...(store.has === undefined ? {} : { has: (executionId: string, layerId: string) => store.has!(executionId, layerId) }),
    // A flush that rejects fails what waited for it: the write is not acknowledged.
    ...(flush === undefined ? {} : { flush: (executionId: string) => Effect.promise(() => flush.call(store, executionId)) }),
    ...(store.disable === undefined ? {} : { disable: (executionId: string, layerId: string) => store.disable!(executionId, layerId) }),
    ...(store.isDisabled === undefined
      ? {}
      : { isDisabled: (executionId: string, layerId: string) => store.isDisabled!(executionId, layerId) })
  }
}
