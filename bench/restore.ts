/**
 * Restore of an execution whose ledger holds N entries (N = 10, 100, 1,000): a run of
 * N `runCode` steps whose last step fails, then `resume` by a host that has never seen
 * it (a fresh harness and store per sample, built untimed). The resume reads the
 * snapshot and the ledger, replays the N recorded steps and runs the failing one again.
 *
 * Against, interleaved: a raw `SELECT ... WHERE key = ANY($1)` of the same rows
 * through the same Postgres driver; a raw read of as many files of the same bytes; and
 * LangGraph's savers loading the latest checkpoint of a thread of N steps (the state a
 * LangGraph resume starts from; it re-runs nothing, so it does less than `resume`).
 * Round trips of one resume on Postgres are counted on the wire, untimed.
 *
 * The user's view on Postgres: the same resume through the Promise API
 * (`await harness.resume(executionId)` until it settles), on the facade's own
 * Postgres storage over the same table, against the same raw `SELECT`.
 */
import { Effect, Exit, Layer, ManagedRuntime, Option, Schema } from "effect"
import { Activity, DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Path from "node:path"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import * as Facade from "../src/promise/index.ts"
import { runCode } from "../src/harness/Step.ts"
import { snapshotKey } from "../src/schema/CheckpointSnapshot.ts"
import { ledgerPrefix } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { type BackendName, dropPostgres, langGraphPeers, openBackends, rawPostgres, rawSqliteSelect } from "./backends.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  fresh,
  interleave,
  now,
  type Ratio,
  ratioOf,
  rawDurableWrite,
  type Series,
  seriesOf,
  sizedVariants,
  tempRoot,
  withCaseScope
} from "./harness.ts"
import { stepOutput } from "./peers/langgraphOps.mjs"
import * as Savers from "./peers/savers.ts"
import * as Pg from "./postgres.ts"

class Refused {
  readonly _tag = "Refused"
}

const leaf = runCode("leaf", (i: number) => Effect.sync(() => stepOutput(i)))
const last = runCode("last", (_: number) => Effect.fail(new Refused()))

const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += (yield* ctx.run(leaf, i)).value
    return yield* ctx.run(last, acc)
  }))

/** A harness over `storage` as a freshly started host builds it; the ledger keeps every entry. */
const hostWithLedger = (storage: StorageAdapterShape) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    const ledger = yield* StepLedger.makeWith(store, { retention: { maxEntries: Infinity } })
    const harness = yield* AgentHarness.make({ name: "bench", agentGraph: root }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store),
      Effect.provideService(StepLedger.StepLedger, ledger)
    )
    return { harness, ledger }
  })))

const hostOn = async (storage: StorageAdapterShape) => (await hostWithLedger(storage)).harness

/** Times what a resume reads, by a fresh host: the context (snapshot) and the ledger. */
const timedReads = async (storage: StorageAdapterShape, executionId: string) => {
  const { harness, ledger } = await hostWithLedger(storage)
  const start = now()
  const [context, opened] = await Effect.runPromise(Effect.all([harness.restore(executionId), ledger.open(executionId)]))
  const ms = now() - start
  if (context._tag === "None" || (await Effect.runPromise(opened.entries)).length === 0) {
    throw new Error(`nothing recorded for ${executionId}`)
  }
  return ms
}

/** The `effect/workflow` peer: N activities, then a durable deferred that suspends the workflow. */
const ResumeWorkflow = Workflow.make("benchResume", {
  payload: { steps: Schema.Number, id: Schema.String },
  success: Schema.Number,
  idempotencyKey: (payload) => payload.id
})
const Gate = DurableDeferred.make("gate")
let activityRuns = 0
const resumeWorkflowLayer = ResumeWorkflow.toLayer(({ steps }) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) {
      acc += (yield* Activity.make({
        name: `leaf-${i}`,
        success: Schema.Struct({ step: Schema.Number, value: Schema.Number }),
        execute: Effect.sync(() => {
          activityRuns++
          return stepOutput(i)
        })
      })).value
    }
    yield* DurableDeferred.await(Gate)
    return acc
  })
).pipe(Layer.provideMerge(WorkflowEngine.layerMemory))

/**
 * Times the resume of a workflow suspended after N completed activities: the deferred
 * is completed and the result awaited; the engine replays the body, answering every
 * activity from its journal (checked: none runs again).
 */
const timedWorkflowResume = async (
  runtime: ManagedRuntime.ManagedRuntime<WorkflowEngine.WorkflowEngine, never>,
  steps: number
) => {
  const id = fresh("wf")
  const executionId = await runtime.runPromise(ResumeWorkflow.execute({ steps, id }, { discard: true }))
  for (;;) {
    const polled = await runtime.runPromise(ResumeWorkflow.poll(executionId))
    if (Option.isSome(polled) && polled.value._tag === "Suspended") break
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  const before = activityRuns
  const token = DurableDeferred.tokenFromExecutionId(Gate, { workflow: ResumeWorkflow, executionId })
  const start = now()
  await runtime.runPromise(DurableDeferred.succeed(Gate, { token, value: undefined }))
  await runtime.runPromise(ResumeWorkflow.execute({ steps, id }))
  const ms = now() - start
  if (activityRuns !== before) throw new Error(`effect/workflow re-ran ${activityRuns - before} activities on resume`)
  return ms
}


/** The same graph through the Promise API: the same ids, kinds and paths, so it replays the same ledger. */
const facadeLeaf = Facade.runCode({ id: "leaf", execute: async (i: number) => stepOutput(i) })
const facadeLast = Facade.runCode({
  id: "last",
  execute: async (_: number): Promise<number> => {
    throw new Refused()
  }
})
const facadeRoot = Facade.runCode({
  id: "root",
  execute: async (steps: number, ctx: Facade.StepContext) => {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += (await ctx.harness.run(facadeLeaf, i, ctx)).value
    return await ctx.harness.run(facadeLast, acc, ctx)
  }
})

/** A Promise API harness over `storage` as a freshly started host builds it; the ledger keeps every entry. */
const facadeHostOn = (storage: Facade.StorageAdapter) =>
  new Facade.AgentHarness({
    name: "bench",
    agentGraph: facadeRoot,
    params: {},
    environment: {
      storage: {
        checkpointStore: Facade.createCheckpointStore({ storage }),
        stepLedgerRetention: { maxEntries: Infinity }
      }
    }
  })

/** Times one resume through the Promise API by a fresh host, to the result (it rejects at the last step). */
const timedFacadeResume = async (storage: Facade.StorageAdapter, executionId: string) => {
  const harness = facadeHostOn(storage)
  let rejected = false
  const start = now()
  await harness.resume(executionId).catch(() => {
    rejected = true
  })
  const ms = now() - start
  await harness.close()
  if (!rejected) throw new Error(`resume of ${executionId} was meant to reject at its last step`)
  return ms
}

/** Records an execution of `steps` steps whose last step fails; returns its id. */
const recordExecution = async (storage: StorageAdapterShape, steps: number) => {
  const executionId = fresh("exec")
  const harness = await hostOn(storage)
  const exit = await Effect.runPromiseExit(harness.execute(steps, { executionId }))
  if (Exit.isSuccess(exit)) throw new Error("the recorded run was meant to fail at its last step")
  return executionId
}

/** Times one resume by a fresh host; checks it replayed (the last step fails again, nothing else runs). */
const timedResume = async (storage: StorageAdapterShape, executionId: string) => {
  const harness = await hostOn(storage)
  const start = now()
  const exit = await Effect.runPromiseExit(harness.resume(executionId))
  const ms = now() - start
  if (Exit.isSuccess(exit)) throw new Error(`resume of ${executionId} was meant to fail at its last step`)
  return ms
}

const restoreCase: BenchCase = {
  id: "restore",
  title: "Restore (resume) of an execution with an N-entry ledger (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const { skipped, notes } = scope
      const sizes = context.quick ? [10, 100] : [10, 100, 1000]
      const rounds = context.quick ? 3 : 11
      const set = sizedVariants(sizes)
      const add = set.add
      const backends: Array<BackendName> = ["memory", "file", "postgres", "sqlite"]
      for (const opened of await openBackends(backends, context, scope)) {
        const name = opened.name
        const executions: Record<number, string> = {}
        for (const n of sizes) executions[n] = await recordExecution(opened.storage, n)
        add(name, `this library, resume, ${opened.description}`, "this", (n) => () => timedResume(opened.storage, executions[n]!))
        add(`${name}-reads`, `this library, the reads of a resume (restore + ledger open), ${opened.description}`, "this", (n) => () =>
          timedReads(opened.storage, executions[n]!))
        if (name !== "postgres" && name !== "sqlite") continue
        // The rows a resume reads: the snapshot and the ledger entries.
        const rows: Record<number, ReadonlyArray<string>> = {}
        for (const n of sizes) {
          const keys = await Effect.runPromise(opened.storage.list(ledgerPrefix(executions[n]!)))
          rows[n] = [snapshotKey(executions[n]!), ...keys]
        }
        // The user's view: the Promise API's resume on its own Postgres storage over the same
        // table, its pool kept open between samples as a serving host's would be. It resumes
        // executions of its own, recorded alike: the two doors word the failure differently, so
        // on one execution each resume would rewrite the failure mark the other left.
        if (name === "postgres" && opened.table !== undefined && context.postgres._tag === "Available") {
          const facadeStorage = Facade.createPostgresStorage({
            url: context.postgres.url,
            table: opened.table,
            idleCloseMs: 600_000
          })
          scope.onClose(() => facadeStorage.close())
          const own: Record<number, string> = {}
          for (const n of sizes) own[n] = await recordExecution(opened.storage, n)
          add("postgres-facade", `the Promise API, await harness.resume() to the result, ${opened.description}`, "this", (n) => () =>
            timedFacadeResume(facadeStorage, own[n]!))
        }
        // Raw baselines over the same rows, through the same driver.
        if (name === "postgres" && opened.table !== undefined) {
          // The storage's own table holds the rows: select them from it.
          const client = await rawPostgres(context, scope, opened.table)
          if (client !== undefined) {
            add("raw-select", "raw SELECT ... WHERE key = ANY($1) of the same rows (@effect/sql-pg)", "baseline", (n) => async () => {
              const start = now()
              const count = await client.selectAny(rows[n]!)
              const ms = now() - start
              if (count !== rows[n]!.length) throw new Error(`raw SELECT found ${count} of ${rows[n]!.length} rows`)
              return ms
            })
          }
        }
        if (name === "sqlite" && opened.path !== undefined) {
          const select = rawSqliteSelect(opened.path, scope)
          add("raw-sqlite-select", "raw SELECT of the same rows in one statement (node:sqlite)", "baseline", (n) => async () => {
            const start = now()
            const count = select(rows[n]!)
            const ms = now() - start
            if (count !== rows[n]!.length) throw new Error(`raw SELECT found ${count} of ${rows[n]!.length} rows`)
            return ms
          })
        }
      }

      // As many files of the same bytes, read raw.
      const rawDir = tempRoot("raw-restore")
      const rawFiles: Record<number, string> = {}
      for (const n of sizes) {
        const dir = Path.join(rawDir, `n${n}`)
        Fs.mkdirSync(dir)
        rawFiles[n] = dir
        for (let i = 0; i <= n; i++) {
          await rawDurableWrite(dir, `entry-${String(i).padStart(8, "0")}`, JSON.stringify({ version: 1, key: `k${i}`, value: stepOutput(i) }))
        }
      }
      add("raw-read", "raw readdir + read and parse of N+1 files of the same size", "baseline", (n) => async () => {
        const start = now()
        const names = await FsPromises.readdir(rawFiles[n]!)
        await Promise.all(names.map(async (name) => JSON.parse(await FsPromises.readFile(Path.join(rawFiles[n]!, name), "utf8"))))
        return now() - start
      })

      // Peers: the latest checkpoint of a thread of N steps.
      for (const { id, peer } of await langGraphPeers(context, scope)) {
        const threads: Record<number, string> = {}
        for (const n of sizes) {
          threads[n] = fresh("thread")
          await peer.fillThread(threads[n], n)
        }
        add(id, `${peer.name}, load latest of a thread of N steps`, "peer", (n) => async () => {
          const { ms, count } = await peer.loadLatest(threads[n]!)
          if (count !== n) throw new Error(`${peer.name} loaded ${count} of ${n} results`)
          return ms
        })
      }
      const workflowRuntime = ManagedRuntime.make(resumeWorkflowLayer)
      scope.onClose(() => workflowRuntime.dispose())
      add("workflow", "effect/workflow, WorkflowEngine.layerMemory: resume of a workflow suspended after N activities", "peer", (n) => () =>
        timedWorkflowResume(workflowRuntime, n))
      notes.push(
        "effect/workflow's in-memory engine keeps its journal in the process, so its resume is of a workflow suspended " +
          "on a durable deferred in the same process (no restart, no reads); it is compared with the whole resume on memory storage."
      )

      context.log(`restore: ${Object.keys(set.variants).length} variants x ${rounds} rounds (+1 warm-up)`)
      const samples = await interleave(set.variants, { rounds, warmup: 1 })
      const figures = set.figures(samples, "ms", (label, n) => `${label}, N = ${n}`)
      const ratios: Array<Ratio> = []
      const push = (r: Ratio | undefined) => r !== undefined && ratios.push(r)
      for (const n of sizes) {
        const at = (id: string) => `${id}@${n}`
        push(ratioOf(figures, samples, `resume, postgres / raw SELECT of the same rows, N = ${n}`, at("postgres"), at("raw-select"), n === 1000 ? 2 : undefined))
        push(ratioOf(figures, samples, `resume through the Promise API, postgres / raw SELECT of the same rows, N = ${n}`, at("postgres-facade"), at("raw-select"), n === 1000 ? 2 : undefined))
        push(ratioOf(figures, samples, `resume reads, postgres / raw SELECT of the same rows, N = ${n}`, at("postgres-reads"), at("raw-select")))
        push(ratioOf(figures, samples, `resume, sqlite / raw SELECT of the same rows, N = ${n}`, at("sqlite"), at("raw-sqlite-select")))
        push(ratioOf(figures, samples, `resume reads, sqlite / raw SELECT of the same rows, N = ${n}`, at("sqlite-reads"), at("raw-sqlite-select")))
        push(ratioOf(figures, samples, `resume, file / raw read of N+1 files, N = ${n}`, at("file"), at("raw-read")))
        push(ratioOf(figures, samples, `resume reads, file / raw read of N+1 files, N = ${n}`, at("file-reads"), at("raw-read")))
        // Restore against restore: what a resume reads against what a LangGraph resume reads.
        push(ratioOf(figures, samples, `restore, memory / LangGraph MemorySaver load, N = ${n}`, at("memory-reads"), at("lg-memory"), 1))
        push(ratioOf(figures, samples, `restore, file / LangGraph SqliteSaver load, N = ${n}`, at("file-reads"), at("lg-sqlite"), 1))
        push(ratioOf(figures, samples, `restore, sqlite / LangGraph SqliteSaver load, N = ${n}`, at("sqlite-reads"), at("lg-sqlite"), 1))
        push(ratioOf(figures, samples, `restore, postgres / LangGraph PostgresSaver load, N = ${n}`, at("postgres-reads"), at("lg-postgres"), 1))
        push(ratioOf(figures, samples, `whole resume, memory / effect/workflow memory resume, N = ${n}`, at("memory"), at("workflow"), 1))
        // The whole resume also replays the steps, re-runs the failing one and saves the snapshot.
        push(ratioOf(figures, samples, `whole resume, memory / LangGraph MemorySaver load, N = ${n}`, at("memory"), at("lg-memory")))
        push(ratioOf(figures, samples, `whole resume, file / LangGraph SqliteSaver load, N = ${n}`, at("file"), at("lg-sqlite")))
        push(ratioOf(figures, samples, `whole resume, sqlite / LangGraph SqliteSaver load, N = ${n}`, at("sqlite"), at("lg-sqlite")))
        push(ratioOf(figures, samples, `whole resume, postgres / LangGraph PostgresSaver load, N = ${n}`, at("postgres"), at("lg-postgres")))
      }

      if (context.postgres._tag === "Available") {
        const proxy = await Pg.countingProxy(context.postgres.url)
        try {
          const table = Pg.freshName("noetic_bench_rt")
          const counted = await Pg.storage(proxy.url, table)
          const trips: Record<number, number> = {}
          const reads: Record<number, number> = {}
          let statements: ReadonlyArray<string> = []
          for (const n of sizes) {
            const executionId = await recordExecution(counted.value, n)
            const harness = await hostOn(counted.value)
            proxy.reset()
            await Effect.runPromiseExit(harness.resume(executionId))
            trips[n] = proxy.roundTrips()
            reads[n] = proxy.statements().filter((text) => /^select/i.test(text)).length
            // A copy: the proxy's list keeps growing until its next reset (the peer's statements below).
            if (n === sizes[sizes.length - 1]) statements = [...proxy.statements()]
          }
          await counted.close()
          // The peer's load, counted the same way.
          const lgSchema = Pg.freshName("noetic_bench_lgrt")
          const lg = await Pg.langGraphSaver(proxy.url, lgSchema)
          const lgTrips: Record<number, number> = {}
          for (const n of sizes) {
            const thread = fresh("thread")
            const peer = Savers.inProcess("PostgresSaver", lg.value)
            await peer.fillThread(thread, n)
            proxy.reset()
            await peer.loadLatest(thread)
            lgTrips[n] = proxy.roundTrips()
          }
          await lg.close()
          await dropPostgres(context.postgres.url, { tables: [table], schemas: [lgSchema] })
          for (let i = 0; i < figures.length; i++) {
            const [id, n] = figures[i]!.id.split("@") as [string, string]
            if (id === "lg-postgres") figures[i] = { ...figures[i]!, detail: { roundTrips: lgTrips[Number(n)] } }
          }
          for (let i = 0; i < figures.length; i++) {
            const [id, n] = figures[i]!.id.split("@") as [string, string]
            if (id === "postgres") figures[i] = { ...figures[i]!, detail: { roundTrips: trips[Number(n)] } }
            if (id === "postgres-reads") figures[i] = { ...figures[i]!, detail: { roundTrips: reads[Number(n)] } }
            if (id === "raw-select") figures[i] = { ...figures[i]!, detail: { roundTrips: 1 } }
          }
          const largest = sizes[sizes.length - 1]!
          notes.push(
            `Round trips of one resume on Postgres (counted on the wire): ${
              sizes.map((n) => `N = ${n}: ${trips[n]} (${reads[n]} reads)`).join(", ")
            }; target at most 2 (reads at N = ${largest}: ${reads[largest]}). On a storage with its own pool the snapshot, the ledger, the failure mark and the list of the execution's streams (ended with the run, which fails at its last step) are read in one statement. It writes nothing: a resume that changed nothing saves no snapshot, and the failure mark the recorded run left already says this failure (the first resume of an execution, or one that fails otherwise, writes it beside that listing). Statements of the N = ${largest} resume: ${
              statements.map((text) => text.slice(0, 70)).join(" | ")
            }.`
          )
        } finally {
          await proxy.close()
        }
      }
      const line = (id: string, name: string, kind: Series["kind"]) => seriesOf(figures, sizes, id, name, kind)
      const series = [
        line("memory-reads", "noetic-effect, memory", "this"),
        line("file-reads", "noetic-effect, file", "this"),
        line("sqlite-reads", "noetic-effect, SQLite", "this"),
        line("postgres-reads", "noetic-effect, Postgres", "this"),
        line("postgres", "whole resume, Postgres", "this"),
        line("postgres-facade", "whole resume through the Promise API, Postgres", "this"),
        line("sqlite", "whole resume, SQLite", "this"),
        line("memory", "whole resume, memory", "this"),
        line("workflow", "effect/workflow resume, memory", "peer"),
        line("lg-memory", "LangGraph MemorySaver", "peer"),
        line("lg-sqlite", "LangGraph SqliteSaver", "peer"),
        line("lg-postgres", "LangGraph PostgresSaver", "peer"),
        line("raw-select", "raw Postgres SELECT", "baseline"),
        line("raw-sqlite-select", "raw SQLite SELECT", "baseline"),
        line("raw-read", "raw file reads", "baseline")
      ].filter((s): s is Series => s !== undefined)
      return { id: "restore", title: restoreCase.title, figures, ratios, skipped, notes, series }
    })
}

/** The restore case. */
export const cases: ReadonlyArray<BenchCase> = [restoreCase]
