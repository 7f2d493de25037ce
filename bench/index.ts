/**
 * Runs the benchmark cases, writes the results document and prints the table.
 *
 *   npm run bench                      every case; writes bench/results.json
 *   npm run bench -- steps restore     the named modules or cases; writes to the temp dir
 *   BENCH_QUICK=1 npm run bench        a smoke run (few rounds, small sizes); temp dir
 *   BENCH_OUT=path                     where to write the results instead
 *   NOETIC_PG_URL=postgres://...       the Postgres to use (default the local test one)
 *
 * Each module under bench/ named in MODULES exports `cases: ReadonlyArray<BenchCase>`
 * (see harness.ts). A module missing from this checkout is reported, not skipped
 * silently. `npm run bench:render` renders the SVG charts, bench/README.md's tables and
 * the README's headline table from the results document.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { BenchCase, BenchContext, CaseResult } from "./harness.ts"
import { reasonOf, removeTempRoots } from "./harness.ts"
import * as Pg from "./postgres.ts"
import { consoleReport, type Results } from "./report.ts"

const here = Path.dirname(fileURLToPath(import.meta.url))

/** The benchmark modules, in run order. */
const MODULES = ["steps", "facade", "checkpoint", "restore", "storage", "sqlite", "ipc", "subprocess", "childStart", "streams", "agentStreams"] as const

const quick = process.env["BENCH_QUICK"] === "1" || process.env["BENCH_QUICK"] === "true"
const selected = process.argv.slice(2)
const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`)

const loadCases = async (): Promise<{ cases: Array<BenchCase>; missing: Array<{ id: string; error: string }> }> => {
  const cases: Array<BenchCase> = []
  const missing: Array<{ id: string; error: string }> = []
  for (const name of MODULES) {
    const file = Path.join(here, `${name}.ts`)
    if (!Fs.existsSync(file)) {
      missing.push({ id: name, error: `bench/${name}.ts is not in this checkout` })
      continue
    }
    const mod = await import(file) as { cases?: ReadonlyArray<BenchCase> }
    if (mod.cases !== undefined) cases.push(...mod.cases)
    else missing.push({ id: name, error: `bench/${name}.ts exports no cases` })
  }
  return { cases, missing }
}

const main = async () => {
  const { cases: all, missing } = await loadCases()
  const modulesOf = (c: BenchCase) => c.id.split(/[:.]/)[0]!
  const chosen = selected.length === 0
    ? all
    : all.filter((c) => selected.includes(c.id) || selected.includes(modulesOf(c)))
  if (selected.length > 0 && chosen.length === 0) {
    process.stderr.write(`no case matches ${selected.join(", ")}; known: ${all.map((c) => c.id).join(", ")}\n`)
    process.exit(2)
  }
  const pgUrl = process.env["NOETIC_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
  const pgError = await Pg.probe(pgUrl)
  const context: BenchContext = {
    quick,
    postgres: pgError === undefined
      ? { _tag: "Available", url: pgUrl }
      : { _tag: "Unavailable", reason: `no Postgres at ${pgUrl}: ${pgError}` },
    log
  }
  // Modules that read the URL themselves use the same Postgres.
  if (context.postgres._tag === "Available") process.env["NOETIC_PG_URL"] = context.postgres.url
  const startedAt = new Date().toISOString()
  const loadAverageAtStart = Os.loadavg()
  const results: Array<CaseResult> = []
  const failed: Array<{ id: string; error: string }> = []
  for (const c of chosen) {
    log(`${c.id}: ${c.title}`)
    const start = performance.now()
    try {
      const result = await c.run(context)
      results.push({ ...result, durationMs: Math.round(performance.now() - start) })
    } catch (cause) {
      log(`${c.id} failed: ${cause instanceof Error ? cause.stack : String(cause)}`)
      failed.push({ id: c.id, error: reasonOf(cause) })
    }
  }
  const document: Results = {
    schema: 1,
    startedAt,
    finishedAt: new Date().toISOString(),
    quick,
    machine: {
      node: process.version,
      platform: `${process.platform} ${Os.release()}`,
      cpus: Os.cpus().length,
      cpuModel: Os.cpus()[0]?.model.trim() ?? "unknown",
      loadAverageAtStart,
      loadAverageAtEnd: Os.loadavg()
    },
    cases: results,
    failed,
    notRun: selected.length === 0 ? missing : []
  }
  removeTempRoots()
  const complete = !quick && selected.length === 0
  const out = process.env["BENCH_OUT"] ??
    (complete ? Path.join(here, "results.json") : Path.join(Os.tmpdir(), "noetic-bench-results.json"))
  Fs.writeFileSync(out, JSON.stringify(document, null, 2) + "\n")
  process.stdout.write(consoleReport(document) + "\n")
  log(`results written to ${out}${complete ? "" : " (a partial or quick run never overwrites bench/results.json)"}`)
  // Pools and child processes are closed by the cases; anything a peer leaves behind must not hold the run open.
  process.exit(failed.length > 0 && results.length === 0 ? 1 : 0)
}

await main()
