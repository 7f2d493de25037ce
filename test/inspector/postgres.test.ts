import { PgClient } from "@effect/sql-pg"
import { describe } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as PostgresStorage from "../../src/layers/PostgresStorage.ts"
import { suite } from "./suite.ts"

const url = process.env.NOETIC_PG_URL

/** A storage on a fresh table, dropped afterwards, and the flags that point the inspector at it. */
const freshTable = Effect.gen(function*() {
  const client = yield* PgClient.make({ url: Redacted.make(url!) }).pipe(
    Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
    Effect.orDie
  )
  const table = `noetic_inspector_${randomUUID().replaceAll("-", "")}`
  const sql = client.withoutTransforms()
  yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
  const storage = yield* PostgresStorage.make({ table }).pipe(Effect.provideService(SqlClient.SqlClient, client), Effect.orDie)
  return { args: ["--pg", url!, "--table", table], checkpoints: storage, subprocess: storage }
})

describe.skipIf(url === undefined)("the inspector on PostgreSQL", () => {
  suite(freshTable)
})
