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
export {
  AgentContext,
  AgentHarness,
  type AgentHarnessOptions,
  type AnyStep,
  callModel,
  conditional,
  type ContextLayer,
  type CreateContextOptions,
  defaultContextLayers,
  type DetachedSpawnOptions,
  history,
  inParallel,
  instructions,
  invokeTool,
  type Item,
  loop,
  type PlainModel,
  type RestoreContextOptions,
  runCode,
  scratchpad,
  spawn,
  StepContext,
  type Tool
} from "./harness.ts"
export {
  createInMemorySubprocessAdapter,
  createLocalSubprocessAdapter,
  type LocalSubprocessAdapterOptions,
  type OwnedSubprocessAdapter,
  reattachLiveChildren,
  type ReattachedChildren,
  type SubprocessAdapter,
  type SubprocessHandle
} from "./subprocess.ts"
export { createDurableOutboundQueue, type DurableOutboundQueue, encodeFrame } from "./ipc.ts"
