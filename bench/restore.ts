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
 */
import { Effect, Exit, Layer, ManagedRuntime, Option, Schema } from "effect"
import { Activity, DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Path from "node:path"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import { snapshotKey } from "../src/schema/CheckpointSnapshot.ts"
import { ledgerPrefix } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { type BackendName, openBackend } from "./backends.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  type Figure,
  interleave,
  now,
  type Ratio,
  ratioOf,
  rawDurableWrite,
  reasonOf,
  type Series,
  type Skipped,
  summarize,
  tempRoot
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

let unique = 0
const fresh = (prefix: string) => `${prefix}-${process.pid}-${unique++}`

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
  run: async (context: BenchContext): Promise<CaseResult> => {
    const sizes = context.quick ? [10, 100] : [10, 100, 1000]
    const rounds = context.quick ? 3 : 11
    const skipped: Array<Skipped> = []
    const notes: Array<string> = []
    const closers: Array<() => Promise<void>> = []
    const variants: Record<string, () => Promise<number>> = {}
    const labels: Record<string, { label: string; kind: Figure["kind"] }> = {}
    const add = (id: string, label: string, kind: Figure["kind"], fn: (n: number) => () => Promise<number>) => {
      labels[id] = { label, kind }
      for (const n of sizes) variants[`${id}@${n}`] = fn(n)
    }
    try {
      let pgRows: Record<number, ReadonlyArray<string>> = {}
      let pgTable: string | undefined
      const backends: Array<BackendName> = ["memory", "file", "postgres", "sqlite"]
      for (const name of backends) {
        const opened = await openBackend(name, context).catch((cause) => ({ skipped: reasonOf(cause) }))
        if ("skipped" in opened) {
          skipped.push({ label: `this library on ${name}`, reason: opened.skipped })
          continue
        }
        closers.push(opened.close)
        const executions: Record<number, string> = {}
        for (const n of sizes) executions[n] = await recordExecution(opened.storage, n)
        if (name === "postgres") {
          const rows: Record<number, ReadonlyArray<string>> = {}
          for (const n of sizes) {
            const keys = await Effect.runPromise(opened.storage.list(ledgerPrefix(executions[n]!)))
            rows[n] = [snapshotKey(executions[n]!), ...keys]
          }
          pgRows = rows
          pgTable = opened.table
        }
        add(name, `this library, resume, ${opened.description}`, "this", (n) => () => timedResume(opened.storage, executions[n]!))
        add(`${name}-reads`, `this library, the reads of a resume (restore + ledger open), ${opened.description}`, "this", (n) => () =>
          timedReads(opened.storage, executions[n]!))
      }

      // Raw baselines over the same rows (Postgres) and as many files of the same bytes.
      if (context.postgres._tag === "Available" && pgTable !== undefined) {
        // The storage's own table holds the rows: select them from it, through the same driver.
        const client = await Pg.raw(context.postgres.url, pgTable)
        closers.push(client.close)
        add("raw-select", "raw SELECT ... WHERE key = ANY($1) of the same rows (@effect/sql-pg)", "baseline", (n) => async () => {
          const start = now()
          const count = await client.value.selectAny(pgRows[n]!)
          const ms = now() - start
          if (count !== pgRows[n]!.length) throw new Error(`raw SELECT found ${count} of ${pgRows[n]!.length} rows`)
          return ms
        })
      } else {
        skipped.push({ label: "raw Postgres SELECT", reason: context.postgres._tag === "Unavailable" ? context.postgres.reason : "no Postgres storage" })
      }
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
      const peers: Array<{ id: string; peer: Savers.SaverPeer }> = [{ id: "lg-memory", peer: Savers.memory() }]
      const plan = Savers.planSqliteSaver()
      if (plan._tag === "Unavailable") skipped.push({ label: "LangGraph SqliteSaver", reason: plan.reason })
      else {
        const saver = await Savers.sqlite(plan, Path.join(tempRoot("lg-sqlite"), "checkpoints.db"))
        closers.push(saver.close)
        notes.push(`LangGraph SqliteSaver runs ${saver.where}.`)
        peers.push({ id: "lg-sqlite", peer: saver })
      }
      let dropSchema: (() => Promise<void>) | undefined
      if (context.postgres._tag === "Available") {
        const schema = Pg.freshName("noetic_bench_lg")
        const scoped = await Pg.langGraphSaver(context.postgres.url, schema)
        const url = context.postgres.url
        dropSchema = async () => {
          const raw = await Pg.raw(url, Pg.freshName("noetic_bench_drop"))
          await raw.value.dropSchema(schema)
          await raw.close()
        }
        closers.push(async () => {
          await scoped.close()
          await dropSchema?.()
        })
        peers.push({ id: "lg-postgres", peer: Savers.inProcess("LangGraph PostgresSaver", scoped.value) })
      } else skipped.push({ label: "LangGraph PostgresSaver", reason: context.postgres.reason })
      for (const { id, peer } of peers) {
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
      closers.push(() => workflowRuntime.dispose())
      add("workflow", "effect/workflow, WorkflowEngine.layerMemory: resume of a workflow suspended after N activities", "peer", (n) => () =>
        timedWorkflowResume(workflowRuntime, n))
      notes.push(
        "effect/workflow's in-memory engine keeps its journal in the process, so its resume is of a workflow suspended " +
          "on a durable deferred in the same process (no restart, no reads); it is compared with the whole resume on memory storage."
      )

      context.log(`restore: ${Object.keys(variants).length} variants x ${rounds} rounds (+1 warm-up)`)
      const samples = await interleave(variants, { rounds, warmup: 1 })
      const figures: Array<Figure> = Object.entries(samples).map(([key, values]) => {
        const [id, n] = key.split("@") as [string, string]
        return { id: key, label: `${labels[id]!.label}, N = ${n}`, kind: labels[id]!.kind, unit: "ms", summary: summarize(values) }
      })
      const ratios: Array<Ratio> = []
      const push = (r: Ratio | undefined) => r !== undefined && ratios.push(r)
      for (const n of sizes) {
        const at = (id: string) => `${id}@${n}`
        push(ratioOf(figures, samples, `resume, postgres / raw SELECT of the same rows, N = ${n}`, at("postgres"), at("raw-select"), n === 1000 ? 2 : undefined))
        push(ratioOf(figures, samples, `resume reads, postgres / raw SELECT of the same rows, N = ${n}`, at("postgres-reads"), at("raw-select")))
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
            if (n === sizes[sizes.length - 1]) statements = proxy.statements()
          }
          await counted.close()
          const raw = await Pg.raw(context.postgres.url, Pg.freshName("noetic_bench_drop"))
          await raw.value.dropTables([table])
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
          await raw.value.dropSchema(lgSchema)
          await raw.close()
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
            }; target at most 2 (reads at N = ${largest}: ${reads[largest]}). The writes are the resumed run's own snapshot saves. Statements of the N = ${largest} resume: ${
              statements.map((text) => text.slice(0, 70)).join(" | ")
            }.`
          )
        } finally {
          await proxy.close()
        }
      }
      const seriesOf = (id: string, name: string, kind: Series["kind"]): Series | undefined =>
        figures.some((f) => f.id === `${id}@${sizes[0]}`)
          ? { name, kind, points: sizes.map((n) => ({ x: n, figure: `${id}@${n}` })) }
          : undefined
      const series = [
        seriesOf("memory-reads", "noetic-effect, memory", "this"),
        seriesOf("file-reads", "noetic-effect, file", "this"),
        seriesOf("sqlite-reads", "noetic-effect, SQLite", "this"),
        seriesOf("postgres-reads", "noetic-effect, Postgres", "this"),
        seriesOf("postgres", "whole resume, Postgres", "this"),
        seriesOf("memory", "whole resume, memory", "this"),
        seriesOf("workflow", "effect/workflow resume, memory", "peer"),
        seriesOf("lg-memory", "LangGraph MemorySaver", "peer"),
        seriesOf("lg-sqlite", "LangGraph SqliteSaver", "peer"),
        seriesOf("lg-postgres", "LangGraph PostgresSaver", "peer"),
        seriesOf("raw-select", "raw Postgres SELECT", "baseline"),
        seriesOf("raw-read", "raw file reads", "baseline")
      ].filter((s): s is Series => s !== undefined)
      return { id: "restore", title: restoreCase.title, figures, ratios, skipped, notes, series }
    } finally {
      for (const close of closers.reverse()) await close().catch(() => {})
    }
  }
}

/** The restore case. */
export const cases: ReadonlyArray<BenchCase> = [restoreCase]
