/**
 * Loop termination predicates (noetic's `until.maxSteps(10)`, `any(...)`, `all(...)`)
 * for `loop({ until })`: each reads the loop's `Snapshot` after an iteration and answers
 * a `Verdict`, at once or as an effect. The Promise API's `until`, `any` and `all`
 * (`src/promise/until.ts`) are these, its host functions (`verified`, an `embed`, a
 * predicate of its own) called through Promises.
 *
 * ```ts
 * loop({ id: "refine", steps: [draft], until: Until.any(Until.maxSteps(5), Until.outputContains("DONE")) })
 * ```
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { Snapshot, Verdict } from "./Step.ts"

/** A loop's termination predicate: a verdict at once, or an effect of one. */
export type Until<E = never, R = never> = (snapshot: Snapshot) => Verdict | Effect.Effect<Verdict, E, R>

/** A predicate that answers at once (every built-in one but `verified`, `converged` with `embed`, `any`, `all`). */
export type Immediate = (snapshot: Snapshot) => Verdict

/** What `verified` asks of the last output. */
export type Verify<E = never, R = never> = (output: unknown) => Effect.Effect<{ readonly pass: boolean; readonly feedback?: string | undefined }, E, R>

/** Options of `converged`: exact text equality, or cosine similarity of embeddings. */
export interface ConvergeOptions<E = never, R = never> {
  /** Similarity (0..1) at which outputs count as converged; 1 (the default) means equal text. */
  readonly threshold?: number | undefined
  /** Embeds texts; used for a threshold below 1. */
  readonly embed?: ((texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ReadonlyArray<number>>, E, R>) | undefined
}

const stopIf = (stop: boolean, reason: string): Verdict => (stop ? { stop, reason } : { stop })

const cosine = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i]! * b[i]!
    na += a[i]! * a[i]!
    nb += b[i]! * b[i]!
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

/** A predicate's verdict on `snapshot`, as an effect (what a loop asks of its `until`). */
export const verdictOf = <E, R>(until: Until<E, R>, snapshot: Snapshot): Effect.Effect<Verdict, E, R> =>
  Effect.suspend(() => {
    const verdict = until(snapshot)
    return Effect.isEffect(verdict) ? verdict : Effect.succeed(verdict)
  })

/** Stops after `n` successful iterations. */
export const maxSteps = (n: number): Immediate => (snapshot) => stopIf(snapshot.stepCount >= n, `Reached max steps (${n})`)

/** Stops when the cost of the loop's model calls reaches `usd` (the provider's reported cost). */
export const maxCost = (usd: number): Immediate => (snapshot) => stopIf(snapshot.cost >= usd, `Reached max cost ($${usd})`)

/** Stops once `ms` milliseconds have passed since the loop started. */
export const maxDuration = (ms: number): Immediate => (snapshot) =>
  stopIf(snapshot.elapsed >= ms, `Reached max duration (${ms}ms)`)

/**
 * Stops when the last model response had no tool calls: reads the snapshot's
 * `lastStepMeta`, which a `callModel` in the loop sets (docs/runtime.md#the-tool-loop).
 */
export const noToolCalls = (): Immediate => (snapshot) => {
  if (snapshot.stepCount < 1) return { stop: false }
  const calls = snapshot.lastStepMeta?.toolCalls
  return stopIf(calls === undefined || calls.length === 0, "No tool calls in last response")
}

/** Never stops: the loop ends by `maxIterations` or cancellation. */
export const never = (): Immediate => () => ({ stop: false })

/** Stops when `verify` passes the last output; its feedback goes with the verdict. */
export const verified = <E, R>(verify: Verify<E, R>): Until<E, R> => (snapshot) =>
  Effect.map(verify(snapshot.lastOutput), (result) => ({
    stop: result.pass,
    ...(result.pass ? { reason: "Verification passed" } : {}),
    ...(result.feedback === undefined ? {} : { feedback: result.feedback })
  }))

/**
 * Stops when two consecutive outputs are the same text, or (with `embed` and a
 * `threshold` below 1) embed at least `threshold` alike. Each predicate made keeps the
 * previous output of the loop it watches: make one per loop.
 */
export const converged = <E = never, R = never>(options: ConvergeOptions<E, R> = {}): Until<E, R> => {
  const threshold = options.threshold ?? 1
  const embed = options.embed
  if (embed === undefined || threshold >= 1) {
    let previous: string | undefined
    return (snapshot) => {
      const same = previous !== undefined && previous === snapshot.lastText
      previous = snapshot.lastText
      return stopIf(same, "Output converged")
    }
  }
  let previous: ReadonlyArray<number> | undefined
  return (snapshot) =>
    Effect.map(embed([snapshot.lastText]), ([vector]): Verdict => {
      if (vector === undefined) return { stop: false }
      const similarity = previous === undefined ? undefined : cosine(vector, previous)
      previous = vector
      return similarity !== undefined && similarity >= threshold
        ? { stop: true, reason: `Output converged (similarity: ${similarity.toFixed(3)})` }
        : { stop: false }
    })
}

/** Stops when the last output's text contains `marker`. */
export const outputContains = (marker: string): Immediate => (snapshot) =>
  stopIf(snapshot.lastText.includes(marker), `Output contains marker: ${marker}`)

/** Stops when the last output's text is exactly `sentinel`. */
export const outputEquals = (sentinel: string): Immediate => (snapshot) =>
  stopIf(snapshot.lastText === sentinel, `Output matched sentinel: ${sentinel}`)

/** Stops when any predicate says stop (its verdict wins); asked in order, the rest not asked. */
export const any = <E, R>(...predicates: ReadonlyArray<Until<E, R>>): Until<E, R> => (snapshot) =>
  Effect.gen(function*() {
    for (const predicate of predicates) {
      const verdict = yield* verdictOf(predicate, snapshot)
      if (verdict.stop) return verdict
    }
    return { stop: false }
  })

/** Stops only when every predicate says stop (asked in order until one does not); their reasons are joined. */
export const all = <E, R>(...predicates: ReadonlyArray<Until<E, R>>): Until<E, R> => (snapshot) =>
  Effect.gen(function*() {
    const reasons: Array<string> = []
    for (const predicate of predicates) {
      const verdict = yield* verdictOf(predicate, snapshot)
      if (!verdict.stop) return { stop: false }
      if (verdict.reason !== undefined) reasons.push(verdict.reason)
    }
    return { stop: true, reason: reasons.join("; ") || "All predicates satisfied" }
  })
