/**
 * SQLite storage (`node:sqlite`, WAL, `synchronous=FULL`, group commit), every ratio
 * measured in the same interleaved rounds:
 * - `sqlite:set`: `set` of a ledger-sized record against the physical floor of a
 *   durable append, one `write` + `fdatasync` of the same bytes on an open file;
 * - `sqlite:steps`: a durable step through the harness on SQLite against the same
 *   floor, at the 10th and the 1,000th step of one run (and the two against each other);
 * - `sqlite:restore`: a step-ledger restore of 1,000 and 10,000 entries against a raw
 *   `SELECT` of the same rows through the same driver;
 * - `sqlite:concurrent`: 8 executions running durable steps at once on one database
 *   against the same 8 in sequence (steps per second: group commit shares one fsync);
 * - `sqlite:writesOffTheLoop`: how long a commit blocks the event loop, and a commit
 *   through a worker thread against the same commit on the loop;
 * - `sqlite:effectSql`: Effect's SQL client for SQLite (`@effect/sql-sqlite-node`), when
 *   it loads, against the storage.
 * The durable IPC figures on SQLite are in bench/ipc.ts, beside file storage.
 *
 * `npm run bench:sqlite` runs these cases alone (as `npm run bench -- sqlite`).
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { spawnSync } from "node:child_process"
import { register } from "node:module"
import * as Path from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { DatabaseSync } from "node:sqlite"
import { Worker } from "node:worker_threads"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  figureOf,
  fresh,
  interleave,
  now,
  openAppendLog,
  present,
  ratioOf,
  round,
  summarize,
  tempRoot,
  withCaseScope
} from "./harness.ts"
import * as Pg from "./postgres.ts"

/** A record the size of a ledger entry of a small step output. */
const ledgerRecord = (seq: number) => ({
  version: 1,
  seq,
  path: `/research-agent#0/step#${seq}`,
  stepId: "summarise",
  kind: "runCode",
  output: { text: "summary of the findings for the topic at hand, a sentence or two long", tokens: 42, seq }
})
const ledgerKey = (seq: number) => `execution:bench:ledger:${String(seq).padStart(16, "0")}`
const recordText = JSON.stringify(ledgerRecord(123))

const median = (samples: ReadonlyArray<number>) => summarize(samples).median
/** A SQLite storage on a fresh database, open until the case ends. */
const openSqlite = async (onClose: (close: () => Promise<void>) => void, name = "bench.db") => {
  const path = Path.join(tempRoot("sqlite"), name)
  const scoped = await Pg.openScoped(SqliteStorage.make({ path }).pipe(Effect.orDie))
  onClose(scoped.close)
  return { path, storage: scoped.value }
}

/** `count` sets of ledger records, one after another; milliseconds each. */
const setTimes = (storage: StorageAdapterShape, count: number, offset: number) =>
  Effect.runPromise(Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < count; i++) {
      const start = now()
      yield* storage.set(ledgerKey(offset + i), ledgerRecord(offset + i))
      samples.push(now() - start)
    }
    return samples
  }).pipe(Effect.orDie))

/** A root composite running `steps` durable leaf steps in sequence, stamping each. */
const timedGraph = (steps: number, stamps: Array<number>) =>
  runCode("root", (_: void, ctx) =>
    Effect.gen(function*() {
      let acc = 0
      for (let i = 0; i < steps; i++) {
        acc += yield* ctx.run(runCode("leaf", (n: number) => Effect.sync(() => (n * 31 + 7) % 1_000_003)), i)
        stamps.push(now())
      }
      return acc
    }))

/** Runs one execution of `steps` durable steps; the time each step took, in milliseconds. */
const stepTimes = (storage: StorageAdapterShape, steps: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const stamps: Array<number> = []
    const harness = yield* AgentHarness.make({ name: "bench", agentGraph: timedGraph(steps, stamps) }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, yield* CheckpointStore.makeWith(storage))
    )
    stamps.push(now())
    yield* harness.execute(undefined, { executionId: fresh("steps") })
    return stamps.slice(1).map((stamp, i) => stamp - stamps[i]!)
  })).pipe(Effect.orDie))

const setCase: BenchCase = {
  id: "sqlite:set",
  title: "SQLite storage: set of a ledger-sized record against raw write + fdatasync of the same bytes (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const count = context.quick ? 20 : 100
      const rounds = context.quick ? 2 : 7
      const { storage } = await openSqlite(scope.onClose)
      const files = await Effect.runPromise(FileStorage.make({ root: tempRoot("sqlite-vs-file") }))
      const log = openAppendLog(tempRoot("sqlite-floor"))
      scope.onClose(async () => log.close())
      // The storage grows a fresh database's log to its steady size when it opens it, so
      // no commit grows the file; the first 300 sets are still reported on their own,
      // and the compared rounds run after 1,200 more (a log SQLite has checkpointed and
      // rewrites in place, as for any database in use).
      const freshLog = await setTimes(storage, context.quick ? 50 : 300, 1_000_000)
      await setTimes(storage, context.quick ? 100 : 1_200, 2_000_000)
      let offset = 0
      const perOp = (samples: ReadonlyArray<number>) => samples.reduce((a, b) => a + b, 0) / samples.length
      const samples: Record<string, Array<number>> = await interleave({
        floor: async () => log.append(recordText, count) / count,
        sqlite: async () => perOp(await setTimes(storage, count, (offset += count))),
        file: async () => perOp(await setTimes(files, Math.max(5, count / 5), (offset += count)))
      }, { rounds, warmup: 1 })
      samples["sqlite-fresh-log"] = freshLog
      const detail = { recordBytes: Buffer.byteLength(recordText), opsPerSample: count }
      const figures = [
        figureOf(samples, "floor", "raw write + fdatasync append of the same bytes to one open file", "baseline", "ms", detail),
        figureOf(samples, "sqlite", "SQLite storage set (database in use: log checkpointed)", "this", "ms", detail),
        figureOf(samples, "file", "file storage set", "this", "ms", { ...detail, opsPerSample: Math.max(5, count / 5) }),
        figureOf(samples, "sqlite-fresh-log", "SQLite storage set on a fresh database (its first 300 sets)", "this", "ms")
      ]
      return {
        id: "sqlite:set",
        title: setCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, "SQLite set / raw write + fdatasync append", "sqlite", "floor", 1.5),
          ratioOf(figures, samples, "file storage set / raw write + fdatasync append", "file", "floor")
        ]),
        skipped: scope.skipped,
        notes: ["A sample is the mean over its operations; the fresh-database figure is over single sets, before the compared rounds."]
      }
    })
}

const stepsCase: BenchCase = {
  id: "sqlite:steps",
  title: "SQLite storage: a durable step through the harness at the 10th and the 1,000th step, against raw write + fdatasync (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      // 1,000 steps: the default retention cap, so no step of the run evicts an entry
      // (a step past the cap also deletes the oldest entry; `steps` measures runs at the cap).
      const steps = context.quick ? 110 : 1_000
      const rounds = context.quick ? 2 : 5
      const { storage } = await openSqlite(scope.onClose)
      const memory = await Effect.runPromise(makeMemory)
      const log = openAppendLog(tempRoot("sqlite-floor"))
      scope.onClose(async () => log.close())
      // Past the log's first checkpoint, as a database in use.
      await setTimes(storage, context.quick ? 100 : 1_200, 2_000_000)
      const early = (times: ReadonlyArray<number>) => median(times.slice(5, 25))
      const late = (times: ReadonlyArray<number>) => median(times.slice(steps - 20, steps))
      const side: Record<string, Array<number>> = { "sqlite:late": [], "memory:late": [] }
      const samples: Record<string, Array<number>> = await interleave({
        floor: async () => {
          let total = 0
          for (let i = 0; i < 100; i++) total += log.append(recordText, 1)
          return total / 100
        },
        sqlite: async () => {
          const times = await stepTimes(storage, steps)
          side["sqlite:late"]!.push(late(times))
          return early(times)
        },
        memory: async () => {
          const times = await stepTimes(memory, steps)
          side["memory:late"]!.push(late(times))
          return early(times)
        }
      }, { rounds, warmup: 1 })
      for (const [id, values] of Object.entries(side)) samples[id] = values.slice(1)
      const lateStep = steps
      const figures = [
        figureOf(samples, "floor", "raw write + fdatasync append of a ledger-sized record to one open file", "baseline", "ms"),
        figureOf(samples, "sqlite", `SQLite storage: a durable step, steps 5-25 of a ${steps}-step run (median)`, "this", "ms"),
        figureOf(samples, "sqlite:late", `SQLite storage: a durable step, steps ${steps - 20}-${steps} (median)`, "this", "ms"),
        figureOf(samples, "memory", "memory storage (the harness's own work): steps 5-25 (median)", "this", "ms"),
        figureOf(samples, "memory:late", `memory storage: steps ${steps - 20}-${steps} (median)`, "this", "ms")
      ]
      return {
        id: "sqlite:steps",
        title: stepsCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, "SQLite durable step (10th) / raw write + fdatasync", "sqlite", "floor", 1.5),
          ratioOf(figures, samples, `SQLite durable step (${lateStep}th) / raw write + fdatasync`, "sqlite:late", "floor", 1.5),
          ratioOf(figures, samples, `SQLite durable step, ${lateStep}th / 10th (flat in run length)`, "sqlite:late", "sqlite", 1.2)
        ]),
        skipped: scope.skipped,
        notes: [
          "A sample of a step is the median step time of a window of one run; the floor is the mean of 100 appends in the same round."
        ]
      }
    })
}

const restoreCase: BenchCase = {
  id: "sqlite:restore",
  title: "SQLite storage: step-ledger restore against a raw SELECT of the same rows through node:sqlite (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const sizes = context.quick ? [1_000] : [1_000, 10_000]
      const rounds = context.quick ? 2 : 7
      const variants: Record<string, () => Promise<number>> = {}
      const retention = { maxEntries: Infinity }
      for (const entries of sizes) {
        const { path, storage } = await openSqlite(scope.onClose, `ledger-${entries}.db`)
        const store = await Effect.runPromise(CheckpointStore.makeWith(storage))
        await Effect.runPromise(Effect.gen(function*() {
          const ledger = yield* StepLedger.makeWith(store, { retention })
          const writing = yield* ledger.open("restore")
          // Recorded in bursts (each burst one transaction), so setting up 10,000 is quick.
          for (let i = 0; i < entries; i += 100) {
            yield* Effect.forEach(
              Array.from({ length: Math.min(100, entries - i) }, (_, j) => i + j),
              (n) => writing.record(`/root#0/step#${n}`, { stepId: "summarise", kind: "runCode" }, ledgerRecord(n).output),
              { concurrency: "unbounded", discard: true }
            )
          }
        }).pipe(Effect.scoped, Effect.orDie))
        const prefix = "execution:restore:ledger:"
        const db = new DatabaseSync(path, { readOnly: true })
        scope.onClose(async () => db.close())
        // The plain range SELECT of the rows, keys and values as stored (the storage's own
        // statement reads a key as the hex of its bytes past the prefix).
        const select = db.prepare(
          `SELECT key, value FROM ${SqliteStorage.TABLE} WHERE key >= ? AND key < ? ORDER BY key`
        )
        // Keys are stored as UTF-16BE BLOBs: the prefix's range is [prefix, prefix with its last byte + 1).
        const lower = Buffer.from(prefix, "utf16le").swap16()
        const upper = Buffer.from(lower)
        upper[upper.length - 1]!++
        variants[`restore@${entries}`] = async () => {
          const start = now()
          const loaded = await Effect.runPromise(Effect.gen(function*() {
            const ledger = yield* StepLedger.makeWith(store, { retention })
            return yield* ledger.open("restore")
          }).pipe(Effect.scoped, Effect.orDie))
          const ms = now() - start
          const count = (await Effect.runPromise(loaded.entries)).length
          if (count !== entries) throw new Error(`the restore found ${count} of ${entries} entries`)
          return ms
        }
        variants[`scan@${entries}`] = async () => {
          const start = now()
          await Effect.runPromise(storage.scan!(prefix).pipe(Effect.orDie))
          return now() - start
        }
        variants[`raw@${entries}`] = async () => {
          const start = now()
          const rows = select.all(lower, upper)
          const ms = now() - start
          if (rows.length < entries) throw new Error(`the raw SELECT found ${rows.length} of ${entries} rows`)
          return ms
        }
        variants[`raw-parse@${entries}`] = async () => {
          const start = now()
          for (const row of select.all(lower, upper)) JSON.parse(row["value"] as string)
          return now() - start
        }
      }
      context.log(`sqlite:restore: ${Object.keys(variants).length} variants x ${rounds} rounds`)
      const samples = await interleave(variants, { rounds, warmup: 1 })
      const figures = sizes.flatMap((n) => [
        figureOf(samples, `raw@${n}`, `raw SELECT of the ledger's rows (node:sqlite, one range), ${n} entries`, "baseline", "ms"),
        figureOf(samples, `raw-parse@${n}`, `raw SELECT of the rows with each value JSON.parse'd, ${n} entries`, "baseline", "ms"),
        figureOf(samples, `scan@${n}`, `the storage's scan of the ledger prefix, ${n} entries`, "this", "ms"),
        figureOf(samples, `restore@${n}`, `step-ledger restore (a fresh ledger opens the execution), ${n} entries`, "this", "ms")
      ])
      return {
        id: "sqlite:restore",
        title: restoreCase.title,
        figures,
        ratios: present(sizes.flatMap((n) => [
          ratioOf(figures, samples, `SQLite ledger restore / raw SELECT of the same rows, ${n} entries`, `restore@${n}`, `raw@${n}`, 2),
          ratioOf(figures, samples, `SQLite storage scan / raw SELECT, ${n} entries`, `scan@${n}`, `raw@${n}`),
          ratioOf(figures, samples, `SQLite ledger restore / raw SELECT and parse, ${n} entries`, `restore@${n}`, `raw-parse@${n}`)
        ])),
        skipped: scope.skipped,
        notes: scope.notes
      }
    })
}

/** Steps per second of `executions` runs of `steps` steps each, all at once or one after another. */
const throughput = (storage: StorageAdapterShape, executions: number, steps: number, concurrent: boolean) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const harness = yield* AgentHarness.make({ name: "bench", agentGraph: timedGraph(steps, []) }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, yield* CheckpointStore.makeWith(storage))
    )
    const start = now()
    yield* Effect.forEach(
      Array.from({ length: executions }, () => fresh("exec")),
      (executionId) => harness.execute(undefined, { executionId }),
      { concurrency: concurrent ? executions : 1, discard: true }
    )
    return (executions * steps) / ((now() - start) / 1000)
  })).pipe(Effect.orDie))

const concurrentCase: BenchCase = {
  id: "sqlite:concurrent",
  title: "SQLite storage: 8 executions of durable steps at once against the same 8 one after another (steps/s)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const executions = 8
      const stepsEach = context.quick ? 20 : 150
      const rounds = context.quick ? 2 : 5
      const { storage } = await openSqlite(scope.onClose)
      const memory = await Effect.runPromise(makeMemory)
      const stalls: Array<number> = []
      const samples = await interleave({
        sequential: () => throughput(storage, executions, stepsEach, false),
        concurrent: async () => {
          const histogram = monitorEventLoopDelay({ resolution: 1 })
          histogram.enable()
          const rate = await throughput(storage, executions, stepsEach, true)
          histogram.disable()
          stalls.push(histogram.max / 1e6)
          return rate
        },
        "memory:sequential": () => throughput(memory, executions, stepsEach, false),
        "memory:concurrent": () => throughput(memory, executions, stepsEach, true)
      }, { rounds, warmup: 1 })
      const detail = { executions, stepsEach }
      const figures = [
        figureOf(samples, "sequential", `SQLite storage, ${executions} executions one after another`, "this", "steps/s", detail),
        figureOf(samples, "concurrent", `SQLite storage, ${executions} executions at once`, "this", "steps/s", {
          ...detail,
          eventLoopMaxStallMs: round(Math.max(...stalls))
        }),
        figureOf(samples, "memory:sequential", `memory storage, ${executions} executions one after another (the harness's CPU ceiling)`, "this", "steps/s", detail),
        figureOf(samples, "memory:concurrent", `memory storage, ${executions} executions at once`, "this", "steps/s", detail)
      ]
      return {
        id: "sqlite:concurrent",
        title: concurrentCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, `SQLite, ${executions} concurrent / ${executions} sequential executions (steps/s, higher is better)`, "concurrent", "sequential"),
          ratioOf(figures, samples, `SQLite concurrent / memory concurrent (steps/s)`, "concurrent", "memory:concurrent")
        ]),
        skipped: scope.skipped,
        notes: [`The longest event-loop stall in the concurrent runs: ${round(Math.max(...stalls))} ms.`]
      }
    })
}

const SCHEMA = "CREATE TABLE IF NOT EXISTS noetic_storage (key BLOB PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"

/** A database as the storage opens it, with its upsert. */
const rawDatabase = (path: string) => {
  const db = new DatabaseSync(path)
  db.exec("PRAGMA journal_mode = WAL")
  db.exec("PRAGMA synchronous = FULL")
  db.exec(SCHEMA)
  return { db, upsert: db.prepare(SqliteStorage.SQL.set) }
}

/**
 * What one group commit blocks the event loop for: `BEGIN IMMEDIATE`, an upsert of
 * `rows` records and `COMMIT` (with its fsync, and SQLite's automatic checkpoint when
 * the log passes 1,000 pages), run synchronously as the storage runs them.
 */
const commitStalls = (path: string, rows: number, n: number) => {
  const { db, upsert } = rawDatabase(path)
  const samples: Array<number> = []
  for (let i = 0; i < n; i++) {
    const start = now()
    db.exec("BEGIN IMMEDIATE")
    for (let r = 0; r < rows; r++) {
      upsert.run(Buffer.from(ledgerKey(i * rows + r), "utf16le").swap16(), JSON.stringify(ledgerRecord(i * rows + r)))
    }
    db.exec("COMMIT")
    samples.push(now() - start)
  }
  db.close()
  return samples
}

const offLoopCase: BenchCase = {
  id: "sqlite:writesOffTheLoop",
  title: "SQLite: what a commit blocks the event loop for, and a commit through a worker thread against the same on the loop (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    const dir = tempRoot("sqlite-loop")
    const commits = context.quick ? 1_200 : 2_000
    // The first 1,100 commits grow a fresh log; after that both are in steady state.
    const steady = 1_100
    const worker = new Worker(
      `const { parentPort } = require("node:worker_threads"); const { DatabaseSync } = require("node:sqlite");
      const db = new DatabaseSync(${JSON.stringify(Path.join(dir, "worker.db"))})
      db.exec("PRAGMA journal_mode = WAL"); db.exec("PRAGMA synchronous = FULL"); db.exec(${JSON.stringify(SCHEMA)})
      const upsert = db.prepare(${JSON.stringify(SqliteStorage.SQL.set)})
      parentPort.on("message", ([key, text]) => {
        db.exec("BEGIN IMMEDIATE"); upsert.run(key, text); db.exec("COMMIT"); parentPort.postMessage(0)
      })`,
      { eval: true }
    )
    const { db, upsert } = rawDatabase(Path.join(dir, "loop.db"))
    let i = 0
    try {
      const samples: Record<string, Array<number>> = await interleave({
        worker: async () => {
          const key = Buffer.from(ledgerKey(i), "utf16le").swap16()
          const text = JSON.stringify(ledgerRecord(i++))
          const start = now()
          await new Promise((resolve) => {
            worker.once("message", resolve)
            worker.postMessage([key, text])
          })
          return now() - start
        },
        loop: async () => {
          const key = Buffer.from(ledgerKey(i), "utf16le").swap16()
          const text = JSON.stringify(ledgerRecord(i++))
          const start = now()
          // The hop to the next turn of the loop the storage takes before a commit.
          await new Promise((resolve) => setImmediate(resolve))
          db.exec("BEGIN IMMEDIATE")
          upsert.run(key, text)
          db.exec("COMMIT")
          return now() - start
        }
      }, { rounds: commits - steady, warmup: steady })
      const one = commitStalls(Path.join(dir, "stalls.db"), 1, context.quick ? 300 : 3_000)
      const eight = commitStalls(Path.join(dir, "stalls8.db"), 8, context.quick ? 100 : 1_000)
      samples["stall-1"] = one
      samples["stall-8"] = eight
      const tail = (values: ReadonlyArray<number>) => {
        const sorted = [...values].sort((a, b) => a - b)
        return { p99Ms: round(sorted[Math.floor(sorted.length * 0.99)]!), maxMs: round(sorted.at(-1)!) }
      }
      const figures = [
        figureOf(samples, "loop", "one-row commit on the event loop (with the hop to the next turn)", "this", "ms"),
        figureOf(samples, "worker", "one-row commit through a worker thread (a message each way)", "this", "ms"),
        figureOf(samples, "stall-1", "event loop blocked by a commit of 1 row", "this", "ms", tail(one)),
        figureOf(samples, "stall-8", "event loop blocked by a commit of 8 rows", "this", "ms", tail(eight))
      ]
      return {
        id: "sqlite:writesOffTheLoop",
        title: offLoopCase.title,
        figures,
        ratios: present([ratioOf(figures, samples, "commit through a worker thread / on the loop", "worker", "loop")]),
        skipped: [],
        notes: ["The stalls are every commit of a run in sequence (not interleaved); their p99 and max are in the figures' detail."]
      }
    } finally {
      db.close()
      await worker.terminate()
    }
  }
}

/**
 * Effect's SQL client for SQLite, version 4.0.0-beta.102, imports `effect/unstable/...`
 * modules that effect 4.1 moved to `effect/sql` and `effect/reactivity`. Loaded as it
 * is, it fails (checked in a separate process, so this one's module cache stays clean);
 * with those imports redirected, it can be measured against the storage.
 */
const effectSqlCase: BenchCase = {
  id: "sqlite:effectSql",
  title: "Effect's SQL client for SQLite (@effect/sql-sqlite-node) against the storage: an upsert and a point read (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const probe = spawnSync(
        process.execPath,
        ["--input-type=module", "-e", "await import('@effect/sql-sqlite-node').then(() => console.log('loads'))"],
        { cwd: Path.join(import.meta.dirname, ".."), encoding: "utf8" }
      )
      const asIs = probe.status === 0
        ? "loads as it is"
        : `fails to load as it is: ${probe.stderr.split("\n").find((line) => line.includes("Error")) ?? probe.stderr}`
      register(
        "data:text/javascript," +
          encodeURIComponent(
            "export async function resolve(specifier, context, next) {" +
              "return next(specifier.startsWith('effect/unstable/') ? 'effect/' + specifier.slice(16) : specifier, context) }"
          )
      )
      const shimmed = await import("@effect/sql-sqlite-node/SqliteClient").then(
        (module) => module as typeof import("@effect/sql-sqlite-node/SqliteClient"),
        () => undefined
      )
      if (shimmed === undefined) {
        return {
          id: "sqlite:effectSql",
          title: effectSqlCase.title,
          figures: [],
          ratios: [],
          skipped: [{ label: "@effect/sql-sqlite-node", reason: `${asIs}; it fails even with effect/unstable redirected` }],
          notes: []
        }
      }
      const { SqlClient } = await import("effect/sql")
      const dir = tempRoot("sqlite-effect-sql")
      const runtime = ManagedRuntime.make(
        Layer.orDie(shimmed.layer({ filename: Path.join(dir, "effect-sql.db") }) as Layer.Layer<any, any>)
      )
      scope.onClose(() => runtime.dispose())
      const sql = await runtime.runPromise(Effect.gen(function*() {
        return yield* SqlClient.SqlClient
      }))
      await Effect.runPromise(Effect.gen(function*() {
        yield* sql`PRAGMA journal_mode = WAL`
        yield* sql`PRAGMA synchronous = FULL`
        yield* sql`CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`
      }).pipe(Effect.orDie))
      const { storage } = await openSqlite(scope.onClose)
      let i = 0
      const timed = async (effect: Effect.Effect<unknown, unknown>) => {
        const start = now()
        await Effect.runPromise(Effect.orDie(effect))
        return now() - start
      }
      const keyOf = (n: number) => Buffer.from(ledgerKey(n), "utf16le").swap16()
      const samples = await interleave({
        "effect-upsert": () => {
          const n = i++
          return timed(sql`INSERT INTO kv (key, value) VALUES (${keyOf(n)}, ${JSON.stringify(ledgerRecord(n))})
            ON CONFLICT (key) DO UPDATE SET value = excluded.value`)
        },
        "storage-set": () => {
          const n = i++
          return timed(storage.set(ledgerKey(n), ledgerRecord(n)))
        },
        "effect-get": () => timed(sql`SELECT value FROM kv WHERE key = ${keyOf(Math.max(0, i - 3))}`),
        "storage-get": () => timed(storage.get(ledgerKey(Math.max(0, i - 3))))
      }, { rounds: context.quick ? 30 : 300, warmup: 10 })
      const figures = [
        figureOf(samples, "effect-upsert", "@effect/sql-sqlite-node (imports redirected): an upsert", "peer", "ms"),
        figureOf(samples, "storage-set", "SQLite storage (node:sqlite): set", "this", "ms"),
        figureOf(samples, "effect-get", "@effect/sql-sqlite-node (imports redirected): a point read", "peer", "ms"),
        figureOf(samples, "storage-get", "SQLite storage (node:sqlite): get", "this", "ms")
      ]
      return {
        id: "sqlite:effectSql",
        title: effectSqlCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, "Effect SQL client upsert / storage set", "effect-upsert", "storage-set"),
          ratioOf(figures, samples, "Effect SQL client point read / storage get", "effect-get", "storage-get")
        ]),
        skipped: scope.skipped,
        notes: [`@effect/sql-sqlite-node ${asIs}; measured with its effect/unstable imports redirected to effect 4.1's modules.`]
      }
    })
}

/** The SQLite storage cases. */
export const cases: ReadonlyArray<BenchCase> = [setCase, stepsCase, restoreCase, concurrentCase, offLoopCase, effectSqlCase]

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === Path.resolve(import.meta.filename)) {
  // `npm run bench:sqlite [-- restore ...]`: the runner, on this module's cases. Not
  // awaited: the runner imports this module, which must finish evaluating first.
  const names = process.argv.slice(2)
  process.argv.splice(2, names.length, ...(names.length === 0 ? ["sqlite"] : names.map((name) => `sqlite:${name}`)))
  void import("./index.ts")
}
