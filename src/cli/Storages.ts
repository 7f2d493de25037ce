/**
 * Where the CLI reads from: the roots under a home directory (`--home`, else
 * `$NOETIC_HOME`, else `~/.noetic`) or one PostgreSQL table (`--pg <url> [--table]`).
 * Every backend is opened by {@link openRootStorage} (per root) or {@link openPostgres},
 * and every failure to open one is a one-line {@link CliFailure}.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import * as Fs from "node:fs"
import { errorCode } from "../internal/processes.ts"
import * as FileStorage from "../layers/FileStorage.ts"
import * as PostgresStorage from "../layers/PostgresStorage.ts"
import * as SqliteStorage from "../layers/SqliteStorage.ts"
import { CHECKPOINTS_DATABASE, roots, storageLocation, SUBPROCESS_DATABASE } from "../NoeticHome.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"

/** A failure the CLI reports as one line (and a non-zero exit), never as a stack trace. */
export class CliFailure extends Schema.TaggedError<CliFailure>("noetic-effect/CliFailure")("CliFailure", {
  message: Schema.String
}) {
  /** The error code. */
  get code(): "CLI_FAILURE" {
    return "CLI_FAILURE"
  }
}

/** The storages a command reads: checkpoints (snapshots, ledgers, leases) and subprocess records (manifests, queues). */
export interface CliStorages {
  /** Where the state was read from, for messages: the home directory or the redacted URL and table. */
  readonly source: string
  /** Home directory layout: the home; none on Postgres. */
  readonly home: Option.Option<string>
  /** Snapshots, ledgers and leases; none when nothing was ever recorded there. */
  readonly checkpoints: Option.Option<StorageAdapterShape>
  /** Manifests, results and IPC queues; none when nothing was ever recorded there. On Postgres: the same table. */
  readonly subprocess: Option.Option<StorageAdapterShape>
  /** Whether both are one storage (Postgres), so a scan of both reads it once. */
  readonly shared: boolean
}

/** The flags every command shares. */
export interface SourceFlags {
  readonly home: Option.Option<string>
  readonly pg: Option.Option<string>
  readonly table: Option.Option<string>
}

/** The file a root's SQLite storage lives in, by root (see NoeticHome). */
export const SQLITE_FILES = { checkpoints: CHECKPOINTS_DATABASE, subprocess: SUBPROCESS_DATABASE } as const

const describeFsError = (path: string, cause: unknown): string => {
  switch (errorCode(cause)) {
    case "ENOENT":
      return `no noetic state at ${path} (no such directory)`
    case "EACCES":
    case "EPERM":
      return `cannot read ${path}: permission denied`
    case "ENOTDIR":
      return `cannot read ${path}: not a directory`
    default:
      return `cannot read ${path}: ${cause instanceof Error ? cause.message : String(cause)}`
  }
}

/** Checks a directory exists and can be listed; the one-line failure names it. */
const readableDirectory = (path: string): Effect.Effect<void, CliFailure> =>
  Effect.try({
    try: () => {
      if (!Fs.statSync(path).isDirectory()) throw Object.assign(new Error("not a directory"), { code: "ENOTDIR" })
      Fs.accessSync(path, Fs.constants.R_OK | Fs.constants.X_OK)
    },
    catch: (cause) => new CliFailure({ message: describeFsError(path, cause) })
  })

/**
 * Opens the storage of one root, detecting its backend as the engine does
 * (`NoeticHome.storageLocation`): the SQLite database `<root>/<dbFile>` unless the
 * directory holds file-storage records, else the file storage of the directory; none
 * when nothing was ever recorded under that root. Nothing is created, and a SQLite
 * database's write-ahead log is not reserved: the CLI only reads.
 */
export const openRootStorage = (
  root: string,
  dbFile: string
): Effect.Effect<Option.Option<StorageAdapterShape>, CliFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const found = storageLocation(root, dbFile)
    if (!Fs.existsSync(found.path)) return Option.none()
    const unreadable = (error: { readonly message: string }) =>
      new CliFailure({ message: `cannot read ${found.path}: ${firstLine(error)}` })
    if (found.kind === "sqlite") {
      return Option.some(yield* SqliteStorage.make({ path: found.path, reserveLog: false }).pipe(Effect.mapError(unreadable)))
    }
    yield* readableDirectory(root)
    return Option.some(yield* FileStorage.make({ root }).pipe(Effect.mapError(unreadable)))
  })

/** The URL with its password hidden, for messages. */
export const redactUrl = (url: URL): string => {
  const shown = new URL(url.href)
  if (shown.password !== "") shown.password = "***"
  return shown.href
}

const quoteIdentifier = (name: string) => `"${name.replace(/"/g, "\"\"")}"`

/** How long connecting to PostgreSQL may take before the CLI gives up. */
const CONNECT_TIMEOUT = Duration.seconds(15)

/**
 * Opens the PostgreSQL table `table` at `url` as a storage. A malformed URL, a server
 * that cannot be reached and a table that does not exist each fail with one line; the
 * table is never created (a mistyped name must not leave an empty table behind).
 */
export const openPostgres = (
  url: string,
  table: string
): Effect.Effect<StorageAdapterShape, CliFailure, Scope.Scope> =>
  Effect.gen(function*() {
    let parsed: URL
    try {
      parsed = new URL(url)
    } catch {
      return yield* new CliFailure({ message: `bad --pg URL: not a URL (expected postgres://user@host:port/database)` })
    }
    if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
      return yield* new CliFailure({
        message: `bad --pg URL: ${parsed.protocol} is not postgres: (expected postgres://user@host:port/database)`
      })
    }
    const shown = redactUrl(parsed)
    const unreachable = (message: string) => new CliFailure({ message: `cannot connect to PostgreSQL at ${shown}: ${message}` })
    const client = yield* PgClient.make({ url: Redacted.make(url) }).pipe(
      Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
      Effect.timeoutOrElse({
        duration: CONNECT_TIMEOUT,
        orElse: () => Effect.fail(unreachable(`no answer within ${Duration.format(CONNECT_TIMEOUT)}`))
      }),
      Effect.mapError((error) => (error instanceof CliFailure ? error : unreachable(firstLine(error))))
    )
    const sql = client.withoutTransforms()
    const quoted = table.split(".").map(quoteIdentifier).join(".")
    const found = yield* sql<{ oid: unknown }>`SELECT to_regclass(${quoted}) AS oid`.pipe(
      Effect.mapError((error) => unreachable(firstLine(error)))
    )
    if (found[0]?.oid === null || found[0]?.oid === undefined) {
      return yield* new CliFailure({ message: `no table ${table} at ${shown}` })
    }
    return yield* PostgresStorage.make({ table }).pipe(
      Effect.provideService(SqlClient.SqlClient, client),
      Effect.mapError((error) => new CliFailure({ message: `cannot read table ${table} at ${shown}: ${error.message}` }))
    )
  })

/** The first line of an error's message. */
export const firstLine = (error: unknown): string => {
  const text = error instanceof Error || (typeof error === "object" && error !== null && "message" in error)
    ? String((error as { message: unknown }).message)
    : String(error)
  return text.split("\n")[0] ?? text
}

/** Opens what the shared flags select: `--pg` (with `--table`), else the roots under the home. */
export const openStorages = (flags: SourceFlags): Effect.Effect<CliStorages, CliFailure, Scope.Scope> =>
  Effect.gen(function*() {
    if (Option.isSome(flags.pg) && Option.isSome(flags.home)) {
      return yield* new CliFailure({ message: "--home and --pg name two different stores; pass one of them" })
    }
    if (Option.isSome(flags.pg)) {
      const table = Option.getOrElse(flags.table, () => PostgresStorage.DEFAULT_TABLE)
      const storage = yield* openPostgres(flags.pg.value, table)
      let shown = "PostgreSQL"
      try {
        shown = redactUrl(new URL(flags.pg.value))
      } catch {
        // openPostgres rejected a bad URL already.
      }
      return {
        source: `${shown} table ${table}`,
        home: Option.none(),
        checkpoints: Option.some(storage),
        subprocess: Option.some(storage),
        shared: true
      }
    }
    if (Option.isSome(flags.table)) {
      return yield* new CliFailure({ message: "--table needs --pg <url>" })
    }
    const r = roots(Option.getOrUndefined(flags.home))
    yield* readableDirectory(r.home)
    return {
      source: r.home,
      home: Option.some(r.home),
      checkpoints: yield* openRootStorage(r.checkpoints, SQLITE_FILES.checkpoints),
      subprocess: yield* openRootStorage(r.subprocess, SQLITE_FILES.subprocess),
      shared: false
    }
  })
