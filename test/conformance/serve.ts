/**
 * Runs the official Durable Streams conformance suite
 * (`@durable-streams/server-conformance-tests`) against this library's server on one
 * storage. The suite needs vitest 4 (ours is 5), so it has its own config,
 * vitest.conformance.config.ts, and runs with `npm run test:conformance`.
 */
import { runConformanceTests } from "@durable-streams/server-conformance-tests"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  createFileStorage,
  createInMemoryStorage,
  createPostgresStorage,
  createSqliteStorage,
  createStreamServer,
  type StreamServerHandle
} from "../../src/promise/index.ts"

// vitest 4's globals (the suite's runner), not the project's vitest 5 imports.
declare const beforeAll: (fn: () => Promise<void>, timeout?: number) => void
declare const afterAll: (fn: () => Promise<void>, timeout?: number) => void
declare const describe: (name: string, fn: () => void) => void
declare const it: { readonly skip: (name: string, fn: () => void) => void }

/** How long the server's long-polls wait; the suite is told the same. */
const LONG_POLL_MS = 3_000

/** Drops the table a Postgres run used (the driver loads only for that run). */
const dropTable = async (url: string, table: string) => {
  const { PgClient } = await import("@effect/sql-pg")
  const { Effect, Layer, Redacted } = await import("effect")
  const { SqlClient } = await import("effect/sql")
  await Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`)
    }).pipe(Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url) }))))
  )
}

export const conformance = (storage: "memory" | "file" | "sqlite" | "postgres") => {
  const config = { baseUrl: "", longPollTimeoutMs: LONG_POLL_MS }
  const pgUrl = process.env["NOETIC_PG_URL"]
  if (storage === "postgres" && pgUrl === undefined) {
    describe(`conformance on postgres`, () => it.skip("SKIPPED: NOETIC_PG_URL is not set", () => {}))
    return
  }
  let server: StreamServerHandle | undefined
  let close: () => Promise<void> = async () => {}
  beforeAll(async () => {
    const table = `noetic_conformance_${process.pid}_${Date.now()}`
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), `noetic-conformance-${storage}-`))
    const adapter = storage === "memory"
      ? createInMemoryStorage()
      : storage === "file"
      ? createFileStorage({ root: dir })
      : storage === "sqlite"
      ? createSqliteStorage({ path: Path.join(dir, "streams.db") })
      : createPostgresStorage({ url: pgUrl!, table })
    server = await createStreamServer({ storage: adapter, longPollMillis: LONG_POLL_MS })
    config.baseUrl = server.url
    close = async () => {
      await server?.close()
      await adapter.close()
      Fs.rmSync(dir, { recursive: true, force: true })
      if (storage === "postgres") await dropTable(pgUrl!, table)
    }
  }, 60_000)
  afterAll(() => close(), 60_000)
  describe(`Durable Streams conformance on ${storage}`, () => {
    runConformanceTests(config)
  })
}
