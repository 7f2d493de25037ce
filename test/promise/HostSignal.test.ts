/**
 * A step body's `ctx.signal` (made only when a body reads it): aborted when the body's
 * step is interrupted, whether the body listened before the interruption or reads the
 * signal only after it; a body that finishes sees it never aborted. The child steps a
 * body runs (`ctx.run`) are interrupted with it, those it starts after it too.
 */
import { describe, expect, it } from "vitest"
import { inParallel, runCode, type StepContext } from "../../src/promise/index.ts"
import { harness } from "./harnesses.ts"

const tick = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

describe("a body's abort signal", () => {
  it("is aborted for a branch that lost a race, read before or after; the winner's never is", async () => {
    const seen: Record<string, boolean> = {}
    let winner: AbortSignal | undefined
    const listening = runCode({
      id: "listening",
      execute: async (_: unknown, ctx: StepContext) => {
        const signal = ctx.signal
        await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }))
        seen.listening = signal.aborted
        return "listening"
      }
    })
    const late = runCode({
      id: "late",
      execute: async (_: unknown, ctx: StepContext) => {
        await tick(60)
        // First read of the signal, after the race was lost.
        seen.late = ctx.signal.aborted
        return "late"
      }
    })
    const fast = runCode({
      id: "fast",
      execute: async (_: unknown, ctx: StepContext) => {
        winner = ctx.signal
        await tick(5)
        return "fast"
      }
    })
    const race = inParallel({ id: "race", mode: "race", paths: () => [listening, late, fast] })
    const h = harness({ name: "signals", agentGraph: race })
    expect(await h.run(race, undefined, h.createContext())).toBe("fast")
    await tick(120)
    expect(seen).toEqual({ listening: true, late: true })
    expect(winner?.aborted).toBe(false)
  })

  it("interrupts the child steps a body is running, and one it starts after it was interrupted", async () => {
    const seen: Record<string, boolean> = {}
    const waiting = runCode({
      id: "waiting",
      execute: async (_: unknown, ctx: StepContext) => {
        const signal = ctx.signal
        await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }))
        seen.waiting = signal.aborted
        return "waiting"
      }
    })
    const lateChild = runCode({
      id: "late-child",
      execute: async (_: unknown, ctx: StepContext) => {
        seen.lateChild = ctx.signal.aborted
        return "late-child"
      }
    })
    const parent = runCode({
      id: "parent",
      execute: async (_: unknown, ctx: StepContext) => {
        const first = ctx.run(waiting, undefined)
        first.catch(() => {})
        const signal = ctx.signal
        if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }))
        // The race is lost and this body interrupted: this child is interrupted as it starts.
        const late = ctx.run(lateChild, undefined)
        seen.lateRejected = await late.then(() => false, () => true)
        return first
      }
    })
    const fast = runCode({
      id: "fast",
      execute: async () => {
        await tick(5)
        return "fast"
      }
    })
    const race = inParallel({ id: "race", mode: "race", paths: () => [parent, fast] })
    const h = harness({ name: "child-signals", agentGraph: race })
    expect(await h.run(race, undefined, h.createContext())).toBe("fast")
    // The lost path's bodies settle after the race returned: wait for them (bounded).
    for (let i = 0; i < 500 && Object.keys(seen).length < 3; i++) await tick(10)
    expect(seen).toEqual({ waiting: true, lateChild: true, lateRejected: true })
  })
})
