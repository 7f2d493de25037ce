/**
 * Host restart with 50 live children: the time `reattachLiveChildren` takes to return
 * every handle (pid and start time checked, socket reconnected) and every restored
 * parent context. The children are real `node` processes of the local adapter; a
 * restart is a fresh harness and adapter over the same roots, the previous adapter
 * having let its children outlive it.
 */
import { Effect, Exit, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as LocalSubprocessAdapter from "../src/layers/LocalSubprocessAdapter.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import { reattachLiveChildren } from "../src/services/SubprocessAdapter.ts"
import { now, round, summarize, tempRoot } from "./harness.ts"
import { idle } from "./subprocessSteps.ts"

const CHILDREN = 50
const RESTARTS = 5

/** One host: a durable harness whose default adapter is the local one, in `scope`. */
const host = (base: string, scope: Scope.Scope) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(yield* FileStorage.make({ root: Path.join(base, "checkpoints") }))
    const adapter = yield* LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), outliveHost: true })
    return yield* AgentHarness.make({ name: "bench", subprocess: adapter }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  }).pipe(Scope.provide(scope), Effect.orDie)

/** Runs the subprocess benchmark and returns its figures. */
export const run = async () => {
  const base = tempRoot("subprocess")
  const release = Path.join(base, "release")
  const firstScope = Scope.makeUnsafe()
  const first = await Effect.runPromise(host(base, firstScope))
  const spawnStart = now()
  const handles = await Effect.runPromise(Effect.forEach(Array.from({ length: CHILDREN }, (_, n) => n), (n) =>
    Effect.gen(function*() {
      const parent = yield* first.createContext()
      yield* parent.append([{ type: "message", role: "user", id: `job-${n}`, content: `job ${n}` }])
      return yield* first.detachedSpawn(idle, { release, n }, parent)
    }), { concurrency: 10 }))
  // Measured once every child serves its socket: a restart of a host whose children are
  // still booting would time their boot (CPU-bound under tsx), not the reattach.
  const runDir = Path.join(base, "run")
  while (Fs.readdirSync(runDir).filter((name) => name.endsWith(".sock")).length < CHILDREN) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const spawnMs = now() - spawnStart
  // The first host goes away; its children run on.
  await Effect.runPromise(Scope.close(firstScope, Exit.void))

  const samples: Array<number> = []
  let found = { handles: 0, contexts: 0, failures: 0 }
  let last: Scope.Closeable | undefined
  for (let i = 0; i < RESTARTS; i++) {
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
  return {
    benchmark: `reattachLiveChildren after a host restart with ${CHILDREN} live children (real node processes)`,
    children: CHILDREN,
    /** Until every child served its socket; each child boots node with the tsx loader. */
    spawnedAndListeningMs: round(spawnMs),
    found,
    reattach: summarize(samples),
    settled: outputs.length === handles.length
  }
}
