/**
 * Helpers for testing code built on noetic-effect.
 *
 * @since 0.1.0
 */

/** A scripted `LanguageModel`: each call answers with the next scripted response. */
export * as ScriptedModel from "../layers/ScriptedModel.ts"

/**
 * A fault-injecting storage: typed failures, a host crash or failure before or after
 * its k-th operation (optionally leaving a torn file-storage temp file), and crash
 * points that simulate a host dying mid-run.
 */
export * as FaultyStorage from "./FaultyStorage.ts"
export { crashOnTick, type FaultPoint, HostCrashed, isHostCrash } from "./FaultyStorage.ts"

/**
 * Recovery testing: run a workflow, crash it at a chosen storage operation, resume it
 * on a fresh harness over the same storage (`crashAndResume`), or try every crash
 * point of a run (`exploreCrashPoints`).
 */
export * as CrashRecovery from "./CrashRecovery.ts"
export {
  crashAndResume,
  type CrashOutcome,
  type CrashPoint,
  dryRun,
  exploreCrashPoints,
  type Host,
  type Workflow
} from "./CrashRecovery.ts"
