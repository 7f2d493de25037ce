/**
 * The Promise facade: the documented `AgentHarness` API for plain TypeScript.
 *
 * @since 0.1.0
 */
export {
  isNoeticConfigError,
  isNoeticError,
  NoeticConfigError,
  NoeticError,
  NoeticErrorImpl,
  type NoeticErrorPayload
} from "./errors.ts"
export {
  createFileStorage,
  createHomeStorage,
  createInMemoryStorage,
  createPostgresStorage,
  createSqliteStorage,
  type PostgresStorageAdapter,
  storageGetMany,
  type SqliteStorageAdapter,
  type StorageAdapter
} from "./storage.ts"
export {
  CheckpointKeys,
  type CheckpointSnapshot,
  CheckpointSchemaVersion,
  CheckpointSnapshotSchema,
  type CheckpointStore,
  createCheckpointStore,
  type CwdSnapshot,
  type FrontierFrame,
  type PendingAskUserSnapshot,
  type SnapshotParseResult,
  DEFAULT_STEP_LEDGER_RETENTION,
  resolveStepLedgerRetention,
  type StepLedgerRetention
} from "./checkpoint.ts"
export type {
  DeliveryMode,
  ExecuteReceipt,
  FrameworkStreamEvent,
  HarnessResponse,
  SdkStreamEvent,
  SessionScope,
  StreamEvent,
  StreamingItem
} from "./sessions.ts"
export {
  type AppendPipelineResult,
  type ContextLayer,
  type ContextLayerHooks,
  type ContextScope,
  type ExecutionContext,
  type InitParams,
  type Item,
  type NoeticContextLayer,
  type OnItemAppendParams,
  type OnItemAppendResult,
  type RerenderRequest,
  type ScopedStorage,
  context,
  layerData,
  layerFunction,
  type BudgetConfig,
  type ContextConfig,
  type ContextData,
  type ExecutionOutcome,
  type InferContext,
  type InferContextShape,
  type LayerDataDecl,
  type LayerFunctionDecl,
  type LayerProvides,
  type LayerTimeouts,
  type RecallResult,
  type SteeringDecision
} from "./layers.ts"
export {
  type AfterModelCallParams,
  type BeforeToolCallParams,
  type FactExtractor,
  type FactSearcher,
  filesystem,
  type FilesystemState,
  history,
  instructions,
  type LedgerEntry,
  type ObservationsState,
  observations,
  type ObserverFn,
  plan,
  type ScratchpadState,
  scratchpad,
  Slot,
  SteeringAction,
  type SteeringRule,
  type SteeringRuleParams,
  type SteeringState,
  steering,
  type TaskState,
  type TaskStateDataMerge,
  taskState,
  type TemporalFact,
  type TemporalSearchResult,
  type TemporalState,
  temporal,
  type ToolContextDeclaration,
  toolCalls,
  type TrackedFile
} from "./builtinLayers.ts"
export { AgentContext, type CwdState, type ItemLog, type Span, StepContext, type StreamWriter, type TokenUsage } from "./context.ts"
export { type Channel, channel, type ChannelHandle, type ExternalChannel } from "./channels.ts"
export type { RecallLayerOutput } from "./layerMethods.ts"
export type { LayerStateStore } from "./layerStateStore.ts"
export { createInMemoryFsAdapter, createInMemoryShellAdapter } from "./memoryAdapters.ts"
export { ExportedSpan, GenAI, InMemoryExporter, NoopExporter, type TraceExporter, ToolAttr } from "./traceExporter.ts"
export {
  type AnyStep,
  conditional,
  type ConditionalOptions,
  type EffectsOptions,
  execute,
  inParallel,
  type InParallelOptions,
  loop,
  type LoopOptions,
  type NoeticContext as Context,
  type NoeticStep as Step,
  Reconciled,
  type RetryPolicy,
  runCode,
  type RunCodeOptions,
  type SettleResult,
  type Snapshot,
  spawn,
  type SpawnOptions,
  type StepBuildOptions,
  subprocessOf,
  type Verdict
} from "./builders.ts"
export { callModel, type CallModelOptions, type PlainModel } from "./models.ts"
export { invokeTool, type InvokeToolOptions, type Tool } from "./tools.ts"
export {
  type GeneratorToolConfig,
  type ShellAdapter,
  tool,
  type ToolConfig,
  ToolExecutionContext,
  type ToolLayerState,
  toolWithGenerator
} from "./modelTools.ts"
export type { CallModelRequest, LLMResponse, LlmProviderConfig } from "./providers.ts"
export {
  defaultItemSchemaRegistry,
  type ItemExtensionSchema,
  type ItemLike,
  ItemSchema,
  type ItemSchemaExtensions,
  ItemSchemaRegistry
} from "./itemSchemas.ts"
export { type DetachedHandle, DetachedStatus } from "./handles.ts"
export type {
  AgentHarnessOptions,
  CreateContextOptions,
  DetachedSpawnOptions,
  ExecuteOptions,
  HarnessStatus,
  HarnessTool,
  RestoreContextOptions,
  StorageEnvironment
} from "./options.ts"
export { AgentHarness, defaultContextLayers, reattachLiveChildren, type ReattachedChildren } from "./harness.ts"
export {
  createInMemorySubprocessAdapter,
  createLocalSubprocessAdapter,
  type LocalSubprocessAdapterFacade,
  type LocalSubprocessAdapterOptions,
  type EngineSubprocessAdapter,
  type InMemorySubprocessAdapterOptions,
  type LiveSubprocessHandle,
  type OwnedSubprocessAdapter,
  type ProcessSubprocessRequest,
  type SerializedError,
  type StepSubprocessOverrides,
  type StepSubprocessRequest,
  type SubprocessAdapter,
  type SubprocessControlResult,
  type SubprocessHandle,
  type SubprocessHandleMetadata,
  type SubprocessRequest,
  type SubprocessStatus,
  type SubprocessStopResult
} from "./subprocess.ts"
export {
  type ImportNoeticOptions,
  importNoeticData,
  type NoeticImportFailure,
  type NoeticImportResult
} from "./noeticImport.ts"
export {
  AgentIpcClient,
  type AgentIpcClientOpts,
  AgentIpcServer,
  type AgentIpcServerOpts,
  type AskUserPendingFrame,
  type AskUserStreamEvent,
  type ChatHistoryStore,
  createDurableOutboundQueue,
  type CreateDurableOutboundQueueOptions,
  createLocalFsAdapter,
  type DurableFrameEntry,
  type DurableOutboundQueue,
  encodeFrame,
  type FsAdapter,
  type FsStats,
  type HelloInfo,
  type IpcAskUserService,
  type IpcHarness,
  type TaskLogEntry,
  type TaskLogger
} from "./ipc.ts"
export { all, any, type ConvergeConfig, until, type Until, type VerifyFn } from "./until.ts"
export { createDetachedSignal, type DetachedSignal } from "./detachedSignal.ts"
export {
  createStreamHandler,
  createStreamServer,
  type StreamHandler,
  type StreamHandlerConfig,
  type StreamServerConfig,
  type StreamServerHandle
} from "./streams.ts"

// Engine types that the facade's signatures mention, so declaration files that use
// the facade can name them.
export type { ConfigErrorCode } from "../Errors.ts"
export type { AgentContext as EngineAgentContext } from "../harness/AgentContext.ts"
export type { ExecuteOptions as EngineExecuteOptions } from "../harness/AgentHarness.ts"
export type { ContextLayer as EngineContextLayer } from "../harness/AgentContext.ts"
export type {
  ModelParams,
  ModelTurn,
  ParallelMode,
  StandardSchema,
  Step as EngineStep,
  StepContext as EngineStepContext,
  StepOptions
} from "../harness/Step.ts"
export type { LocalSubprocessAdapterOptions as EngineLocalSubprocessAdapterOptions } from "../layers/LocalSubprocessAdapter.ts"
export type { GenerateRequest } from "../layers/ScriptedModel.ts"
export type { StepMeta } from "../harness/ToolLoop.ts"
export type { ModelDelta, RoundUsage, RunEvent, ToolSpec } from "../services/ModelProvider.ts"
export type { AskUserPrompt, Cwd, FrontierEntry } from "../schema/CheckpointSnapshot.ts"
export type { ClientFrame, ServerFrame } from "../schema/IpcFrame.ts"
export type { HandleStatus } from "../services/SubprocessAdapter.ts"
