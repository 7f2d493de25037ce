/**
 * Per-step cost of a durable run of N `runCode` steps (N = 10, 100, 1,000) on each
 * storage backend, against, in the same interleaved rounds:
 * - raw baselines: N fsync'd writes (open, write, fsync, rename, fsync dir) of the
 *   bytes the file storage writes per step, and N single-row upserts of them through
 *   the same Postgres driver;
 * - peers: `effect/workflow` on `WorkflowEngine.layerMemory` (a workflow of N
 *   activities), and LangGraph's MemorySaver, SqliteSaver and PostgresSaver saving a
 *   checkpoint of the run's state after each step.
 *
 * Every step does the same work and returns the same output on every side. The figure
 * is microseconds per step: a run's time over N. Small N are repeated within a round
 * so every sample covers a comparable number of steps. Round trips per step are
 * counted on Postgres in a separate, untimed pass through the counting proxy.
 */
import { Effect, Layer, ManagedRuntime, Schema } from "effect"
import { Activity, Workflow, WorkflowEngine } from "effect/workflow"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import { LEDGER_ENTRY_VERSION, ledgerKey } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { type BackendName, langGraphPeers, openBackends, rawPostgres } from "./backends.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  type Figure,
  fresh,
  interleave,
  now,
  openAppendLog,
  type Ratio,
  ratioOf,
  rawDurableWrite,
  round,
  type Series,
  seriesOf,
  sizedVariants,
  summarize,
  tempRoot,
  withCaseScope
} from "./harness.ts"
import { stepOutput } from "./peers/langgraphOps.mjs"
import * as Savers from "./peers/savers.ts"
import * as Pg from "./postgres.ts"

const leaf = runCode("leaf", (i: number) => Effect.sync(() => stepOutput(i)))

/** Step durations of the latest run, in milliseconds, for the early/late window figures. */
let lastStepTimes: Array<number> = []

const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    let acc = 0
    for (let i = 0; i < steps; i++) {
      const start = now()
      acc += (yield* ctx.run(leaf, i)).value
      times.push(now() - start)
    }
    lastStepTimes = times
    return acc
  }))

/** A harness on `storage` (none: zero-config, nothing durable). */
const harnessOn = (storage: StorageAdapterShape | undefined) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    if (storage === undefined) return yield* AgentHarness.make({ name: "bench", agentGraph: root })
    const store = yield* CheckpointStore.makeWith(storage)
    return yield* AgentHarness.make({ name: "bench", agentGraph: root }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })))

const BenchWorkflow = Workflow.make("bench", {
  payload: { steps: Schema.Number, id: Schema.String },
  success: Schema.Number,
  idempotencyKey: (payload) => payload.id
})

const workflowLayer = BenchWorkflow.toLayer(({ steps }) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) {
      acc += (yield* Activity.make({
        name: `leaf-${i}`,
        success: Schema.Struct({ step: Schema.Number, value: Schema.Number }),
        execute: Effect.sync(() => stepOutput(i))
      })).value
    }
    return acc
  })
).pipe(Layer.provideMerge(WorkflowEngine.layerMemory))

/** The bytes the file storage writes for step `i`'s ledger record. */
const ledgerRecordText = (executionId: string, i: number) => {
  const key = ledgerKey(executionId, i)
  return JSON.stringify({
    version: 1,
    key,
    value: {
      _tag: "StepRecorded",
      version: LEDGER_ENTRY_VERSION,
      path: `/root#0/leaf#${i}`,
      stepId: "leaf",
      kind: "runCode",
      output: { _tag: "Json", value: stepOutput(i) }
    }
  })
}

const THIS_BACKENDS: ReadonlyArray<BackendName> = ["memory", "file", "postgres", "sqlite"]

/** Runs `fn` `repeats` times; microseconds per step over all of them. */
const perStep = async (steps: number, repeats: number, fn: (repeat: number) => Promise<number>) => {
  let ms = 0
  for (let r = 0; r < repeats; r++) ms += await fn(r)
  return (ms * 1000) / (steps * repeats)
}

const perStepCase: BenchCase = {
  id: "steps",
  title: "Per-step cost of a durable run of N runCode steps (µs per step)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const { skipped, notes } = scope
      const sizes = context.quick ? [10, 100] : [10, 100, 1000]
      const rounds = context.quick ? 2 : 7
      // Steps per sample at least: small runs repeat so a sample is not a few microseconds.
      const budget = context.quick ? 100 : 200
      const repeatsOf = (n: number) => Math.max(1, Math.floor(budget / n))
      const set = sizedVariants(sizes)
      const add = (id: string, label: string, kind: Figure["kind"], fn: (n: number) => (repeat: number) => Promise<number>) =>
        set.add(id, label, kind, (n) => () => perStep(n, repeatsOf(n), fn(n)))
      const windows: Record<string, { early: Array<number>; late: Array<number>; ratios: Array<number> }> = {}
      const timedExecute = (id: string, harness: Awaited<ReturnType<typeof harnessOn>>) => (n: number) => async () => {
        const start = now()
        await Effect.runPromise(harness.execute(n, { executionId: fresh(id) }))
        const ms = now() - start
        if (n >= 1000) {
          const window = windows[id] ??= { early: [], late: [], ratios: [] }
          const early = lastStepTimes.slice(10, 20)
          const late = lastStepTimes.slice(n - 10, n)
          window.early.push(...early)
          window.late.push(...late)
          window.ratios.push(summarize(late).median / summarize(early).median)
        }
        return ms
      }

      // This library: zero-config, then each durable backend.
      add("zero", "this library, zero-config (no store, nothing durable)", "this", timedExecute("zero", await harnessOn(undefined)))
      for (const opened of await openBackends(THIS_BACKENDS, context, scope)) {
        add(opened.name, `this library, ${opened.description}`, "this", timedExecute(opened.name, await harnessOn(opened.storage)))
      }

      // Raw baselines.
      const rawDir = tempRoot("raw-fsync")
      add("raw-fsync", "raw fsync'd write of the same bytes per step (open, write, fsync, rename, fsync dir)", "baseline", (n) => async () => {
        const id = fresh("raw")
        const texts = Array.from({ length: n }, (_, i) => ledgerRecordText(id, i))
        const start = now()
        for (let i = 0; i < n; i++) await rawDurableWrite(rawDir, `${id}-${i}`, texts[i]!)
        return now() - start
      })
      const log = openAppendLog(tempRoot("raw-append"))
      scope.onClose(async () => log.close())
      add("raw-append", "raw write + fdatasync append of the same bytes per step to one open file", "baseline", (n) => async () => {
        const text = ledgerRecordText(fresh("raw"), n) + "\n"
        return log.append(text, n)
      })
      const rawPg = await rawPostgres(context, scope)
      if (rawPg !== undefined) {
        add("raw-upsert", "raw single-row upsert of the same bytes per step (@effect/sql-pg)", "baseline", (n) => async () => {
          const id = fresh("raw")
          const rows = Array.from({ length: n }, (_, i) => [ledgerKey(id, i), ledgerRecordText(id, i)] as const)
          const start = now()
          for (const [key, value] of rows) await rawPg.upsert(key, value)
          return now() - start
        })
      }

      // Peers.
      // One engine for every run, as an application keeps one.
      const workflowRuntime = ManagedRuntime.make(workflowLayer)
      scope.onClose(() => workflowRuntime.dispose())
      add("workflow", "effect/workflow, WorkflowEngine.layerMemory (N activities)", "peer", (n) => async () => {
        const start = now()
        await workflowRuntime.runPromise(BenchWorkflow.execute({ steps: n, id: fresh("wf") }))
        return now() - start
      })
      for (const { id, peer } of await langGraphPeers(context, scope)) {
        add(id, id === "lg-sqlite" ? `${peer.name} (synchronous=FULL)` : peer.name, "peer", (n) => () => peer.runSteps(fresh("t"), n))
      }

      context.log(`steps: ${Object.keys(set.variants).length} variants x ${rounds} rounds (+1 warm-up)`)
      const samples = await interleave(set.variants, { rounds, warmup: 1 })

      const figures = set.figures(samples, "µs/step", (label, n) => `${label}, N = ${n}`, (_, n) => ({
        steps: Number(n),
        repeatsPerSample: repeatsOf(Number(n))
      }))
      for (const [id, window] of Object.entries(windows)) {
        const early = summarize(window.early.map((ms) => ms * 1000))
        const late = summarize(window.late.map((ms) => ms * 1000))
        const label = set.labels[id]!.label
        figures.push({ id: `${id}:steps10-19`, label: `${label}: steps 10-19 of a 1,000-step run`, kind: "this", unit: "µs/step", summary: early })
        figures.push({ id: `${id}:steps990-999`, label: `${label}: steps 990-999 of a 1,000-step run`, kind: "this", unit: "µs/step", summary: late })
      }

      const ratios: Array<Ratio> = []
      const push = (ratio: Ratio | undefined) => {
        if (ratio !== undefined) ratios.push(ratio)
      }
      for (const n of sizes) {
        const at = (id: string) => `${id}@${n}`
        push(ratioOf(figures, samples, `file / raw fsync'd write, N = ${n}`, at("file"), at("raw-fsync"), 1.5))
        push(ratioOf(figures, samples, `sqlite / raw fsync'd write, N = ${n}`, at("sqlite"), at("raw-fsync")))
        push(ratioOf(figures, samples, `sqlite / raw write + fdatasync append, N = ${n}`, at("sqlite"), at("raw-append")))
        push(ratioOf(figures, samples, `postgres / raw upsert, N = ${n}`, at("postgres"), at("raw-upsert"), 1.5))
        push(ratioOf(figures, samples, `memory / effect/workflow memory, N = ${n}`, at("memory"), at("workflow"), 1))
        push(ratioOf(figures, samples, `zero-config / effect/workflow memory, N = ${n}`, at("zero"), at("workflow")))
        push(ratioOf(figures, samples, `memory / LangGraph MemorySaver, N = ${n}`, at("memory"), at("lg-memory"), 1))
        push(ratioOf(figures, samples, `file / LangGraph SqliteSaver, N = ${n}`, at("file"), at("lg-sqlite"), 1))
        push(ratioOf(figures, samples, `sqlite / LangGraph SqliteSaver, N = ${n}`, at("sqlite"), at("lg-sqlite"), 1))
        push(ratioOf(figures, samples, `postgres / LangGraph PostgresSaver, N = ${n}`, at("postgres"), at("lg-postgres"), 1))
      }
      const largest = sizes[sizes.length - 1]!
      // Flat in run length: the target is on file storage.
      for (const id of ["memory", "file", "postgres", "sqlite"]) {
        push(ratioOf(figures, samples, `${id}: per step at N = ${largest} / at N = 10`, `${id}@${largest}`, `${id}@10`, id === "file" ? 1.2 : undefined))
      }
      for (const [id, window] of Object.entries(windows)) {
        const summary = summarize(window.ratios)
        ratios.push({
          label: `${id}: steps 990-999 / steps 10-19 of one 1,000-step run (per-run medians)`,
          of: `${id}:steps990-999`,
          to: `${id}:steps10-19`,
          summary,
          ...(id === "file" ? { targetAtMost: 1.2, met: summary.median <= 1.2 } : {})
        })
      }

      // Round trips per step on Postgres, untimed, through the counting proxy.
      if (context.postgres._tag === "Available") {
        const countN = 100
        const proxy = await Pg.countingProxy(context.postgres.url)
        try {
          const table = Pg.freshName("noetic_bench_rt")
          const counted = await Pg.storage(proxy.url, table)
          const harness = await harnessOn(counted.value)
          proxy.reset()
          await Effect.runPromise(harness.execute(countN, { executionId: fresh("rt") }))
          const ours = proxy.roundTrips() / countN
          await counted.close()
          await rawPg?.dropTables([table])
          const schema = Pg.freshName("noetic_bench_lgrt")
          const lg = await Pg.langGraphSaver(proxy.url, schema)
          proxy.reset()
          await Savers.inProcess("PostgresSaver", lg.value).runSteps(fresh("t"), countN)
          const theirs = proxy.roundTrips() / countN
          await lg.close()
          await rawPg?.dropSchema(schema)
          const rawCounted = await Pg.raw(proxy.url, Pg.freshName("noetic_bench_rtraw"))
          proxy.reset()
          await rawCounted.value.upsert("k", "v")
          const rawTrips = proxy.roundTrips()
          await rawCounted.close()
          notes.push(
            `Round trips per step on Postgres (N = ${countN}, counted on the wire): this library ${round(ours)}, ` +
              `LangGraph PostgresSaver ${round(theirs)}, raw upsert ${rawTrips}.`
          )
          const detail = (id: string, trips: number) => {
            for (let i = 0; i < figures.length; i++) {
              if (figures[i]!.id.startsWith(`${id}@`)) {
                figures[i] = { ...figures[i]!, detail: { ...figures[i]!.detail, roundTripsPerStep: round(trips) } }
              }
            }
          }
          detail("postgres", ours)
          detail("lg-postgres", theirs)
          detail("raw-upsert", rawTrips)
        } finally {
          await proxy.close()
        }
      }

      const line = (id: string, name: string, kind: Series["kind"]) => seriesOf(figures, sizes, id, name, kind)
      const series = [
        line("zero", "noetic-effect zero-config (no store)", "this"),
        line("memory", "noetic-effect, memory", "this"),
        line("file", "noetic-effect, file", "this"),
        line("sqlite", "noetic-effect, SQLite", "this"),
        line("postgres", "noetic-effect, Postgres", "this"),
        line("workflow", "effect/workflow, memory", "peer"),
        line("lg-memory", "LangGraph MemorySaver", "peer"),
        line("lg-sqlite", "LangGraph SqliteSaver", "peer"),
        line("lg-postgres", "LangGraph PostgresSaver", "peer"),
        line("raw-fsync", "raw fsync'd write", "baseline"),
        line("raw-append", "raw write + fdatasync append", "baseline"),
        line("raw-upsert", "raw Postgres upsert", "baseline")
      ].filter((s): s is Series => s !== undefined)

      notes.push(
        "Each step returns the same small object on every side. LangGraph savers put one checkpoint per step holding " +
          "the outputs so far in one channel (only that channel gets a new version), the least a LangGraph graph " +
          "writes per superstep; it does not call putWrites."
      )
      return { id: "steps", title: perStepCase.title, figures, ratios, skipped, notes, series }
    })
}

/** The per-step cost case. */
export const cases: ReadonlyArray<BenchCase> = [perStepCase]
