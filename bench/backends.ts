/**
 * The storage backends the cases run this library on, each built fresh for a case and
 * released after it, and what the cases set up around them: the raw Postgres client of
 * the baselines and LangGraph's savers. A backend that cannot be built here (no
 * Postgres) is reported as skipped with its reason.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { DatabaseSync } from "node:sqlite"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import { makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { type BenchContext, type CaseScope, reasonOf, tempRoot } from "./harness.ts"
import * as Savers from "./peers/savers.ts"
import * as Pg from "./postgres.ts"

/** The backends by name. */
export type BackendName = "memory" | "file" | "postgres" | "sqlite"

/** A storage built for a case. */
export interface OpenBackend {
  readonly name: BackendName
  readonly storage: StorageAdapterShape
  /** How it is configured, for the report. */
  readonly description: string
  /** The Postgres table, for raw baselines over the same rows. */
  readonly table?: string | undefined
  /** The SQLite database file, for raw baselines over the same rows. */
  readonly path?: string | undefined
  readonly close: () => Promise<void>
}


/** Builds a backend, or says why it cannot be built here. */
export const openBackend = async (
  name: BackendName,
  context: BenchContext
): Promise<OpenBackend | { readonly skipped: string }> => {
  switch (name) {
    case "memory":
      return {
        name,
        storage: await Effect.runPromise(makeMemory),
        description: "in-memory storage",
        close: async () => {}
      }
    case "file": {
      const root = tempRoot("file")
      return {
        name,
        storage: await Effect.runPromise(FileStorage.make({ root })),
        description: `file storage under ${Path.dirname(root)} (fsync per write)`,
        close: async () => Fs.rmSync(root, { recursive: true, force: true })
      }
    }
    case "postgres": {
      if (context.postgres._tag === "Unavailable") return { skipped: context.postgres.reason }
      const url = context.postgres.url
      const table = Pg.freshName("noetic_bench")
      const scoped = await Pg.storage(url, table)
      return {
        name,
        storage: scoped.value,
        description: "Postgres storage (@effect/sql-pg)",
        table,
        close: async () => {
          await scoped.close()
          await dropPostgres(url, { tables: [table] })
        }
      }
    }
    case "sqlite": {
      const root = tempRoot("sqlite")
      const path = Path.join(root, "bench.db")
      const scoped = await Pg.openScoped(SqliteStorage.make({ path }).pipe(Effect.orDie))
      return {
        name,
        storage: scoped.value,
        description: "SQLite storage (node:sqlite, WAL, synchronous=FULL)",
        path,
        close: async () => {
          await scoped.close()
          Fs.rmSync(root, { recursive: true, force: true })
        }
      }
    }
  }
}

/**
 * Opens each backend of `names` for a case: the ones built, in order; each one that
 * cannot be built here is recorded as skipped with its reason, and each built one is
 * closed with the case.
 */
export const openBackends = async (
  names: ReadonlyArray<BackendName>,
  context: BenchContext,
  scope: CaseScope
): Promise<Array<OpenBackend>> => {
  const opened: Array<OpenBackend> = []
  for (const name of names) {
    const backend = await openBackend(name, context).catch((cause) => ({ skipped: reasonOf(cause) }))
    if ("skipped" in backend) {
      scope.skipped.push({ label: `this library on ${name}`, reason: backend.skipped })
      continue
    }
    scope.onClose(backend.close)
    opened.push(backend)
  }
  return opened
}

/** Drops the tables and schemas a case made, through a client of its own. */
export const dropPostgres = async (
  url: string,
  what: { readonly tables?: ReadonlyArray<string>; readonly schemas?: ReadonlyArray<string> }
): Promise<void> => {
  const raw = await Pg.raw(url, Pg.freshName("noetic_bench_drop"))
  try {
    await raw.value.dropTables([...(what.tables ?? []), raw.value.table])
    for (const schema of what.schemas ?? []) await raw.value.dropSchema(schema)
  } finally {
    await raw.close()
  }
}

/**
 * The raw Postgres baseline client of a case, on a table of its own shaped like the
 * storage's (or on `table`, an existing one, which it then leaves in place), dropped
 * and closed with the case; undefined, and recorded as skipped, without Postgres.
 */
export const rawPostgres = async (
  context: BenchContext,
  scope: CaseScope,
  table?: string
): Promise<Pg.RawPg | undefined> => {
  if (context.postgres._tag === "Unavailable") {
    scope.skipped.push({ label: "raw Postgres baselines", reason: context.postgres.reason })
    return undefined
  }
  const client = await Pg.raw(context.postgres.url, table ?? Pg.freshName("noetic_bench_raw"))
  scope.onClose(async () => {
    if (table === undefined) await client.value.dropTables([client.value.table])
    await client.close()
  })
  return client.value
}

/** A LangGraph saver peer, by the id the cases give its figures. */
export interface PeerSaver {
  readonly id: "lg-memory" | "lg-sqlite" | "lg-postgres"
  readonly peer: Savers.SaverPeer
}

/**
 * LangGraph's MemorySaver, SqliteSaver (in a child process on another Node when its
 * native addon does not load here; the notes say where it runs) and PostgresSaver (in
 * a schema of its own, dropped with the case). A saver that cannot run is recorded as
 * skipped with the reason.
 */
export const langGraphPeers = async (context: BenchContext, scope: CaseScope): Promise<Array<PeerSaver>> => {
  const peers: Array<PeerSaver> = [{ id: "lg-memory", peer: Savers.memory() }]
  const plan = Savers.planSqliteSaver()
  if (plan._tag === "Unavailable") scope.skipped.push({ label: "LangGraph SqliteSaver", reason: plan.reason })
  else {
    const saver = await Savers.sqlite(plan, Path.join(tempRoot("lg-sqlite"), "checkpoints.db"))
    scope.onClose(saver.close)
    scope.notes.push(`LangGraph SqliteSaver runs ${saver.where}.`)
    peers.push({ id: "lg-sqlite", peer: saver })
  }
  if (context.postgres._tag === "Available") {
    const url = context.postgres.url
    const schema = Pg.freshName("noetic_bench_lg")
    const saver = await Pg.langGraphSaver(url, schema)
    scope.onClose(async () => {
      await saver.close()
      await dropPostgres(url, { schemas: [schema] })
    })
    peers.push({ id: "lg-postgres", peer: Savers.inProcess("LangGraph PostgresSaver", saver.value) })
  } else scope.skipped.push({ label: "LangGraph PostgresSaver", reason: context.postgres.reason })
  return peers
}

/**
 * The raw SQLite baseline over a backend's database: the rows of `keys` in one
 * `SELECT` through the same driver (`node:sqlite`), read-only; the row count.
 */
export const rawSqliteSelect = (path: string, scope: CaseScope) => {
  const db = new DatabaseSync(path, { readOnly: true })
  scope.onClose(async () => db.close())
  const select = db.prepare(SqliteStorage.SQL.getMany)
  return (keys: ReadonlyArray<string>): number =>
    select.all(JSON.stringify(keys.map((key) => Buffer.from(key, "utf16le").swap16().toString("hex")))).length
}
