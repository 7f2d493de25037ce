/**
 * The inspector's executions list at 10,000 executions (`npm run bench:inspector`):
 * one real run's records copied under 10,000 ids on SQLite and on file storage, then
 * - `full read`: what `executions list` reads (every snapshot, lease and newest record);
 * - `first page, cold`: the inspector's first list request (the same reads, once);
 * - `first page, warm`: a later request when nothing changed (two key listings, the
 *   page's 50 executions read again);
 * - `after one new run`: a request after one more execution was recorded.
 * Each is the median of 5, as wall time and this process's CPU time. On PostgreSQL too
 * when NOETIC_PG_URL is set (a fresh table, dropped after); `BENCH_STORAGES` picks some. Figures go to docs/inspector.md#how-fast.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Redacted, type Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Executions from "../src/cli/Executions.ts"
import { silent } from "../src/cli/ReadModel.ts"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as ExecutionIndex from "../src/inspector/ExecutionIndex.ts"
import * as Views from "../src/inspector/Views.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"

const COUNT = Number(process.env.BENCH_EXECUTIONS ?? 10_000)

const pipeline = runCode("pipeline", (url: string, ctx) =>
  Effect.gen(function*() {
    const page = yield* ctx.run(runCode("fetch", (u: string) => Effect.succeed({ url: u, body: "x".repeat(200) })), url)
    const words = yield* ctx.run(runCode("parse", (p: { readonly body: string }) => Effect.succeed(p.body.length)), page)
    return { words }
  }))

const run = (storage: StorageAdapterShape, id: string) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    const harness = yield* AgentHarness.make({ name: "bench", agentGraph: pipeline }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
    yield* harness.execute("https://example.com", { executionId: id, threadId: `thread-${id}` })
  })

/** One real run, its records copied under `COUNT` ids. */
const seed = (storage: StorageAdapterShape) =>
  Effect.gen(function*() {
    yield* run(storage, "template")
    const records = [
      ...(yield* storage.scan("execution:template:")),
      ...(yield* storage.scan("checkpoints:template"))
    ]
    for (let i = 0; i < COUNT; i++) {
      const id = `exec-${String(i).padStart(6, "0")}`
      yield* Effect.forEach(records, ([key, value]) =>
        storage.set(key.replace("template", id), JSON.parse(JSON.stringify(value).replaceAll("\"template\"", JSON.stringify(id)))), {
        concurrency: 8,
        discard: true
      })
    }
  })

const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** CPU time of this process per measurement, beside the wall time (the machine may be shared). */
const cpuOf = new Map<Array<number>, Array<number>>()

const time = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    const cpu = process.cpuUsage()
    yield* effect
    const used = process.cpuUsage(cpu)
    lastCpu = (used.user + used.system) / 1000
    return performance.now() - start
  })
let lastCpu = 0
const record = (into: Array<number>, ms: number) => {
  into.push(ms)
  let cpu = cpuOf.get(into)
  if (cpu === undefined) cpuOf.set(into, cpu = [])
  cpu.push(lastCpu)
}

const measure = (name: string, open: (dir: string) => Effect.Effect<StorageAdapterShape, unknown, Scope.Scope>) =>
  Effect.scoped(Effect.gen(function*() {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-inspector-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
    const storage = yield* open(dir)
    const seeding = yield* time(seed(storage))
    const query = Views.parseListQuery(new URLSearchParams())
    const pageOf = (rows: ReadonlyArray<Executions.ExecutionRow>) => Views.page(rows, query).rows.map((row) => row.executionId)
    const full: Array<number> = []
    const cold: Array<number> = []
    const warm: Array<number> = []
    const afterRun: Array<number> = []
    for (let round = 0; round < 5; round++) {
      record(full, yield* time(Executions.listExecutions(storage, silent, Date.now())))
      const index = yield* ExecutionIndex.make(storage)
      record(cold, yield* time(index.refresh(Date.now(), pageOf)))
      record(warm, yield* time(index.refresh(Date.now(), pageOf)))
      yield* run(storage, `new-${round}`)
      record(afterRun, yield* time(index.refresh(Date.now(), pageOf)))
    }
    const ms = (value: number) => `${value.toFixed(0)} ms`
    const both = (values: Array<number>) => `${ms(median(values))} (CPU ${ms(median(cpuOf.get(values)!))})`
    console.log(`${name}, ${COUNT} executions (seeded in ${ms(seeding)}; wall time, and this process's CPU time):`)
    console.log(`  full read (executions list)  ${both(full)}`)
    console.log(`  first page, cold             ${both(cold)}`)
    console.log(`  first page, warm             ${both(warm)}`)
    console.log(`  after one new run            ${both(afterRun)}`)
  }))

/** Which storages to measure: `BENCH_STORAGES=sqlite,file,postgres` (default all; postgres needs NOETIC_PG_URL). */
const wanted = new Set((process.env.BENCH_STORAGES ?? (process.env.BENCH_SQLITE_ONLY !== undefined ? "sqlite" : "sqlite,file,postgres")).split(","))

await Effect.runPromise(Effect.gen(function*() {
  if (wanted.has("sqlite")) yield* measure("SQLite", (dir) => SqliteStorage.make({ path: Path.join(dir, "checkpoints.db") }))
  if (wanted.has("file")) yield* measure("file storage", (dir) => FileStorage.make({ root: dir }))
  const pg = process.env.NOETIC_PG_URL
  if (pg !== undefined && wanted.has("postgres")) {
    // A fresh table per run, dropped afterwards.
    const table = `bench_inspector_${process.pid}`
    yield* measure("PostgreSQL", () =>
      Effect.gen(function*() {
        const client = yield* PgClient.make({ url: Redacted.make(pg) }).pipe(
          Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make)
        )
        yield* Effect.addFinalizer(() => Effect.ignore(client`DROP TABLE IF EXISTS ${client(table)}`))
        return yield* PostgresStorage.make({ table }).pipe(Effect.provideService(SqlClient.SqlClient, client))
      }))
  }
}))
