/**
 * The documented `AgentHarness` for plain TypeScript: step builders whose bodies return
 * values or Promises, contexts with Promise methods, and a harness class that owns a
 * `ManagedRuntime` built from the same layers an Effect user would compose.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, ManagedRuntime, Option } from "effect"
import { randomUUID } from "node:crypto"
import { AiError, LanguageModel } from "effect/ai"
import { EmptyStepId, type StorageError } from "../Errors.ts"
import {
  type AgentContext as EngineContext,
  type ContextLayer,
  defaultLayers,
  history,
  instructions,
  type Item,
  scratchpad
} from "../harness/AgentContext.ts"
import * as EngineHarness from "../harness/AgentHarness.ts"
import * as Step from "../harness/Step.ts"
import * as ScriptedModel from "../layers/ScriptedModel.ts"
import type { AskUserPrompt, Cwd, FrontierEntry } from "../schema/CheckpointSnapshot.ts"
import { CheckpointStore as CheckpointStoreTag } from "../services/CheckpointStore.ts"
import { makeWith as makeStepLedger, StepLedger } from "../services/StepLedger.ts"
import {
  reattachLiveChildren as engineReattachLiveChildren,
  SubprocessAdapter as SubprocessAdapterTag
} from "../services/SubprocessAdapter.ts"
import { type CheckpointStore, resolveStepLedgerRetention, type StepLedgerRetention, toEngineCheckpointStore } from "./checkpoint.ts"
import { hostThrown, NoeticError, toFacadeError, unwrapExit } from "./errors.ts"
import {
  type DetachedSubprocessHandle,
  fromEngineSubprocessAdapter,
  type LiveSubprocessHandle as SubprocessHandle,
  type SubprocessAdapter,
  toFacadeHandle
} from "./subprocess.ts"
import { SpawnsInFlight, toEngineSubprocessShape, withEngineSubprocess } from "./subprocessBridge.ts"

export { history, instructions, scratchpad }
export type { ContextLayer, Item }

// -----------------------------------------------------------------------------
// Contexts
// -----------------------------------------------------------------------------

const engineOf = Symbol.for("noetic-effect/promise/engineContext")

/** The live context of an execution, with Promise methods. */
export class AgentContext {
  /** @internal */
  readonly [engineOf]: EngineContext

  /** @internal */
  constructor(engine: EngineContext) {
    this[engineOf] = engine
  }

  /** The execution id. */
  get id(): string {
    return this[engineOf].id
  }
  get threadId(): string | undefined {
    return this[engineOf].threadId
  }
  get resourceId(): string | undefined {
    return this[engineOf].resourceId
  }
  /** Host wiring given to `execute`, `createContext` or `restore`; never persisted. */
  get state(): unknown {
    return this[engineOf].state
  }
  /** The context that spawned this one. */
  get parent(): AgentContext | undefined {
    const parent = this[engineOf].parent
    return parent === undefined ? undefined : wrapContext(parent)
  }
  /** The item log, oldest first. */
  get items(): ReadonlyArray<Item> {
    return this[engineOf].items
  }
  /** Each context layer's state, by layer id. */
  get layers(): Readonly<Record<string, unknown>> {
    return this[engineOf].layers
  }
  get cwd(): Cwd | null {
    return this[engineOf].cwd
  }
  /** Ask-user prompts waiting for an answer. */
  get pendingAskUser(): ReadonlyArray<AskUserPrompt> {
    return this[engineOf].pendingAskUser
  }
  /** The frontier of the snapshot this context was restored from: which steps were in flight. */
  get frontier(): ReadonlyArray<FrontierEntry> {
    return this[engineOf].restoredFrontier
  }
  /** Saves a snapshot now (a no-op without a checkpoint store); never rejects. */
  checkpoint(): Promise<void> {
    return Effect.runPromise(this[engineOf].checkpoint())
  }
  /** The append pipeline: appends (deduplicating by id and response id), updates layers, checkpoints. */
  append(items: ReadonlyArray<Item>): Promise<ReadonlyArray<Item>> {
    return Effect.runPromise(this[engineOf].append(items))
  }
  /** Changes the working directory, remembering the previous one. */
  setCwd(path: string | null): Promise<void> {
    return Effect.runPromise(this[engineOf].setCwd(path))
  }
  /** Replaces a layer's state. */
  updateLayer<S>(layerId: string, f: (state: S | undefined) => S): Promise<void> {
    return Effect.runPromise(this[engineOf].updateLayer(layerId, f))
  }
  /** Enqueues an ask-user prompt (checkpointing it) and resolves with the answer. */
  askUser(input: unknown, options?: { readonly id?: string }): Promise<unknown> {
    return run(this[engineOf].askUser(input, options))
  }
  /** Answers a pending prompt. */
  resolveAskUser(promptId: string, output: unknown): Promise<void> {
    return run(this[engineOf].resolveAskUser(promptId, output))
  }
  /** Cancels a pending prompt; its asker rejects. */
  cancelAskUser(promptId: string, reason?: string): Promise<void> {
    return run(this[engineOf].cancelAskUser(promptId, reason))
  }
}

const wrapped = new WeakMap<EngineContext, AgentContext>()

/** The one facade context of an engine context. */
const wrapContext = (engine: EngineContext): AgentContext => {
  let context = wrapped.get(engine)
  if (context === undefined) {
    context = new AgentContext(engine)
    wrapped.set(engine, context)
  }
  return context
}

/** What a step body sees: its context plus `run` for child steps and its own `path`. */
export class StepContext extends AgentContext {
  readonly #step: Step.StepContext
  readonly #services: Context.Context<never>
  readonly #signal: AbortSignal

  /** @internal */
  constructor(step: Step.StepContext, services: Context.Context<never>, signal: AbortSignal) {
    super(step)
    this.#step = step
    this.#services = services
    this.#signal = signal
  }

  /** This dispatch's path, e.g. `/agent#0/search#1`. */
  get path(): string {
    return this.#step.path
  }

  /** Runs a child step below this one; a recorded output replays instead of running. */
  run<I, O>(step: AnyStep<I, O>, input: I): Promise<O> {
    return Effect.runPromiseExitWith(this.#services)(
      this.#step.run(step as Step.Step<I, O, unknown, never>, input),
      { signal: this.#signal }
    ).then(unwrapExit)
  }

  override askUser(input: unknown, options?: { readonly id?: string }): Promise<unknown> {
    // The step view derives prompt ids from the path, so a resumed step rejoins its prompt.
    return run(this.#step.askUser(input, options))
  }
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromiseExit(effect).then(unwrapExit)

// -----------------------------------------------------------------------------
// Step builders
// -----------------------------------------------------------------------------

/** A step of the facade: bodies return values or Promises. */
export type AnyStep<I = any, O = any> = Step.Step<I, O, any, any>

const checkId = (id: string, kind: Step.StepKind): void => {
  if (id === "") {
    throw toFacadeError(
      new EmptyStepId({
        kind,
        message: `a ${kind} step has an empty id`,
        hint: "every step needs a non-empty id: it names the step's path in the ledger"
      })
    )
  }
}

/** A step that runs `body`; a composite when the body calls `ctx.run`. Throws `EMPTY_STEP_ID` for an empty id. */
export const runCode = <I, O>(
  id: string,
  body: (input: I, ctx: StepContext) => O | Promise<O>,
  options?: Omit<Step.StepOptions, "subprocess"> & { readonly subprocess?: SubprocessAdapter | Step.StepOptions["subprocess"] }
): AnyStep<I, Awaited<O>> => {
  checkId(id, "runCode")
  return Step.runCode<I, Awaited<O>, unknown>(id, (input, ctx) =>
    Effect.flatMap(Effect.context<never>(), (services) =>
      Effect.tryPromise({
        try: (signal): Promise<Awaited<O>> =>
          Promise.resolve().then(() => body(input, new StepContext(ctx, services, signal))) as Promise<Awaited<O>>,
        // What the body threw is what the caller of execute() gets back.
        catch: hostThrown
      })), withEngineSubprocess(options, `runCode step ${id}: subprocess`) as Step.StepOptions | undefined)
}

/** A model turn through the harness's model; resolves with `{ responseId, text }`. */
export const callModel = <I = string>(
  id: string,
  options?: Step.StepOptions & { readonly prompt?: (input: I, ctx: Step.StepContext) => string }
): AnyStep<I, Step.ModelTurn> => {
  checkId(id, "callModel")
  return Step.callModel<I>(id, options)
}

/** A call of the harness tool named `tool`. */
export const invokeTool = <I = unknown>(id: string, tool: string, options?: Step.StepOptions): AnyStep<I, unknown> => {
  checkId(id, "invokeTool")
  return Step.invokeTool<I>(id, tool, options)
}

/** Runs `then` when the predicate holds, else `else` (or passes the input through). */
export const conditional = <I, O>(
  id: string,
  options: Step.StepOptions & {
    readonly if: (input: I) => boolean
    readonly then: AnyStep<I, O>
    readonly else?: AnyStep<I, O>
  }
): AnyStep<I, O> => {
  checkId(id, "conditional")
  return Step.conditional(id, options as unknown as Parameters<typeof Step.conditional>[1]) as AnyStep<I, O>
}

/** Runs branches concurrently: `all` (outputs in order), `race` (first success) or `settle`. */
export const inParallel = <I>(
  id: string,
  branches: ReadonlyArray<AnyStep<I>>,
  options?: Step.StepOptions & { readonly mode?: Step.ParallelMode }
): AnyStep<I, any> => {
  checkId(id, "inParallel")
  return Step.inParallel(id, branches as ReadonlyArray<Step.AnyStep>, options)
}

/** Runs `body` on the input, then on each output, until `until` holds or `maxIterations` ran. */
export const loop = <I>(
  id: string,
  body: AnyStep<I, I>,
  options: Step.StepOptions & {
    readonly until: (output: I, iteration: number) => boolean
    readonly maxIterations?: number
  }
): AnyStep<I, I> => {
  checkId(id, "loop")
  return Step.loop(id, body as Step.AnyStep, options)
}

/** Runs `child` as a child agent in a context whose parent is the caller's. */
export const spawn = <I, O>(
  id: string,
  child: AnyStep<I, O>,
  options?: Omit<Step.StepOptions, "subprocess"> & { readonly subprocess?: SubprocessAdapter | Step.StepOptions["subprocess"] }
): AnyStep<I, O> => {
  checkId(id, "spawn")
  // A facade adapter (ours or host-written) dispatches the child agent through it.
  return Step.spawn(id, child as Step.AnyStep, withEngineSubprocess(options, `spawn step ${id}: subprocess`) as Step.StepOptions)
}

// -----------------------------------------------------------------------------
// The harness
// -----------------------------------------------------------------------------

/** A model as a plain object: one `generate` per turn. */
export interface PlainModel {
  generate(request: ScriptedModel.GenerateRequest): Promise<{ readonly text: string; readonly id?: string }>
}

/** A tool as a plain function. */
export type Tool = (input: unknown, ctx: StepContext) => unknown

/** The documented constructor options. */
export interface AgentHarnessOptions<I = any, O = any> {
  readonly name: string
  readonly agentGraph?: AnyStep<I, O>
  readonly params?: unknown
  /** A `{ generate(request) }` object, or any `effect/ai` LanguageModel layer. */
  readonly model?: PlainModel | Layer.Layer<LanguageModel.LanguageModel>
  readonly tools?: Readonly<Record<string, Tool>>
  /** The context layers of every context; defaults to scratchpad, instructions and history. */
  readonly context?: ReadonlyArray<ContextLayer<any>>
  readonly environment?: {
    readonly subprocess?: SubprocessAdapter
    readonly storage?: {
      readonly checkpointStore?: CheckpointStore
      readonly stepLedgerRetention?: Partial<StepLedgerRetention>
      /**
       * Several hosts sharing the storage: each execution runs under a lease of this
       * owner (a host incarnation), renewed every third of `ttlMs` (default 30 s). A
       * second host resuming it rejects with `EXECUTION_LEASE_HELD`; a host whose
       * lease was taken over stops with `EXECUTION_LEASE_LOST`.
       */
      readonly lease?: { readonly owner: string; readonly ttlMs?: number }
    }
  }
}

/** Options of `restore`; snapshot-owned fields (items, threadId, resourceId, cwd) are not accepted. */
export type RestoreContextOptions = EngineHarness.RestoreContextOptions<AgentContext>

/** Options of `createContext`. */
export type CreateContextOptions = EngineHarness.CreateContextOptions<AgentContext>

/** Options of `detachedSpawn`. */
export interface DetachedSpawnOptions {
  readonly subprocess?: SubprocessAdapter
  readonly cwdInit?: string
  readonly threadId?: string
  readonly resourceId?: string
  readonly metadata?: Readonly<Record<string, unknown>>
}

/** How functions of this module reach the engine behind a facade harness. */
const engines = new WeakMap<
  AgentHarness,
  <A, E>(f: (engine: EngineHarness.AgentHarness<any>) => Effect.Effect<A, E, any>) => Promise<A>
>()

class Engine extends Context.Service<Engine, EngineHarness.AgentHarness<any>>()("noetic-effect/promise/Engine") {}

const engineService: Effect.Effect<EngineHarness.AgentHarness<any>, never, Engine> = Effect.gen(function*() {
  return yield* Engine
})

const noModel = LanguageModel.make({
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

const modelLayer = (model: AgentHarnessOptions["model"]): Layer.Layer<LanguageModel.LanguageModel> => {
  if (model === undefined) return Layer.effect(LanguageModel.LanguageModel, noModel)
  if (!("generate" in model)) return model
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
}

const toEngineContext = (context: AgentContext | undefined): EngineContext | undefined =>
  context === undefined ? undefined : context[engineOf]

const engineRestoreOptions = (options: RestoreContextOptions = {}): EngineHarness.RestoreContextOptions => ({
  ...(options.parent === undefined ? {} : { parent: options.parent[engineOf] }),
  ...(options.state === undefined ? {} : { state: options.state }),
  ...(options.context === undefined ? {} : { context: options.context })
})

/** Checks every reachable step id now, so a bad graph throws at construction. */
const checkGraph = (step: AnyStep): void => {
  checkId(step.id, step.kind)
  for (const child of Step.staticChildren(step as Step.AnyStep)) checkGraph(child)
}

/**
 * An agent harness. Durable when `environment.storage.checkpointStore` is given;
 * otherwise every durability hook is a no-op. Call `close()` when done with it.
 */
export class AgentHarness<I = any, O = any> {
  readonly name: string
  readonly params: unknown
  readonly agentGraph: AnyStep<I, O> | undefined
  /** The harness's default subprocess adapter (`listLive`, `reattach`). */
  readonly subprocess: SubprocessAdapter
  readonly #runtime: ManagedRuntime.ManagedRuntime<Engine, StorageError>
  readonly #spawns = new SpawnsInFlight()

  /**
   * Throws `NoeticConfigError` with code `STEP_LEDGER_RETENTION_INVALID` for a bad
   * retention cap and `EMPTY_STEP_ID` for a graph with an empty step id.
   */
  constructor(options: AgentHarnessOptions<I, O>) {
    this.name = options.name
    this.params = options.params
    this.agentGraph = options.agentGraph
    const storage = options.environment?.storage
    const retention = resolveStepLedgerRetention(storage?.stepLedgerRetention)
    const ttlMs = storage?.lease?.ttlMs
    if (ttlMs !== undefined && !(ttlMs > 0 && Number.isFinite(ttlMs))) {
      throw new NoeticError({
        code: "LEASE_TTL_INVALID",
        message: `environment.storage.lease.ttlMs must be a positive, finite number of milliseconds, got ${ttlMs}`
      })
    }
    if (options.agentGraph !== undefined) checkGraph(options.agentGraph)

    let durability: Layer.Layer<never> | Layer.Layer<CheckpointStoreTag | StepLedger, StorageError> = Layer.empty
    if (storage?.checkpointStore !== undefined) {
      const engineStore = toEngineCheckpointStore(storage.checkpointStore)
      if (engineStore === undefined) {
        // None of the documented config codes fits: the store's schema is not the problem.
        throw new NoeticError({
          code: "CHECKPOINT_STORE_UNSUPPORTED",
          message: "environment.storage.checkpointStore must be made by createCheckpointStore " +
            "(the step ledger lives in its storage); build it with createCheckpointStore({ storage }), " +
            "which any StorageAdapter can back"
        })
      }
      // A storage that cannot be opened fails each call with a StorageError, which the
      // facade maps like any other (a defect would escape as the raw engine error).
      const store = Layer.effect(CheckpointStoreTag, engineStore)
      durability = Layer.provideMerge(
        Layer.effect(
          StepLedger,
          Effect.gen(function*() {
            return yield* Effect.orDie(makeStepLedger(yield* CheckpointStoreTag, { retention }))
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
    const engine = Layer.effect(
      Engine,
      Effect.orDie(EngineHarness.make({
        name: options.name,
        agentGraph: options.agentGraph as Step.AnyStep | undefined,
        params: options.params,
        tools,
        ...(options.context === undefined ? {} : { context: options.context }),
        ...(storage?.lease === undefined ? {} : {
          lease: {
            owner: storage.lease.owner,
            ...(storage.lease.ttlMs === undefined ? {} : { ttl: Duration.millis(storage.lease.ttlMs) })
          }
        })
      }))
    ).pipe(Layer.provide(Layer.mergeAll(durability, subprocess, modelLayer(options.model))))
    this.#runtime = ManagedRuntime.make(
      Layer.merge(engine, modelLayer(options.model)) as Layer.Layer<Engine, StorageError>
    )
    const runtime = this.#runtime
    this.subprocess = this.#spawns.wrap(
      subprocessOption ?? fromEngineSubprocessAdapter(
        Effect.promise(() => runtime.runPromise(Effect.map(engineService, (engine) => engine.subprocess)))
      )
    )
    engines.set(this, (f) => this.#use(f))
  }

  #use<A, E>(f: (engine: EngineHarness.AgentHarness<any>) => Effect.Effect<A, E, any>): Promise<A> {
    return this.#runtime.runPromiseExit(
      Effect.flatMap(engineService, f) as Effect.Effect<A, E, Engine>
    ).then(unwrapExit)
  }

  /** Runs the root graph; resolves with `{ executionId, output }`. Rejects `NO_STEP_CONFIGURED` without a graph. */
  execute(
    input: I,
    options: EngineHarness.ExecuteOptions = {}
  ): Promise<{ readonly executionId: string; readonly output: O }> {
    return this.#use((engine) => engine.execute(input, options)) as Promise<
      { readonly executionId: string; readonly output: O }
    >
  }

  /** Saves a snapshot of `ctx`; a no-op without a checkpoint store. A failing save is logged, never thrown. */
  checkpoint(ctx: AgentContext): Promise<void> {
    return this.#use((engine) => engine.checkpoint(ctx[engineOf]))
  }

  /** The rebuilt context of a recorded execution, or null. Rejects `CHECKPOINT_SCHEMA_MISMATCH` for a bad snapshot. */
  restore(executionId: string, options?: RestoreContextOptions): Promise<AgentContext | null> {
    return this.#use((engine) =>
      Effect.map(engine.restore(executionId, engineRestoreOptions(options)), (ctx) =>
        Option.getOrNull(Option.map(ctx, wrapContext))))
  }

  /** Restores and re-runs the root graph: completed steps replay. Null when nothing is recorded. */
  resume(
    executionId: string,
    options?: RestoreContextOptions
  ): Promise<{ readonly executionId: string; readonly output: O } | null> {
    return this.#use((engine) =>
      Effect.map(engine.resume(executionId, engineRestoreOptions(options)), Option.getOrNull)
    ) as Promise<{ readonly executionId: string; readonly output: O } | null>
  }

  /** Discards the snapshot and every ledger entry of an execution. */
  clearCheckpoint(executionId: string): Promise<void> {
    return this.#use((engine) => engine.clearCheckpoint(executionId))
  }

  /** A fresh context with this harness's layers. */
  createContext(options: CreateContextOptions = {}): Promise<AgentContext> {
    const { parent, ...rest } = options
    return this.#use((engine) =>
      Effect.map(
        engine.createContext({ ...rest, ...(parent === undefined ? {} : { parent: toEngineContext(parent)! }) }),
        wrapContext
      )
    )
  }

  /** Runs one step on a context (durably when the harness is). */
  run<SI, SO>(step: AnyStep<SI, SO>, input: SI, ctx: AgentContext): Promise<SO> {
    return this.#use((engine) => engine.run(step as Step.Step<SI, SO, unknown, never>, input, ctx[engineOf]))
  }

  /**
   * Starts `step` as a detached child and returns its handle at once. The adapter is
   * `options.subprocess`, else the step's, else the harness default. The parent
   * context checkpoints when the child settles.
   */
  detachedSpawn<SI>(
    step: AnyStep<SI>,
    input: SI,
    parentCtx: AgentContext,
    options: DetachedSpawnOptions = {}
  ): DetachedSubprocessHandle {
    const { subprocess, ...rest } = options
    const adapter = subprocess === undefined ? undefined : toEngineSubprocessShape(subprocess, "detachedSpawn options.subprocess")
    // The documented API hands the handle back at once, so its ids are made here.
    const handleId = randomUUID()
    const executionId = randomUUID()
    const started = this.#use((engine) =>
      Effect.gen(function*() {
        const engineOptions: EngineHarness.DetachedSpawnOptions = {
          ...rest,
          handleId,
          executionId,
          ...(adapter === undefined ? {} : { subprocess: adapter })
        }
        return toFacadeHandle(
          yield* engine.detachedSpawn(step as Step.Step<SI, unknown, unknown, never>, input, parentCtx[engineOf], engineOptions)
        )
      })
    )
    // A failed start surfaces through status() and await(); never as an unhandled rejection.
    started.catch(() => {})
    this.#spawns.track(started)
    return {
      handleId,
      stepId: step.id,
      executionId,
      parentExecutionId: parentCtx.id,
      metadata: options.metadata ?? {},
      status: () => started.then((handle) => handle.engineStatus()),
      await: () => started.then((handle) => handle.await())
    }
  }

  /** Answers a pending ask-user prompt of an execution this harness is running. */
  answerAskUser(executionId: string, promptId: string, output: unknown): Promise<void> {
    return this.#use((engine) => engine.answerAskUser(executionId, promptId, output))
  }

  /** Stops in-process children and releases the harness's resources. */
  close(): Promise<void> {
    return this.#runtime.dispose()
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
          engineRestoreOptions(typeof restore === "function" ? restore(toFacadeHandle(handle)) : restore)
      }),
      (found): ReattachedChildren => ({
        handles: found.handles.map(toFacadeHandle),
        contexts: new Map(Array.from(found.contexts, ([handleId, ctx]) => [handleId, wrapContext(ctx)])),
        failures: found.failures.map(({ error, handle }) => ({ handle: toFacadeHandle(handle), error: toFacadeError(error) }))
      })
    )
  )
}
