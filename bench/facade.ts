/**
 * Facade overhead: the same durable run of N `runCode` steps (N = 10, 100) on memory
 * storage through the Promise API and through the Effect API, in the same interleaved
 * rounds. Each sample builds a harness on a fresh memory storage (untimed) and times
 * runs on fresh contexts: `await harness.run(root, n, harness.createContext({ id }))`
 * against `harness.run(root, n, yield* harness.createContext({ id }))`. The root step
 * runs N leaf steps one after another (`ctx.run(leaf, i)`); every step does the same
 * work and returns the same output on both sides. The target (issue 35): the Promise
 * API costs at most 1.2x the Effect API at both sizes.
 */
import { Effect } from "effect"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as Facade from "../src/promise/index.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import { makeMemory } from "../src/services/StorageAdapter.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  fresh,
  interleave,
  now,
  type Ratio,
  ratioOf,
  sizedVariants,
  withCaseScope
} from "./harness.ts"
import { stepOutput } from "./peers/langgraphOps.mjs"

const leaf = runCode("leaf", (i: number) => Effect.sync(() => stepOutput(i)))
const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += (yield* ctx.run(leaf, i)).value
    return acc
  }))

const facadeLeaf = Facade.runCode({ id: "leaf", execute: async (i: number) => stepOutput(i) })
const facadeRoot = Facade.runCode({
  id: "root",
  execute: async (steps: number, ctx: Facade.StepContext) => {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += (await ctx.run(facadeLeaf, i)).value
    return acc
  }
})

/** An Effect API harness on its own memory storage, durable. */
const effectHarness = () =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(yield* makeMemory)
    return yield* AgentHarness.make({ name: "bench", agentGraph: root }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })))

/** A Promise API harness on its own memory storage, durable. */
const facadeHarness = () =>
  new Facade.AgentHarness({
    name: "bench",
    agentGraph: facadeRoot,
    environment: {
      storage: { checkpointStore: Facade.createCheckpointStore({ storage: Facade.createInMemoryStorage() }) }
    }
  })

/** Runs `fn` `repeats` times; milliseconds per run over all of them. */
const perRun = async (repeats: number, fn: () => Promise<number>) => {
  let ms = 0
  for (let r = 0; r < repeats; r++) ms += await fn()
  return ms / repeats
}

const facadeCase: BenchCase = {
  id: "facade",
  title: "A run of N runCode steps through the Promise API and the Effect API, memory storage (ms per run)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const { skipped, notes } = scope
      const sizes = [10, 100]
      const rounds = context.quick ? 3 : 15
      // Runs per sample: a 10-step run takes well under a millisecond.
      const repeatsOf = (n: number) => Math.max(1, Math.floor((context.quick ? 200 : 1000) / n))
      const set = sizedVariants(sizes)
      // A fresh harness and storage per sample, built and closed untimed: the memory
      // storage lists by scanning every key, so a storage kept across samples would
      // slow every run as the case goes on, on both sides alike.
      set.add("effect", "the Effect API: harness.run(root, n, ctx) on a fresh context", "this", (n) => async () => {
        const effect = await effectHarness()
        return perRun(repeatsOf(n), async () => {
          const start = now()
          await Effect.runPromise(Effect.flatMap(effect.createContext({ id: fresh("e") }), (ctx) => effect.run(root, n, ctx)))
          return now() - start
        })
      })
      set.add("promise", "the Promise API: await harness.run(root, n, harness.createContext())", "this", (n) => async () => {
        const facade = facadeHarness()
        try {
          return await perRun(repeatsOf(n), async () => {
            const start = now()
            await facade.run(facadeRoot, n, facade.createContext({ id: fresh("p") }))
            return now() - start
          })
        } finally {
          await facade.close()
        }
      })
      context.log(`facade: ${Object.keys(set.variants).length} variants x ${rounds} rounds (+1 warm-up)`)
      const samples = await interleave(set.variants, { rounds, warmup: 1 })
      const figures = set.figures(samples, "ms/run", (label, n) => `${label}, N = ${n}`, (_, n) => ({
        steps: Number(n),
        runsPerSample: repeatsOf(Number(n))
      }))
      const ratios: Array<Ratio> = []
      for (const n of sizes) {
        const ratio = ratioOf(figures, samples, `Promise API / Effect API, N = ${n}, memory storage`, `promise@${n}`, `effect@${n}`, 1.2)
        if (ratio !== undefined) ratios.push(ratio)
      }
      notes.push(
        "Both harnesses are durable on memory storage (a checkpoint store and a step ledger), built per sample " +
          "(untimed); each run is a new execution. The ratio is the median of the per-round ratios."
      )
      return { id: "facade", title: facadeCase.title, figures, ratios, skipped, notes }
    })
}

/** The facade overhead case. */
export const cases: ReadonlyArray<BenchCase> = [facadeCase]
