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
