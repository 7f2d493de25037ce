/**
 * The default storages of a Noetic home (see `internal/homePaths.ts` for its paths):
 * the storage at a location (a SQLite database file or a file storage directory),
 * and a home's checkpoint and subprocess storages. Re-exported by `NoeticHome.ts`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { StorageError } from "../Errors.ts"
import { CHECKPOINTS_DATABASE, roots, storageLocation, SUBPROCESS_DATABASE } from "../internal/homePaths.ts"
import { StorageAdapter, type StorageAdapterShape } from "../services/StorageAdapter.ts"
import * as FileStorage from "./FileStorage.ts"
import * as SqliteStorage from "./SqliteStorage.ts"

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
