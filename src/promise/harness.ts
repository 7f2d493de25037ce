/**
 * The documented `AgentHarness` for plain TypeScript: a harness whose `createContext`
 * and `detachedSpawn` answer at once. It owns a `ManagedRuntime` built from the same
 * layers an Effect user would compose. Its contexts are in `context.ts`, the step
 * builders in `builders.ts`, `models.ts` and `tools.ts`, noetic's layers in
 * `layers.ts`, detached handles in `handles.ts`, the option types in `options.ts`, and
 * the runtime it builds from its options in `src/internal/promiseHarness.ts`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Tracer from "effect/Tracer"
import * as Layer from "effect/Layer"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import type { StorageError } from "../Errors.ts"
import {
  AgentContext as EngineContext,
  type ContextLayer as EngineContextLayer,
  defaultLayers,
  type Item
} from "../harness/AgentContext.ts"
import type * as EngineHarness from "../harness/AgentHarness.ts"
import * as EngineSessions from "../harness/Sessions.ts"
import { reattachLiveChildren as engineReattachLiveChildren } from "../harness/Reattach.ts"
import type * as Step from "../harness/Step.ts"
import { nodeCrypto } from "../internal/builtins.ts"
import { inheritFields, selectLayers } from "../internal/contextInit.ts"
import { toFacadeError, unwrapExit, harnessClosed } from "./errors.ts"
import * as Bridge from "./bridge.ts"
import { createInMemoryStorage, type StorageAdapter, toEngineStorage } from "./storage.ts"
import {
  fromEngineSubprocessAdapter,
  SpawnsInFlight,
  spawnsThrough,
  type LiveSubprocessHandle as SubprocessHandle,
  type SubprocessAdapter,
  toFacadeHandle
} from "./subprocess.ts"
import { toEngineSubprocessShape } from "./subprocessBridge.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { type AppendPipelineResult, type ContextLayer, toEngineLayer } from "./layers.ts"
import { ChannelHub } from "../harness/Channels.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { type Channel, type ChannelHandle, type ExternalChannel, handleOf, runChannel, streamOf } from "./channels.ts"
import * as LayerMethods from "./layerMethods.ts"
import { createInMemoryFsAdapter, createInMemoryShellAdapter } from "./memoryAdapters.ts"
import { AgentContext, FacadeHarness, type Span, spanOf, StepContext, wrapContext } from "./context.ts"
import { subprocessOf } from "./builders.ts"
import { type AnyStep, asStep } from "./plainSteps.ts"
import { harnessCallModel, type HarnessCallModelRequest } from "./models.ts"
import type { FsAdapter } from "./ipc.ts"
import type { ShellAdapter } from "./modelTools.ts"
import { type LLMResponse, refuseUnsupportedHarnessOptions } from "./providers.ts"
import { type DetachedHandle, DetachedHandleImpl } from "./handles.ts"
import type { StepHooks } from "../harness/SessionTurn.ts"
import type { LayerStateStore as EngineLayerStateStore } from "../harness/LayerHooks.ts"
import { type LayerStateStore, toEngineLayerStateStore } from "./layerStateStore.ts"
import { type TraceExporter, tracerFor } from "./traceExporter.ts"
import type {
  AgentHooks,
  AgentHarnessOptions,
  CreateContextOptions,
  DetachedSpawnOptions,
  ExecuteOptions,
  RestoreContextOptions
} from "./options.ts"
import {
  type ExecuteReceipt,
  type HarnessResponse,
  type HarnessStatus,
  iterable,
  receipt,
  type SessionScope,
  type StreamEvent,
  type StreamingItem
} from "./sessions.ts"
import {
  checkEngineOptions,
  engineRestoreOptions,
  engineService,
  type HarnessServices,
  lazyStorage,
  makeRuntime,
  SessionsService,
  validateParams
} from "../internal/promiseHarness.ts"

/** How `reattachLiveChildren` resolves restore layers the way the harness's own `restore` does. */
const layerMergers = new WeakMap<
  AgentHarness,
  (options: RestoreContextOptions | undefined) => ReadonlyArray<EngineContextLayer<any>> | undefined
>()

/** How functions of this module reach the engine behind a facade harness. */
const engines = new WeakMap<
  AgentHarness,
  <A, E>(f: (engine: EngineHarness.AgentHarness<any>) => Effect.Effect<A, E, any>) => Promise<A>
>()

/**
 * An agent harness. Durable when `environment.storage.checkpointStore` is given;
 * otherwise every durability hook is a no-op. `close()` (or `await using`) releases it.
 */
export class AgentHarness<I = any, O = any> {
  readonly name: string
  readonly params: any
  readonly agentGraph: AnyStep<I, O> | undefined
  /** The harness's default subprocess adapter (`listLive`, `reattach`). */
  readonly subprocess: SubprocessAdapter
  /** The filesystem adapter tools get as `toolCtx.fs`: `environment.fs`, else noetic's in-memory one. */
  readonly fs: FsAdapter
  /** The shell adapter tools get as `toolCtx.shell`: `environment.shell`, else noetic's in-memory one. */
  readonly shell: ShellAdapter
  readonly #runtime: ManagedRuntime.ManagedRuntime<HarnessServices, StorageError>
  /** Where layer `init` hooks keep their storage. */
  readonly #layerStorage: StorageAdapter
  /** The layers of every context unless a call replaces them. */
  readonly #layers: ReadonlyArray<EngineContextLayer<any>>
  /** Where the step ledger lives when it is not the checkpoint store's storage. */
  readonly #converted = new WeakMap<object, EngineContextLayer<any>>()
  readonly #spawns = new SpawnsInFlight()
  /** noetic's `config`: the harness's name, its (validated) params, its hooks. */
  readonly config: { readonly name: string; readonly params: any; readonly hooks?: AgentHooks; readonly storage: StorageAdapter }
  /** The root working directory once `initialCwd` or `setRootCwd` set it. */
  #rootCwd: { cwd: string; previousCwd?: string } | undefined
  /** The engine's sessions, once the runtime has built them (the synchronous accessors read them). */
  #sessions: EngineSessions.Sessions | undefined
  /** Histories seeded before the sessions were built. */
  readonly #seeds = new Map<string, ReadonlyArray<Item>>()
  /** Set by `close()`: a call it interrupts rejects with `HARNESS_CLOSED`. */
  #closed = false
  /** The channels of this harness's contexts (the engine's too). */
  readonly #channels = new ChannelHub()
  /** `storage.adapter` as the engine's layer storage (opened at its first use). */
  #engineLayerStorage: StorageAdapterShape | undefined
  /** The `traceExporter` option, which `createSpan` exports to. */
  readonly #traceExporter: TraceExporter | undefined
  /** `storage.layerStateStore`, as the engine takes it (docs/layers-and-channels.md#a-layer-state-store). */
  readonly #layerStateStore: { readonly host: LayerStateStore; readonly engine: EngineLayerStateStore } | undefined

  /**
   * Throws `NoeticConfigError`: `STEP_LEDGER_RETENTION_INVALID` for a retention cap
   * below 1 or NaN, `EMPTY_STEP_ID` for a graph with a blank step id,
   * `UNSUPPORTED_LAYER_HOOK` for a layer hook this library does not run,
   * `LEASE_TTL_INVALID`, and `STORAGE_ADAPTER_UNSUPPORTED` for a combination it cannot honour.
   */
  constructor(options: AgentHarnessOptions<I, O>) {
    this.name = options.name
    refuseUnsupportedHarnessOptions(options)
    this.params = validateParams(options.paramsSchema, options.params)
    if (options.initialCwd !== undefined) this.#rootCwd = { cwd: options.initialCwd }
    // noetic's defaults: a process-local filesystem and a shell that runs nothing.
    this.fs = options.environment?.fs ?? createInMemoryFsAdapter()
    this.shell = options.environment?.shell ?? createInMemoryShellAdapter()
    const agentGraph = options.agentGraph === undefined ? undefined : asStep(options.agentGraph)
    this.agentGraph = agentGraph
    const storage = options.environment?.storage
    checkEngineOptions(agentGraph as Step.AnyStep | undefined, storage)
    this.#layerStorage = storage?.adapter ?? createInMemoryStorage()
    // noetic's AgentConfig: `storage` is environment.storage.adapter, else an in-memory one.
    this.config = {
      name: options.name,
      params: this.params,
      ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
      storage: this.#layerStorage
    }
    // As in noetic, a harness given no layers gives its contexts none (`defaultContextLayers` lists the usual ones).
    this.#layers = this.#toEngineLayers(options.contextLayers ?? options.context) ?? []
    const layerAdapter = storage?.adapter
    this.#engineLayerStorage = layerAdapter === undefined ? undefined : lazyStorage(toEngineStorage(layerAdapter))
    this.#traceExporter = options.traceExporter
    const hostStore = storage?.layerStateStore
    this.#layerStateStore = hostStore === undefined ? undefined : { host: hostStore, engine: toEngineLayerStateStore(hostStore) }
    // A durable harness stores external channels' handle sends from its first call on.
    if (storage?.checkpointStore !== undefined && this.#engineLayerStorage !== undefined) {
      this.#channels.attachStorage(this.#engineLayerStorage)
    }
    // The model side (docs/runtime.md), the durability and subprocess layers: src/internal/promiseHarness.ts.
    this.#runtime = makeRuntime(options, {
      params: this.params,
      agentGraph: agentGraph as Step.AnyStep | undefined,
      layers: this.#layers,
      channels: this.#channels,
      layerStorage: this.#engineLayerStorage,
      layerStateStore: this.#layerStateStore?.engine,
      hooks: options.hooks === undefined ? undefined : this.#engineHooks(options.hooks),
      self: Layer.succeed(FacadeHarness, this as AgentHarness),
      seeds: this.#seeds,
      onSessions: (made) => {
        this.#sessions = made
      }
    })
    const runtime = this.#runtime
    // The host's adapter itself, as in noetic (its own methods, called as it wrote them).
    this.subprocess = options.environment?.subprocess ?? fromEngineSubprocessAdapter(
      Effect.promise(() => runtime.runPromise(Effect.map(engineService, (engine) => engine.subprocess)))
    )
    // reattachLiveChildren lists through the adapter as harness.subprocess.listLive() does: after the spawns in flight.
    engines.set(this, (f) => this.#spawns.drain().then(() => this.#use(f)))
    layerMergers.set(this, (options) => this.#restoreLayers(options))
  }

  #use<A, E>(f: (engine: EngineHarness.AgentHarness<any>) => Effect.Effect<A, E, any>): Promise<A> {
    return this.#runtime.runPromiseExit(
      Effect.flatMap(engineService, f) as Effect.Effect<A, E, HarnessServices>
    ).then((exit) => {
      // A call close() interrupted rejects with a code, not a bare interruption.
      if (this.#closed && exit._tag === "Failure" && exit.cause.reasons.every((r) => r._tag === "Interrupt")) {
        throw harnessClosed(this.name)
      }
      return unwrapExit(exit)
    })
  }

  #toEngineLayers(layers: ReadonlyArray<ContextLayer> | undefined): ReadonlyArray<EngineContextLayer<any>> | undefined {
    if (layers === undefined) return undefined
    return layers.map((layer) => {
      let engine = this.#converted.get(layer)
      if (engine === undefined) {
        engine = toEngineLayer(layer, this.#layerStorage)
        this.#converted.set(layer, engine)
      }
      return engine
    })
  }

  /** The layers of a restored context, as `createContext` picks them: none given, the snapshot's harness default. */
  #restoreLayers = (options: RestoreContextOptions | undefined) => {
    return selectLayers(
      this.#toEngineLayers(options?.contextLayers ?? options?.context),
      this.#toEngineLayers(options?.extraContextLayers),
      this.#layers
    )
  }

  /**
   * The root working directory (noetic's `rootCwdState`): `initialCwd`, else the
   * process's, and `previousCwd` once `setRootCwd` changed it. Every root context (and
   * every turn) the harness creates after that starts there.
   */
  get rootCwdState(): { readonly cwd: string; readonly previousCwd?: string } {
    return this.#rootCwd === undefined ? { cwd: process.cwd() } : { ...this.#rootCwd }
  }

  /** Moves the root working directory (noetic's `setRootCwd`, a TUI's `! cd`); the same directory is a no-op. */
  setRootCwd(nextCwd: string): void {
    const current = this.rootCwdState.cwd
    if (nextCwd === current && this.#rootCwd !== undefined) return
    this.#rootCwd = nextCwd === current ? { cwd: nextCwd } : { cwd: nextCwd, previousCwd: current }
  }

  #engineHooks(hooks: AgentHooks): StepHooks {
    const before = hooks.beforeStep
    const after = hooks.afterStep
    const host = (call: () => Promise<void> | void) =>
      Effect.tryPromise({ try: () => Promise.resolve().then(call), catch: (error) => error })
    return {
      ...(before === undefined ? {} : {
        beforeStep: (step, ctx) => host(() => before.call(hooks, step, wrapContext(ctx, this)))
      }),
      ...(after === undefined ? {} : {
        afterStep: (step, output, ctx) => host(() => after.call(hooks, step, output, wrapContext(ctx, this)))
      })
    }
  }

  #useSessions<A, E>(f: (sessions: EngineSessions.Sessions) => Effect.Effect<A, E, any>): Promise<A> {
    return this.#runtime.runPromiseExit(
      SessionsService.use(f) as Effect.Effect<A, E, HarnessServices>
    ).then((exit) => {
      if (this.#closed && exit._tag === "Failure" && exit.cause.reasons.every((r) => r._tag === "Interrupt")) {
        throw harnessClosed(this.name)
      }
      return unwrapExit(exit)
    })
  }

  /**
   * Queues `input` on the session of `options.threadId` (noetic's `execute`) and
   * resolves once it is accepted, not when its turn finishes: on a durable harness once
   * its record is stored. Turns run one after another per thread; `deliveryMode`
   * (`'next-turn'`, `'between-rounds'`, `'interrupt'`) and `messageId` as noetic's. Resolves
   * with an {@link ExecuteReceipt} (`result()` waits for the turn). Rejects
   * `NO_STEP_CONFIGURED` without a graph, `DELIVERY_MODE_INVALID` for an unknown mode.
   */
  execute(input: I, options: ExecuteOptions = {}): Promise<ExecuteReceipt<O>> {
    const { context, contextLayers, extraContextLayers, ...rest } = options
    const layers = selectLayers(this.#toEngineLayers(contextLayers ?? context), this.#toEngineLayers(extraContextLayers), this.#layers)
    const rootCwd = this.#rootCwd?.cwd
    const enqueueOptions: EngineSessions.EnqueueOptions = {
      ...(rootCwd === undefined ? {} : { cwd: rootCwd }),
      ...rest,
      ...(layers === undefined ? {} : { context: layers })
    }
    return this.#useSessions((sessions) =>
      Effect.map(sessions.enqueue(input, enqueueOptions), (enqueued) =>
        receipt<O>(enqueued, this.name, () => this.#closed))
    )
  }

  /**
   * The session's response once it has run every queued message and is idle (noetic's
   * `getAgentResponse`): `{ items, usage, cost?, text }`, plus the last turn's
   * `executionId` and root `output`. Rejects with the error of a turn that failed.
   */
  getAgentResponse(scope?: SessionScope): Promise<HarnessResponse> {
    return this.#useSessions((sessions) => sessions.response(scope?.threadId))
  }

  /** Every event of the session (noetic's `getFullStream`), across its turns, from its start. */
  getFullStream(scope?: SessionScope): AsyncIterable<StreamEvent> {
    return iterable(() => this.#useSessions((sessions) => sessions.events(scope?.threadId)))
  }

  /** The model's text deltas, across the session's turns (noetic's `getTextStream`). */
  getTextStream(scope?: SessionScope): AsyncIterable<string> {
    return iterable(() => this.#useSessions((sessions) => sessions.textStream(scope?.threadId)))
  }

  /** The model's reasoning deltas (noetic's `getReasoningStream`). */
  getReasoningStream(scope?: SessionScope): AsyncIterable<string> {
    return iterable(() => this.#useSessions((sessions) => sessions.reasoningStream(scope?.threadId)))
  }

  /** Cumulative item snapshots with `isComplete`, the whole session log (noetic's `getItemStream`). */
  getItemStream(scope?: SessionScope): AsyncIterable<StreamingItem> {
    return iterable(() => this.#useSessions((sessions) => sessions.itemStream(scope?.threadId)))
  }

  /** How many messages wait on the session; the running turn's is not counted (noetic's `getQueueSize`). */
  getQueueSize(scope?: SessionScope): number {
    return this.#sessions?.queueSize(scope?.threadId) ?? 0
  }

  /** Replaces the history the thread's next turn starts from (noetic's `seedSessionHistory`). */
  seedSessionHistory(threadId: string, items: ReadonlyArray<Item>): void {
    if (this.#sessions === undefined) this.#seeds.set(threadId, [...items])
    else this.#sessions.seedHistory(threadId, items)
  }

  /**
   * After a host restart: queues again every message a previous host of this harness
   * (same name, same checkpoint store) accepted and did not finish, thread by thread in
   * their order, each thread's history restored from its last turn. A turn that had
   * started resumes (its completed steps replay). Resolves with what it queued; an empty
   * list without a checkpoint store. `state` and `contextLayers` are the host wiring of
   * those turns.
   */
  resumeSessions(options: { readonly state?: unknown; readonly contextLayers?: ReadonlyArray<ContextLayer> } = {}): Promise<
    ReadonlyArray<{ readonly threadId: string; readonly messages: ReadonlyArray<ExecuteReceipt<O>> }>
  > {
    const layers = this.#toEngineLayers(options.contextLayers)
    return this.#useSessions((sessions) =>
      Effect.map(
        sessions.resumeQueued({
          ...(options.state === undefined ? {} : { state: options.state }),
          ...(layers === undefined ? {} : { context: layers })
        }),
        (found) =>
          found.threads.map((thread) => ({
            threadId: thread.threadId,
            messages: thread.messages.map((enqueued) => receipt<O>(enqueued, this.name, () => this.#closed))
          }))
      )
    )
  }

  /**
   * What the thread's session is doing (noetic's `HarnessStatus`): `{ kind: 'idle' }`,
   * `{ kind: 'generating', startedAt, turnId }` while a turn runs (the turn id is its
   * execution id), `{ kind: 'aborting', turnId }` once `abort` (or an interrupting
   * message) asked it to stop.
   */
  getStatus(scope?: SessionScope): HarnessStatus {
    return this.#sessions?.status(scope?.threadId) ?? { kind: "idle" }
  }

  /**
   * Stops the thread's running turn (noetic's `abort`): its context is aborted, so the
   * run's next step boundary fails it with `cancelled`; resolves once the turn has
   * stopped. Queued messages stay and run next. A thread with no running turn is left as it is.
   */
  async abort(scope?: SessionScope & { readonly reason?: string }): Promise<void> {
    if (this.#sessions === undefined) return
    await this.#useSessions((sessions) => sessions.abort(scope?.threadId, scope?.reason))
  }

  /**
   * Cancels `ctx` and the contexts under it (noetic's `cancel`): the same as
   * `ctx.abort(reason)`, a no-op when it is aborted already. Steps running under it fail
   * at their next boundary with `cancelled`. (noetic also runs layers' `onComplete` and
   * `dispose` here; this library refuses those hooks when a layer is given.)
   */
  async cancel(ctx: AgentContext, reason?: string): Promise<void> {
    if (ctx.aborted) return
    await this.#use((engine) => engine.cancel(Bridge.context.of(ctx), reason))
  }

  /** @internal The channels of this harness's contexts. */
  get channelHub(): ChannelHub {
    return this.#channels
  }

  /** Sends on a channel from `ctx` (noetic's `harness.send`); parks while a queue is full. */
  send<T>(channel: Channel<T>, value: T, ctx: AgentContext): Promise<void> {
    return ctx.send(channel, value)
  }

  /** Waits for a channel value for `ctx` (noetic's `harness.recv`). */
  recv<T>(channel: Channel<T>, ctx: AgentContext, opts?: { timeout?: number }): Promise<T> {
    return ctx.recv(channel, opts)
  }

  /** A channel value available now, else null (noetic's `harness.tryRecv`). */
  tryRecv<T>(channel: Channel<T>, ctx: AgentContext): T | null {
    return ctx.tryRecv(channel)
  }

  /**
   * A handle outside code sends through into the execution `executionId` (noetic's
   * `getChannelHandle`). On a durable harness an external channel's value is stored
   * first: a handle of another process's harness over the same storage reaches this
   * one, and a value sent while no host runs is delivered after a restore.
   */
  getChannelHandle<T>(channel: ExternalChannel<T> | Channel<T>, executionId: string): ChannelHandle<T> {
    if (!this.#closed) void this.#use(() => Effect.void).catch(() => {})
    return handleOf(this.#channels, channel, executionId)
  }

  /** Values sent on `channel`, as they come, until `executionId` ends (noetic's `getChannelStream`). */
  getChannelStream<T>(channel: ExternalChannel<T> | Channel<T>, executionId: string): AsyncIterable<T> {
    return streamOf(this.#channels, channel, executionId)
  }

  /** Runs the `init` of `ctx`'s layers that have no state yet (noetic's `initLayers`). */
  initLayers(_layers: ReadonlyArray<ContextLayer> | undefined, ctx: AgentContext, _storage?: unknown): Promise<void> {
    return this.#use((engine) => LayerMethods.init(engine, ctx))
  }

  /** Runs `recall` of `layers` (default: `ctx`'s) in slot order (noetic's `recallLayers`). */
  recallLayers(layers: ReadonlyArray<ContextLayer> | undefined, input: string, ctx: AgentContext): Promise<Array<LayerMethods.RecallLayerOutput>> {
    return this.#use((engine) => LayerMethods.recall(engine, ctx, this.#toEngineLayers(layers), input))
  }

  /** The recall of `layers`' atomic-mode ones only, with `budgets` (noetic's `recallLayersAtomic`). */
  recallLayersAtomic(layers: ReadonlyArray<ContextLayer> | undefined, input: string, ctx: AgentContext, budgets: ReadonlyMap<string, number> = new Map()): Promise<Array<LayerMethods.RecallLayerOutput>> {
    return this.#use((engine) => LayerMethods.recallByMode(engine, ctx, this.#toEngineLayers(layers), input, budgets, "atomic"))
  }

  /** The recall of `layers`' eventual-mode ones only, served from the recall cache (noetic's `recallLayersEventual`). */
  recallLayersEventual(layers: ReadonlyArray<ContextLayer> | undefined, input: string, ctx: AgentContext, budgets: ReadonlyMap<string, number> = new Map()): Promise<Array<LayerMethods.RecallLayerOutput>> {
    return this.#use((engine) => LayerMethods.recallByMode(engine, ctx, this.#toEngineLayers(layers), input, budgets, "eventual"))
  }

  /** A span under `parent` (a new trace when null), exported on `end()` to the `traceExporter` (noetic's `createSpan`). */
  createSpan(name: string, parent: Span | null): Span {
    const made = Effect.runSync(Effect.provideService(
      Effect.makeSpan(name, parent === null ? { root: true } : { parent: parent.effectSpan }),
      Tracer.Tracer,
      tracerFor(this.#traceExporter)
    ))
    return spanOf(made, true)
  }

  /** Recalls again, fresh, the layers the re-render requests of `runAppendPipeline` select (noetic's `executeRerender`). */
  executeRerender(requests: ReadonlyArray<LayerMethods.RerenderRequest>, layers: ReadonlyArray<ContextLayer> | undefined, ctx: AgentContext, budgets: ReadonlyMap<string, number> = new Map(), query = ""): Promise<Array<LayerMethods.RecallLayerOutput>> {
    return this.#use((engine) => LayerMethods.rerender(engine, ctx, requests, this.#toEngineLayers(layers), budgets, query))
  }

  /** Runs `store` of `layers` after a model response, waiting for the write-through (noetic's `storeLayers`). */
  storeLayers(layers: ReadonlyArray<ContextLayer> | undefined, response: LayerMethods.LLMResponse, ctx: AgentContext): Promise<void> {
    return this.#use((engine) => LayerMethods.store(engine, ctx, this.#toEngineLayers(layers), response))
  }

  /** Runs `dispose` of `layers` in reverse order (noetic's `disposeLayers`). */
  disposeLayers(layers: ReadonlyArray<ContextLayer> | undefined, ctx: AgentContext): Promise<void> {
    return this.#use((engine) => LayerMethods.dispose(engine, ctx, this.#toEngineLayers(layers)))
  }

  /** Runs `beforeToolCall` of `layers`: the steering verdict for a tool call (noetic's `beforeToolCall`). */
  beforeToolCall(layers: ReadonlyArray<ContextLayer> | undefined, toolName: string, toolArgs: unknown, ctx: AgentContext, callId?: string): Promise<LayerMethods.SteeringDecision> {
    return this.#use((engine) => LayerMethods.beforeTool(engine, ctx, this.#toEngineLayers(layers), toolName, toolArgs, callId))
  }

  /** Runs `afterModelCall` of `layers`: the steering verdict for a response (noetic's `afterModelCall`). */
  afterModelCall(layers: ReadonlyArray<ContextLayer> | undefined, response: LayerMethods.LLMResponse, ctx: AgentContext): Promise<LayerMethods.SteeringDecision> {
    return this.#use((engine) => LayerMethods.afterModel(engine, ctx, this.#toEngineLayers(layers), response))
  }

  /** Runs `projectHistory` of `layers` over `items` (noetic's `projectHistory`); the log is not touched. */
  projectHistory(layers: ReadonlyArray<ContextLayer> | undefined, items: ReadonlyArray<Item>, ctx: AgentContext): Promise<ReadonlyArray<Item>> {
    return this.#use((engine) => LayerMethods.project(engine, ctx, this.#toEngineLayers(layers), items))
  }

  /**
   * The items the next model call of thread `scope.threadId` would send (noetic's
   * `previewRequestItems`): the harness's layers initialised and recalled on a
   * throwaway context over the thread's latest item log, read-only (nothing pinned).
   */
  previewRequestItems(scope?: { threadId?: string }): Promise<ReadonlyArray<Item>> {
    const threadId = scope?.threadId ?? EngineSessions.DEFAULT_THREAD_ID
    const throwaway = this.createContext({ threadId, items: [...LayerMethods.latestItems(threadId)] })
    return this.#use((engine) => LayerMethods.preview(engine, throwaway))
  }

  /** A live context's layer state (noetic's `getLayerState`). */
  getLayerState<T>(executionId: string, layerId: string): T | undefined {
    const ctx = LayerMethods.contextById(executionId)
    // Not live here: the host's store, as noetic reads it.
    return ctx === undefined ? this.#layerStateStore?.host.get<T>(executionId, layerId) : ctx.layerState<T>(layerId)
  }

  /** Sets a live context's layer state, written through for a durable scope (noetic's `setLayerState`). */
  setLayerState<T>(executionId: string, layerId: string, state: T): void {
    const ctx = LayerMethods.contextById(executionId)
    if (ctx === undefined) return this.#layerStateStore?.host.set(executionId, layerId, state)
    ctx.setLayerStateValue(layerId, state)
    void runChannel(ctx.persistLayerState())
  }

  /** Saves a snapshot of `ctx`; a no-op without a checkpoint store. A failing save is logged, never thrown. */
  checkpoint(ctx: AgentContext): Promise<void> {
    return this.#use((engine) => engine.checkpoint(Bridge.context.of(ctx)))
  }

  /**
   * noetic's append pipeline: runs the `onItemAppend` hooks of `layers` over `items` in
   * slot order, each layer with `ctx`'s state for its id, and resolves with the items to
   * append and the re-render requests. It appends nothing: the caller appends what it
   * keeps (`ctx.itemLog.append`). A layer whose `init` left no state is skipped, the
   * pipeline stops once no items are left, and a hook that throws passes its items on
   * unchanged (logged). `ctx` is checkpointed before the promise resolves.
   */
  runAppendPipeline(
    layers: ReadonlyArray<ContextLayer>,
    items: ReadonlyArray<Item>,
    ctx: AgentContext
  ): Promise<AppendPipelineResult> {
    return Promise.resolve().then(() => {
      const engineLayers = this.#toEngineLayers(layers) ?? []
      return Effect.runPromise(Bridge.context.of(ctx).appendPipeline(engineLayers, items))
    }).then((result) => ({
      items: [...result.items],
      rerenderRequests: result.rerenderRequests.map((request) => ({ ...request }))
    }))
  }

  /**
   * The rebuilt context of a recorded execution, or null. Rejects
   * `CHECKPOINT_SCHEMA_MISMATCH` for a bad snapshot. `contextLayers` (or `context`)
   * replace the harness's layers of the same id.
   */
  restore(executionId: string, options?: RestoreContextOptions): Promise<AgentContext | null> {
    return this.#use((engine) =>
      Effect.map(engine.restore(executionId, engineRestoreOptions(options, this.#restoreLayers)), (ctx) =>
        Option.getOrNull(Option.map(ctx, (engineCtx) => wrapContext(engineCtx, this))))
    )
  }

  /** Restores and re-runs the root graph: completed steps replay. Null when nothing is recorded. */
  resume(
    executionId: string,
    options?: RestoreContextOptions
  ): Promise<{ readonly executionId: string; readonly output: O } | null> {
    return this.#use((engine) =>
      Effect.map(engine.resume(executionId, engineRestoreOptions(options, this.#restoreLayers)), Option.getOrNull)
    ) as Promise<{ readonly executionId: string; readonly output: O } | null>
  }

  /** Discards the snapshot and every ledger entry of an execution. */
  clearCheckpoint(executionId: string): Promise<void> {
    return this.#use((engine) => engine.clearCheckpoint(executionId))
  }

  /**
   * A fresh context, at once: `id` and `threadId` random UUIDs unless given, `parent`
   * null at the root, the harness's layers (or `contextLayers`, plus
   * `extraContextLayers`), the item log from `items`, the cwd from `cwdInit` (else the
   * parent's). Layer `init` hooks run before its first step.
   */
  createContext(options: CreateContextOptions = {}): AgentContext {
    const parent = (options.parent === undefined ? undefined : Bridge.context.of(options.parent))
    const layers = selectLayers(
      this.#toEngineLayers(options.contextLayers ?? options.context),
      this.#toEngineLayers(options.extraContextLayers),
      this.#layers
    )
    // The engine's rule (what a child inherits); a root context starts in the root cwd.
    const inherited = inheritFields({ ...options, cwd: options.cwdInit }, parent)
    const cwd = inherited.cwd ?? (parent === undefined ? this.#rootCwd?.cwd : undefined)
    const engine = new EngineContext({
      id: options.id ?? nodeCrypto().randomUUID(),
      threadId: inherited.threadId ?? nodeCrypto().randomUUID(),
      resourceId: inherited.resourceId,
      parent,
      state: options.state,
      layers: layers ?? this.#layers,
      items: options.items,
      cwd: cwd === undefined ? null : { current: cwd },
      channels: this.#channels,
      layerStorage: this.#engineLayerStorage,
      ...(this.#layerStateStore === undefined ? {} : { layerStateStore: this.#layerStateStore.engine }),
      // The engine is built lazily (its storage may open asynchronously): a checkpoint
      // of this context goes through it when it comes.
      checkpoint: (ctx) =>
        Effect.promise(() =>
          this.#use((harness) => harness.checkpoint(ctx)).catch((error) =>
            Effect.runPromise(logWarning("checkpoint not saved: the harness is closed", error))
          )
        )
    })
    return wrapContext(engine, this)
  }

  /**
   * Runs one step on a context (durably when the harness is). Given the context of a
   * running step (`ctx.harness.run(step, input, ctx)` inside a body), the step runs
   * below that step, as `ctx.run(step, input)` does.
   */
  run<SI, SO>(step: AnyStep<SI, SO>, input: SI, ctx: AgentContext): Promise<SO> {
    if (ctx instanceof StepContext) return ctx.run(step, input)
    return this.#use((engine) => engine.run(asStep(step) as Step.Step<SI, SO, unknown, never>, input, Bridge.context.of(ctx)))
  }

  /**
   * Starts `step` as a detached child and returns its `DetachedHandle` at once. The
   * adapter is `options.subprocess`, else the step's, else the harness default. The
   * parent context checkpoints when the child settles.
   */
  detachedSpawn<SI, SO = unknown>(
    given: AnyStep<SI, SO>,
    input: SI,
    parentCtx: AgentContext,
    options: DetachedSpawnOptions = {}
  ): DetachedHandle<SO> {
    const step = asStep(given)
    const { subprocess, ...rest } = options
    const chosen = subprocess ?? subprocessOf(step)
    const adapter = chosen === undefined
      ? undefined
      : toEngineSubprocessShape(chosen, subprocess === undefined ? `step ${step.id}: subprocess` : "detachedSpawn options.subprocess")
    // The documented API hands the handle back at once, so its ids are made here.
    const handleId = nodeCrypto().randomUUID()
    const executionId = nodeCrypto().randomUUID()
    const started = this.#use((engine) =>
      Effect.gen(function*() {
        const engineOptions: EngineHarness.DetachedSpawnOptions = {
          ...rest,
          handleId,
          executionId,
          ...(adapter === undefined ? {} : { subprocess: adapter })
        }
        return toFacadeHandle(
          yield* engine.detachedSpawn(step as Step.Step<SI, unknown, unknown, never>, input, Bridge.context.of(parentCtx), engineOptions)
        )
      })
    )
    this.#spawns.track(started)
    spawnsThrough(chosen ?? this.subprocess)?.track(started)
    return new DetachedHandleImpl<SO>({
      handleId,
      stepId: step.id,
      executionId,
      parentExecutionId: parentCtx.id,
      metadata: options.metadata ?? {},
      started
    })
  }

  /**
   * noetic's `harness.callModel(request)`: one model call through the harness's provider,
   * its tool loop included, on `request.items`; resolves with the new items, usage and
   * cost. Not a step: nothing is recorded or appended (docs/runtime.md#harnesscallmodel).
   */
  callModel(request: HarnessCallModelRequest): Promise<LLMResponse> {
    return this.#use(() => harnessCallModel(request)) as Promise<LLMResponse>
  }

  /** Answers a pending ask-user prompt of an execution this harness is running. */
  answerAskUser(executionId: string, promptId: string, output: unknown): Promise<void> {
    return this.#use((engine) => engine.answerAskUser(executionId, promptId, output))
  }

  /** Stops in-process children and releases the harness's runtime. */
  close(): Promise<void> {
    this.#closed = true
    return this.#runtime.dispose()
  }

  /** `await using harness = new AgentHarness(...)` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

/** The default context layers, for hosts that extend them. */
export const defaultContextLayers = defaultLayers

/** What `reattachLiveChildren` found. */
export interface ReattachedChildren {
  /** Every child still known: running, or finished while the host was down. */
  readonly handles: ReadonlyArray<SubprocessHandle>
  /** Each handle's restored parent context, by handle id. */
  readonly contexts: Map<string, AgentContext>
  /** Handles whose parent context could not be restored, and why; the others are unaffected. */
  readonly failures: ReadonlyArray<{ readonly handle: SubprocessHandle; readonly error: Error }>
}

/**
 * The recovery step of a host restart: `harness.subprocess.listLive()`, then
 * `harness.restore(parentExecutionId, opts.restore)` for every handle, in parallel. One
 * bad snapshot lands in `failures` and does not abort the others. Each restored parent
 * checkpoints when its child settles.
 */
export const reattachLiveChildren = (
  harness: AgentHarness,
  options: {
    readonly restore?: RestoreContextOptions | ((handle: SubprocessHandle) => RestoreContextOptions)
  } = {}
): Promise<ReattachedChildren> => {
  const use = engines.get(harness)
  if (use === undefined) return Promise.reject(new TypeError("reattachLiveChildren needs an AgentHarness of this library"))
  const { restore } = options
  return use((engine) =>
    Effect.map(
      engineReattachLiveChildren(engine, {
        restore: (handle) =>
          engineRestoreOptions(
            typeof restore === "function" ? restore(toFacadeHandle(handle)) : restore,
            layerMergers.get(harness)!
          )
      }),
      (found): ReattachedChildren => ({
        handles: found.handles.map(toFacadeHandle),
        contexts: new Map(Array.from(found.contexts, ([handleId, ctx]) => [handleId, wrapContext(ctx, harness)])),
        failures: found.failures.map(({ error, handle }) => ({ handle: toFacadeHandle(handle), error: toFacadeError(error) }))
      })
    )
  )
}
