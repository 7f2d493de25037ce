/**
 * Helpers for testing code built on noetic-effect.
 *
 * @since 0.1.0
 */

/** A scripted `LanguageModel`: each call answers with the next scripted response. */
export * as ScriptedModel from "../layers/ScriptedModel.ts"

/** A fault-injecting storage, and crash points that simulate a host dying mid-run. */
export * as FaultyStorage from "./FaultyStorage.ts"
export { crashOnTick, HostCrashed, isHostCrash } from "./FaultyStorage.ts"
