/**
 * The storages the CLI and inspector suites run against: a home directory on its default
 * SQLite databases, on file storage, and a fresh Postgres table. Each is built per test
 * and removed afterwards; `withRecordedState` writes the suites' shared state into it
 * first (state.ts).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted, type Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as PostgresStorage from "../../src/layers/PostgresStorage.ts"
import * as SqliteStorage from "../../src/layers/SqliteStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import type { StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import { recordState } from "./state.ts"

/** A backend under test: where its state lives and the CLI flags that select it. */
export interface Backend {
  /** The flags that point the CLI at it (`--home <dir>` or `--pg <url> --table <t>`). */
  readonly args: ReadonlyArray<string>
  /** The storage of checkpoints (snapshots, ledgers, leases, queues of state.ts). */
  readonly checkpoints: StorageAdapterShape
  /** The storage subprocess manifests go to (the same on Postgres). */
  readonly subprocess: StorageAdapterShape
}

/** A fresh home directory, removed afterwards. */
export const freshHome = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-cli-"))),
  (home) => Effect.sync(() => Fs.rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }))
)

/** A fresh home on its default databases: checkpoints/checkpoints.db and subprocess/subprocess.db. */
export const sqliteHome: Effect.Effect<Backend, unknown, Scope.Scope> = Effect.gen(function*() {
  const home = yield* freshHome
  const r = roots(home)
  return {
    args: ["--home", home],
    checkpoints: yield* SqliteStorage.make({ path: r.checkpointsDatabase }),
    subprocess: yield* SqliteStorage.make({ path: r.subprocessDatabase })
  }
})

/** A fresh home whose storages are file storage. */
export const fileHome: Effect.Effect<Backend, unknown, Scope.Scope> = Effect.gen(function*() {
  const home = yield* freshHome
  return {
    args: ["--home", home],
    checkpoints: yield* FileStorage.make({ root: roots(home).checkpoints }),
    subprocess: yield* FileStorage.make({ root: roots(home).subprocess })
  }
})

/** The Postgres URL the tests use, or undefined where none is set. */
export const pgUrl = process.env.NOETIC_PG_URL

/** A storage on a fresh Postgres table (named after `tablePrefix`), dropped afterwards. */
export const pgTable = (tablePrefix: string): Effect.Effect<Backend, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const client = yield* PgClient.make({ url: Redacted.make(pgUrl!) }).pipe(
      Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
      Effect.orDie
    )
    const table = `${tablePrefix}${randomUUID().replaceAll("-", "")}`
    const sql = client.withoutTransforms()
    yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
    const storage = yield* PostgresStorage.make({ table }).pipe(Effect.provideService(SqlClient.SqlClient, client), Effect.orDie)
    return { args: ["--pg", pgUrl!, "--table", table], checkpoints: storage, subprocess: storage }
  })

/** Runs `f` on a fresh backend holding the suites' recorded state, in one scope. */
export const withRecordedState = (backend: Effect.Effect<Backend, unknown, Scope.Scope>) =>
<A, E>(f: (b: Backend) => Effect.Effect<A, E, Scope.Scope>) =>
  Effect.gen(function*() {
    const b = yield* backend
    yield* recordState(b.checkpoints)
    return yield* f(b)
  }).pipe(Effect.scoped)
