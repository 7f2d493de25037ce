/**
 * Per-step cost of a `runCode` step: durable on file storage, durable on memory,
 * and zero-config, against a plain Effect call of the same function, in one run.
 * A root composite dispatches `steps` children in sequence; the cost per step is the
 * run's time divided by `steps`.
 */
import { Effect } from "effect"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import { makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { now, round, tempRoot } from "./harness.ts"

const work = (n: number) => (n * 31 + 7) % 1_000_003

const leaf = runCode("leaf", (n: number) => Effect.sync(() => work(n)))

const graph = (steps: number) =>
  runCode("root", (_: void, ctx) =>
    Effect.gen(function*() {
      let acc = 0
      for (let i = 0; i < steps; i++) acc += yield* ctx.run(leaf, i)
      return acc
    }))

const perStepMicros = (steps: number, storage: StorageAdapterShape | undefined) =>
  Effect.scoped(Effect.gen(function*() {
    const harness = storage === undefined
      ? yield* AgentHarness.make({ name: "bench", agentGraph: graph(steps) })
      : yield* AgentHarness.make({ name: "bench", agentGraph: graph(steps) }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, yield* CheckpointStore.makeWith(storage))
      )
    const start = now()
    yield* harness.execute(undefined)
    return round(((now() - start) * 1000) / steps)
  }))

const plainMicros = (steps: number) =>
  Effect.sync(() => {
    const start = now()
    let acc = 0
    return Effect.gen(function*() {
      for (let i = 0; i < steps; i++) acc += yield* Effect.sync(() => work(i))
      return round(((now() - start) * 1000) / steps)
    })
  }).pipe(Effect.flatten)

/** Runs the per-step benchmark and returns its figures (microseconds per step). */
export const run = () =>
  Effect.runPromise(Effect.gen(function*() {
    // Warm up the JIT on every path before measuring.
    yield* perStepMicros(200, undefined)
    yield* perStepMicros(200, yield* makeMemory)
    const plainEffect = yield* plainMicros(10_000)
    const zeroConfig = yield* perStepMicros(10_000, undefined)
    const durableMemory = yield* perStepMicros(10_000, yield* makeMemory)
    const durableFile = yield* perStepMicros(500, yield* FileStorage.make({ root: tempRoot("steps") }))
    return {
      benchmark: "per-step cost of a runCode step (microseconds)",
      plainEffectMicros: plainEffect,
      zeroConfigMicros: zeroConfig,
      durableMemoryMicros: durableMemory,
      durableFileMicros: durableFile,
      overheadVsPlain: {
        zeroConfig: round(zeroConfig / plainEffect),
        durableMemory: round(durableMemory / plainEffect),
        durableFile: round(durableFile / plainEffect)
      }
    }
  }))
