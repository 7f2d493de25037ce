/**
 * noetic-effect: durable execution for AI agent harnesses, on Effect 4.
 *
 * @since 0.1.0
 */

/** Tagged failures: config errors with documented codes, and `StorageError`. */
export * as Errors from "./Errors.ts"
export {
  CheckpointSchemaMismatch,
  EmptyStepId,
  NoStepConfigured,
  StepLedgerRetentionInvalid,
  StorageError
} from "./Errors.ts"

/** The key-value storage every durable surface is written on. */
export * as StorageAdapter from "./services/StorageAdapter.ts"

/** A `StorageAdapter` on a directory, one durable file per key. */
export * as FileStorage from "./layers/FileStorage.ts"

/** A `StorageAdapter` on a PostgreSQL table, through `@effect/sql-pg`. */
export * as PostgresStorage from "./layers/PostgresStorage.ts"

/** A `StorageAdapter` in one SQLite database file, through `node:sqlite`: the embedded default. */
export * as SqliteStorage from "./layers/SqliteStorage.ts"

/** The on-disk roots under `$NOETIC_HOME` and the default SQLite storages in them. */
export * as NoeticHome from "./NoeticHome.ts"

/** The persisted snapshot record, schema version 2. */
export * as CheckpointSnapshot from "./schema/CheckpointSnapshot.ts"

/** The persisted step-ledger records and their keys. */
export * as LedgerEntry from "./schema/LedgerEntry.ts"

/** Saves and loads per-execution snapshots; `clear` also removes the step ledger. */
export * as CheckpointStore from "./services/CheckpointStore.ts"

/** The step-completion ledger: recorded outputs replayed on resume, with retention caps. */
export * as StepLedger from "./services/StepLedger.ts"

/** The step ledger's default retention caps (docs/architecture.md#retention: exported under this name). */
export { DEFAULT_STEP_LEDGER_RETENTION } from "./services/StepLedger.ts"

/** Execution leases with fencing tokens: one host at a time writes an execution. */
export * as ExecutionLease from "./services/ExecutionLease.ts"

/** The agent harness: execute, checkpoint, restore, resume, detached spawns. */
export * as AgentHarness from "./harness/AgentHarness.ts"

/** Sessions: per-thread queues of `execute` inputs run as turns, their event streams, durable queued messages. */
export * as Sessions from "./harness/Sessions.ts"

/** What a session turn offers its steps: events, the between-rounds inbox, usage. */
export * as SessionTurn from "./harness/SessionTurn.ts"

/** The live context of an execution: item log, layers, cwd, ask-user prompts. */
export * as AgentContext from "./harness/AgentContext.ts"

/** noetic's context-layer lifecycle: recall, store, steering, spawn hooks, teardown, provides (docs/layers-and-channels.md). */
export * as LayerLifecycle from "./harness/LayerLifecycle.ts"

/** The shapes of layer hooks, scopes, budgets and timeouts. */
export * as LayerHooks from "./harness/LayerHooks.ts"

/** noetic's built-in layers: scratchpad, history, instructions, taskState, toolCalls (docs/layers-and-channels.md#built-in-layers). */
export * as BuiltinLayers from "./harness/BuiltinLayers.ts"

/** noetic's memory layers: observations, temporal. */
export * as MemoryLayers from "./harness/MemoryLayers.ts"

/** noetic's steering layer: rules before tool calls and after model calls, with a ledger. */
export * as SteeringLayer from "./harness/SteeringLayer.ts"

/** noetic's filesystem layer: `#path` references read through a file reader and recalled. */
export * as FilesystemLayer from "./harness/FilesystemLayer.ts"

/** Typed channels: value, queue, topic; handles and streams for outside code (docs/layers-and-channels.md#channels). */
export * as Channels from "./harness/Channels.ts"

/** Step builders: runCode, callModel, invokeTool, conditional, inParallel, loop, spawn. */
export * as Step from "./harness/Step.ts"
export { callModel, conditional, inParallel, invokeTool, loop, Reconciled, runCode, spawn } from "./harness/Step.ts"

/** Loop termination predicates for `loop({ until })`: maxSteps, maxCost, noToolCalls, verified, converged, any, all. */
export * as Until from "./harness/Until.ts"

/** A tool's input checked against its Standard Schema (or Zod) schema: `validate`, `ToolInputInvalid`. */
export * as ToolInput from "./harness/ToolInput.ts"

/** Agent streams: a step's durable stream of its execution (`ctx.stream(name)`), exactly once. */
export * as AgentStreams from "./harness/AgentStreams.ts"

/** Runtime failures of the harness. */
export * as HarnessError from "./harness/HarnessError.ts"

/** Runs detached child steps; in-process by default. */
export * as SubprocessAdapter from "./services/SubprocessAdapter.ts"

/** The recovery step of a host restart: rebinds live children and restores their parents. */
export { reattachLiveChildren } from "./harness/Reattach.ts"
export type { ReattachedChildren, ReattachLiveChildrenOptions } from "./harness/Reattach.ts"

/** The in-memory subprocess adapter with optional manifests: reattach re-runs a child from its input. */
export * as InMemorySubprocessAdapter from "./layers/InMemorySubprocessAdapter.ts"

/** The local subprocess adapter: one `node` process per child, surviving a host crash. */
export * as LocalSubprocessAdapter from "./layers/LocalSubprocessAdapter.ts"

/** Imports a directory noetic's file storage wrote: snapshots, step ledgers, manifests. */
export * as NoeticImport from "./NoeticImport.ts"

/** The persisted manifest and result records of spawned children, and their reads and writes. */
export * as SubprocessManifest from "./services/SubprocessRecords.ts"

/** A scripted `LanguageModel`, and one over a plain `generate` function. */
export * as ScriptedModel from "./layers/ScriptedModel.ts"

/** Model providers (`ModelProvider`), the run events a model call publishes (`RunEvents`), model errors. */
export * as ModelProvider from "./services/ModelProvider.ts"

/** Completed spans to an exporter (noetic's `traceExporter`): a tracer that hands each span to a sink as it ends. */
export * as SpanExport from "./layers/SpanExport.ts"

/** noetic's item schemas: the `ItemSchemas` reference the tool loop checks items with, `ItemSchemaMismatch`. */
export * as ItemSchemas from "./services/ItemSchemas.ts"

/** The structured-output constraint a `callModel` sends its provider (`wireJsonSchema`). */
export * as OutputSchema from "./harness/OutputSchema.ts"

/** A `ModelProvider` speaking OpenRouter's chat completions API over `effect/http`. */
export * as OpenRouterModel from "./layers/OpenRouterModel.ts"

/** The `callModel` tool loop: `ModelTool`, the harness's `ModelTools`, `StepMeta`. */
export * as ToolLoop from "./harness/ToolLoop.ts"

/** The durable IPC failure, one error with tagged reasons. */
export * as IpcError from "./IpcError.ts"

/** The IPC wire protocol v2: Schema-validated newline-delimited JSON frames. */
export * as IpcFrame from "./schema/IpcFrame.ts"

/** A durable, numbered outbox of frames for one socket, over any `StorageAdapter`. */
export * as DurableOutboundQueue from "./services/DurableOutboundQueue.ts"

/** A unix-socket IPC server emitting durably through a `DurableOutboundQueue`. */
export * as IpcServer from "./layers/IpcServer.ts"

/** A reconnecting IPC client that resumes from its acked watermark. */
export * as IpcClient from "./layers/IpcClient.ts"

/** The local web inspector: every execution, step, child and queue, live, as an `HttpRouter` layer (docs/inspector.md). */
export * as Inspector from "./inspector/Inspector.ts"

// The shapes and failures the namespaces above define, by name, so declaration files
// built against this package can refer to them.
export type { CheckpointStoreShape } from "./services/CheckpointStore.ts"
export type { StorageAdapterShape } from "./services/StorageAdapter.ts"
export type { ProcessRequest, SubprocessAdapterShape } from "./services/SubprocessAdapter.ts"
export type { ClientFrame, Hello, V1ServerFrame } from "./schema/IpcFrame.ts"
export {
  ChildExited,
  ChildFailed,
  SpawnFailed,
  StepUnavailable,
  Stopped,
  SubprocessError,
  UnknownHandle,
  UnsafeDirectory
} from "./services/SubprocessAdapter.ts"
export type { IpcError as IpcErrorClass } from "./IpcError.ts"
export type { StorageAdapter as StorageAdapterService } from "./services/StorageAdapter.ts"
export type { SubprocessAdapter as SubprocessAdapterService } from "./services/SubprocessAdapter.ts"
export { ExecutionLeaseHeld, ExecutionLeaseLost, ExecutionLeaseUnsupported } from "./services/ExecutionLease.ts"
export type { ExecutionLeaseShape } from "./services/ExecutionLease.ts"
export type { Fence } from "./services/StorageAdapter.ts"

/** Durable streams (the Durable Streams protocol's semantics) over any `StorageAdapter`. */
export * as DurableStreams from "./services/DurableStreams.ts"

/** Serving an `HttpRouter` app on Node: host/port, optional bearer token, body limit, graceful shutdown. */
export * as HttpServe from "./http/HttpServe.ts"

/** The Durable Streams HTTP routes: `layerRouter` mounts them into a host's router. */
export * as StreamRoutes from "./http/StreamRoutes.ts"

/** A Durable Streams server: `layer` serves the routes; `makePostgresSignals` wakes servers on one Postgres. */
export * as StreamServer from "./http/StreamServer.ts"
