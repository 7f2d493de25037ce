/**
 * The facade's contexts: `AgentContext` (noetic's `Context`) and `StepContext`, what
 * step bodies see.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { AgentContext as EngineContext, type Item } from "../harness/AgentContext.ts"
import * as Step from "../harness/Step.ts"
import { replayNow } from "../harness/Frames.ts"
import type { AskUserPrompt, Cwd, FrontierEntry } from "../schema/CheckpointSnapshot.ts"
import { toFacadeError, unwrapExit } from "./errors.ts"
import { AgentStreamError, DEFAULT_NAME, nameProblem, type StreamChunk } from "../harness/AgentStreams.ts"
import * as Bridge from "./bridge.ts"
import { type SubprocessAdapter } from "./subprocess.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { lastStepMeta, type StepMeta } from "../harness/ToolLoop.ts"
import { NoeticConfigError } from "./errors.ts"
import type { FsAdapter, ShellAdapter } from "./ipc.ts"
import type { ContextLayer } from "./layers.ts"
import { type AnyStep, asStep } from "./plainSteps.ts"
import type { AgentHarness } from "./harness.ts"
import * as Channels from "../harness/Channels.ts"
import * as LayerLifecycle from "../harness/LayerLifecycle.ts"
import { type Channel, runChannel } from "./channels.ts"
import * as LiveContexts from "./liveContexts.ts"

/** Token usage (noetic's `TokenUsage`). */
export interface TokenUsage {
  input: number
  output: number
  total: number
  cached?: number
}

/**
 * A context's span (noetic's `Span`) over a span of Effect's tracer, so what a step
 * sets reaches whatever the tracer exports to (an OpenTelemetry layer on the Effect
 * API). In a step body it is the step's own span (`<kind> <id>`, which its dispatch
 * ends); on a context outside a step, a span `context <id>` under its parent's.
 */
export interface Span {
  readonly name: string
  /** Shared by the spans of one trace. */
  readonly traceId: string
  readonly spanId: string
  /** The enclosing span's id; null for a root span. */
  readonly parentSpanId: string | null
  /** What `setAttribute` (and the runtime) put on the span. */
  readonly attributes: ReadonlyMap<string, unknown>
  setAttribute(key: string, value: string | number | boolean): void
  addEvent(name: string, attributes?: Record<string, string | number | boolean>): void
  /** Ends the span now (a step's span ends with its dispatch: then this does nothing). */
  end(): void
  /** The Effect span underneath. */
  readonly effectSpan: Tracer.Span
}

/** noetic's span methods over an Effect span; `owned`: whether `end()` may end it. */
export const spanOf = (span: Tracer.Span, owned: boolean): Span => {
  let ended = false
  const now = () => BigInt(Date.now()) * 1_000_000n
  return {
    name: span.name,
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: Option.getOrNull(Option.map(span.parent, (parent) => parent.spanId)),
    get attributes() {
      return span.attributes
    },
    effectSpan: span,
    setAttribute: (key, value) => span.attribute(key, value),
    addEvent: (name, attributes) => span.event(name, now(), attributes),
    end: () => {
      if (!owned || ended) return
      ended = true
      span.end(now(), Exit.void)
    }
  }
}

const hubOf = (ctx: AgentContext): Channels.ChannelHub => {
  const engine = Bridge.context.of(ctx)
  const hub = engine.store.channels ?? (ctx.harness as { readonly channelHub?: Channels.ChannelHub }).channelHub
  if (hub === undefined) throw new TypeError("this context belongs to no harness: it has no channels")
  return hub
}

const waiterOf = (ctx: AgentContext): Channels.Waiter => ({ aborted: () => ctx.aborted, abortReason: () => ctx.abortReason })

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

/** The context itself under a step's view of it (a view is made with Object.create over its context). */
const rootOf = (engine: EngineContext): EngineContext => {
  let root = engine
  while (!Object.prototype.hasOwnProperty.call(root, "store")) root = Object.getPrototypeOf(root)
  return root
}

/** Notes on an engine context the harness's `environment.fs`, for the `filesystem()` layer's reads. */
const noteEnvironmentFs = (engine: EngineContext, harness: AgentHarness | undefined): void => {
  const fs = (harness as { readonly fs?: FsAdapter | undefined } | undefined)?.fs
  if (fs === undefined) return
  // The note goes on the context itself, not on a step's view of it.
  const root = rootOf(engine)
  if (!Bridge.environmentFs.has(root)) Bridge.environmentFs.attach(root, fs)
}

/**
 * The live context of an execution (noetic's `Context`): `id`, `threadId`,
 * `resourceId`, assignable `state`, `parent` (null at the root), `itemLog`,
 * `cwdState`, `depth`, `layers`, `harness`, `subprocess`, `checkpoint()`, `abort()`,
 * `aborted`; and this library's Promise methods (`append`, `askUser`, ...).
 */
export class AgentContext {
  readonly #engine: EngineContext
  #harness: AgentHarness | undefined
  #itemLog: ItemLog | undefined
  #span: Span | undefined

  static {
    // The link to the engine context (bridge.ts) is read through the prototype: a
    // context is made per step body, and a property defined on each cost more than
    // the rest of its construction.
    Bridge.context.attachEach(this.prototype, (ctx) => #engine in ctx ? ctx.#engine : undefined)
  }

  /** @internal */
  constructor(engine: EngineContext, harness?: AgentHarness) {
    this.#engine = engine
    // Note the context itself, not a step's view of it.
    const root = rootOf(engine)
    LiveContexts.register(root)
    this.#harness = harness
    noteEnvironmentFs(root, harness)
  }

  /** @internal Attaches the harness to a context first seen without one. */
  adoptHarness(harness: AgentHarness | undefined): void {
    if (this.#harness === undefined) this.#harness = harness
    noteEnvironmentFs(Bridge.context.of(this), harness)
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
  /** Steps dispatched on this context so far (noetic's `stepCount`). */
  get stepCount(): number {
    return Bridge.context.of(this).meter.stepCount
  }
  /** Tokens the provider reported for this context's model calls (noetic's `tokens`). */
  get tokens(): TokenUsage {
    return { ...Bridge.context.of(this).meter.tokens }
  }
  /** Milliseconds since this context was made (noetic's `elapsed`). */
  get elapsed(): number {
    return Date.now() - Bridge.context.of(this).meter.startedAt
  }
  /** USD the provider reported for this context's model calls (noetic's `cost`). */
  get cost(): number {
    return Bridge.context.of(this).meter.cost
  }
  /**
   * What the layers provide, by layer id (noetic's `ctx.context`): data entries read
   * from the current state, function entries returning Promises (docs/layers-and-channels.md#provides).
   */
  get context(): any {
    return LayerLifecycle.contextView(Bridge.context.of(this), (effect) => runChannel(effect))
  }
  /**
   * This context's span (noetic's `span`), of Effect's tracer: `context <id>`, made on
   * first use under the parent context's span. A step's context gives the step's span.
   */
  get span(): Span {
    if (this.#span === undefined) {
      const parent = this.parent?.span.effectSpan
      const made = Effect.runSync(Effect.makeSpan(`context ${this.id}`, {
        attributes: { executionId: this.id, threadId: this.threadId },
        ...(parent === undefined ? { root: true } : { parent })
      }))
      this.#span = spanOf(made, true)
    }
    return this.#span
  }
  /** The harness's filesystem adapter (`environment.fs`). */
  get fs(): FsAdapter {
    const fs = (this.harness as { readonly fs?: FsAdapter | undefined }).fs
    if (fs === undefined) throw missingEnvironment("fs", "createLocalFsAdapter()")
    return fs
  }
  /** What the last `callModel` on this context produced, or null. */
  get lastStepMeta(): StepMeta | null {
    return lastStepMeta(Bridge.context.of(this)) ?? null
  }
  /** Per-layer breakdown of the last model call's view (noetic's `LastLayerUsage`); undefined before the first. */
  get lastLayerUsage(): LayerLifecycle.LastLayerUsage | undefined {
    return Bridge.context.of(this).meter.lastLayerUsage
  }
  /** Marks this context complete with `value` (noetic's `complete`). */
  complete<T>(value: T): void {
    const meter = Bridge.context.of(this).meter
    meter.completed = true
    meter.completionValue = value
  }
  /** Whether `complete()` was called. */
  get completed(): boolean {
    return Bridge.context.of(this).meter.completed
  }
  /** The value given to `complete()`. */
  get completionValue(): unknown {
    return Bridge.context.of(this).meter.completionValue
  }
  /** Sends on a channel; parks while a queue is full (`channel_timeout` after 30 s, `cancelled` on abort). */
  send<T>(channel: Channel<T>, value: T): Promise<void> {
    return runChannel(Effect.suspend(() => hubOf(this).send(channel as Channels.Channel<T>, value, waiterOf(this))))
  }
  /** Waits for a channel value (`timeout` ms, default 30 s): `channel_timeout`, or `cancelled` on abort. */
  recv<T>(channel: Channel<T>, opts?: { timeout?: number }): Promise<T> {
    return runChannel(Effect.suspend(() =>
      hubOf(this).recv(channel as Channels.Channel<T>, { timeoutMs: opts?.timeout, waiter: waiterOf(this) })
    ))
  }
  /** A channel value available now, else null (always null for a topic). */
  tryRecv<T>(channel: Channel<T>): T | null {
    return hubOf(this).tryRecv(channel as Channels.Channel<T>)
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
export const wrapContext = (engine: EngineContext, harness: AgentHarness | undefined): AgentContext => {
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
export class FacadeHarness extends Context.Service<FacadeHarness, AgentHarness>()("noetic-effect/promise/FacadeHarness") {}

/**
 * A writer on one stream of an execution (`ctx.stream(name)`): `write` resolves when the
 * chunk is durable, `close` ends this writer; the stream closes when the execution ends.
 */
export interface StreamWriter {
  /** Resolves when the stream exists (it is created on first use); rejects as `write` would. */
  readonly ready: Promise<void>
  write(chunk: StreamChunk): Promise<void>
  close(): Promise<void>
}

const isThenable = (u: unknown): u is PromiseLike<unknown> =>
  (typeof u === "object" || typeof u === "function") && u !== null && typeof (u as { then?: unknown }).then === "function"

/**
 * The abort signal of one host call (a step body, a tool), made when first asked for,
 * and the fibers its `ctx.run` calls are running: interrupting the call aborts the
 * signal and interrupts those fibers. Most bodies never read their signal, and an abort
 * listener per child step (what `Effect.runFork`'s `signal` option adds) costs more
 * than a set entry.
 */
export class HostSignal {
  #controller: AbortController | undefined
  #interrupted = false
  #fibers: Set<Fiber.Fiber<unknown, unknown>> | undefined

  /** The signal, aborted once the call is interrupted. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#interrupted) this.#controller.abort()
    }
    return this.#controller.signal
  }

  /** Interrupts `fiber` when the call is interrupted (at once if it was), until the fiber ends. */
  watch(fiber: Fiber.Fiber<unknown, unknown>): void {
    if (this.#interrupted) {
      fiber.interruptUnsafe()
      return
    }
    const fibers = this.#fibers ??= new Set()
    fibers.add(fiber)
    fiber.addObserver(() => fibers.delete(fiber))
  }

  /** @internal The call was interrupted: aborts the signal, interrupts the watched fibers. */
  interrupt(): void {
    this.#interrupted = true
    this.#controller?.abort()
    if (this.#fibers !== undefined) for (const fiber of this.#fibers) fiber.interruptUnsafe()
  }
}

/** A body's abort signal: a host call's, or a signal of its own (one that never aborts, say). */
export type LazySignal = AbortSignal | HostSignal

/**
 * A host's Promise-returning function called as an Effect, its rejection mapped by
 * `onReject`: `f` gets the call's `HostSignal`, interrupted with the fiber. Most bodies
 * never read the signal: `Effect.tryPromise` would make an `AbortController` (and an
 * abort listener) for every call whose `try` takes the signal.
 */
export const hostCall = <A>(
  f: (signal: HostSignal) => A | PromiseLike<A>,
  onReject: (thrown: unknown) => unknown
): Effect.Effect<Awaited<A>, unknown> =>
  Effect.callback<Awaited<A>, unknown>((resume) => {
    const signal = new HostSignal()
    // A value resumes the fiber at once, a Promise when it settles.
    try {
      const result = f(signal)
      if (isThenable(result)) {
        result.then((value) => resume(Effect.succeed(value as Awaited<A>)), (thrown) => resume(rejected(onReject, thrown)))
      } else {
        resume(Effect.succeed(result as Awaited<A>))
      }
    } catch (thrown) {
      resume(rejected(onReject, thrown))
    }
    return Effect.sync(() => signal.interrupt())
  })

/** What a host call threw, mapped once the fiber runs again, as `Effect.tryPromise` maps its rejections. */
const rejected = (onReject: (thrown: unknown) => unknown, thrown: unknown): Effect.Effect<never, unknown> =>
  Effect.suspend(() => Effect.fail(onReject(thrown)))

/** What step bodies see: their context plus `run` for child steps and their own `path`. */
export class StepContext extends AgentContext {
  readonly #step: Step.StepContext
  readonly #services: Context.Context<never>
  #signal: LazySignal

  /** @internal */
  constructor(step: Step.StepContext, services: Context.Context<never>, signal: LazySignal) {
    super(step, Context.getOrUndefined(services as Context.Context<FacadeHarness>, FacadeHarness))
    this.#step = step
    this.#services = services
    this.#signal = signal
  }

  /** This dispatch's path, e.g. `/agent#0/search#1`. */
  get path(): string {
    return this.#step.path
  }

  /** The span of this step's dispatch (`<kind> <id>`, Effect's tracer): what a body sets lands on the step's span. */
  override get span(): Span {
    const current = Context.getOption(this.#services, Tracer.ParentSpan)
    if (Option.isSome(current) && current.value._tag === "Span") return spanOf(current.value, false)
    return super.span
  }

  /** Aborted when the step is interrupted (a race lost, a timeout, a failing sibling). */
  get signal(): AbortSignal {
    const signal = this.#signal
    return signal instanceof HostSignal ? signal.signal : signal
  }

  /** Runs a child step below this one (interrupted with this body); a recorded output replays instead of running. */
  run<I, O>(step: AnyStep<I, O>, input: I): Promise<O> {
    const engineStep = asStep(step) as Step.Step<I, O, unknown, never>
    // A step the ledger answers at once (a replay) settles without a fiber: the engine decides.
    const replayed = replayNow(this.#step, engineStep, this.#services)
    if (replayed !== undefined) return Promise.resolve(replayed.output as O)
    const signal = this.#signal
    const fiber = Effect.runForkWith(this.#services)(
      this.#step.run(engineStep, input),
      signal instanceof HostSignal ? undefined : { signal }
    )
    // A step that settles while it is forked gets a settled promise, without waiting for the fiber's observer.
    const done = fiber.pollUnsafe()
    if (done !== undefined) return settledPromise(done)
    if (signal instanceof HostSignal) signal.watch(fiber)
    return new Promise<O>((resolve, reject) =>
      fiber.addObserver((exit) => {
        try {
          resolve(unwrapExit(exit))
        } catch (error) {
          reject(error)
        }
      })
    )
  }

  /**
   * A writer on the durable stream `executions/<executionId>/<name>` (default `output`):
   * `await write(chunk)` resolves when the chunk is durable; each chunk is stored once
   * across replay and re-run. A bad name throws a NoeticError `AGENT_STREAM` here.
   * See docs/agent-streams.md.
   */
  stream(name?: string): StreamWriter {
    const problem = nameProblem(name ?? DEFAULT_NAME)
    if (problem !== undefined) {
      throw toFacadeError(
        new AgentStreamError({ reason: "InvalidName", executionId: this.#step.id, name: name ?? "", detail: problem })
      )
    }
    const opened = run(this.#step.stream(name))
    opened.catch(() => {})
    return {
      ready: opened.then(() => undefined),
      write: (chunk) => opened.then((writer) => run(writer.write(chunk))),
      close: () => opened.then((writer) => run(writer.close()), () => {})
    }
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

/** A promise settled as `exit` is: resolved with its value, or rejected as `unwrapExit` throws. */
const settledPromise = <A, E>(exit: Exit.Exit<A, E>): Promise<A> => {
  if (Exit.isSuccess(exit)) return Promise.resolve(exit.value)
  try {
    return Promise.resolve(unwrapExit(exit))
  } catch (error) {
    return Promise.reject(error)
  }
}

// -----------------------------------------------------------------------------
// Tool execution contexts (docs/runtime.md#tools)
// -----------------------------------------------------------------------------

export type { ShellAdapter }

/** Per-layer state a tool reads and writes (noetic's `ToolContext`). */
export interface ToolLayerState {
  get<T>(layerId: string): T | undefined
  set<T>(layerId: string, state: T): void
}

/**
 * What a tool's `execute` gets as its second argument (noetic's `ToolExecutionContext`):
 * `ctx` (the step's context), `harness`, `fs`, `shell`, `context` (layer state),
 * `assembledView` (the item log) and `lastStepMeta`. It is also the step's context
 * itself (`toolCtx.items`, `toolCtx.run(step, input)`), as this library's tools had it.
 */
export class ToolExecutionContext extends StepContext {
  /** The context of the step running the tool. */
  readonly ctx: StepContext
  /** @internal */
  constructor(
    step: Step.StepContext,
    services: Context.Context<never>,
    signal: LazySignal
  ) {
    super(step, services, signal)
    this.ctx = new StepContext(step, services, signal)
  }
  /** The harness's filesystem adapter (`environment.fs`). */
  override get fs(): FsAdapter {
    const fs = (this.harness as { readonly fs?: FsAdapter | undefined }).fs
    if (fs === undefined) throw missingEnvironment("fs", "createLocalFsAdapter()")
    return fs
  }
  /** The harness's shell adapter (`environment.shell`). */
  get shell(): ShellAdapter {
    const shell = (this.harness as { readonly shell?: ShellAdapter | undefined }).shell
    if (shell === undefined) throw missingEnvironment("shell", "an adapter with exec(command)")
    return shell
  }
  /** Layer state by layer id. */
  override get context(): ToolLayerState {
    return {
      get: <T>(layerId: string) => this.layerState<T>(layerId),
      set: <T>(layerId: string, state: T) => {
        this.updateLayer<T>(layerId, () => state).catch(() => {})
      }
    }
  }
  /** The item log as the model was shown it. */
  get assembledView(): ReadonlyArray<unknown> {
    return this.items
  }
  /** What the last `callModel` on this context produced, or null. */
  override get lastStepMeta(): StepMeta | null {
    return lastStepMeta(Bridge.context.of(this.ctx)) ?? null
  }
}

const missingEnvironment = (what: "fs" | "shell", example: string) =>
  new NoeticConfigError({
    code: "MISSING_ENVIRONMENT_ADAPTER",
    message: `a tool used toolCtx.${what}, and this harness was built without environment.${what}`,
    hint: `Pass environment: { ${what}: ${example} } to the AgentHarness.`
  })
