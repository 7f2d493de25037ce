/**
 * The paths of a Noetic home (`$NOETIC_HOME`, else `~/.noetic`): its roots, the
 * default databases in them, and which backend a storage location holds. Paths
 * only: the storages themselves are opened by `layers/HomeStorage.ts`; both are
 * re-exported by `NoeticHome.ts`.
 *
 * @since 0.1.0
 */
import type { Stats } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { nodeFs as Fs } from "./builtins.ts"

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
