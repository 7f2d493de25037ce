/**
 * noetic's loop termination predicates (`until.maxSteps(10)`, `any(...)`, `all(...)`),
 * for `loop({ until })`. Each reads the loop's `Snapshot` and answers a `Verdict`.
 *
 * @since 0.1.0
 */
import type { Snapshot, Verdict } from "../harness/Step.ts"

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

const stopIf = (stop: boolean, reason: string): Verdict => (stop ? { stop, reason } : { stop })

/** The built-in termination predicates. */
export const until = {
  /** Stops after `n` successful iterations. */
  maxSteps: (n: number): Until => (snapshot) => stopIf(snapshot.stepCount >= n, `Reached max steps (${n})`),
  /** Stops when the cost of the loop's model calls reaches `usd` (the provider's reported cost). */
  maxCost: (usd: number): Until => (snapshot) => stopIf(snapshot.cost >= usd, `Reached max cost ($${usd})`),
  /** Stops once `ms` milliseconds have passed since the loop started. */
  maxDuration: (ms: number): Until => (snapshot) =>
    stopIf(snapshot.elapsed >= ms, `Reached max duration (${ms}ms)`),
  /**
   * Stops when the last model response had no tool calls (noetic's): reads the
   * snapshot's `lastStepMeta`, which a `callModel` in the loop sets (docs/runtime.md#the-tool-loop).
   */
  noToolCalls: (): Until => (snapshot) => {
    if (snapshot.stepCount < 1) return { stop: false }
    const calls = snapshot.lastStepMeta?.toolCalls
    return stopIf(calls === undefined || calls.length === 0, "No tool calls in last response")
  },
  /** Never stops: the loop ends by `maxIterations` or cancellation. */
  never: (): Until => () => ({ stop: false }),
  /** Stops when `fn` passes the last output; its feedback goes to the next iteration's verdict. */
  verified: (fn: VerifyFn): Until => async (snapshot) => {
    const result = await fn(snapshot.lastOutput)
    return {
      stop: result.pass,
      ...(result.pass ? { reason: "Verification passed" } : {}),
      ...(result.feedback === undefined ? {} : { feedback: result.feedback })
    }
  },
  /** Stops when two consecutive outputs are the same text, or embed at least `threshold` alike. */
  converged: (options: ConvergeConfig = {}): Until => {
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
    return async (snapshot) => {
      const [vector] = await embed([snapshot.lastText])
      if (vector === undefined) return { stop: false }
      const similarity = previous === undefined ? undefined : cosine(vector, previous)
      previous = vector
      return similarity !== undefined && similarity >= threshold
        ? { stop: true, reason: `Output converged (similarity: ${similarity.toFixed(3)})` }
        : { stop: false }
    }
  },
  /** Stops when the last output's text contains `marker`. */
  outputContains: (marker: string): Until => (snapshot) =>
    stopIf(snapshot.lastText.includes(marker), `Output contains marker: ${marker}`),
  /** Stops when the last output's text is exactly `sentinel`. */
  outputEquals: (sentinel: string): Until => (snapshot) =>
    stopIf(snapshot.lastText === sentinel, `Output matched sentinel: ${sentinel}`),
  /** A predicate of your own, as is. */
  custom: (fn: Until): Until => fn
}

/** Stops when any predicate says stop (its verdict wins); asked in order. */
export const any = (...predicates: Array<Until>): Until => async (snapshot) => {
  for (const predicate of predicates) {
    const verdict = await predicate(snapshot)
    if (verdict.stop) return verdict
  }
  return { stop: false }
}

/** Stops only when every predicate says stop; their reasons are joined. */
export const all = (...predicates: Array<Until>): Until => async (snapshot) => {
  const reasons: Array<string> = []
  for (const predicate of predicates) {
    const verdict = await predicate(snapshot)
    if (!verdict.stop) return { stop: false }
    if (verdict.reason !== undefined) reasons.push(verdict.reason)
  }
  return { stop: true, reason: reasons.join("; ") || "All predicates satisfied" }
}
