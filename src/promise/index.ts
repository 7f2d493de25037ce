/**
 * The Promise facade: the documented `AgentHarness` API for plain TypeScript.
 *
 * @since 0.1.0
 */
export { NoeticConfigError, NoeticError } from "./errors.ts"
export {
  createFileStorage,
  createHomeStorage,
  createInMemoryStorage,
  createPostgresStorage,
  createSqliteStorage,
  type PostgresStorageAdapter,
  type SqliteStorageAdapter,
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
  reattachLiveChildren,
  type ReattachedChildren,
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
  type LocalSubprocessAdapterFacade,
  type LocalSubprocessAdapterOptions,
  type OwnedSubprocessAdapter,
  type SubprocessAdapter,
  type SubprocessHandle
} from "./subprocess.ts"
export { createDurableOutboundQueue, type DurableOutboundQueue, encodeFrame } from "./ipc.ts"

// Engine types that the facade's signatures mention, so declaration files that use
// the facade can name them.
export type { ConfigErrorCode } from "../Errors.ts"
export type { AgentContext as EngineAgentContext } from "../harness/AgentContext.ts"
export type { ExecuteOptions } from "../harness/AgentHarness.ts"
export type {
  ModelTurn,
  ParallelMode,
  Step,
  StepContext as EngineStepContext,
  StepOptions
} from "../harness/Step.ts"
export type { LocalSubprocessAdapterOptions as EngineLocalSubprocessAdapterOptions } from "../layers/LocalSubprocessAdapter.ts"
export type { GenerateRequest } from "../layers/ScriptedModel.ts"
export type { AskUserPrompt, Cwd, FrontierEntry } from "../schema/CheckpointSnapshot.ts"
export type { ClientFrame, ServerFrame } from "../schema/IpcFrame.ts"
export type { HandleStatus } from "../services/SubprocessAdapter.ts"
