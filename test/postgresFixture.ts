/**
 * The Postgres storage tests' fixture: a client on `NOETIC_PG_URL`, fresh table names,
 * and a storage layer on a table of its own that is dropped when the layer is released.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import type { StorageError } from "../src/Errors.ts"
import { StorageAdapter } from "../src/services/StorageAdapter.ts"

/** The server the tests use, or undefined where none is set (CI always sets it). */
export const pgUrl = process.env.NOETIC_PG_URL

/** A table name no other test uses. */
export const freshTableName = (): string => `noetic_test_${randomUUID().replaceAll("-", "")}`

/** A SQL client on `NOETIC_PG_URL`. */
export const clientLayer = (): Layer.Layer<SqlClient.SqlClient> =>
  Layer.orDie(PgClient.layer({ url: Redacted.make(pgUrl ?? "") }))

/** Adds a finalizer dropping `table` with the scope's SQL client. */
export const dropOnClose = (table: string): Effect.Effect<void, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`)))

/** A Postgres storage (with `options`) on a table of its own, dropped when the layer is released. */
export const storageOnFreshTable = (
  options: Omit<PostgresStorage.PostgresStorageOptions, "table"> = {}
): Layer.Layer<StorageAdapter, StorageError> =>
  Layer.effect(
    StorageAdapter,
    Effect.gen(function*() {
      const table = freshTableName()
      yield* dropOnClose(table)
      return yield* PostgresStorage.make({ ...options, table })
    })
  ).pipe(Layer.provide(clientLayer()))
