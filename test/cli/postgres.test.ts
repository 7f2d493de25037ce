import { PgClient } from "@effect/sql-pg"
import { describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as PostgresStorage from "../../src/layers/PostgresStorage.ts"
import { assertOneLineFailure, cli, suite } from "./suite.ts"

const url = process.env.NOETIC_PG_URL

/** A storage on a fresh table, dropped afterwards, and the flags that point the CLI at it. */
const freshTable = Effect.gen(function*() {
  const client = yield* PgClient.make({ url: Redacted.make(url!) }).pipe(
    Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
    Effect.orDie
  )
  const table = `noetic_cli_${randomUUID().replaceAll("-", "")}`
  const sql = client.withoutTransforms()
  yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
  const storage = yield* PostgresStorage.make({ table }).pipe(Effect.provideService(SqlClient.SqlClient, client), Effect.orDie)
  return { args: ["--pg", url!, "--table", table], checkpoints: storage, subprocess: storage }
})

describe.skipIf(url === undefined)("noetic-effect CLI on PostgreSQL", () => {
  suite(freshTable)

  it.live("a bad URL, an unreachable server and a missing table are one line and a non-zero exit", () =>
    Effect.gen(function*() {
      assertOneLineFailure(yield* cli("--pg", "not a url", "executions", "list"), "bad --pg URL")
      assertOneLineFailure(yield* cli("--pg", "mysql://localhost/x", "executions", "list"), "bad --pg URL")
      assertOneLineFailure(yield* cli("--pg", "postgres://postgres:secret@127.0.0.1:1/test", "children", "list"), "cannot connect to PostgreSQL")
      const hidden = yield* cli("--pg", "postgres://postgres:secret@127.0.0.1:1/test", "queues", "list")
      if (hidden.err.includes("secret")) throw new Error(`the password leaked: ${hidden.err}`)
      const table = `noetic_cli_missing_${randomUUID().replaceAll("-", "")}`
      assertOneLineFailure(yield* cli("--pg", url!, "--table", table, "executions", "list"), `no table ${table}`)
    }), { timeout: 60_000 })
})
