/**
 * The facade's divergence policy and at-most-once steps: the same engine behaviour,
 * as noetic-shaped options and NoeticError codes.
 */
import { describe, expect, it } from "vitest"
import {
  createCheckpointStore,
  createInMemoryStorage,
  invokeTool,
  isNoeticError,
  type NoeticError,
  Reconciled,
  runCode
} from "../../src/promise/index.ts"
import { harness } from "./harnesses.ts"
import { runTurn } from "./turns.ts"


const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (e: unknown) => e)

describe("facade: divergence policy", () => {
  it("onDivergence 'fail' rejects REPLAY_DIVERGED naming the path; the default runs the renamed step fresh", async () => {
    const storage = createInMemoryStorage()
    const checkpointStore = createCheckpointStore({ storage })
    let crash = true
    const first = harness({
      name: "edited",
      agentGraph: runCode({
        id: "root",
        execute: async (_: void, ctx) => {
          const data = await ctx.run(runCode({ id: "fetch", execute: () => "recorded" }), undefined)
          if (crash) throw new Error("host died")
          return data
        }
      }),
      environment: { storage: { checkpointStore } }
    })
    await expect(runTurn(first, undefined, { executionId: "e1" })).rejects.toThrow("host died")
    crash = false
    let loads = 0
    const renamed = runCode({
      id: "root",
      execute: async (_: void, ctx) => ctx.run(runCode({ id: "load", execute: () => `fresh ${++loads}` }), undefined)
    })
    const strict = harness({
      name: "edited",
      agentGraph: renamed,
      onDivergence: "fail",
      environment: { storage: { checkpointStore } }
    })
    // The body rethrows its child's rejection: a divergence is the run's failure, not the step's, so it is not wrapped.
    const diverged = await rejection(strict.resume("e1")) as NoeticError
    expect(isNoeticError(diverged)).toBe(true)
    expect(diverged.code).toBe("REPLAY_DIVERGED")
    expect(diverged.message).toContain("/root#0/fetch#0")
    expect(loads).toBe(0)

    const lenient = harness({ name: "edited", agentGraph: renamed, environment: { storage: { checkpointStore } } })
    const resumed = await lenient.resume("e1")
    expect(resumed?.output).toBe("fresh 1")
  })
})

describe("facade: at-most-once steps", () => {
  const build = (
    checkpointStore: ReturnType<typeof createCheckpointStore>,
    counts: { body: number; reconcile: number },
    fail: { inBody: boolean },
    withReconcile: boolean
  ) =>
    harness({
      name: "payments",
      agentGraph: invokeTool({
        id: "pay",
        effects: "at-most-once",
        tool: {
          name: "pay",
          execute: async (args: { amount: number }) => {
            counts.body++
            if (fail.inBody) throw new Error("connection reset mid-payment")
            return `paid ${args.amount}`
          }
        },
        ...(withReconcile
          ? {
            reconcile: async (args: { amount: number }) => {
              counts.reconcile++
              return Reconciled.completed(`found payment of ${args.amount}`)
            }
          }
          : {})
      }),
      environment: { storage: { checkpointStore } }
    })

  it("a body cut short: resume calls reconcile once, never the body", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    const counts = { body: 0, reconcile: 0 }
    const fail = { inBody: true }
    await expect(runTurn(build(checkpointStore, counts, fail, true), { amount: 5 }, { executionId: "p1" })).rejects
      .toThrow("connection reset")
    fail.inBody = false
    const resumed = await build(checkpointStore, counts, fail, true).resume("p1")
    expect(resumed?.output).toBe("found payment of 5")
    expect(counts).toEqual({ body: 1, reconcile: 1 })
  })

  it("without reconcile: NoeticError TOOL_OUTCOME_UNKNOWN naming the path, and the body is not called", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    const counts = { body: 0, reconcile: 0 }
    const fail = { inBody: true }
    await expect(runTurn(build(checkpointStore, counts, fail, false), { amount: 5 }, { executionId: "p2" })).rejects
      .toThrow("connection reset")
    fail.inBody = false
    const error = await rejection(build(checkpointStore, counts, fail, false).resume("p2"))
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).code).toBe("TOOL_OUTCOME_UNKNOWN")
    expect((error as NoeticError).message).toContain("/pay#0")
    expect(counts).toEqual({ body: 1, reconcile: 0 })
  })
})
