/**
 * The inspector's executions list at 10,000 executions (`npm run bench:inspector`):
 * one real run's records copied under 10,000 ids on SQLite and on file storage, then
 * - `full read`: what `executions list` reads (every snapshot, lease and newest record);
 * - `first page, cold`: the inspector's first list request (the same reads, once);
 * - `first page, warm`: a later request when nothing changed (two key listings, the
 *   page's 50 executions read again);
 * - `after one new run`: a request after one more execution was recorded.
 * Each is the median of 5. On PostgreSQL too when NOETIC_PG_URL is set (a fresh table,
 * dropped after). Figures go to docs/inspector.md#how-fast.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Layer, Redacted, type Scope } from "effect"
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

const time = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    yield* effect
    return performance.now() - start
  })

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
      full.push(yield* time(Executions.listExecutions(storage, silent, Date.now())))
      const index = yield* ExecutionIndex.make(storage)
      cold.push(yield* time(index.refresh(Date.now(), pageOf)))
      warm.push(yield* time(index.refresh(Date.now(), pageOf)))
      yield* run(storage, `new-${round}`)
      afterRun.push(yield* time(index.refresh(Date.now(), pageOf)))
    }
    const ms = (value: number) => `${value.toFixed(0)} ms`
    console.log(`${name}, ${COUNT} executions (seeded in ${ms(seeding)}):`)
    console.log(`  full read (executions list)  ${ms(median(full))}`)
    console.log(`  first page, cold             ${ms(median(cold))}`)
    console.log(`  first page, warm             ${ms(median(warm))}`)
    console.log(`  after one new run            ${ms(median(afterRun))}`)
  }))

await Effect.runPromise(Effect.gen(function*() {
  yield* measure("SQLite", (dir) => SqliteStorage.make({ path: Path.join(dir, "checkpoints.db") }))
  if (process.env.BENCH_SQLITE_ONLY === undefined) yield* measure("file storage", (dir) => FileStorage.make({ root: dir }))
  const pg = process.env.NOETIC_PG_URL
  if (pg !== undefined && process.env.BENCH_SQLITE_ONLY === undefined) {
    // A fresh table per run, dropped afterwards.
    const table = `bench_inspector_${process.pid}`
    yield* measure("PostgreSQL", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
        return yield* PostgresStorage.make({ table })
      }).pipe(Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(pg) })))))
  }
}))
