/**
 * A child step the ledger answers, run from a body through the Promise API
 * (`ctx.run`, `ctx.harness.run`), settles at once (the engine decides the replay,
 * `Frames.replayNow`, with no fiber of its own): the recorded outputs, the numbering
 * of the steps after them, a model call's meta, and, under a tracing backend, the
 * replayed steps' spans marked `hit` are as the dispatch through the engine has them.
 */
import { describe, expect, it } from "vitest"
import {
  createCheckpointStore,
  createInMemoryStorage,
  InMemoryExporter,
  runCode,
  type StepContext
} from "../../src/promise/index.ts"
import { harness } from "./harnesses.ts"
import { runTurn } from "./turns.ts"

const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (e: unknown) => e)

describe("facade: a replayed child step settles at once", () => {
  it("replays the recorded outputs, numbers the next steps after them, and runs nothing again", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    let runs = 0
    let fail = true
    const leaf = runCode({ id: "leaf", execute: async (i: number) => ({ i, run: ++runs }) })
    const root = runCode({
      id: "root",
      execute: async (steps: number, ctx: StepContext) => {
        const outputs: Array<{ i: number; run: number }> = []
        for (let i = 0; i < steps; i++) outputs.push(await ctx.harness.run(leaf, i, ctx))
        // The same step again through ctx.run: its own path (#3), after the replayed ones.
        outputs.push(await ctx.run(leaf, steps))
        if (fail) throw new Error("not yet")
        return outputs
      }
    })
    const first = harness({ name: "at-once", agentGraph: root, environment: { storage: { checkpointStore } } })
    await expect(runTurn(first, 3, { executionId: "e1" })).rejects.toThrow("not yet")
    expect(runs).toBe(4)
    fail = false
    const second = harness({ name: "at-once", agentGraph: root, environment: { storage: { checkpointStore } } })
    const resumed = await second.resume("e1")
    expect(runs).toBe(4)
    expect(resumed?.output).toEqual([0, 1, 2, 3].map((i) => ({ i, run: i + 1 })))
  })

  it("under a trace exporter, the replayed steps' spans are exported, marked hit", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    let fail = true
    const leaf = runCode({ id: "leaf", execute: async (i: number) => i * 2 })
    const root = runCode({
      id: "root",
      execute: async (_: void, ctx: StepContext) => {
        const a = await ctx.run(leaf, 1)
        const b = await ctx.run(leaf, 2)
        if (fail) throw new Error("not yet")
        return a + b
      }
    })
    const first = harness({ name: "traced", agentGraph: root, environment: { storage: { checkpointStore } } })
    expect(await rejection(runTurn(first, undefined, { executionId: "t1" }))).toBeInstanceOf(Error)
    fail = false
    const exporter = new InMemoryExporter()
    const second = harness({
      name: "traced",
      agentGraph: root,
      environment: { storage: { checkpointStore } },
      traceExporter: exporter
    })
    expect((await second.resume("t1"))?.output).toBe(6)
    const leaves = exporter.getSpansByName("runCode leaf")
    expect(leaves.map((span) => [span.attributes.get("path"), span.attributes.get("replay")])).toEqual([
      ["/root#0/leaf#0", "hit"],
      ["/root#0/leaf#1", "hit"]
    ])
  })
})
