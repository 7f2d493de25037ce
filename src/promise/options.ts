/**
 * The harness's option types (noetic's `AgentHarnessOpts` and the options of its
 * methods).
 *
 * @since 0.1.0
 */
import type { DeliveryMode } from "./sessions.ts"
import * as Layer from "effect/Layer"
import type * as LanguageModel from "effect/ai/LanguageModel"
import { type Item } from "../harness/AgentContext.ts"
import * as EngineHarness from "../harness/AgentHarness.ts"
import { type CheckpointStore, type StepLedgerRetention } from "./checkpoint.ts"
import { type StorageAdapter } from "./storage.ts"
import { type SubprocessAdapter } from "./subprocess.ts"
import type { ContextLayer } from "./layers.ts"
import type { AgentContext, StepContext } from "./context.ts"
import type { AnyStep } from "./builders.ts"
import type { PlainModel } from "./models.ts"
import type { FsAdapter } from "./ipc.ts"
import type { ShellAdapter } from "./modelTools.ts"
import type { CallModelRequest, LLMResponse, LlmProviderConfig } from "./providers.ts"
import type { Tool } from "./tools.ts"
import type { ItemSchemaExtensions } from "./itemSchemas.ts"
import type { LayerStateStore } from "./layerStateStore.ts"
import type { TraceExporter } from "./traceExporter.ts"

/** A harness tool as a plain function, called by `invokeTool(id, name)`. */
export type HarnessTool = (input: unknown, ctx: StepContext) => unknown


/** Storage settings (noetic's `StorageEnvironmentConfig`). */
export interface StorageEnvironment {
  /**
   * Where the step ledger and layer `init` storage live (noetic keeps them here);
   * memory when absent. With a `createCheckpointStore` store and no adapter, the
   * ledger lives in the store's storage.
   */
  readonly adapter?: StorageAdapter
  readonly checkpointStore?: CheckpointStore
  readonly stepLedgerRetention?: Partial<StepLedgerRetention>
  /**
   * What a failed step-ledger write costs (this library's option): `'best-effort'`
   * (default, as noetic: a warning on stderr and a `recordFailed` count; the step
   * re-runs on resume) or `'strict'` (the run rejects with a `NoeticError` code
   * `STEP_LEDGER_WRITE_FAILED` and nothing downstream runs).
   */
  readonly stepLedgerDurability?: "best-effort" | "strict"
  /**
   * Several hosts sharing the storage: each execution runs under a lease of this
   * owner (a host incarnation), renewed every third of `ttlMs` (default 30 s). A
   * second host resuming it rejects with `EXECUTION_LEASE_HELD`; a host whose
   * lease was taken over stops with `EXECUTION_LEASE_LOST`.
   */
  readonly lease?: { readonly owner: string; readonly ttlMs?: number }
  /**
   * A host's store of live layer state (noetic's `layerStateStore`): every context
   * writes each layer state change to it and reads state back from it
   * (docs/layers-and-channels.md#a-layer-state-store).
   */
  readonly layerStateStore?: LayerStateStore
}

/** The documented constructor options (noetic's `AgentHarnessOpts`, the fields this library runs). */
export interface AgentHarnessOptions<I = any, O = any> {
  readonly name: string
  readonly agentGraph?: AnyStep<I, O>
  readonly params?: unknown
  /** A `{ generate(request) }` object, or any `effect/ai` LanguageModel layer. */
  readonly model?: PlainModel | Layer.Layer<LanguageModel.LanguageModel>
  /**
   * noetic's harness tool pool (`Tool[]`): what a `callModel` without `tools` may call,
   * and what `invokeTool(id, name)` calls by name. Or this library's `{ name: fn }`.
   */
  readonly tools?: ReadonlyArray<Tool> | Readonly<Record<string, HarnessTool>>
  /** The model provider (docs/runtime.md#providers): `{ provider: 'openrouter', apiKey?, baseUrl? }`. */
  readonly callModelDefaults?: LlmProviderConfig
  /** noetic's testing seam: answers every model call with an `LLMResponse` (docs/runtime.md#testing). */
  readonly _testCallModel?: (request: CallModelRequest) => Promise<LLMResponse>
  /**
   * noetic's `ItemSchemaConfig` (docs/runtime.md#item-schemas): extension schemas the
   * items a model answers and the tool results are checked against, and whether an
   * unknown item type is refused (`strict`, default true).
   */
  readonly itemSchemas?: { readonly schemas?: ItemSchemaExtensions; readonly strict?: boolean }
  /** Where completed spans go (noetic's `traceExporter`): each span of the harness's runs, as it ends. */
  readonly traceExporter?: TraceExporter
  /** The context layers of every context; defaults to scratchpad, instructions and history. */
  readonly contextLayers?: ReadonlyArray<ContextLayer>
  /** Same as `contextLayers` (this library's earlier name). */
  readonly context?: ReadonlyArray<ContextLayer>
  readonly environment?: {
    /** The filesystem adapter tools get as `toolCtx.fs` (and `harness.fs`). */
    readonly fs?: FsAdapter
    /** The shell adapter tools get as `toolCtx.shell` (and `harness.shell`). */
    readonly shell?: ShellAdapter
    readonly subprocess?: SubprocessAdapter
    readonly storage?: StorageEnvironment
  }
  /**
   * What a resume does when the step at a recorded path changed (an edited
   * workflow): `'warn'` (default) logs a warning naming the path and both
   * identities, then runs the step fresh; `'fail'` rejects with a `NoeticError`
   * code `REPLAY_DIVERGED` naming the path.
   */
  readonly onDivergence?: "warn" | "fail"
  /** The delivery mode of an `execute` given none: `'next-turn'` when absent. */
  readonly defaultDeliveryMode?: DeliveryMode
  /** noetic's `AgentHooks`: `beforeStep(step, ctx)` before every step dispatch, `afterStep(step, result, ctx)` after it completed. */
  readonly hooks?: AgentHooks
  /**
   * Validates `params` at construction (noetic's `paramsSchema`): a schema with `parse`
   * (zod) is called and its result becomes `config.params`; a Standard Schema is
   * validated, its issues thrown as `PARAMS_INVALID`.
   */
  readonly paramsSchema?: unknown
  /** The working directory of every root context the harness creates (noetic's `initialCwd`); see `setRootCwd`. */
  readonly initialCwd?: string
}

/** noetic's `AgentHooks`. A hook that rejects fails the step. */
export interface AgentHooks {
  beforeStep?(step: { readonly id: string; readonly kind: string }, ctx: AgentContext): Promise<void> | void
  afterStep?(step: { readonly id: string; readonly kind: string }, result: unknown, ctx: AgentContext): Promise<void> | void
}

/** Options of `restore`; snapshot-owned fields (items, threadId, resourceId, cwd) are not accepted. */
export interface RestoreContextOptions {
  readonly parent?: AgentContext
  readonly state?: unknown
  /** The restored context's layers instead of the harness's, as in `createContext`. */
  readonly contextLayers?: ReadonlyArray<ContextLayer>
  /** Same as `contextLayers` (the seed page's name). */
  readonly context?: ReadonlyArray<ContextLayer>
  /** Layers added after the harness's (or `contextLayers`), as in `createContext`. */
  readonly extraContextLayers?: ReadonlyArray<ContextLayer>
}

/** Options of `createContext` (noetic's, plus this library's `id`). */
export interface CreateContextOptions {
  readonly parent?: AgentContext
  readonly items?: ReadonlyArray<Item>
  readonly state?: unknown
  readonly threadId?: string
  readonly resourceId?: string
  /** Replaces the harness's layers. */
  readonly contextLayers?: ReadonlyArray<ContextLayer>
  /** Same as `contextLayers`. */
  readonly context?: ReadonlyArray<ContextLayer>
  /** Added after the effective layers. */
  readonly extraContextLayers?: ReadonlyArray<ContextLayer>
  /** The working directory; else the parent's, else the process cwd. */
  readonly cwdInit?: string
  /** The execution id; a random UUID when absent. */
  readonly id?: string
}

/** Options of `execute` (noetic's, plus this library's `executionId` and `cwd`). */
export interface ExecuteOptions
  extends Omit<EngineHarness.ExecuteOptions, "context" | "runByAdapter" | "newExecution">
{
  readonly contextLayers?: ReadonlyArray<ContextLayer>
  /** Same as `contextLayers`. */
  readonly context?: ReadonlyArray<ContextLayer>
  readonly extraContextLayers?: ReadonlyArray<ContextLayer>
  readonly deliveryMode?: DeliveryMode
  readonly messageId?: string
}

/** Options of `detachedSpawn` (noetic's overrides, plus this library's `metadata`). */
export interface DetachedSpawnOptions {
  readonly subprocess?: SubprocessAdapter
  readonly cwdInit?: string
  readonly threadId?: string
  readonly resourceId?: string
  readonly metadata?: Readonly<Record<string, unknown>>
}

export type { HarnessStatus } from "./sessions.ts"
