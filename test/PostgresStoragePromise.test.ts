import { PgClient } from "@effect/sql-pg"
import { describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { createPostgresStorage } from "../src/promise/index.ts"
import { facadeStorageSuite } from "./FacadeStorageSuite.ts"

const url = process.env.NOETIC_PG_URL

/** Drops a test table through a short-lived client of the same database. */
const dropTable = (table: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
    }).pipe(Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url ?? "") }))), Effect.ignore)
  )

describe.skipIf(url === undefined)("createPostgresStorage", () => {
  facadeStorageSuite("createPostgresStorage", async () => {
    const table = `noetic_test_${randomUUID().replaceAll("-", "")}`
    return { open: () => createPostgresStorage({ url: url ?? "", table }), cleanup: () => dropTable(table) }
  })

  it.effect("closing a storage that was never used does not connect", () =>
    Effect.promise(() => createPostgresStorage({ url: "postgres://postgres@127.0.0.1:1/nowhere" }).close()))
})
