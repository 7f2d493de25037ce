/**
 * The Promise facade: the documented `AgentHarness` API for plain TypeScript.
 *
 * @since 0.1.0
 */
export { NoeticConfigError, NoeticError } from "./errors.ts"
export {
  createFileStorage,
  createInMemoryStorage,
  createPostgresStorage,
  type PostgresStorageAdapter,
  type StorageAdapter
} from "./storage.ts"
export {
  type CheckpointSnapshot,
  type CheckpointStore,
  createCheckpointStore,
  DEFAULT_STEP_LEDGER_RETENTION,
  resolveStepLedgerRetention,
  type StepLedgerRetention
} from "./checkpoint.ts"
