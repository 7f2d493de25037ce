/**
 * The documented `AgentHarness` for plain TypeScript, in noetic's shapes: step
 * builders taking noetic's option objects (bodies return values or Promises), a
 * harness whose `createContext` and `detachedSpawn` answer at once, contexts with
 * noetic's members, noetic's `ContextLayer` definitions and `DetachedHandle`s. The
 * harness owns a `ManagedRuntime` built from the same layers an Effect user would
 * compose; the types here are the ones the rest of the facade builds on.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as AiError from "effect/ai/AiError"
import type * as LanguageModel from "effect/ai/LanguageModel"
import type { StorageError } from "../Errors.ts"
import {
  AgentContext as EngineContext,
  type ContextLayer as EngineContextLayer,
  defaultLayers,
  history,
  instructions,
  type Item,
  scratchpad
} from "../harness/AgentContext.ts"
import * as EngineHarness from "../harness/AgentHarness.ts"
import * as EngineSessions from "../harness/Sessions.ts"
import { reattachLiveChildren as engineReattachLiveChildren } from "../harness/Reattach.ts"
import * as Step from "../harness/Step.ts"
import { nodeCrypto } from "../internal/builtins.ts"
import type * as ScriptedModel from "../layers/ScriptedModel.ts"
import type { AskUserPrompt, Cwd, FrontierEntry } from "../schema/CheckpointSnapshot.ts"
import { CheckpointStore as CheckpointStoreTag, type CheckpointStoreShape } from "../services/CheckpointStore.ts"
import { makeWith as makeStepLedger, StepLedger } from "../services/StepLedger.ts"
import { SubprocessAdapter as SubprocessAdapterTag } from "../services/SubprocessAdapter.ts"
import {
  type CheckpointStore,
  clearLedger,
  holdsExecutionLeases,
  isEngineBackedCheckpointStore,
  resolveStepLedgerRetention,
  type StepLedgerRetention,
  toEngineCheckpointStore
} from "./checkpoint.ts"
import {
  isConfigError,
  isNoeticError,
  NoeticConfigError,
  bodyFailure,
  hostThrown,
  type NoeticErrorPayload,
  stepFailed,
  toFacadeError,
  unwrapExit,
  childError,
  childFailedReason,
  handleEvicted,
  handleEvictedOf,
  harnessClosed,
  isPlainRecordedError,
  payloadOf
} from "./errors.ts"
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
import {
  type DeliveryMode,
  type ExecuteReceipt,
  type HarnessResponse,
  type HarnessStatus,
  iterable,
  receipt,
  type SessionScope,
  type StreamEvent,
  type StreamingItem
} from "./sessions.ts"

export { history, instructions, scratchpad }
export type { Item }
export type { RetryPolicy, Snapshot, Verdict } from "../harness/Step.ts"

// -----------------------------------------------------------------------------
// Context layers (noetic's definitions)
// -----------------------------------------------------------------------------

/** How a layer's state is keyed and shared (noetic's `ContextScope`). */
export type ContextScope = "thread" | "resource" | "global" | "execution"

/** Storage namespaced to one layer and scope key, handed to `init` (noetic's `ScopedStorage`). */
export interface ScopedStorage {
  get<T>(key: string): Promise<T | null>
  set<T>(key: string, value: T): Promise<void>
  delete(key: string): Promise<void>
  list(prefix?: string): Promise<Array<string>>
  getMany<T>(keys: Array<string>): Promise<Map<string, T>>
}

/** What a layer hook is told about the execution (noetic's `ExecutionContext`, the fields this library has). */
export interface ExecutionContext {
  executionId: string
  threadId: string
  resourceId?: string
  depth: number
  stepNumber: number
  tokenUsage: { input: number; output: number }
  cost: number
  tokenize(text: string): number
  trace: {
    setAttribute(key: string, value: string | number | boolean): void
    addEvent(name: string, attributes?: Record<string, string | number | boolean>): void
  }
  /** A sibling layer's state, by layer id. */
  readLayerState<T>(layerId: string): T | undefined
}

/** What `init` is given. */
export interface InitParams {
  storage: ScopedStorage
  scopeKey: string
  ctx: ExecutionContext
}

/** What `onItemAppend` is given: items on their way into the log, in slot order. */
export interface OnItemAppendParams<TState> {
  items: Array<Item>
  log: { readonly items: ReadonlyArray<Item> }
  ctx: ExecutionContext
  state: TState
}

/** A re-render a layer's `onItemAppend` asked for, as `runAppendPipeline` reports it. */
export interface RerenderRequest {
  layerId: string
  slot: number
  timing: "immediate" | "batched"
  scope: "self" | "slot-after" | "all"
}

/** What `runAppendPipeline` resolves with: the items to append, and the re-renders asked for. */
export interface AppendPipelineResult {
  items: Array<Item>
  rerenderRequests: Array<RerenderRequest>
}

/** What `onItemAppend` returns: the items to append (filtered, changed or added to) and the new state. */
export interface OnItemAppendResult<TState> {
  items: Array<Item>
  state?: TState
  rerender?: boolean
  timing?: "immediate" | "batched"
  scope?: "self" | "slot-after" | "all"
}

/**
 * noetic's layer hooks. This library runs `init` (lazily, before the first step,
 * only for a layer with no restored state) and `onItemAppend`; a layer with any other
 * hook is refused when a harness or context takes it (`UNSUPPORTED_LAYER_HOOK`).
 */
export interface ContextLayerHooks<TState = unknown> {
  init?(params: InitParams): Promise<{ state: TState }>
  onItemAppend?(params: OnItemAppendParams<TState>): Promise<OnItemAppendResult<TState>>
  recall?(params: any): Promise<unknown>
  store?(params: any): Promise<unknown>
  onSpawn?(params: any): Promise<unknown>
  onReturn?(params: any): Promise<unknown>
  onComplete?(params: any): Promise<unknown>
  dispose?(params: any): Promise<void>
  beforeToolCall?(params: any): Promise<unknown>
  afterModelCall?(params: any): Promise<unknown>
  projectHistory?(params: any): Promise<unknown>
  renderDelta?(params: any): Promise<string | null>
}

/** A noetic context layer definition: serialisable state per layer id, kept in snapshots. */
export interface NoeticContextLayer<TState = unknown> {
  id: string
  name?: string
  slot: number
  scope: ContextScope
  hooks: ContextLayerHooks<TState>
  /** `'disable'`: a failing `init` leaves the layer without state instead of failing the run. */
  onInitError?: "throw" | "disable"
  budget?: unknown
  timeouts?: unknown
  provides?: unknown
  placement?: "anchor" | "live" | "auto"
  /** When a re-render this layer asks for without a `timing` happens (default `'batched'`). */
  rerenderTiming?: "immediate" | "batched"
}

/** A context layer: noetic's definition, or this library's `{ id, init, onAppend }` form. */
export type ContextLayer<TState = any> = NoeticContextLayer<TState> | EngineContextLayer<TState>

const RUN_HOOKS = new Set(["init", "onItemAppend"])
const SCOPES = new Set(["thread", "resource", "global", "execution"])

const isNoeticLayer = (layer: ContextLayer): layer is NoeticContextLayer<any> =>
  typeof layer === "object" && layer !== null && "hooks" in layer

const layerConfigError = (code: string, message: string, hint: string) => new NoeticConfigError({ code, message, hint })

/** A storage namespaced under `prefix`. */
const scopedStorage = (storage: StorageAdapter, prefix: string): ScopedStorage => ({
  get: (key) => storage.get(prefix + key),
  set: (key, value) => storage.set(prefix + key, value),
  delete: (key) => storage.delete(prefix + key),
  list: async (sub = "") => (await storage.list(prefix + sub)).map((key) => key.slice(prefix.length)),
  getMany: async <T>(keys: Array<string>) => {
    const found = new Map<string, T>()
    await Promise.all(keys.map(async (key) => {
      const value = await storage.get<T>(prefix + key)
      if (value !== null && value !== undefined) found.set(key, value)
    }))
    return found
  }
})

const executionContextOf = (ctx: EngineContext): ExecutionContext => ({
  executionId: ctx.id,
  threadId: ctx.threadId ?? ctx.id,
  ...(ctx.resourceId === undefined ? {} : { resourceId: ctx.resourceId }),
  depth: ctx.depth,
  stepNumber: 0,
  tokenUsage: { input: 0, output: 0 },
  cost: 0,
  tokenize: (text) => Math.ceil(text.length / 4),
  trace: { setAttribute: () => {}, addEvent: () => {} },
  readLayerState: <T>(layerId: string) => ctx.layerState<T>(layerId)
})

const scopeKeyOf = (scope: ContextScope, ctx: EngineContext): string => {
  switch (scope) {
    case "thread":
      return ctx.threadId ?? ctx.id
    case "resource":
      return ctx.resourceId ?? ctx.threadId ?? ctx.id
    case "global":
      return "global"
    case "execution":
      return ctx.id
  }
}

/**
 * The engine form of a layer. A noetic definition is checked (a hook this library
 * does not run is refused by name) and its `init` gets a `ScopedStorage` over
 * `storage` (the harness's `environment.storage.adapter`, else memory).
 */
export const toEngineLayer = (layer: ContextLayer, storage: StorageAdapter): EngineContextLayer<any> => {
  if (!isNoeticLayer(layer)) {
    if (typeof layer !== "object" || layer === null || typeof layer.id !== "string" || layer.id.trim() === "") {
      throw layerConfigError(
        "INVALID_CONTEXT_LAYER",
        "a context layer needs a non-empty string id",
        "Give every layer a unique id: its state is stored under it in snapshots."
      )
    }
    return layer
  }
  if (typeof layer.id !== "string" || layer.id.trim() === "") {
    throw layerConfigError(
      "INVALID_CONTEXT_LAYER",
      "a context layer needs a non-empty string id",
      "Give every layer a unique id: its state is stored under it in snapshots."
    )
  }
  if (!SCOPES.has(layer.scope)) {
    throw layerConfigError(
      "INVALID_CONTEXT_LAYER",
      `context layer '${layer.id}' has scope ${JSON.stringify(layer.scope)}`,
      "Use one of 'thread', 'resource', 'global' or 'execution'."
    )
  }
  const hooks = layer.hooks ?? {}
  for (const [hook, value] of Object.entries(hooks)) {
    if (value !== undefined && !RUN_HOOKS.has(hook)) {
      throw layerConfigError(
        "UNSUPPORTED_LAYER_HOOK",
        `context layer '${layer.id}' has a '${hook}' hook, which noetic-effect does not run`,
        `Remove '${hook}' from the layer's hooks: this library runs init (state init, skipped when a snapshot restores the state) and onItemAppend only, and refuses a hook rather than ignore it.`
      )
    }
  }
  const init = hooks.init
  const onItemAppend = hooks.onItemAppend
  return {
    id: layer.id,
    slot: layer.slot,
    definition: layer,
    ...(init === undefined ? { init: () => undefined } : {
      initEffect: (ctx: EngineContext) => {
        const scopeKey = scopeKeyOf(layer.scope, ctx)
        const run = Effect.tryPromise({
          try: () =>
            init.call(hooks, {
              storage: scopedStorage(storage, `layer:${layer.id}:${scopeKey}:`),
              scopeKey,
              ctx: executionContextOf(ctx)
            }),
          catch: (cause) => cause
        })
        return layer.onInitError === "disable"
          ? Effect.catch(Effect.map(run, (result) => result?.state), (cause) =>
            Effect.as(logWarning(`context layer '${layer.id}' init failed; it runs disabled`, cause), undefined))
          : Effect.orDie(Effect.map(run, (result) => result?.state))
      }
    }),
    ...(onItemAppend === undefined ? {} : {
      appendEffect: ({ ctx, items, state }) =>
        Effect.orDie(Effect.tryPromise({
          try: () =>
            onItemAppend.call(hooks, {
              items: [...items],
              log: { items: ctx.items },
              ctx: executionContextOf(ctx),
              state
            }),
          catch: (cause) => cause
        })).pipe(Effect.map((result) => ({
          items: result.items,
          state: result.state,
          rerender: result.rerender === true
            ? { timing: result.timing ?? layer.rerenderTiming ?? "batched", scope: result.scope ?? "slot-after" }
            : undefined
        })))
    })
  }
}

// Layers of spawn steps are built without a harness: their init storage is this one.
let defaultLayerStorage: StorageAdapter | undefined
const layerStorageDefault = (): StorageAdapter => (defaultLayerStorage ??= createInMemoryStorage())

// -----------------------------------------------------------------------------
// Contexts
// -----------------------------------------------------------------------------

/** The working directory as noetic's contexts carry it. */
export interface CwdState {
  cwd: string
  previousCwd?: string
}

/** The item log as noetic's contexts carry it. */
export interface ItemLog {
  readonly items: ReadonlyArray<Item>
  /** Appends one item through the append pipeline (layers, dedupe, checkpoint), without waiting. */
  append(item: Item): void
}

/**
 * The live context of an execution (noetic's `Context`): `id`, `threadId`,
 * `resourceId`, assignable `state`, `parent` (null at the root), `itemLog`,
 * `cwdState`, `depth`, `layers`, `harness`, `subprocess`, `checkpoint()`, `abort()`,
 * `aborted`; and this library's Promise methods (`append`, `askUser`, ...).
 */
export class AgentContext {
  #harness: AgentHarness | undefined
  #itemLog: ItemLog | undefined

  /** @internal */
  constructor(engine: EngineContext, harness?: AgentHarness) {
    Bridge.context.attach(this, engine)
    this.#harness = harness
  }

  /** @internal Attaches the harness to a context first seen without one. */
  adoptHarness(harness: AgentHarness | undefined): void {
    if (this.#harness === undefined) this.#harness = harness
  }

  /** The execution id. */
  get id(): string {
    return Bridge.context.of(this).id
  }
  /** The thread: a random UUID unless one was given. */
  get threadId(): string {
    return Bridge.context.of(this).threadId ?? Bridge.context.of(this).id
  }
  get resourceId(): string | undefined {
    return Bridge.context.of(this).resourceId
  }
  /**
   * Host wiring given to `execute`, `createContext` or `restore`; assignable, never
   * persisted. `{}` until something else is given or assigned, as in noetic.
   */
  get state(): any {
    const engine = Bridge.context.of(this)
    if (engine.state === undefined) engine.state = {}
    return engine.state
  }
  set state(value: unknown) {
    Bridge.context.of(this).state = value
  }
  /** The context this one was made under, or null at the root. */
  get parent(): AgentContext | null {
    const parent = Bridge.context.of(this).parent
    return parent === undefined ? null : wrapContext(parent, this.#harness)
  }
  /** How many parents this context has: 0 at the root. */
  get depth(): number {
    return Bridge.context.of(this).depth
  }
  /** The item log (`itemLog.items`, oldest first). */
  get itemLog(): ItemLog {
    const engine = Bridge.context.of(this)
    return this.#itemLog ??= {
      get items() {
        return engine.items
      },
      append: (item) => {
        this.append([item]).catch((error) => Effect.runFork(logWarning("itemLog.append failed", error)))
      }
    }
  }
  /** The working directory: the current one (the process cwd when none was set) and the previous one. */
  get cwdState(): CwdState {
    const cwd = Bridge.context.of(this).cwd
    const previous = cwd?.previous
    return {
      cwd: cwd?.current ?? process.cwd(),
      ...(previous === undefined || previous === null ? {} : { previousCwd: previous })
    }
  }
  /**
   * The layers of this context, as they were given (noetic definitions stay themselves);
   * absent when it has none (neither the harness nor the call gave any), as in noetic,
   * whose `Context` declares `layers?`. Read through an accessor defined below the class.
   */
  declare readonly layers?: Array<ContextLayer>
  /** The harness this context belongs to: `ctx.harness.run(step, input, ctx)` composes steps. */
  get harness(): AgentHarness {
    return this.#harness ?? (detachedRunner as unknown as AgentHarness)
  }
  /** The harness's subprocess adapter. */
  get subprocess(): SubprocessAdapter {
    const harness = this.#harness
    if (harness === undefined) {
      throw new TypeError("this context was not made by an AgentHarness of this process: it has no subprocess adapter")
    }
    return harness.subprocess
  }
  /** Whether `abort` was called on this context or one it was made under. */
  get aborted(): boolean {
    return Bridge.context.of(this).aborted
  }
  /** The reason the first `abort` gave. */
  get abortReason(): string | undefined {
    return Bridge.context.of(this).abortReason
  }
  /**
   * Cancels this context and every context made under it: the next step dispatched on
   * any of them rejects with a `NoeticError` of kind `cancelled`. It never travels up.
   */
  abort(reason?: string): void {
    Bridge.context.of(this).abort(reason)
  }
  /** The item log, oldest first (same as `itemLog.items`). */
  get items(): ReadonlyArray<Item> {
    return Bridge.context.of(this).items
  }
  /** Each context layer's state, by layer id. */
  get layerStates(): Readonly<Record<string, unknown>> {
    return Bridge.context.of(this).layers
  }
  /** One layer's state. */
  layerState<S = unknown>(layerId: string): S | undefined {
    return Bridge.context.of(this).layerState<S>(layerId)
  }
  /** The working directory as a snapshot records it (`current`, `previous`), or null when none was set. */
  get cwd(): Cwd | null {
    return Bridge.context.of(this).cwd
  }
  /** Ask-user prompts waiting for an answer. */
  get pendingAskUser(): ReadonlyArray<AskUserPrompt> {
    return Bridge.context.of(this).pendingAskUser
  }
  /** The frontier of the snapshot this context was restored from: which steps were in flight. */
  get frontier(): ReadonlyArray<FrontierEntry> {
    return Bridge.context.of(this).restoredFrontier
  }
  /** Saves a snapshot now (a no-op without a checkpoint store); never rejects. */
  checkpoint(): Promise<void> {
    return Effect.runPromise(Bridge.context.of(this).checkpoint())
  }
  /** The append pipeline: layer hooks, dedupe by id and response id, layer state, checkpoint. */
  append(items: ReadonlyArray<Item>): Promise<ReadonlyArray<Item>> {
    return Effect.runPromise(Bridge.context.of(this).append(items))
  }
  /** Changes the working directory, remembering the previous one. */
  setCwd(path: string | null): Promise<void> {
    return Effect.runPromise(Bridge.context.of(this).setCwd(path))
  }
  /** Replaces a layer's state. */
  updateLayer<S>(layerId: string, f: (state: S | undefined) => S): Promise<void> {
    return Effect.runPromise(Bridge.context.of(this).updateLayer(layerId, f))
  }
  /** Enqueues an ask-user prompt (checkpointing it) and resolves with the answer. */
  askUser(input: unknown, options?: { readonly id?: string }): Promise<unknown> {
    return run(Bridge.context.of(this).askUser(input, options))
  }
  /** Answers a pending prompt. */
  resolveAskUser(promptId: string, output: unknown): Promise<void> {
    return run(Bridge.context.of(this).resolveAskUser(promptId, output))
  }
  /** Cancels a pending prompt; its asker rejects. */
  cancelAskUser(promptId: string, reason?: string): Promise<void> {
    return run(Bridge.context.of(this).cancelAskUser(promptId, reason))
  }
}

// `layers` is optional in noetic's `Context`: an accessor on the prototype keeps the
// class's declaration optional (a class `get` could only be typed `X | undefined`).
Object.defineProperty(AgentContext.prototype, "layers", {
  configurable: true,
  enumerable: false,
  get(this: AgentContext): Array<ContextLayer> | undefined {
    const layers = Bridge.context.of(this).layerDefinitions
    return layers.length === 0 ? undefined : [...layers] as Array<ContextLayer>
  }
})

const wrapped = new WeakMap<EngineContext, AgentContext>()

/** The one facade context of an engine context. */
const wrapContext = (engine: EngineContext, harness: AgentHarness | undefined): AgentContext => {
  let context = wrapped.get(engine)
  if (context === undefined) {
    context = new AgentContext(engine, harness)
    wrapped.set(engine, context)
  } else {
    context.adoptHarness(harness)
  }
  return context
}

/** The facade harness a runtime serves, so step bodies can hand it out as `ctx.harness`. */
class FacadeHarness extends Context.Service<FacadeHarness, AgentHarness>()("noetic-effect/promise/FacadeHarness") {}

/** What step bodies see: their context plus `run` for child steps and their own `path`. */
export class StepContext extends AgentContext {
  readonly #step: Step.StepContext
  readonly #services: Context.Context<never>
  readonly #signal: AbortSignal

  /** @internal */
  constructor(step: Step.StepContext, services: Context.Context<never>, signal: AbortSignal) {
    super(step, Option.getOrUndefined(Context.getOption(services as Context.Context<FacadeHarness>, FacadeHarness)))
    this.#step = step
    this.#services = services
    this.#signal = signal
  }

  /** This dispatch's path, e.g. `/agent#0/search#1`. */
  get path(): string {
    return this.#step.path
  }

  /** Aborted when the step is interrupted (a race lost, a timeout, a failing sibling). */
  get signal(): AbortSignal {
    return this.#signal
  }

  /** Runs a child step below this one; a recorded output replays instead of running. */
  run<I, O>(step: AnyStep<I, O>, input: I): Promise<O> {
    return Effect.runPromiseExitWith(this.#services)(
      this.#step.run(asStep(step) as Step.Step<I, O, unknown, never>, input),
      { signal: this.#signal }
    ).then(unwrapExit)
  }

  override askUser(input: unknown, options?: { readonly id?: string }): Promise<unknown> {
    // The step view derives prompt ids from the path, so a resumed step rejoins its prompt.
    return run(this.#step.askUser(input, options))
  }
}

// A context no facade harness made (one a child process rebuilt) still composes steps
// from inside a body: `ctx.harness.run(step, input, ctx)` runs below the calling step.
const detachedRunner = {
  run: <I, O>(step: AnyStep<I, O>, input: I, ctx: AgentContext): Promise<O> =>
    ctx instanceof StepContext
      ? ctx.run(step, input)
      : Promise.reject(new TypeError("ctx.harness.run needs the context of a running step or of an AgentHarness"))
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromiseExit(effect).then(unwrapExit)

// -----------------------------------------------------------------------------
// Step builders
// -----------------------------------------------------------------------------

/** A step of the facade: bodies return values or Promises. */
export type AnyStep<I = any, O = any> = Step.Step<I, O, any, any>

/** noetic's name for a step, `Step<TContext, I, O>`; the context type parameter is accepted and not used. */
export type NoeticStep<_TContext = any, I = any, O = any> = AnyStep<I, O>

/** noetic's name for a context, `Context<TContext, TState>`: this library's `AgentContext`. */
export type NoeticContext<_TContext = any, _TState = unknown> = AgentContext

/** The subprocess adapter a facade step was built with (`runCode`/`spawn` option `subprocess`). */


/** The subprocess adapter a step was built with, if any: `detachedSpawn` dispatches it there. */
export const subprocessOf = (step: AnyStep): SubprocessAdapter | undefined =>
  Bridge.stepSubprocess.get(step) as SubprocessAdapter | undefined

/** Options every builder's positional form takes. */
export interface StepBuildOptions {
  /**
   * The module that defines the step (`import.meta.url`), imported by a child process;
   * `null` records none (a child process then needs the adapter's `registryEntry`).
   */
  readonly module?: string | null
  /** A subprocess adapter for every detached dispatch of this step. */
  readonly subprocess?: SubprocessAdapter
}

/** Builds with the engine builder, turning its config failure into `NoeticConfigError`. */
const build = <A extends object>(f: () => A, subprocess?: SubprocessAdapter): A => {
  let built: A
  try {
    // The step's module is that of the caller of the facade's builder, which called this.
    built = Step.buildingBelow(build, f)
  } catch (error) {
    if (isConfigError(error)) throw toFacadeError(error)
    throw error
  }
  if (subprocess !== undefined) Bridge.stepSubprocess.attach(built, subprocess)
  return built
}

const plainSteps = new WeakMap<object, AnyStep>()

/**
 * A step as this library runs it. noetic's `Step` is a plain object (`{ kind: 'runCode',
 * id, execute }`, ...), which noetic code may write without a builder: such an object is
 * built once with the builder of its kind (its fields are that builder's options) and
 * the same step is used every time it is seen. A built step is returned as it is.
 */
const asStep = <I, O>(step: AnyStep<I, O>): AnyStep<I, O> => {
  if (Step.isStep(step) || typeof step !== "object" || step === null) return step
  const known = plainSteps.get(step)
  if (known !== undefined) return known as AnyStep<I, O>
  const { kind, ...options } = step as { readonly kind?: unknown }
  const builder = typeof kind === "string" && Object.hasOwn(plainBuilders, kind)
    ? plainBuilders[kind as keyof typeof plainBuilders]
    : undefined
  if (builder === undefined) return step
  // The builder's caller here is this module: record no module (an object literal says
  // nothing of where it was written) unless the object names one.
  const built = builder({ module: null, ...options } as any)
  plainSteps.set(step, built)
  return built as AnyStep<I, O>
}

const plainBuilders = {
  runCode: (options: RunCodeOptions<any, any>) => runCode(options),
  callModel: (options: CallModelOptions<any, any>) => callModel(options),
  invokeTool: (options: InvokeToolOptions<any, any>) => invokeTool(options),
  spawn: (options: SpawnOptions<any, any>) => spawn(options),
  loop: (options: LoopOptions<any, any>) => loop(options),
  inParallel: (options: InParallelOptions<any, any>) => inParallel(options),
  conditional: (options: ConditionalOptions<any, any>) => conditional(options)
} as const

/** `asStep` over a list, leaving anything that is not an array as it is (the builder refuses it). */
const asSteps = <A>(steps: A): A => (Array.isArray(steps) ? steps.map(asStep) as A : steps)

const engineStepOptions = (options: StepBuildOptions | undefined): Step.StepOptions => ({
  ...(options?.module === undefined ? {} : { module: options.module }),
  // The engine dispatches a runCode or spawn with its own adapter through it (see subprocessBridge);
  // one the engine cannot use throws NoeticConfigError here, when the step is built.
  ...(options?.subprocess === undefined
    ? {}
    : { subprocess: toEngineSubprocessShape(options.subprocess, "the step's subprocess option") })
})

/**
 * A Promise-returning body as an Effect body. What it throws rejects, as in noetic,
 * as a `step_failed` NoeticError of step `stepId` whose cause is the thrown value.
 */
const effectBody = <I, O>(
  body: (input: I, ctx: StepContext) => O | PromiseLike<O>,
  stepId: string,
  retriesExhausted: boolean
) =>
(input: I, ctx: Step.StepContext): Effect.Effect<Awaited<O>, unknown> =>
  Effect.flatMap(Effect.context<never>(), (services) =>
    Effect.tryPromise({
      try: (signal): Promise<Awaited<O>> =>
        Promise.resolve().then(() => body(input, new StepContext(ctx, services, signal))) as Promise<Awaited<O>>,
      catch: (thrown) => bodyFailure(stepId, thrown, retriesExhausted)
    }))

const neverAborted = new AbortController().signal

/** A facade context for a function the engine calls outside a body (lazy options, loop hooks). */
const facadeContext = (ctx: Step.StepContext): StepContext => new StepContext(ctx, Context.empty(), neverAborted)

/** A value or a Promise as an Effect failing with what was thrown. */
const fromPromise = <A>(f: () => A | PromiseLike<A>): Effect.Effect<Awaited<A>, unknown> =>
  Effect.tryPromise({ try: () => Promise.resolve().then(f) as Promise<Awaited<A>>, catch: hostThrown })


/** What `reconcile` answers: `Reconciled.completed(output)` or `Reconciled.rerun`. */
export type Reconciled<O> = Step.Reconciled<O>

/** Builds `reconcile`'s answers: `Reconciled.completed(output)`, `Reconciled.rerun`. */
export const Reconciled = Step.Reconciled

/**
 * At-most-once options of `runCode` and `invokeTool`. With `effects: 'at-most-once'`
 * an intent is recorded durably before the body runs; a resume that finds it without
 * a completion never calls the body again: it calls `reconcile(input, ctx)`, or
 * rejects with a `NoeticError` code `TOOL_OUTCOME_UNKNOWN` when there is none.
 */
export interface EffectsOptions<I, O> {
  /** `'at-least-once'` (default): a body a crash cut short runs again on resume. */
  readonly effects?: Step.EffectsPolicy
  /** Finds out what became of a body a crash cut short. */
  readonly reconcile?: (input: I, ctx: StepContext) => Reconciled<O> | Promise<Reconciled<O>>
}

/** The engine's form of an at-most-once option pair. */
const engineEffects = <I, O>(opts: EffectsOptions<I, O>) => {
  const reconcile = opts.reconcile
  return {
    ...(opts.effects === undefined ? {} : { effects: opts.effects }),
    ...(reconcile === undefined ? {} : {
      reconcile: typeof reconcile === "function"
        ? (input: I, ctx: Step.StepContext) =>
          Effect.flatMap(Effect.context<never>(), (services) =>
            fromPromise(() => reconcile(input, new StepContext(ctx, services, neverAborted))))
        : reconcile as never
    })
  }
}

/** Options of `runCode` (noetic's `RunCodeOpts`). */
export interface RunCodeOptions<I, O> extends StepBuildOptions, EffectsOptions<I, O> {
  readonly id: string
  readonly execute: (input: I, ctx: StepContext) => O | Promise<O>
  readonly retry?: Step.RetryPolicy
}

/**
 * A step that runs `execute`; a composite when it calls `ctx.run` (or
 * `ctx.harness.run(step, input, ctx)`). `retry` re-runs a failing body on its
 * schedule, recording only the final success. Throws `NoeticConfigError`
 * `EMPTY_STEP_ID` / `MISSING_EXECUTE_FUNCTION`. The positional `runCode(id, body,
 * options?)` builds the same step.
 */
export function runCode<I, O>(options: RunCodeOptions<I, O>): AnyStep<I, Awaited<O>>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function runCode<TContext, I, O>(options: RunCodeOptions<I, O>): AnyStep<I, Awaited<O>>
export function runCode<I, O>(
  id: string,
  body: (input: I, ctx: StepContext) => O | Promise<O>,
  options?: StepBuildOptions & { readonly retry?: Step.RetryPolicy }
): AnyStep<I, Awaited<O>>
export function runCode(
  idOrOptions: string | RunCodeOptions<any, any>,
  body?: (input: any, ctx: StepContext) => unknown,
  options?: StepBuildOptions & { readonly retry?: Step.RetryPolicy }
): AnyStep {
  const opts = typeof idOrOptions === "string" ? { ...options, id: idOrOptions, execute: body! } : idOrOptions
  // noetic runs `attempt < maxAttempts` attempts: a count below 1 (or NaN) builds and makes
  // none, failing the step when it runs; a fraction rounds up; Infinity retries for good.
  const attempts = opts.retry?.maxAttempts
  const noAttempts = attempts !== undefined && !(attempts >= 1)
  const retry = opts.retry === undefined || noAttempts ? undefined : {
    ...opts.retry,
    maxAttempts: attempts === Infinity ? Number.MAX_SAFE_INTEGER : Math.ceil(attempts!)
  }
  const execute = noAttempts && typeof opts.execute === "function"
    ? () => Promise.reject(new Error("No attempts executed"))
    : opts.execute
  return build(() =>
    Step.runCode({
      ...engineStepOptions(opts),
      id: opts.id,
      execute: (typeof execute === "function"
        ? effectBody(execute, opts.id, (retry?.maxAttempts ?? 1) > 1)
        : execute) as any,
      ...(retry === undefined ? {} : { retry }),
      ...engineEffects(opts)
    }), opts.subprocess)
}

/** Options of `callModel` (noetic's `CallModelOpts`). */
export interface CallModelOptions<I = unknown, O = string> extends StepBuildOptions {
  readonly id: string
  /** The model id: a string, or `(ctx) => string`; an empty string throws `MISSING_MODEL`. */
  readonly model: string | ((ctx: StepContext) => string)
  /** A system message before the history: a string or `(ctx) => string | undefined`. */
  readonly instructions?: string | ((ctx: StepContext) => string | undefined)
  readonly tools?: unknown
  /** A Standard Schema (zod, valibot...): the reply's text, parsed as JSON and validated, is the output. */
  readonly output?: Step.StandardSchema<O>
  readonly params?: Step.ModelParams
  /** This library's prompt builder, instead of instructions + history + input. */
  readonly prompt?: (input: I, ctx: Step.StepContext) => string | ReadonlyArray<{ role: string; content: string }>
}

const lazyOf = <T>(value: T | ((ctx: StepContext) => T) | undefined): Step.Lazy<T> | undefined =>
  typeof value === "function" ? (ctx: Step.StepContext) => (value as (ctx: StepContext) => T)(facadeContext(ctx)) : value

/**
 * A model turn through the harness's model, appended to the item log. The option
 * form resolves, as noetic's does, with the reply's text, or with `output`'s value of
 * it (a Standard Schema; a reply that does not match rejects `MODEL_OUTPUT_INVALID`).
 * Throws `EMPTY_STEP_ID` / `MISSING_MODEL`. The positional `callModel(id, options?)`
 * resolves with the whole turn, `{ responseId, text }`.
 */
export function callModel<I = string, O = string>(options: CallModelOptions<I, O>): AnyStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function callModel<TContext, I, O>(options: CallModelOptions<I, O>): AnyStep<I, O>
export function callModel<I = string>(
  id: string,
  options?: StepBuildOptions & Partial<Omit<CallModelOptions<I>, "id" | "output">>
): AnyStep<I, Step.ModelTurn>
export function callModel(
  idOrOptions: string | CallModelOptions<any, any>,
  options?: StepBuildOptions & Partial<Omit<CallModelOptions<any>, "id" | "output">>
): AnyStep {
  const opts: Partial<CallModelOptions<any, any>> = typeof idOrOptions === "string" ? { ...options, id: idOrOptions } : idOrOptions
  const model = lazyOf(opts.model)
  const instructions = lazyOf(opts.instructions)
  const engineOptions = {
    ...engineStepOptions(opts),
    ...(model === undefined ? {} : { model }),
    ...(instructions === undefined ? {} : { instructions }),
    ...(opts.params === undefined ? {} : { params: opts.params }),
    ...(opts.tools === undefined ? {} : { tools: opts.tools }),
    ...(opts.prompt === undefined ? {} : { prompt: opts.prompt as any })
  }
  return build(() =>
    typeof idOrOptions === "string"
      ? Step.callModel(idOrOptions, engineOptions)
      : Step.callModel({
        ...engineOptions,
        id: opts.id!,
        model: model as Step.Lazy<string>,
        ...(opts.output === undefined ? {} : { output: opts.output })
      })
  )
}

/** A tool as noetic declares one: a name and an `execute` returning the result or a Promise of it. */
export interface Tool<I = any, O = unknown> {
  readonly name?: string
  readonly description?: string
  readonly input?: unknown
  readonly output?: unknown
  execute(args: I, ctx: StepContext): O | Promise<O>
}

/** An issue of a Standard Schema (`~standard.validate`) or Zod (`safeParse`) failure. */
interface SchemaIssue {
  readonly message: string
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
}

/**
 * The tool's input: `args` checked against the tool's `input` schema (a Standard Schema,
 * or a Zod schema through `safeParse`) and the schema's output passed on, as noetic
 * does; a tool without one gets `args` as they are. Rejects with `step_failed` for
 * `stepId`, "Tool input validation failed: ..." naming each issue.
 */
const validToolInput = async (schema: unknown, args: unknown, stepId: string): Promise<any> => {
  // A schema may be a function object (Effect's are).
  if ((typeof schema !== "object" && typeof schema !== "function") || schema === null) return args
  const zod = schema as { readonly safeParse?: unknown }
  const standard = (schema as { readonly "~standard"?: { readonly validate?: unknown } })["~standard"]
  let issues: ReadonlyArray<SchemaIssue> | undefined
  let value: unknown = args
  if (typeof zod.safeParse === "function") {
    const result = (zod.safeParse as (u: unknown) => { success: boolean; data?: unknown; error?: { issues: Array<SchemaIssue> } })(args)
    if (result.success) value = result.data
    else issues = result.error?.issues ?? [{ message: "invalid input" }]
  } else if (typeof standard?.validate === "function") {
    const result = await (standard.validate as (u: unknown) => unknown)(args) as {
      readonly value?: unknown
      readonly issues?: ReadonlyArray<SchemaIssue>
    }
    if (result.issues !== undefined) issues = result.issues
    else value = result.value
  } else {
    return args
  }
  if (issues === undefined) return value
  const described = issues.map((issue) => ({
    code: "custom",
    message: issue.message,
    path: (issue.path ?? []).map((segment) => typeof segment === "object" && segment !== null ? segment.key : segment)
  }))
  throw stepFailed(stepId, new Error(`Tool input validation failed: ${JSON.stringify(described, null, 2)}`))
}

/** Options of `invokeTool` (noetic's `InvokeToolOpts`). */
export interface InvokeToolOptions<I = any, O = unknown> extends StepBuildOptions, EffectsOptions<I, O> {
  readonly id: string
  readonly tool: Tool<I, O>
  readonly args?: Partial<I>
}

/**
 * Calls a tool directly: `invokeTool({ id, tool, args? })` calls `tool.execute` with
 * the input (an object input gets `args` merged over it). Throws `EMPTY_STEP_ID` /
 * `MISSING_TOOL`. `invokeTool(id, name)` calls the harness's tool of that name.
 */
export function invokeTool<I = any, O = unknown>(options: InvokeToolOptions<I, O>): AnyStep<I, Awaited<O>>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function invokeTool<TContext, I, O>(options: InvokeToolOptions<I, O>): AnyStep<I, Awaited<O>>
export function invokeTool<I = unknown>(id: string, tool: string, options?: StepBuildOptions): AnyStep<I, unknown>
export function invokeTool(
  idOrOptions: string | InvokeToolOptions,
  tool?: string,
  options?: StepBuildOptions
): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() => Step.invokeTool(idOrOptions, tool!, engineStepOptions(options)))
  }
  const given = idOrOptions.tool as Tool | undefined
  const definition: Step.ToolDefinition | undefined =
    typeof given === "object" && given !== null && typeof given.execute === "function"
      ? {
        ...(given.name === undefined ? {} : { name: given.name }),
        execute: (args, ctx) =>
          Effect.flatMap(Effect.context<never>(), (services) =>
            Effect.tryPromise({
              try: (signal) =>
                Promise.resolve()
                  .then(() => validToolInput(given.input, args, idOrOptions.id))
                  .then((parsed) => given.execute(parsed, new StepContext(ctx, services, signal))),
              // noetic: a tool's NoeticError rejects as it is, anything else as the step's failure.
              // (ToolFailed carries it to the facade's error mapping); a cancellation stays one.
              catch: (thrown) =>
                isNoeticError(thrown) && thrown.noeticError.kind === "cancelled"
                  ? bodyFailure(idOrOptions.id, thrown, false)
                  : thrown
            }))
      }
      : undefined
  return build(() =>
    Step.invokeTool({
      ...engineStepOptions(idOrOptions),
      id: idOrOptions.id,
      tool: definition ?? (given as never),
      ...(idOrOptions.args === undefined ? {} : { args: idOrOptions.args }),
      ...engineEffects(idOrOptions)
    })
  )
}

/** Options of `conditional` (noetic's): `route` picks the next step, or `null` to pass the input through. */
export interface ConditionalOptions<I, O> extends StepBuildOptions {
  readonly id: string
  readonly route: (input: I, ctx: StepContext) => AnyStep<I, O> | null | Promise<AnyStep<I, O> | null>
}

/**
 * Runs the step `route` picks at run time (`null` passes the input through). Throws
 * `EMPTY_STEP_ID` / `MISSING_ROUTE_FUNCTION`. `conditional(id, { if, then, else? })`
 * is the positional form.
 */
export function conditional<I, O>(options: ConditionalOptions<I, O>): AnyStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function conditional<TContext, I, O>(options: ConditionalOptions<I, O>): AnyStep<I, O>
export function conditional<I, O>(
  id: string,
  options: StepBuildOptions & {
    readonly if: (input: I) => boolean
    readonly then: AnyStep<I, O>
    readonly else?: AnyStep<I, O>
  }
): AnyStep<I, O>
export function conditional(idOrOptions: string | ConditionalOptions<any, any>, positional?: any): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() => Step.conditional(idOrOptions, { ...positional, ...engineStepOptions(positional) }))
  }
  const route = idOrOptions.route
  return build(() =>
    Step.conditional({
      ...engineStepOptions(idOrOptions),
      id: idOrOptions.id,
      route: (typeof route === "function"
        ? (input: unknown, ctx: Step.StepContext) =>
          Effect.flatMap(Effect.context<never>(), (services) =>
            Effect.map(
              fromPromise(() => route(input, new StepContext(ctx, services, neverAborted))),
              (picked) => (picked === null || picked === undefined ? picked : asStep(picked))
            ))
        : route) as any
    })
  )
}

/** One path's outcome in a `settle` inParallel (noetic's `SettleResult`). */
export interface SettleResult<O> {
  stepId: string
  status: "fulfilled" | "rejected"
  value?: O
  error?: NoeticErrorPayload
}

/** Options of `inParallel` (noetic's; `merge` required for `all` and `settle`). */
export type InParallelOptions<I, O> =
  & StepBuildOptions
  & {
    readonly id: string
    readonly paths: (input: I, ctx: StepContext) => Array<AnyStep<I, O>> | ReadonlyArray<AnyStep<I, O>>
    readonly concurrency?: number
  }
  & (
    | { readonly mode: "race" }
    | { readonly mode: "all"; readonly merge: (results: Array<O>, ctx: StepContext) => O | Promise<O> }
    | { readonly mode: "settle"; readonly merge: (results: Array<SettleResult<O>>, ctx: StepContext) => O | Promise<O> }
  )

/**
 * Runs paths concurrently on the same input: `all` (merge of every output; a failing
 * path fails the step), `race` (the first success), `settle` (merge of `{ stepId,
 * status, value?, error? }`). Throws `EMPTY_STEP_ID` / `MISSING_MERGE_FUNCTION`.
 * `inParallel(id, branches, { mode? })` is the positional form (results unmerged).
 */
export function inParallel<I, O>(options: InParallelOptions<I, O>): AnyStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function inParallel<TContext, I, O>(options: InParallelOptions<I, O>): AnyStep<I, O>
export function inParallel<I>(
  id: string,
  branches: ReadonlyArray<AnyStep<I>>,
  options?: StepBuildOptions & { readonly mode?: Step.ParallelMode; readonly concurrency?: number }
): AnyStep<I, any>
export function inParallel(
  idOrOptions: string | InParallelOptions<any, any>,
  branches?: ReadonlyArray<AnyStep>,
  positional?: StepBuildOptions & { readonly mode?: Step.ParallelMode; readonly concurrency?: number }
): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() =>
      Step.inParallel(idOrOptions, asSteps(branches ?? []) as ReadonlyArray<Step.AnyStep>, {
        ...engineStepOptions(positional),
        ...(positional?.mode === undefined ? {} : { mode: positional.mode }),
        ...(positional?.concurrency === undefined ? {} : { concurrency: positional.concurrency })
      })
    )
  }
  const opts = idOrOptions
  const paths = opts.paths
  const merge = "merge" in opts ? opts.merge : undefined
  return build(() =>
    Step.inParallel({
      ...engineStepOptions(opts),
      id: opts.id,
      mode: opts.mode,
      ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
      paths: (typeof paths === "function"
        ? (input: unknown, ctx: Step.StepContext) => asSteps(paths(input, facadeContext(ctx))) as ReadonlyArray<Step.AnyStep>
        : paths) as any,
      ...(merge === undefined ? {} : {
        merge: typeof merge === "function"
          ? (results: Array<any>, ctx: Step.StepContext) =>
            fromPromise(() =>
              (merge as (results: Array<unknown>, ctx: StepContext) => unknown)(
                opts.mode === "settle"
                  ? results.map((result: Step.Settled<unknown, unknown>): SettleResult<unknown> =>
                    result.status === "fulfilled"
                      ? { stepId: result.stepId, status: "fulfilled", value: result.value }
                      : { stepId: result.stepId, status: "rejected", error: payloadOf(result.error, result.stepId) }
                  )
                  : results,
                facadeContext(ctx)
              )
            )
          : merge
      })
    } as any)
  )
}

/** Options of `loop` (noetic's `LoopConfig`). */
export interface LoopOptions<I, O> extends StepBuildOptions {
  readonly id: string
  /** Run in sequence each iteration, each on the previous one's output. */
  readonly steps: ReadonlyArray<AnyStep<I, O>>
  readonly until: (snapshot: Step.Snapshot) => Step.Verdict | Promise<Step.Verdict>
  /** Iterations allowed, retries included (default 1000); one more rejects with a `step_failed` NoeticError. */
  readonly maxIterations?: number
  readonly maxHistorySize?: number
  readonly prepareNext?: (output: O, verdict: Step.Verdict, ctx: StepContext) => I
  readonly onError?: (error: NoeticErrorPayload, ctx: StepContext) => "retry" | "skip" | "abort"
}

/**
 * Runs `steps` in sequence, then `until(snapshot)`; stops when the verdict says so,
 * else runs again on the output (or `prepareNext(output, verdict, ctx)`). Throws
 * `EMPTY_STEP_ID` / `MISSING_LOOP_BODY` / `MISSING_UNTIL_PREDICATE`. The positional
 * `loop(id, body, { until: (output, iteration) => boolean })` builds the same step.
 */
export function loop<I, O = I>(options: LoopOptions<I, O>): AnyStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function loop<TContext, I, O>(options: LoopOptions<I, O>): AnyStep<I, O>
export function loop<I>(
  id: string,
  body: AnyStep<I, I>,
  options: StepBuildOptions & {
    readonly until: (output: I, iteration: number) => boolean
    readonly maxIterations?: number
  }
): AnyStep<I, I>
export function loop(idOrOptions: string | LoopOptions<any, any>, body?: AnyStep, positional?: any): AnyStep {
  if (typeof idOrOptions === "string") {
    return build(() =>
      Step.loop(idOrOptions, asStep(body!) as Step.AnyStep, { ...positional, ...engineStepOptions(positional) })
    )
  }
  const opts = idOrOptions
  const until = opts.until
  const prepareNext = opts.prepareNext
  const onError = opts.onError
  const stepId = opts.id
  return build(() =>
    Step.loop({
      ...engineStepOptions(opts),
      id: opts.id,
      steps: asSteps(opts.steps) as ReadonlyArray<Step.AnyStep>,
      until: (typeof until === "function" ? (snapshot: Step.Snapshot) => fromPromise(() => until(snapshot)) : until) as any,
      ...(opts.maxIterations === undefined ? {} : { maxIterations: opts.maxIterations }),
      // noetic builds any maxIterations and fails the loop when it runs with a bad one.
      checkMaxIterationsWhenRun: true,
      ...(opts.maxHistorySize === undefined ? {} : { maxHistorySize: opts.maxHistorySize }),
      ...(prepareNext === undefined ? {} : {
        prepareNext: (output: unknown, verdict: Step.Verdict, ctx: Step.StepContext) =>
          prepareNext(output, verdict, facadeContext(ctx))
      }),
      ...(onError === undefined ? {} : {
        onError: (error: unknown, ctx: Step.StepContext) => onError(payloadOf(error, stepId), facadeContext(ctx))
      })
    })
  )
}

/** Options of `spawn` (noetic's `SpawnOpts`). */
export interface SpawnOptions<I, O> extends StepBuildOptions {
  readonly id: string
  readonly child: AnyStep<I, O>
  /** The child context's layers, instead of the harness's. */
  readonly context?: ReadonlyArray<ContextLayer>
  /** Milliseconds the child may run; past it the step rejects with a `NoeticError` code `SPAWN_TIMEOUT`. */
  readonly timeout?: number
}

/**
 * Runs `child` as a child agent in a context whose parent is the caller's. Throws
 * `EMPTY_STEP_ID` / `MISSING_CHILD_STEP`. `spawn(id, child, options?)` is the
 * positional form.
 */
export function spawn<I, O>(options: SpawnOptions<I, O>): AnyStep<I, O>
/** noetic's explicit type arguments (`<TContext, I, O>`); the context type is not used here. */
export function spawn<TContext, I, O>(options: SpawnOptions<I, O>): AnyStep<I, O>
export function spawn<I, O>(
  id: string,
  child: AnyStep<I, O>,
  options?: StepBuildOptions & { readonly timeout?: number }
): AnyStep<I, O>
export function spawn(idOrOptions: string | SpawnOptions<any, any>, child?: AnyStep, positional?: any): AnyStep {
  const opts: SpawnOptions<any, any> = typeof idOrOptions === "string"
    ? { ...positional, id: idOrOptions, child: child! }
    : idOrOptions
  const context = opts.context?.map((layer) => toEngineLayer(layer, layerStorageDefault()))
  return build(() =>
    Step.spawn({
      ...engineStepOptions(opts),
      id: opts.id,
      child: asStep(opts.child) as Step.AnyStep,
      ...(context === undefined ? {} : { context }),
      ...(opts.timeout === undefined ? {} : { timeout: opts.timeout })
    }), opts.subprocess)
}

// -----------------------------------------------------------------------------
// Detached handles
// -----------------------------------------------------------------------------

/** A detached child's lifecycle, as noetic reports it. */
export type DetachedStatus = (typeof DetachedStatus)[keyof typeof DetachedStatus]
/** The statuses by name, as noetic exports them (`DetachedStatus.Completed`). */
export const DetachedStatus = {
  Running: "running",
  Completed: "completed",
  Failed: "failed"
} as const

/**
 * What `detachedSpawn` returns at once (noetic's `DetachedHandle`): `id` (the child's
 * execution id), a `status` that changes as the child settles, `result`, `error` (a
 * message) and `await(timeout?)`. Extra: the adapter's `handleId`, `stepId`,
 * `executionId`, `parentExecutionId`, `metadata`, and `started()`.
 */
export interface DetachedHandle<O = unknown> {
  readonly id: string
  readonly status: DetachedStatus
  readonly result: O | undefined
  readonly error: string | undefined
  /**
   * The child's output. Rejects with a `NoeticError` carrying `noeticError { kind:
   * 'step_failed', stepId, cause }` when the child fails (a plain Error when a host
   * adapter recorded the failure without a `noeticError` payload, as noetic rehydrates
   * it), `handle_evicted` when the adapter lost the handle, or when `timeout` ms pass
   * first (the child keeps running).
   */
  await(timeout?: number): Promise<O>
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string
  readonly metadata: Readonly<Record<string, unknown>>
  /** Resolves once the adapter has started the child (its manifest is written). */
  started(): Promise<void>
}


class DetachedHandleImpl<O> implements DetachedHandle<O> {
  readonly id: string
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string
  readonly metadata: Readonly<Record<string, unknown>>
  #status: DetachedStatus = "running"
  #result: O | undefined
  #error: string | undefined
  readonly #started: Promise<SubprocessHandle>
  readonly #settled: Promise<O>

  constructor(options: {
    readonly handleId: string
    readonly stepId: string
    readonly executionId: string
    readonly parentExecutionId: string
    readonly metadata: Readonly<Record<string, unknown>>
    readonly started: Promise<SubprocessHandle>
  }) {
    this.id = options.executionId
    this.handleId = options.handleId
    this.stepId = options.stepId
    this.executionId = options.executionId
    this.parentExecutionId = options.parentExecutionId
    this.metadata = options.metadata
    this.#started = options.started
    this.#settled = options.started.then((handle) => handle.await() as Promise<O>).then(
      (value) => {
        this.#result = value
        this.#status = "completed"
        return value
      },
      (failure: unknown) => {
        const evicted = handleEvictedOf(failure)
        // What the child failed with, rebuilt as noetic rehydrates it, rather than the adapter's wrapper.
        const child = childFailedReason(failure)
        const cause = child === undefined ? failure : childError(child.error)
        const error = evicted !== undefined
          ? handleEvicted(evicted.handleId, this.stepId, evicted.gracePeriodMs)
          : isNoeticError(cause) && cause.noeticError.kind === "step_failed" && cause.noeticError.stepId === this.stepId
          ? cause
          : child !== undefined && isPlainRecordedError(child.error) && cause instanceof Error
          ? cause
          : stepFailed(this.stepId, cause)
        this.#error = error.message
        this.#status = "failed"
        throw error
      }
    )
    // Observed here so a caller who never awaits sees no unhandled rejection; await() rethrows.
    this.#settled.catch(() => {})
  }

  get status(): DetachedStatus {
    return this.#status
  }
  get result(): O | undefined {
    return this.#result
  }
  get error(): string | undefined {
    return this.#error
  }

  started(): Promise<void> {
    return this.#started.then(() => undefined)
  }

  await(timeout?: number): Promise<O> {
    if (timeout === undefined || !(timeout > 0)) return this.#settled
    let timer: ReturnType<typeof setTimeout> | undefined
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(stepFailed(this.stepId, new Error(`Detached spawn timed out after ${timeout}ms`))),
        timeout
      )
    })
    return Promise.race([this.#settled, expired]).finally(() => clearTimeout(timer))
  }
}

// -----------------------------------------------------------------------------
// The harness
// -----------------------------------------------------------------------------

/** A model as a plain object: one `generate` per turn. */
export interface PlainModel {
  generate(request: ScriptedModel.GenerateRequest): Promise<{ readonly text: string; readonly id?: string }>
}

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
}

/** The documented constructor options (noetic's `AgentHarnessOpts`, the fields this library runs). */
export interface AgentHarnessOptions<I = any, O = any> {
  readonly name: string
  readonly agentGraph?: AnyStep<I, O>
  readonly params?: unknown
  /** A `{ generate(request) }` object, or any `effect/ai` LanguageModel layer. */
  readonly model?: PlainModel | Layer.Layer<LanguageModel.LanguageModel>
  /** Tools `invokeTool(id, name)` calls by name. */
  readonly tools?: Readonly<Record<string, HarnessTool>>
  /** The context layers of every context; defaults to scratchpad, instructions and history. */
  readonly contextLayers?: ReadonlyArray<ContextLayer>
  /** Same as `contextLayers` (this library's earlier name). */
  readonly context?: ReadonlyArray<ContextLayer>
  readonly environment?: {
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

class Engine extends Context.Service<Engine, EngineHarness.AgentHarness<any>>()("noetic-effect/promise/Engine") {}
class SessionsService
  extends Context.Service<SessionsService, EngineSessions.Sessions>()("noetic-effect/promise/Sessions")
{}

const engineService: Effect.Effect<EngineHarness.AgentHarness<any>, never, Engine> = Effect.gen(function*() {
  return yield* Engine
})

// The model modules (`effect/ai`) load when a harness is built, not when the library is
// imported: a process that only defines steps (a child agent importing its step module)
// never pays for them.
const loadModelModules = Effect.promise(() =>
  Promise.all([
    import("effect/ai/LanguageModel") as Promise<typeof LanguageModel>,
    import("effect/ai/AiError") as Promise<typeof AiError>,
    import("../layers/ScriptedModel.ts") as Promise<typeof ScriptedModel>
  ])
)

const modelLayer = (model: AgentHarnessOptions["model"]): Layer.Layer<LanguageModel.LanguageModel> => {
  if (model !== undefined && !("generate" in model)) return model
  return Layer.unwrap(Effect.map(loadModelModules, ([LanguageModel, AiError, ScriptedModel]) => {
    if (model === undefined) {
      return Layer.effect(
        LanguageModel.LanguageModel,
        LanguageModel.make({
          generateText: () =>
            Effect.fail(
              AiError.make({
                module: "AgentHarness",
                method: "callModel",
                reason: new AiError.InvalidRequestError({ description: "this harness was built without a model" })
              })
            ),
          streamText: () => {
            throw new Error("this harness was built without a model")
          }
        })
      )
    }
    return Layer.effect(
      LanguageModel.LanguageModel,
      ScriptedModel.fromGenerate((request) =>
        Effect.tryPromise({
          try: () => model.generate(request),
          catch: (cause) =>
            AiError.make({
              module: "AgentHarness",
              method: "generate",
              reason: new AiError.UnknownError({ description: cause instanceof Error ? cause.message : String(cause) })
            })
        })
      )
    )
  }))
}

const engineRestoreOptions = (
  options: RestoreContextOptions | undefined,
  layersFor: (options: RestoreContextOptions | undefined) => ReadonlyArray<EngineContextLayer<any>> | undefined
): EngineHarness.RestoreContextOptions => {
  const layers = layersFor(options)
  return {
    ...(options?.parent === undefined ? {} : { parent: Bridge.context.of(options.parent) }),
    ...(options?.state === undefined ? {} : { state: options.state }),
    ...(layers === undefined ? {} : { context: layers })
  }
}

const configError = (code: string, message: string, hint: string) => new NoeticConfigError({ code, message, hint })

export type { DeliveryMode, ExecuteReceipt, HarnessResponse, HarnessStatus, SessionScope, StreamEvent, StreamingItem }

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
  readonly #runtime: ManagedRuntime.ManagedRuntime<Engine | SessionsService | FacadeHarness, StorageError>
  /** Where layer `init` hooks keep their storage. */
  readonly #layerStorage: StorageAdapter
  /** The layers of every context unless a call replaces them. */
  readonly #layers: ReadonlyArray<EngineContextLayer<any>>
  /** Where the step ledger lives when it is not the checkpoint store's storage. */
  readonly #ledgerStorage: StorageAdapter | undefined
  readonly #converted = new WeakMap<object, EngineContextLayer<any>>()
  readonly #spawns = new SpawnsInFlight()
  /** The engine's sessions, once the runtime has built them (the synchronous accessors read them). */
  #sessions: EngineSessions.Sessions | undefined
  /** Histories seeded before the sessions were built. */
  readonly #seeds = new Map<string, ReadonlyArray<Item>>()
  /** Set by `close()`: a call it interrupts rejects with `HARNESS_CLOSED`. */
  #closed = false

  /**
   * Throws `NoeticConfigError`: `STEP_LEDGER_RETENTION_INVALID` for a retention cap
   * below 1 or NaN, `EMPTY_STEP_ID` for a graph with a blank step id,
   * `UNSUPPORTED_LAYER_HOOK` for a layer hook this library does not run,
   * `LEASE_TTL_INVALID`, and `STORAGE_ADAPTER_UNSUPPORTED` for a combination it cannot honour.
   */
  constructor(options: AgentHarnessOptions<I, O>) {
    this.name = options.name
    this.params = options.params
    const agentGraph = options.agentGraph === undefined ? undefined : asStep(options.agentGraph)
    this.agentGraph = agentGraph
    const storage = options.environment?.storage
    const retention = resolveStepLedgerRetention(storage?.stepLedgerRetention)
    // The engine's checks (step ids, lease ttl), thrown as NoeticConfigError now rather than at the first run.
    const checked = Effect.runSync(Effect.result(EngineHarness.validateOptions({
      ...(agentGraph === undefined ? {} : { agentGraph: agentGraph as Step.AnyStep }),
      ...(storage?.stepLedgerDurability === undefined ? {} : { stepLedgerDurability: storage.stepLedgerDurability }),
      ...(storage?.lease === undefined ? {} : {
        lease: { owner: storage.lease.owner, ...(storage.lease.ttlMs === undefined ? {} : { ttl: storage.lease.ttlMs }) }
      })
    })))
    if (Result.isFailure(checked)) throw toFacadeError(checked.failure)
    this.#layerStorage = storage?.adapter ?? createInMemoryStorage()
    this.#ledgerStorage = storage?.adapter
    // As in noetic, a harness given no layers gives its contexts none (`defaultContextLayers` lists the usual ones).
    this.#layers = this.#toEngineLayers(options.contextLayers ?? options.context) ?? []

    let durability: Layer.Layer<never> | Layer.Layer<CheckpointStoreTag | StepLedger, StorageError> = Layer.empty
    if (storage?.checkpointStore !== undefined) {
      const checkpointStore = storage.checkpointStore
      const engineBacked = isEngineBackedCheckpointStore(checkpointStore)
      if (storage.lease !== undefined && (!engineBacked || storage.adapter !== undefined)) {
        throw configError(
          "STORAGE_ADAPTER_UNSUPPORTED",
          "environment.storage.lease needs a checkpoint store made by createCheckpointStore and no separate storage.adapter",
          "Leased runs fence their ledger writes in the checkpoint store's storage: build the store with createCheckpointStore({ storage }) and drop storage.adapter (the ledger then lives in that storage)."
        )
      }
      if (storage.lease !== undefined && !holdsExecutionLeases(checkpointStore)) {
        throw configError(
          "EXECUTION_LEASE_UNSUPPORTED",
          "environment.storage.lease needs a storage with compareAndSet, setFenced and deleteFenced; the checkpoint store's storage is a host-written one",
          "Build the checkpoint store over one of this library's storages (createFileStorage, createSqliteStorage, createPostgresStorage, createInMemoryStorage), or drop lease."
        )
      }
      const adapter = storage.adapter
      const ledgerStorage = adapter === undefined ? undefined : toEngineStorage(adapter)
      const store = Layer.effect(CheckpointStoreTag, toEngineCheckpointStore(checkpointStore, ledgerStorage))
      durability = Layer.provideMerge(
        Layer.effect(
          StepLedger,
          Effect.gen(function*() {
            const checkpoints = yield* CheckpointStoreTag
            // noetic keeps the ledger in storage.adapter: given one, the ledger lives there.
            const base: CheckpointStoreShape = ledgerStorage === undefined || !engineBacked
              ? checkpoints
              : { ...checkpoints, storage: yield* ledgerStorage }
            return yield* Effect.orDie(makeStepLedger(base, { retention }))
          })
        ),
        store
      )
    }
    const subprocessOption = options.environment?.subprocess
    // A host-written adapter is used, never ignored: one the engine cannot use throws here.
    const subprocess: Layer.Layer<SubprocessAdapterTag> | Layer.Layer<never> = subprocessOption === undefined
      ? Layer.empty
      : Layer.succeed(SubprocessAdapterTag, toEngineSubprocessShape(subprocessOption, "environment.subprocess"))

    const tools = Object.fromEntries(
      Object.entries(options.tools ?? {}).map(([name, tool]) => [
        name,
        ((input, ctx) =>
          Effect.flatMap(Effect.context<never>(), (services) =>
            Effect.tryPromise({
              try: (signal) => Promise.resolve().then(() => tool(input, new StepContext(ctx, services, signal))),
              catch: (error) => error
            }))) satisfies EngineHarness.ToolHandler
      ])
    )
    const self = Layer.succeed(FacadeHarness, this as AgentHarness)
    const engine = Layer.effect(
      Engine,
      Effect.orDie(EngineHarness.make({
        name: options.name,
        agentGraph: agentGraph as Step.AnyStep | undefined,
        params: options.params,
        tools,
        context: this.#layers,
        ...(options.onDivergence === undefined ? {} : { onDivergence: options.onDivergence }),
        ...(storage?.stepLedgerDurability === undefined ? {} : { stepLedgerDurability: storage.stepLedgerDurability }),
        ...(storage?.lease === undefined ? {} : {
          lease: {
            owner: storage.lease.owner,
            ...(storage.lease.ttlMs === undefined ? {} : { ttl: storage.lease.ttlMs })
          }
        })
      }))
    ).pipe(Layer.provide(Layer.mergeAll(durability, subprocess, modelLayer(options.model), self)))
    const defaultDeliveryMode = options.defaultDeliveryMode
    const modeChecked = Effect.runSync(Effect.result(
      EngineSessions.validateDeliveryMode(defaultDeliveryMode, "defaultDeliveryMode")
    ))
    if (Result.isFailure(modeChecked)) throw toFacadeError(modeChecked.failure)
    const sessions = Layer.effect(
      SessionsService,
      Effect.gen({ self: this }, function*() {
        const made = yield* Effect.orDie(EngineSessions.make(yield* Engine, {
          ...(defaultDeliveryMode === undefined ? {} : { defaultDeliveryMode })
        }))
        for (const [threadId, items] of this.#seeds) made.seedHistory(threadId, items)
        this.#seeds.clear()
        this.#sessions = made
        return made
      })
    ).pipe(Layer.provide(Layer.mergeAll(engine, modelLayer(options.model), self)))
    this.#runtime = ManagedRuntime.make(
      Layer.mergeAll(engine, sessions, modelLayer(options.model), self) as Layer.Layer<
        Engine | SessionsService | FacadeHarness,
        StorageError
      >
    )
    const runtime = this.#runtime
    // The host's adapter itself, as in noetic (its own methods, called as it wrote them).
    this.subprocess = subprocessOption ?? fromEngineSubprocessAdapter(
      Effect.promise(() => runtime.runPromise(Effect.map(engineService, (engine) => engine.subprocess)))
    )
    // reattachLiveChildren lists through the adapter as harness.subprocess.listLive() does: after the spawns in flight.
    engines.set(this, (f) => this.#spawns.drain().then(() => this.#use(f)))
    layerMergers.set(this, (options) => this.#restoreLayers(options))
  }

  #use<A, E>(f: (engine: EngineHarness.AgentHarness<any>) => Effect.Effect<A, E, any>): Promise<A> {
    return this.#runtime.runPromiseExit(
      Effect.flatMap(engineService, f) as Effect.Effect<A, E, Engine>
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
    const base = this.#toEngineLayers(options?.contextLayers ?? options?.context)
    const extra = this.#toEngineLayers(options?.extraContextLayers)
    return extra === undefined ? base : [...(base ?? this.#layers), ...extra]
  }

  #useSessions<A, E>(f: (sessions: EngineSessions.Sessions) => Effect.Effect<A, E, any>): Promise<A> {
    return this.#runtime.runPromiseExit(
      SessionsService.use(f) as Effect.Effect<A, E, SessionsService>
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
    const base = this.#toEngineLayers(contextLayers ?? context)
    const extra = this.#toEngineLayers(extraContextLayers)
    const layers = extra === undefined ? base : [...(base ?? this.#layers), ...extra]
    const enqueueOptions: EngineSessions.EnqueueOptions = {
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
    return iterable(() => this.#useSessions((sessions) => Effect.succeed(sessions.events(scope?.threadId))))
  }

  /** The model's text deltas, across the session's turns (noetic's `getTextStream`). */
  getTextStream(scope?: SessionScope): AsyncIterable<string> {
    return iterable(() => this.#useSessions((sessions) => Effect.succeed(sessions.textStream(scope?.threadId))))
  }

  /** The model's reasoning deltas (noetic's `getReasoningStream`). */
  getReasoningStream(scope?: SessionScope): AsyncIterable<string> {
    return iterable(() => this.#useSessions((sessions) => Effect.succeed(sessions.reasoningStream(scope?.threadId))))
  }

  /** Cumulative item snapshots with `isComplete`, the whole session log (noetic's `getItemStream`). */
  getItemStream(scope?: SessionScope): AsyncIterable<StreamingItem> {
    return iterable(() => this.#useSessions((sessions) => Effect.succeed(sessions.itemStream(scope?.threadId))))
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
    if (!ctx.aborted) ctx.abort(reason)
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
    const ledgerStorage = this.#ledgerStorage
    return this.#use((engine) =>
      Effect.andThen(
        engine.clearCheckpoint(executionId),
        // A ledger kept in storage.adapter is not the checkpoint store's to clear.
        engine.durable && ledgerStorage !== undefined
          ? Effect.flatMap(toEngineStorage(ledgerStorage), (storage) => clearLedger(storage, executionId))
          : Effect.void
      )
    )
  }

  /**
   * A fresh context, at once: `id` and `threadId` random UUIDs unless given, `parent`
   * null at the root, the harness's layers (or `contextLayers`, plus
   * `extraContextLayers`), the item log from `items`, the cwd from `cwdInit` (else the
   * parent's). Layer `init` hooks run before its first step.
   */
  createContext(options: CreateContextOptions = {}): AgentContext {
    const parent = (options.parent === undefined ? undefined : Bridge.context.of(options.parent))
    const base = this.#toEngineLayers(options.contextLayers ?? options.context) ?? this.#layers
    const extra = this.#toEngineLayers(options.extraContextLayers)
    const cwd = options.cwdInit ?? parent?.cwd?.current ?? undefined
    const threadId = options.threadId ?? parent?.threadId ?? nodeCrypto().randomUUID()
    const resourceId = options.resourceId ?? parent?.resourceId
    const engine = new EngineContext({
      id: options.id ?? nodeCrypto().randomUUID(),
      threadId,
      resourceId,
      parent,
      state: options.state,
      layers: extra === undefined ? base : [...base, ...extra],
      items: options.items,
      cwd: cwd === undefined ? null : { current: cwd },
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
