/**
 * Children in their own processes (real `node` processes of the local adapter):
 * - host restart with 50 live children: the time `reattachLiveChildren` takes to
 *   return every handle (pid and start time checked, socket reconnected) and every
 *   restored parent context; a restart is a fresh harness and adapter over the same
 *   roots, the previous adapter having let its children outlive it;
 * - local child cold start: `detachedSpawn` of a step that returns at once until its
 *   result is back, against a raw spawn of the same Node and loader running the same
 *   step body and printing its output, interleaved.
 */
import { Effect, Exit, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as LocalSubprocessAdapter from "../src/layers/LocalSubprocessAdapter.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import { reattachLiveChildren } from "../src/harness/Reattach.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  interleave,
  now,
  ratioOf,
  summarize,
  targetOf,
  tempRoot
} from "./harness.ts"
import { echo, idle } from "./subprocessSteps.ts"

const here = Path.dirname(fileURLToPath(import.meta.url))

/** One host: a durable harness whose default adapter is the local one, in `scope`. */
const host = (base: string, scope: Scope.Scope) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(yield* FileStorage.make({ root: Path.join(base, "checkpoints") }))
    const adapter = yield* LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), outliveHost: true })
    return yield* AgentHarness.make({ name: "bench", subprocess: adapter }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  }).pipe(Scope.provide(scope), Effect.orDie)

const restartCase: BenchCase = {
  id: "subprocess:restart",
  title: "Host restart with 50 live children: reattachLiveChildren (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    const children = 50
    const restarts = context.quick ? 2 : 7
    const base = tempRoot("subprocess")
    const release = Path.join(base, "release")
    const firstScope = Scope.makeUnsafe()
    const first = await Effect.runPromise(host(base, firstScope))
    const spawnStart = now()
    const handles = await Effect.runPromise(Effect.forEach(Array.from({ length: children }, (_, n) => n), (n) =>
      Effect.gen(function*() {
        const parent = yield* first.createContext()
        yield* parent.append([{ type: "message", role: "user", id: `job-${n}`, content: `job ${n}` }])
        return yield* first.detachedSpawn(idle, { release, n }, parent)
      }), { concurrency: 10 }))
    // Measured once every child serves its socket: a restart of a host whose children are
    // still booting would time their boot (CPU-bound under tsx), not the reattach.
    const runDir = Path.join(base, "run")
    while (Fs.readdirSync(runDir).filter((name) => name.endsWith(".sock")).length < children) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const spawnMs = now() - spawnStart
    // The first host goes away; its children run on.
    await Effect.runPromise(Scope.close(firstScope, Exit.void))

    const samples: Array<number> = []
    let found = { handles: 0, contexts: 0, failures: 0 }
    let last: Scope.Closeable | undefined
    for (let i = 0; i < restarts; i++) {
      if (last !== undefined) await Effect.runPromise(Scope.close(last, Exit.void))
      last = Scope.makeUnsafe()
      const harness = await Effect.runPromise(host(base, last))
      const start = now()
      const result = await Effect.runPromise(reattachLiveChildren(harness))
      samples.push(now() - start)
      found = { handles: result.handles.length, contexts: result.contexts.size, failures: result.failures.length }
    }
    // One host at a time: two hosts watching the same children would race for each result.
    if (last !== undefined) await Effect.runPromise(Scope.close(last, Exit.void))
    const finalScope = Scope.makeUnsafe()
    const harness = await Effect.runPromise(host(base, finalScope))
    const { handles: live } = await Effect.runPromise(reattachLiveChildren(harness))
    Fs.writeFileSync(release, "go")
    const outputs = await Effect.runPromise(Effect.forEach(live, (handle) => handle.await, { concurrency: "unbounded" }))
    await Effect.runPromise(Scope.close(finalScope, Exit.void))
    if (found.handles !== children || outputs.length !== handles.length) {
      throw new Error(`reattach found ${found.handles} of ${children} children; ${outputs.length} settled`)
    }
    return {
      id: "subprocess:restart",
      title: restartCase.title,
      figures: [{
        id: "reattach",
        label: `reattachLiveChildren after a restart, ${children} live children (handles and parent contexts)`,
        kind: "this",
        unit: "ms",
        summary: summarize(samples),
        detail: found,
        // The target: a reattach of 50 live children stays under a second.
        ...targetOf(summarize(samples), { atMost: 1000 })
      }],
      ratios: [],
      skipped: [],
      notes: [
        `Spawning the ${children} children until each served its socket took ${Math.round(spawnMs)} ms (each boots Node with the tsx loader); every child settled after the last restart.`
      ]
    }
  }
}

const coldStartCase: BenchCase = {
  id: "subprocess:coldstart",
  title: "Local child cold start, TypeScript step module under tsx: detachedSpawn until the result is back (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    const rounds = context.quick ? 2 : 10
    const base = tempRoot("coldstart")
    const scope = Scope.makeUnsafe()
    const harness = await Effect.runPromise(host(base, scope))
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
    const rawChild = Path.join(here, "subprocessRawChild.ts")
    let n = 0
    try {
      const samples = await interleave({
        spawn: async () => {
          const parent = await Effect.runPromise(harness.createContext())
          const input = n++
          const start = now()
          const output = await Effect.runPromise(
            Effect.flatMap(harness.detachedSpawn(echo, input, parent), (handle) => handle.await)
          )
          const ms = now() - start
          if (output !== input) throw new Error(`the child returned ${String(output)}, not ${input}`)
          return ms
        },
        raw: () =>
          new Promise<number>((resolve, reject) => {
            const input = n++
            const start = now()
            ChildProcess.execFile(process.execPath, ["--import", tsx, rawChild, String(input)], (error, stdout) => {
              const ms = now() - start
              if (error !== null) reject(error)
              else if (JSON.parse(stdout) !== input) reject(new Error(`the raw child printed ${stdout}`))
              else resolve(ms)
            })
          })
      }, { rounds, warmup: 1 })
      const figures = [
        {
          id: "spawn",
          label: "detachedSpawn of a step that returns at once, local adapter, until its result is back",
          kind: "this" as const,
          unit: "ms",
          summary: summarize(samples.spawn)
        },
        {
          id: "raw",
          label: "raw spawn of the same Node + tsx loader running the same step body, until it exits",
          kind: "baseline" as const,
          unit: "ms",
          summary: summarize(samples.raw)
        }
      ]
      const ratio = ratioOf(figures, samples, "cold start / raw spawn of the same Node and loader", "spawn", "raw")
      return {
        id: "subprocess:coldstart",
        title: coldStartCase.title,
        figures,
        ratios: ratio === undefined ? [] : [ratio],
        skipped: [],
        notes: ["Both children load TypeScript through tsx; a child of a compiled (JavaScript) step module starts without it."]
      }
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}

/** The subprocess cases. */
export const cases: ReadonlyArray<BenchCase> = [restartCase, coldStartCase]
