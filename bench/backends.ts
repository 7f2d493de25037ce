/**
 * The storage backends the cases run this library on, each built fresh for a case and
 * released after it. A backend that cannot be built here (no Postgres, no SQLite
 * storage in this checkout) is reported as skipped with its reason.
 */
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { type BenchContext, tempRoot } from "./harness.ts"
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
  readonly close: () => Promise<void>
}

const here = Path.dirname(fileURLToPath(import.meta.url))
const sqliteModule = Path.resolve(here, "..", "src", "layers", "SqliteStorage.ts")

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
          const raw = await Pg.raw(url, Pg.freshName("noetic_bench_drop"))
          await raw.value.dropTables([table])
          await raw.close()
        }
      }
    }
    case "sqlite": {
      if (!Fs.existsSync(sqliteModule)) return { skipped: "src/layers/SqliteStorage.ts is not in this checkout" }
      return openSqlite(sqliteModule)
    }
  }
}

/** The SQLite storage, loaded only when its module exists in this checkout. */
const openSqlite = async (module: string): Promise<OpenBackend | { readonly skipped: string }> => {
  const mod = await import(module) as Record<string, unknown>
  const root = tempRoot("sqlite")
  const path = Path.join(root, "bench.db")
  const make = mod["make"]
  if (typeof make !== "function") return { skipped: "src/layers/SqliteStorage.ts exports no make" }
  // Loaded by path so this checkout typechecks before the module lands: `make({ path })` is scoped.
  const scoped = await Pg.openScoped(
    Effect.orDie(
      (make as (options: { readonly path: string }) => Effect.Effect<StorageAdapterShape, unknown, Scope.Scope>)({ path })
    )
  )
  return {
    name: "sqlite",
    storage: scoped.value,
    description: "SQLite storage (node:sqlite)",
    close: async () => {
      await scoped.close()
      Fs.rmSync(root, { recursive: true, force: true })
    }
  }
}
