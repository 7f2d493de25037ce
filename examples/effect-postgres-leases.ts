/**
 * Two hosts sharing one Postgres storage, in the Effect API, with execution leases.
 *
 * Host A (its own process) runs an execution under a lease (ttl 2 s) and is killed
 * with SIGKILL in the middle of a step. Host B tries the same execution at once and
 * gets `ExecutionLeaseHeld`: A's lease has not expired. B retries; once the lease
 * expires it takes the execution over, the steps A completed replay, and the rest
 * runs on B. Skips with one line when NOETIC_PG_URL is not set.
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import assert from "node:assert/strict"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { AgentHarness, CheckpointStore, PostgresStorage, runCode, StepLedger } from "noetic-effect"

const url = process.env.NOETIC_PG_URL
const EXECUTION_ID = "nightly-report"
/** Where a step reports that it ran: stdout in host A's process, a list in host B's. */
let say = (event: { readonly host: string; readonly step: string }): void => {
  process.stdout.write(JSON.stringify(event) + "\n")
}

/** The storage stack of a host: its own pool on the shared table. */
const durableOn = (table: string) =>
  StepLedger.layer().pipe(
    Layer.provideMerge(CheckpointStore.layer),
    Layer.provideMerge(PostgresStorage.layerFromUrl(url!, { table }))
  )

/** Each step reports which host ran it; `stall` keeps host A busy until it is killed. */
const agent = (host: string, stall: boolean) => {
  const step = (id: string) =>
    runCode(id, (n: number) =>
      Effect.gen(function*() {
        say({ host, step: id })
        if (stall && id === "aggregate") yield* Effect.never
        return n + 1
      }))
  return runCode("report", (n: number, ctx) =>
    Effect.gen(function*() {
      const a = yield* ctx.run(step("collect"), n)
      const b = yield* ctx.run(step("clean"), a)
      const c = yield* ctx.run(step("aggregate"), b)
      return yield* ctx.run(step("publish"), c)
    }))
}

/** Host A: runs the execution under its lease; it will be killed mid-step. */
const hostA = (table: string) =>
  Effect.gen(function*() {
    const harness = yield* AgentHarness.make({
      name: "reports",
      agentGraph: agent("A", true),
      lease: { owner: `host-a:${process.pid}`, ttl: "2 seconds" }
    })
    yield* harness.execute(0, { executionId: EXECUTION_ID })
  }).pipe(Effect.scoped, Effect.provide(durableOn(table)))

/** Host B: resumes the execution, retrying while another host holds its lease. */
const hostB = (table: string) =>
  Effect.gen(function*() {
    const harness = yield* AgentHarness.make({
      name: "reports",
      agentGraph: agent("B", false),
      lease: { owner: `host-b:${process.pid}`, ttl: "2 seconds" }
    })
    const started = Date.now()
    let refused = 0
    while (true) {
      const attempt = yield* Effect.result(harness.resume(EXECUTION_ID))
      if (attempt._tag === "Success") {
        const output = Option.getOrThrow(attempt.success).output
        return { refused, waitedMs: Date.now() - started, output }
      }
      if (attempt.failure._tag !== "ExecutionLeaseHeld") return yield* Effect.fail(attempt.failure)
      if (refused++ === 0) console.log(`host B: resume refused with ${attempt.failure._tag} (host A's lease is still valid)`)
      yield* Effect.sleep(Duration.millis(250))
    }
  }).pipe(Effect.scoped, Effect.provide(durableOn(table)))

const dropTable = (table: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
  }).pipe(Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url!) }))), Effect.ignore)

const main = async () => {
  const table = `noetic_example_${randomUUID().replaceAll("-", "")}`
  const stepsA: Array<string> = []
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "host-a", table], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const event = JSON.parse(line)
      stepsA.push(event.step)
      if (event.step === "aggregate") {
        console.log(`host A: ran ${stepsA.slice(0, -1).join(", ")}, is inside ${event.step}; kill -9 host A`)
        child.kill("SIGKILL")
      }
    })
    child.on("exit", (code, signal) => (signal === "SIGKILL" ? resolve() : reject(new Error(`host A exited with ${code}`))))
  })

  const stepsB: Array<string> = []
  say = (event) => void stepsB.push(event.step)
  const result = await Effect.runPromise(hostB(table))
  console.log(`host B: took the execution over after ${result.refused} refusals (~${(result.waitedMs / 1000).toFixed(1)} s, the lease ttl)`)
  console.log(`host B: replayed collect, clean; ran ${stepsB.join(", ")}; output ${result.output}`)
  await Effect.runPromise(dropTable(table))
  assert.ok(result.refused >= 1)
  assert.deepEqual(stepsB, ["aggregate", "publish"])
  assert.equal(result.output, 4)
}

const [mode, table] = process.argv.slice(2)
if (url === undefined || url === "") {
  console.log("effect-postgres-leases: skipped (set NOETIC_PG_URL, e.g. postgres://postgres@127.0.0.1:5432/test)")
} else if (mode === "host-a") {
  await Effect.runPromise(hostA(table!))
} else {
  await main()
}
