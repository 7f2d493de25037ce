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
export {
  CHECKPOINTS_DATABASE,
  DATABASE_SUFFIXES,
  homeOfSubprocessDatabase,
  type NoeticRoots,
  roots,
  type StorageKind,
  storageLocation,
  SUBPROCESS_DATABASE
} from "./internal/homePaths.ts"
export {
  layerCheckpointStorage,
  layerSubprocessStorage,
  makeCheckpointStorage,
  makeStorageAt,
  makeSubprocessStorage
} from "./layers/HomeStorage.ts"
