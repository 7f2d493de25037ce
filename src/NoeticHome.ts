/**
 * The on-disk roots of durable state: `$NOETIC_HOME` (else `~/.noetic`) holding
 * `checkpoints/` (snapshots and ledgers), `subprocess/` (manifests and IPC queues) and
 * `run/` (sockets). Discarding all recovery data is one directory removal.
 *
 * The default storages live there as SQLite databases: `checkpoints/checkpoints.db`
 * and `subprocess/subprocess.db` (see `SqliteStorage`). A root that holds records of
 * the file storage instead (one file per key, as `createFileStorage` writes) is still
 * read as such, so tools like the CLI read either.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Stats } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { StorageError } from "./Errors.ts"
import { nodeFs as Fs } from "./internal/builtins.ts"
import * as FileStorage from "./layers/FileStorage.ts"
import * as SqliteStorage from "./layers/SqliteStorage.ts"
import { StorageAdapter, type StorageAdapterShape } from "./services/StorageAdapter.ts"

/** The roots under one home directory, and the default databases in them. */
export interface NoeticRoots {
  readonly home: string
  readonly checkpoints: string
  readonly subprocess: string
  readonly run: string
  /** The default storage of snapshots and step ledgers: `checkpoints/checkpoints.db`. */
  readonly checkpointsDatabase: string
  /** The default storage of subprocess manifests and IPC queues: `subprocess/subprocess.db`. */
  readonly subprocessDatabase: string
}

/** The file name of the checkpoint database inside `checkpoints/`. */
export const CHECKPOINTS_DATABASE = "checkpoints.db"

/** The file name of the subprocess database inside `subprocess/`. */
export const SUBPROCESS_DATABASE = "subprocess.db"

/** The roots under `home`, or under `$NOETIC_HOME`, or under `~/.noetic`. */
export const roots = (home?: string): NoeticRoots => {
  const base = Path.resolve(home ?? process.env.NOETIC_HOME ?? Path.join(Os.homedir(), ".noetic"))
  const checkpoints = Path.join(base, "checkpoints")
  const subprocess = Path.join(base, "subprocess")
  return {
    home: base,
    checkpoints,
    subprocess,
    run: Path.join(base, "run"),
    checkpointsDatabase: Path.join(checkpoints, CHECKPOINTS_DATABASE),
    subprocessDatabase: Path.join(subprocess, SUBPROCESS_DATABASE)
  }
}

/**
 * The roots of the home whose subprocess database is `path` (`<home>/subprocess/subprocess.db`),
 * or undefined when `path` is not one: a storage opened there keeps its home's layout.
 */
export const homeOfSubprocessDatabase = (path: string): NoeticRoots | undefined => {
  const resolved = Path.resolve(path)
  const found = roots(Path.dirname(Path.dirname(resolved)))
  return found.subprocessDatabase === resolved ? found : undefined
}

/** Which backend a storage location holds. */
export type StorageKind = "sqlite" | "file"

/** The file name endings that make a missing location a SQLite database rather than a directory. */
export const DATABASE_SUFFIXES: ReadonlyArray<string> = [".db", ".sqlite", ".sqlite3"]

/**
 * The backend at `location`: a SQLite database when `location` is a file, or is
 * missing and ends in `.db`, `.sqlite` or `.sqlite3`; otherwise a file storage rooted
 * there. With `database`, a directory is read as the database of that name inside it,
 * unless it holds records of a file storage (files not named after the database).
 */
export const storageLocation = (
  location: string,
  database?: string
): { readonly kind: StorageKind; readonly path: string } => {
  const resolved = Path.resolve(location)
  let stat: Stats | undefined
  try {
    stat = Fs.statSync(resolved)
  } catch {
    stat = undefined
  }
  if (stat?.isFile() === true) return { kind: "sqlite", path: resolved }
  if (database === undefined) {
    return stat === undefined && DATABASE_SUFFIXES.some((suffix) => resolved.endsWith(suffix))
      ? { kind: "sqlite", path: resolved }
      : { kind: "file", path: resolved }
  }
  const databasePath = Path.join(resolved, database)
  if (stat === undefined) return { kind: "sqlite", path: databasePath }
  let names: ReadonlyArray<string> = []
  try {
    names = Fs.readdirSync(resolved)
  } catch {
    // Unreadable: opening the database reports why, as a typed failure.
  }
  // File storage names its records after their keys and keeps dot-files for itself.
  // Its records win over a database beside them: a tool that opened the database in
  // a directory of records (and so created it empty) must not hide them afterwards.
  const holdsFileRecords = names.some((name) => !name.startsWith(".") && !name.startsWith(database))
  return holdsFileRecords ? { kind: "file", path: resolved } : { kind: "sqlite", path: databasePath }
}

/**
 * Opens the storage at `location` (see {@link storageLocation}): a SQLite database
 * file, opened with `sqlite` (`reserveLog: false` for a process that writes a few
 * records and ends), or a file storage directory.
 */
export const makeStorageAt = (
  location: string,
  database?: string,
  sqlite?: Omit<SqliteStorage.SqliteStorageOptions, "path">
): Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope> =>
  Effect.suspend(() => {
    const found = storageLocation(location, database)
    return found.kind === "sqlite"
      ? SqliteStorage.make({ ...sqlite, path: found.path })
      : FileStorage.make({ root: found.path })
  })

/**
 * The checkpoint storage of a home (`home`, else `$NOETIC_HOME`, else `~/.noetic`):
 * `checkpoints/checkpoints.db`, or the file storage an older setup left in
 * `checkpoints/`.
 */
export const makeCheckpointStorage = (home?: string): Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope> =>
  Effect.suspend(() => makeStorageAt(roots(home).checkpoints, CHECKPOINTS_DATABASE))

/**
 * The subprocess storage of a home: `subprocess/subprocess.db`, or the file storage
 * an older setup left in `subprocess/`.
 */
export const makeSubprocessStorage = (home?: string): Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope> =>
  Effect.suspend(() => makeStorageAt(roots(home).subprocess, SUBPROCESS_DATABASE))

/** The checkpoint storage of a home (see {@link makeCheckpointStorage}) for the life of the layer. */
export const layerCheckpointStorage = (home?: string): Layer.Layer<StorageAdapter, StorageError> =>
  Layer.effect(StorageAdapter, makeCheckpointStorage(home))

/** The subprocess storage of a home (see {@link makeSubprocessStorage}) for the life of the layer. */
export const layerSubprocessStorage = (home?: string): Layer.Layer<StorageAdapter, StorageError> =>
  Layer.effect(StorageAdapter, makeSubprocessStorage(home))
