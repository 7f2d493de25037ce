/**
 * Property: a random graph interrupted at a random step and resumed by a new harness
 * on the same storage gives the output of an uninterrupted run, and no step that
 * completed before the crash runs its body again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { type AnyStep, inParallel, loop, runCode } from "../../src/harness/Step.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../../src/services/StorageAdapter.ts"

/** What the leaves of one run did, shared by the steps of a graph. */
interface Probe {
  /** Dispatches of leaves so far; the leaf that makes it equal `crashAt` dies. */
  dispatched: number
  crashAt: number
  /** How many times each path's body completed. */
  readonly completed: Map<string, number>
}

/** A small deterministic PRNG, so a graph is a pure function of its seed. */
const prng = (seed: number) => {
  let state = seed >>> 0 || 1
  return (bound: number) => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) % bound
  }
}

const leaf = (id: string, salt: number, probe: Probe) =>
  runCode(id, (n: number, ctx) =>
    Effect.suspend(() => {
      if (++probe.dispatched === probe.crashAt) return Effect.die("simulated host crash")
      probe.completed.set(ctx.path, (probe.completed.get(ctx.path) ?? 0) + 1)
      return Effect.succeed((n * 31 + salt) % 1_000_003)
    }))

/** A random graph: sequences (composites), loops and parallel fans over leaves. */
const randomGraph = (seed: number, probe: Probe): AnyStep => {
  const next = prng(seed)
  let ids = 0
  const build = (depth: number): AnyStep => {
    const choice = depth >= 3 ? 0 : next(4)
    const id = `s${ids++}`
    switch (choice) {
      case 0:
        return leaf(id, next(1000), probe)
      case 1: {
        const children = Array.from({ length: 1 + next(3) }, () => build(depth + 1))
        return runCode(id, (n: number, ctx) =>
          Effect.gen(function*() {
            let current = n
            for (const child of children) current = (yield* ctx.run(child, current)) as number
            const sum = current
            probe.completed.set(ctx.path, (probe.completed.get(ctx.path) ?? 0) + 1)
            return sum
          }))
      }
      case 2: {
        const times = 1 + next(3)
        return loop(id, build(depth + 1), { until: (_, iteration) => iteration + 1 >= times })
      }
      default: {
        const branches = Array.from({ length: 2 + next(2) }, () => build(depth + 1))
        return runCode(`${id}-sum`, (n: number, ctx) =>
          Effect.map(ctx.run(inParallel(id, branches), n), (outputs) => {
            probe.completed.set(ctx.path, (probe.completed.get(ctx.path) ?? 0) + 1)
            return (outputs as Array<number>).reduce((a, b) => a + b, 0)
          }))
      }
    }
  }
  return build(0)
}

const harnessOver = (storage: StorageAdapterShape, graph: AnyStep) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
    AgentHarness.make({ name: "prop", agentGraph: graph }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    ))

const property = (makeStorage: () => Effect.Effect<StorageAdapterShape, unknown>) =>
([seed, crashPick]: readonly [number, number]) =>
  Effect.gen(function*() {
    // The uninterrupted reference run, and how many leaves it dispatches.
    const reference: Probe = { dispatched: 0, crashAt: 0, completed: new Map() }
    const expected = yield* (yield* harnessOver(yield* makeMemory, randomGraph(seed, reference))).execute(7)
    const crashAt = 1 + (crashPick % reference.dispatched)

    const storage = yield* makeStorage()
    const probe: Probe = { dispatched: 0, crashAt, completed: new Map() }
    const graph = randomGraph(seed, probe)
    const crashed = yield* Effect.exit((yield* harnessOver(storage, graph)).execute(7, { executionId: "prop" }))
    assert.isTrue(Exit.isFailure(crashed), "the run must have crashed")
    const completedBeforeCrash = new Map(probe.completed)

    probe.crashAt = 0
    const resumed = yield* (yield* harnessOver(storage, graph)).resume("prop")
    assert.strictEqual(Option.getOrThrow(resumed).output, expected.output)
    for (const [path, count] of probe.completed) {
      assert.strictEqual(count, 1, `${path} completed ${count} times (${completedBeforeCrash.get(path) ?? 0} before the crash)`)
    }
  })

describe("resume property", () => {
  it.effect.prop(
    "memory: a crashed run resumes to the uninterrupted output, with no completed body re-run",
    [Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 2 ** 31 })), Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))],
    property(() => makeMemory),
    { timeout: 120_000, arbitrary: { runs: 60 } }
  )

  it.effect.prop(
    "file: a crashed run resumes to the uninterrupted output, with no completed body re-run",
    [Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 2 ** 31 })), Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))],
    property(() => FileStorage.make({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-prop-")) })),
    { timeout: 120_000, arbitrary: { runs: 15 } }
  )
})
