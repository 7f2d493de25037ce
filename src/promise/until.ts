/**
 * noetic's loop termination predicates (`until.maxSteps(10)`, `any(...)`, `all(...)`),
 * for `loop({ until })`. They are the engine's (`harness/Until.ts`): this module only
 * calls the host's functions (`verified`, an `embed`, a predicate of its own) through
 * Promises and answers a verdict, or a Promise of one, as noetic's do.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type { Snapshot, Verdict } from "../harness/Step.ts"
import * as Engine from "../harness/Until.ts"

/** A loop's termination predicate (noetic's `Until`). */
export type Until = (snapshot: Snapshot) => Verdict | Promise<Verdict>

/** What `until.verified` asks of the last output. */
export type VerifyFn = (output: unknown) => Promise<{ pass: boolean; feedback?: string }>

/** Options of `until.converged`: exact text equality, or cosine similarity of embeddings. */
export interface ConvergeConfig {
  /** Similarity (0..1) at which outputs count as converged; 1 (the default) means equal text. */
  threshold?: number
  /** Embeds texts; required for a threshold below 1. */
  embed?: (texts: Array<string>) => Promise<ReadonlyArray<ReadonlyArray<number>>>
}

/** A host Promise as an effect: its rejection is the failure, as it was thrown. */
const fromPromise = <A>(promise: () => Promise<A>): Effect.Effect<A, unknown> =>
  Effect.tryPromise({ try: promise, catch: (error) => error })

/** The engine's view of a host predicate. */
const toEngine = (until: Until): Engine.Until<unknown> => (snapshot) => {
  const verdict = until(snapshot)
  return verdict instanceof Promise ? fromPromise(() => verdict) : verdict
}

/** The host's view of an engine predicate: a verdict at once, or a Promise of one. */
const toFacade = (until: Engine.Until<unknown>): Until => (snapshot) => {
  const verdict = until(snapshot)
  return Effect.isEffect(verdict) ? Effect.runPromise(verdict) : verdict
}

/** The built-in termination predicates. */
export const until = {
  /** Stops after `n` successful iterations. */
  maxSteps: (n: number): Until => Engine.maxSteps(n),
  /** Stops when the cost of the loop's model calls reaches `usd` (the provider's reported cost). */
  maxCost: (usd: number): Until => Engine.maxCost(usd),
  /** Stops once `ms` milliseconds have passed since the loop started. */
  maxDuration: (ms: number): Until => Engine.maxDuration(ms),
  /**
   * Stops when the last model response had no tool calls (noetic's): reads the
   * snapshot's `lastStepMeta`, which a `callModel` in the loop sets (docs/runtime.md#the-tool-loop).
   */
  noToolCalls: (): Until => Engine.noToolCalls(),
  /** Never stops: the loop ends by `maxIterations` or cancellation. */
  never: (): Until => Engine.never(),
  /** Stops when `fn` passes the last output; its feedback goes to the next iteration's verdict. */
  verified: (fn: VerifyFn): Until => toFacade(Engine.verified((output) => fromPromise(() => fn(output)))),
  /** Stops when two consecutive outputs are the same text, or embed at least `threshold` alike. */
  converged: (options: ConvergeConfig = {}): Until => {
    const embed = options.embed
    return toFacade(Engine.converged({
      ...(options.threshold === undefined ? {} : { threshold: options.threshold }),
      ...(embed === undefined ? {} : { embed: (texts) => fromPromise(() => embed([...texts])) })
    }))
  },
  /** Stops when the last output's text contains `marker`. */
  outputContains: (marker: string): Until => Engine.outputContains(marker),
  /** Stops when the last output's text is exactly `sentinel`. */
  outputEquals: (sentinel: string): Until => Engine.outputEquals(sentinel),
  /** A predicate of your own, as is. */
  custom: (fn: Until): Until => fn
}

/** Stops when any predicate says stop (its verdict wins); asked in order. */
export const any = (...predicates: Array<Until>): Until => toFacade(Engine.any(...predicates.map(toEngine)))

/** Stops only when every predicate says stop; their reasons are joined. */
export const all = (...predicates: Array<Until>): Until => toFacade(Engine.all(...predicates.map(toEngine)))
