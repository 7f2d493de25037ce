/**
 * The agent harness: runs an agent graph of steps against a context and, when given a
 * `CheckpointStore`, makes the run durable: snapshots at the documented boundaries,
 * a step ledger whose recorded outputs replay on resume, restore of contexts.
 *
 * Without a checkpoint store every durability hook is a no-op.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import {
  type CheckpointSchemaMismatch,
  type EmptyStepId,
  NoStepConfigured,
  StepLedgerDurabilityInvalid,
  type StorageError
} from "../Errors.ts"
import { type CheckpointSnapshot, snapshotKey } from "../schema/CheckpointSnapshot.ts"
import { CheckpointStore, type CheckpointStoreShape } from "../services/CheckpointStore.ts"
import { makeMemory as makeMemoryStorage, type StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { ExecutionLeaseError } from "../services/ExecutionLease.ts"
import { checkRestoredItems, type ItemSchemaMismatch } from "../services/ItemSchemas.ts"
import {
  type ExecutionLedger,
  makeWith as makeStepLedger,
  StepLedger,
  type StepLedgerShape
} from "../services/StepLedger.ts"
import {
  makeMemory as makeMemorySubprocessAdapter,
  SubprocessAdapter,
  type SubprocessAdapterShape,
  type SubprocessError,
  type SubprocessHandle
} from "../services/SubprocessAdapter.ts"
import { AgentContext, type ContextLayer, type ContextStore, defaultLayers, type Item, randomUuid } from "./AgentContext.ts"
import type { StepHooks } from "./SessionTurn.ts"
import {
  ReplayDiverged,
  ResumeInputUnavailable,
  type ToolOutcomeUnknown,
  UnknownAskUserPrompt
} from "./HarnessError.ts"
import * as AgentStreams from "./AgentStreams.ts"
import { ChannelHub } from "./Channels.ts"
import type { LayerStateStore } from "./LayerHooks.ts"
import * as Checkpointing from "./Checkpointing.ts"
import * as LayerLifecycle from "./LayerLifecycle.ts"
import * as Interpreter from "./Interpreter.ts"
import {
  type HarnessLeaseOptions,
  type LeaseTtlInvalid,
  make as makeLeasedRuns,
  validateLeaseOptions
} from "./LeasedRuns.ts"
import {
  type AnyStep,
  type Error as StepError,
  type Input as StepInput,
  type Output as StepOutput,
  type Services as StepServices,
  type Step
} from "./Step.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { inheritFields } from "../internal/contextInit.ts"

export {
  /** The schedule of a step's retry policy. */
  retrySchedule,
  validateGraph
} from "./Interpreter.ts"
export type { DivergencePolicy, LedgerDurability, ReplayMark, ToolHandler } from "./Interpreter.ts"
export { toSnapshot } from "./Checkpointing.ts"

/** How a harness is built. */
export interface AgentHarnessOptions<G extends AnyStep | undefined = AnyStep | undefined> {
  readonly name: string
  /** The root step `execute` runs. */
  readonly agentGraph?: G
  /** Free-form parameters the host gives its steps (read them from `harness.params`). */
  readonly params?: unknown
  /** Tools `invokeTool` steps call by name. */
  readonly tools?: Readonly<Record<string, Interpreter.ToolHandler>>
  /** The context layers of every context; defaults to scratchpad, instructions, history. */
  readonly context?: ReadonlyArray<ContextLayer<any>>
  /** The default adapter of `detachedSpawn`; the `SubprocessAdapter` service, else in-process. */
  readonly subprocess?: SubprocessAdapterShape
  /**
   * Runs every execution of a durable harness under an execution lease, so several
   * hosts can share one storage: see {@link HarnessLeaseOptions}. Ignored without a
   * checkpoint store (there is nothing to share).
   */
  readonly lease?: HarnessLeaseOptions
  /**
   * What a resume does when the step at a recorded path is not the one recorded
   * there (an edited workflow). `"warn"` (the default): logs a warning naming the
   * path and both identities, once per run, then runs the step fresh, discarding the
   * recorded subtree. `"fail"`: fails the run with `ReplayDiverged`, discarding nothing.
   */
  readonly onDivergence?: Interpreter.DivergencePolicy
  /**
   * What a failed step-ledger write costs. `"best-effort"` (the default, as noetic):
   * a warning on stderr naming the execution and the path, a `recordFailed` count in
   * the ledger's statistics, and the run goes on (that step re-runs on resume).
   * `"strict"`: the step fails with `StepLedgerWriteFailed` and nothing downstream runs.
   */
  readonly stepLedgerDurability?: Interpreter.LedgerDurability
  /** noetic's `AgentHooks`: `beforeStep` and `afterStep` around every step dispatch. */
  readonly hooks?: StepHooks
  /**
   * Where layer `init` storage and the write-through of `thread`, `resource` and
   * `global` layer state go (docs/layers-and-channels.md#durable-layer-state): by
   * default the checkpoint store's storage on a durable harness, else memory.
   */
  readonly layerStorage?: StorageAdapterShape
  /** The channels of this harness's contexts; one is made when absent. */
  readonly channels?: ChannelHub
  /**
   * A host's store of live layer state (noetic's `storage.layerStateStore`): every
   * context of this harness writes its layer state to it and reads it back from it
   * (docs/layers-and-channels.md#a-layer-state-store).
   */
  readonly layerStateStore?: LayerStateStore
}

export { DEFAULT_LEASE_TTL, type HarnessLeaseOptions, LeaseTtlInvalid } from "./LeasedRuns.ts"

/** Options of `execute`. */
export interface ExecuteOptions {
  /** Reusing the id of a recorded execution continues it: its context is restored and completed steps replay. */
  readonly executionId?: string
  readonly threadId?: string
  readonly resourceId?: string
  /** The working directory of a fresh context (a child process passes its `cwdInit`). */
  readonly cwd?: string
  /** Host wiring for the context; never persisted. */
  readonly state?: unknown
  /** The layers of a fresh context, instead of the harness's. */
  readonly context?: ReadonlyArray<ContextLayer<any>>
  /**
   * Called once the root step is dispatched, just before its body starts (or its
   * recorded output replays, or its reconciler runs), after the run's first
   * checkpoint. Not called when the run fails before that. Work that should start
   * beside the body and not ahead of it starts here (a child process serves its
   * socket from then on).
   */
  readonly onRootDispatch?: () => void
  /**
   * Set by a subprocess adapter that runs this execution's root step (in a child
   * process, or re-run after a restart): that root is not dispatched through its own
   * adapter, or the harness default, again. Every other root (`execute`, `resume`,
   * `run`) is, like any `runCode` or `spawn` dispatch (docs/architecture.md#adapter-precedence).
   */
  readonly runByAdapter?: boolean
  /** `executionId` was just made by the caller: nothing can be recorded under it, so no restore is tried. */
  readonly newExecution?: boolean
  /** The item log of a fresh context (a session turn's history and input); a restored context keeps its own. */
  readonly items?: ReadonlyArray<Item>
  /** Called with the run's context once it is built or restored, before its root step runs. */
  readonly onContext?: (ctx: AgentContext) => void
}

/** What `execute` and `resume` return. */
export interface ExecuteResult<O> {
  readonly executionId: string
  readonly output: O
}

/**
 * Host wiring handed back to `restore`; snapshot-owned fields are deliberately absent.
 * `Ctx` is the context type of the API in use (the Promise facade has its own).
 */
export interface RestoreContextOptions<Ctx = AgentContext> {
  readonly parent?: Ctx
  readonly state?: unknown
  readonly context?: ReadonlyArray<ContextLayer<any>>
}

/** Options of `createContext`. */
export interface CreateContextOptions<Ctx = AgentContext> extends RestoreContextOptions<Ctx> {
  readonly id?: string
  readonly threadId?: string
  readonly resourceId?: string
  readonly cwd?: string
  /** The item log it starts with. */
  readonly items?: ReadonlyArray<Item>
}

/** Options of `detachedSpawn`. */
export interface DetachedSpawnOptions {
  /** The child's handle id; one is made when absent. */
  readonly handleId?: string
  /** The execution id the child runs under; one is made when absent. */
  readonly executionId?: string
  /** An adapter for this call only; wins over the step's and the harness default. */
  readonly subprocess?: SubprocessAdapterShape
  readonly cwdInit?: string
  readonly threadId?: string
  readonly resourceId?: string
  /** Caller metadata recorded with the child. */
  readonly metadata?: Readonly<Record<string, unknown>>
}

/** What can fail a run besides the steps themselves. */
export type RunError = EmptyStepId | StorageError | ReplayDiverged | ToolOutcomeUnknown

/** What can fail `execute` and `resume` of a harness with `lease` besides a run. */
export type LeaseError = ExecutionLeaseError

/** A harness whose root graph is `G`. */
export interface AgentHarness<G extends AnyStep | undefined = AnyStep | undefined> {
  readonly name: string
  readonly params: unknown
  readonly agentGraph: G
  /** Whether a checkpoint store is configured. */
  readonly durable: boolean
  /** The checkpoint store, when the harness is durable (sessions keep their queues in its storage). */
  readonly checkpointStore: Option.Option<CheckpointStoreShape>
  /** The default subprocess adapter (`listLive`, `reattach`). */
  readonly subprocess: SubprocessAdapterShape
  /** Runs the root graph on a fresh context (or continues a recorded execution id). */
  readonly execute: (
    input: GraphInput<G>,
    options?: ExecuteOptions
  ) => Effect.Effect<
    ExecuteResult<GraphOutput<G>>,
    GraphError<G> | RunError | NoStepConfigured | CheckpointSchemaMismatch | ItemSchemaMismatch | LeaseError,
    GraphServices<G>
  >
  /** Saves a snapshot of `ctx`; a no-op without a checkpoint store. Never fails: a failing save is logged. */
  readonly checkpoint: (ctx: AgentContext) => Effect.Effect<void>
  /** Rebuilds the context of a recorded execution; none when nothing is recorded. */
  readonly restore: (
    executionId: string,
    options?: RestoreContextOptions
  ) => Effect.Effect<Option.Option<AgentContext>, StorageError | CheckpointSchemaMismatch | ItemSchemaMismatch>
  /** Restores an execution and runs the root graph again: completed steps replay, the rest runs. */
  readonly resume: (
    executionId: string,
    options?: RestoreContextOptions
  ) => Effect.Effect<
    Option.Option<ExecuteResult<GraphOutput<G>>>,
    GraphError<G> | RunError | NoStepConfigured | CheckpointSchemaMismatch | ItemSchemaMismatch | ResumeInputUnavailable | LeaseError,
    GraphServices<G>
  >
  /** Discards an execution's snapshot and every ledger entry, wherever its ledger is kept. */
  readonly clearCheckpoint: (executionId: string) => Effect.Effect<void, StorageError>
  /** A fresh context with this harness's layers and checkpoint hook. */
  readonly createContext: (options?: CreateContextOptions) => Effect.Effect<AgentContext>
  /**
   * Runs one step on a context, durably when the harness is (`/stepId#n` paths per
   * context); with `lease`, holding the execution's lease while it runs.
   */
  readonly run: <I, O, E, R>(
    step: Step<I, O, E, R>,
    input: I,
    ctx: AgentContext
  ) => Effect.Effect<O, E | RunError | LeaseError, R>
  /** Starts a child through a subprocess adapter; the parent context checkpoints when it settles. */
  readonly detachedSpawn: <I, O, E, R>(
    step: Step<I, O, E, R>,
    input: I,
    parentCtx: AgentContext,
    options?: DetachedSpawnOptions
  ) => Effect.Effect<SubprocessHandle, SubprocessError | EmptyStepId, R>
  /**
   * Watches a child that was started before a restart (one `reattach` returned):
   * `parentCtx` checkpoints when it settles, as it would have for `detachedSpawn`.
   */
  readonly adopt: (handle: SubprocessHandle, parentCtx: AgentContext) => Effect.Effect<void>
  /**
   * Answers a pending ask-user prompt of an execution: at once when this harness runs
   * it, else (a restored prompt, before `resume`) when its run goes live here.
   */
  readonly answerAskUser: (
    executionId: string,
    promptId: string,
    output: unknown
  ) => Effect.Effect<void, UnknownAskUserPrompt>
  /** The live context of an execution this harness is running (or of a running spawn step's child agent), if any. */
  readonly liveContext: (executionId: string) => Option.Option<AgentContext>
  /** The channels of this harness's contexts (docs/layers-and-channels.md#channels). */
  readonly channels: ChannelHub
  /** Where layer init storage and durable layer state go (docs/layers-and-channels.md#durable-layer-state). */
  readonly layerStorage: StorageAdapterShape
  /**
   * Cancels an execution (noetic's `harness.cancel`): aborts `ctx` and, deepest first,
   * runs the layer teardown of each live context under it and then of `ctx`:
   * `onComplete` with outcome `'aborted'`, then `dispose`. A second call does nothing.
   */
  readonly cancel: (ctx: AgentContext, reason?: string) => Effect.Effect<void>
}

type GraphInput<G> = G extends AnyStep ? StepInput<G> : never
type GraphOutput<G> = G extends AnyStep ? StepOutput<G> : never
type GraphError<G> = G extends AnyStep ? StepError<G> : never
type GraphServices<G> = G extends AnyStep ? StepServices<G> : never

/**
 * Every check a harness makes of its options before anything runs (step ids of the
 * graph, lease ttl). `make` runs it; the Promise facade runs it at construction.
 */
export const validateOptions = (
  options: Pick<AgentHarnessOptions, "agentGraph" | "lease" | "stepLedgerDurability">
): Effect.Effect<void, EmptyStepId | LeaseTtlInvalid | StepLedgerDurabilityInvalid> =>
  Effect.andThen(
    options.agentGraph === undefined ? Effect.void : Interpreter.validateGraph(options.agentGraph),
    Effect.andThen(validateLeaseOptions(options.lease), Interpreter.validateDurability(options.stepLedgerDurability))
  )

/**
 * Builds a harness. A `CheckpointStore` in the context makes it durable (with the
 * `StepLedger` service, or a ledger with default retention over the store). The
 * harness's background work (detached-spawn watchers, in-process children) belongs
 * to the surrounding scope.
 */
export const make = Effect.fnUntraced(function*<const G extends AnyStep | undefined = undefined>(
  options: AgentHarnessOptions<G>
): Effect.fn.Return<AgentHarness<G>, EmptyStepId | LeaseTtlInvalid | StepLedgerDurabilityInvalid, Scope.Scope> {
  yield* validateOptions(options)
  const scope = yield* Effect.scope
  const store: Option.Option<CheckpointStoreShape> = yield* Effect.serviceOption(CheckpointStore)
  // A durable harness always keeps a ledger; without the StepLedger service it gets
  // one with the default retention (which is valid, so building it cannot fail).
  const ledgerService: Option.Option<StepLedgerShape> = Option.isNone(store)
    ? Option.none()
    : Option.some(yield* Effect.serviceOption(StepLedger).pipe(
      Effect.flatMap(Option.match({
        onSome: Effect.succeed,
        onNone: () => Effect.orDie(makeStepLedger(store.value))
      }))
    ))
  const subprocess = options.subprocess !== undefined ? options.subprocess : yield* Effect.serviceOption(
    SubprocessAdapter
  ).pipe(Effect.flatMap(Option.match({ onSome: Effect.succeed, onNone: () => makeMemorySubprocessAdapter })))
  const layers = options.context ?? defaultLayers()
  // Not `??` around a `yield*`: the CommonJS build moves its right side into an arrow function.
  const layerStorage: StorageAdapterShape = options.layerStorage !== undefined
    ? options.layerStorage
    : Option.isSome(store)
    ? store.value.storage
    : yield* makeMemoryStorage
  // External channels' handle sends are stored (and so survive the host) only on a durable harness.
  const channels = options.channels ?? new ChannelHub()
  if (Option.isSome(store)) channels.attachStorage(layerStorage)
  const tools = options.tools ?? {}
  const onDivergence: Interpreter.DivergencePolicy = options.onDivergence ?? "warn"
  // Set when the harness's scope closes: an outcome a reconcile learns after that is not recorded.
  let closed = false
  yield* Scope.addFinalizer(scope, Effect.sync(() => void (closed = true)))
  const live = new Map<string, AgentContext>()
  // By shared state too: harness.run given different views of one context numbers on.
  const runCounters = new WeakMap<ContextStore, Map<string, number>>()
  // Execution leases (docs/architecture.md#execution-leases): only with `options.lease` on a durable harness.
  const leases = yield* makeLeasedRuns(options.lease, store, ledgerService)
  const { storeOf, withLease } = leases

  // Checkpoint policy: when a snapshot lands, under which lock and lease.
  const { checkpoint, checkpointIfChanged, saveStarted } = Checkpointing.make({ harness: options.name, store, leases })

  const newContext = (init: {
    readonly id: string
    readonly threadId?: string | undefined
    readonly resourceId?: string | undefined
    readonly cwd?: string | undefined
    readonly items?: ReadonlyArray<Item> | undefined
    readonly snapshot?: CheckpointSnapshot
    readonly restore?: RestoreContextOptions | undefined
  }) =>
    new AgentContext({
      id: init.id,
      threadId: init.snapshot?.threadId ?? init.threadId,
      resourceId: init.snapshot?.resourceId ?? init.resourceId,
      parent: init.restore?.parent,
      state: init.restore?.state,
      layers: init.restore?.context ?? layers,
      layerState: init.snapshot?.layers,
      items: init.snapshot !== undefined ? init.snapshot.itemLog.items : init.items,
      cwd: init.snapshot !== undefined ? init.snapshot.cwd : init.cwd === undefined ? null : { current: init.cwd },
      askUser: init.snapshot?.askUser,
      frontier: init.snapshot?.frontier,
      layerStorage,
      channels,
      layerStateStore: options.layerStateStore,
      checkpoint
    })

  // A fresh root context gets a random thread id when none is given (noetic does), so
  // every snapshot names a thread; a child takes its parent's thread, resource and
  // working directory when none is given (internal/contextInit.ts, shared with the facade).
  const createContext = (createOptions: CreateContextOptions = {}) => {
    const inherited = inheritFields(createOptions, createOptions.parent)
    return Effect.map(
      Effect.all([
        createOptions.id === undefined ? randomUuid : Effect.succeed(createOptions.id),
        inherited.threadId === undefined ? randomUuid : Effect.succeed(inherited.threadId)
      ]),
      ([id, threadId]) => newContext({ ...inherited, id, threadId, items: createOptions.items, restore: createOptions })
    )
  }

  // `refresh` false: the caller reads the channels' stored values itself (a resume, beside its other reads).
  const restoredAt = new WeakMap<ContextStore, string>()
  const restore = (executionId: string, restoreOptions?: RestoreContextOptions, refresh = true) =>
    Option.isNone(store)
      ? Effect.succeedNone
      : Effect.map(
        Option.getOrElse(storeOf(executionId), () => store.value).load(executionId),
        Option.map((snapshot) => {
          const ctx = newContext({ id: snapshot.executionId, snapshot, restore: restoreOptions })
          restoredAt.set(ctx.store, snapshot.capturedAt)
          return ctx
        })
      ).pipe(
        // A restored log is checked against the item schemas as noetic's restore is (docs/runtime.md#item-schemas).
        Effect.tap((restored) => Option.isSome(restored) ? checkRestoredItems(restored.value.items) : Effect.void),
        Effect.tap((restored) => refresh && Option.isSome(restored) ? channels.refresh() : Effect.void),
        Effect.tap((restored) => Effect.annotateCurrentSpan("restored", Option.isSome(restored))),
        Effect.withSpan("AgentHarness.restore", { attributes: { executionId, harness: options.name } })
      )

  const ledgersOf = (executionId: string) => leases.ledgerOf(executionId) ?? Option.getOrUndefined(ledgerService)
  const openLedger = (executionId: string): Effect.Effect<Option.Option<ExecutionLedger>, StorageError> => {
    const ledgers = ledgersOf(executionId)
    return ledgers === undefined ? Effect.succeedNone : Effect.asSome(ledgers.open(executionId))
  }
  // harness.run keeps one ledger per context (per ledger service: a new lease opens
  // afresh). What it loaded first keeps replaying after retention evicts its keys, as
  // within one execute, so a host driving steps itself over a restored context re-runs
  // only the steps evicted before it was restored, not each one a re-run evicts.
  const runLedgers = new WeakMap<ContextStore, { readonly from: unknown; readonly ledger: Option.Option<ExecutionLedger> }>()
  const runLedgerOf = (ctx: AgentContext): Effect.Effect<Option.Option<ExecutionLedger>, StorageError> => {
    const from = ledgersOf(ctx.id)
    const kept = runLedgers.get(ctx.store)
    if (kept !== undefined && kept.from === from) return Effect.succeed(kept.ledger)
    return Effect.tap(openLedger(ctx.id), (ledger) => Effect.sync(() => runLedgers.set(ctx.store, { from, ledger })))
  }

  // Agent streams (docs/agent-streams.md) live in the checkpoint store's storage.
  const streams = AgentStreams.make(Option.isSome(store) ? store.value.storage : undefined)

  const { dispatch } = Interpreter.make({
    harness: options.name,
    hooks: options.hooks,
    tools,
    onDivergence,
    ledgerDurability: options.stepLedgerDurability ?? "best-effort",
    closed: () => closed,
    live,
    subprocess,
    checkpointIfChanged,
    restore,
    newContext,
    streams
  })

  // ---------------------------------------------------------------------------
  // Entry points
  // ---------------------------------------------------------------------------

  /**
   * Runs `root` as the root of `ctx`'s execution: first checkpoint, replay, final
   * checkpoint. `resumedAt` is the version of a context restored with this root in
   * flight on this input: its snapshot already says what the first checkpoint would.
   */
  const runRoot = (
    root: AnyStep,
    ctx: AgentContext,
    input: unknown,
    onRootDispatch?: () => void,
    runByAdapter = false,
    resumedAt?: number,
    opened?: Option.Option<ExecutionLedger>,
    refreshed = false,
    standing?: string,
    knownStreams?: AgentStreams.KnownStreams
  ) =>
    Effect.gen(function*() {
      let ledger = opened
      if (ledger === undefined) ledger = yield* openLedger(ctx.id)
      const frame = Interpreter.rootFrame(ctx, ledger, new Map(), onRootDispatch, runByAdapter)
      const rootPath = `/${root.id}#0`
      live.set(ctx.id, ctx)
      yield* ctx.ensureLayersInit()
      // Values other processes stored on external channels are there for `tryRecv` (docs/layers-and-channels.md#channels).
      if (!refreshed) yield* channels.refresh()
      const before = ctx.version
      yield* deliverEarlyAnswers(ctx)
      // Every turn lands a checkpoint, with the root in flight so resume knows its input.
      ctx.enterStep(rootPath, { stepId: root.id, input, state: { path: rootPath } })
      // A resume that changed nothing yet writes nothing: the stored snapshot already
      // holds the root in flight with this input (its deeper frontier is only replaced
      // by the next checkpoint), so a resume costs its reads alone until the run moves.
      if (resumedAt === undefined || ctx.version !== resumedAt) yield* checkpoint(ctx)
      const output = yield* dispatch(root, input, frame).pipe(
        // The execution's streams end with its outcome (an interrupted run has none yet).
        Effect.onExit((exit) => {
          if (Exit.isSuccess(exit)) return streams.finish(ctx.id, { $end: "succeeded" }, knownStreams)
          if (Cause.hasInterruptsOnly(exit.cause)) return Effect.void
          const error = Checkpointing.failureText(Cause.squash(exit.cause))
          const ended = streams.finish(ctx.id, { $end: "failed", error }, knownStreams)
          if (Option.isNone(store) || ctx.parent !== undefined) return ended
          // Neither waits on the other (each best-effort): one round trip of storage, not two.
          // A mark still standing holds only while no snapshot of this run may have landed.
          const marked = Checkpointing.markRunFailed(store.value.storage, ctx.id, error, saveStarted(ctx) ? undefined : standing)
          return Effect.all([ended, marked], { concurrency: 2, discard: true })
        })
      )
      // A finished run leaves a mark an operator can read (the CLI's `finished`): the
      // root's output in the ledger, or else a snapshot whose frontier no longer holds
      // the root. The lookup is in memory and writes nothing (the identity is the one
      // just recorded), so a run the ledger could record costs no extra write.
      const rootRecorded = Option.isSome(ledger) && Option.isSome(
        yield* ledger.value.lookup(rootPath, { stepId: root.id, kind: root.kind }).pipe(
          Effect.orElseSucceed(() => Option.none<unknown>())
        )
      )
      // Layer state of thread / resource / global scope is written through before the turn ends.
      yield* ctx.persistLayerState()
      if (ctx.version !== before || !rootRecorded) yield* checkpoint(ctx)
      yield* channels.flushTaken()
      return { executionId: ctx.id, output }
    }).pipe(Effect.ensuring(Effect.sync(() => {
      live.delete(ctx.id)
      // The root run is over: its channel handles close and its channel streams end.
      if (ctx.parent === undefined) channels.closeExecution(ctx.id)
    })))

  const requireGraph = Effect.suspend(() =>
    options.agentGraph === undefined
      ? Effect.fail(
        new NoStepConfigured({
          harness: options.name,
          message: `harness ${options.name} has no agent graph to execute`,
          hint: "pass agentGraph when building the harness, or run a step directly with harness.run(step, input, ctx)"
        })
      )
      : Effect.succeed(options.agentGraph as AnyStep)
  )

  const execute = (input: unknown, executeOptions: ExecuteOptions = {}) =>
    Effect.gen(function*() {
      const root = yield* requireGraph
      const executionId = executeOptions.executionId !== undefined ? executeOptions.executionId : yield* randomUuid
      // Under a lease the restore happens after it is taken, so it reads what the
      // previous holder last wrote.
      return yield* withLease(
        executionId,
        Effect.gen(function*() {
          const restored = executeOptions.executionId === undefined || executeOptions.newExecution === true
            ? Option.none<AgentContext>()
            : yield* restore(executionId, { state: executeOptions.state })
          const ctx = Option.isSome(restored) ? restored.value : yield* createContext({
            id: executionId,
            ...(executeOptions.threadId === undefined ? {} : { threadId: executeOptions.threadId }),
            ...(executeOptions.resourceId === undefined ? {} : { resourceId: executeOptions.resourceId }),
            ...(executeOptions.cwd === undefined ? {} : { cwd: executeOptions.cwd }),
            ...(executeOptions.context === undefined ? {} : { context: executeOptions.context }),
            ...(executeOptions.items === undefined ? {} : { items: executeOptions.items }),
            state: executeOptions.state
          })
          executeOptions.onContext?.(ctx)
          return yield* runRoot(root, ctx, input, executeOptions.onRootDispatch, executeOptions.runByAdapter === true)
        }),
        "exclusive"
      ).pipe(Effect.withSpan("AgentHarness.execute", { attributes: { executionId, harness: options.name } }))
    })

  const resume = (executionId: string, restoreOptions?: RestoreContextOptions) =>
    Effect.gen(function*() {
      const root = yield* requireGraph
      // An execution with nothing recorded gets no lease record either.
      if (leases.enabled && Option.isSome(store)) {
        if (Option.isNone(yield* store.value.storage.get(snapshotKey(executionId)))) return Option.none()
      }
      return yield* withLease(executionId, resumeRestored(root, executionId, restoreOptions), "exclusive")
    }).pipe(Effect.withSpan("AgentHarness.resume", { attributes: { executionId, harness: options.name } }))

  const resumeRestored = (root: AnyStep, executionId: string, restoreOptions?: RestoreContextOptions) => {
    // The streams the run ends with it are noted until the resume is over.
    let noting: AgentStreams.KnownStreams | undefined
    return Effect.gen(function*() {
      // The snapshot, the ledger, the channels' stored values, the failure mark and the
      // execution's streams (to end them with the run) are read together: on a storage
      // that merges reads issued at once (Postgres), one round trip.
      const [restored, ledger, , standingAt, knownStreams] = yield* Effect.all([
        restore(executionId, restoreOptions, false),
        openLedger(executionId),
        channels.refresh(),
        Option.isNone(store) ? Effect.succeed(() => undefined) : Checkpointing.standingFailure(store.value.storage, executionId),
        streams.known(executionId)
      ], { concurrency: 5 })
      noting = knownStreams
      if (Option.isNone(restored)) return Option.none()
      const ctx = restored.value
      const rootPath = `/${root.id}#0`
      const inFlight = ctx.restoredFrontier.find((entry) =>
        typeof entry.state === "object" && entry.state !== null && "path" in entry.state &&
        entry.state.path === rootPath
      )
      if (inFlight === undefined || (inFlight.state as { inputUnserializable?: boolean }).inputUnserializable) {
        // The root finished (or its input could not be persisted): only its recorded output can answer.
        const identity = { stepId: root.id, kind: root.kind }
        if (Option.isSome(ledger) && onDivergence === "fail") {
          const found = yield* ledger.value.inspect(rootPath, identity)
          if (found._tag === "Diverged") {
            return yield* new ReplayDiverged({
              executionId,
              path: rootPath,
              recorded: found.recorded,
              current: identity,
              currentPath: rootPath
            })
          }
        }
        const recorded = Option.isNone(ledger)
          ? Option.none()
          : yield* ledger.value.lookup(rootPath, identity)
        if (Option.isNone(recorded)) {
          return yield* new ResumeInputUnavailable({ executionId, rootStepId: root.id })
        }
        return Option.some({ executionId, output: recorded.value })
      }
      // A parent given here is recorded by the first checkpoint (the index names it).
      const resumedAt = restoreOptions?.parent === undefined ? ctx.version : undefined
      const standing = standingAt(restoredAt.get(ctx.store) ?? "")
      return Option.some(yield* runRoot(root, ctx, inFlight.input, undefined, false, resumedAt, ledger, true, standing, knownStreams))
    }).pipe(Effect.ensuring(Effect.sync(() => noting !== undefined && streams.forget(noting))))
  }

  // Under a lease the steps run holding it (joining a run of this harness), so their
  // ledger writes are fenced like those of execute and resume.
  const run = (step: AnyStep, input: unknown, ctx: AgentContext) =>
    withLease(
      ctx.id,
      Effect.gen(function*() {
        let counters = runCounters.get(ctx.store)
        if (counters === undefined) {
          counters = new Map()
          runCounters.set(ctx.store, counters)
        }
        const ledger = yield* runLedgerOf(ctx)
        ctx.adopt({ layerStorage, channels })
        yield* ctx.ensureLayersInit()
        yield* channels.refresh()
        const output = yield* dispatch(step, input, Interpreter.rootFrame(ctx, ledger, counters))
        // The step is recorded: the channel records it took leave storage.
        yield* channels.flushTaken()
        return output
      }),
      "join"
    )

  const detachedSpawn = (
    step: AnyStep,
    input: unknown,
    parentCtx: AgentContext,
    spawnOptions: DetachedSpawnOptions = {}
  ) =>
    Effect.gen(function*() {
      yield* Interpreter.validateGraph(step)
      const adapter = spawnOptions.subprocess ?? step.subprocess ?? subprocess
      const services = yield* Effect.context<never>()
      const child = yield* createContext({
        parent: parentCtx,
        ...(spawnOptions.executionId === undefined ? {} : { id: spawnOptions.executionId }),
        ...(spawnOptions.cwdInit === undefined ? {} : { cwd: spawnOptions.cwdInit }),
        ...(spawnOptions.threadId ?? parentCtx.threadId) === undefined
          ? {}
          : { threadId: (spawnOptions.threadId ?? parentCtx.threadId)! },
        ...(spawnOptions.resourceId ?? parentCtx.resourceId) === undefined
          ? {}
          : { resourceId: (spawnOptions.resourceId ?? parentCtx.resourceId)! }
      })
      // The parent is recorded before its child exists, so a host that dies while the
      // child runs leaves a context for reattachLiveChildren to rebuild.
      yield* checkpoint(parentCtx)
      const handle = yield* adapter.spawn({
        handleId: spawnOptions.handleId,
        stepId: step.id,
        module: step.module,
        input,
        executionId: child.id,
        parentExecutionId: parentCtx.id,
        threadId: child.threadId,
        resourceId: child.resourceId,
        cwdInit: spawnOptions.cwdInit,
        metadata: spawnOptions.metadata,
        // The child runs with the services of the caller of detachedSpawn.
        runInProcess: Effect.provideContext(
          Effect.map(runRoot(step, child, input, undefined, true), (result) => result.output),
          services
        ) as Effect.Effect<unknown, unknown>
      })
      yield* adopt(handle, parentCtx)
      return handle
    })

  // Boundary 2: the parent checkpoints once the child settles, success or failure.
  const adopt = (handle: SubprocessHandle, parentCtx: AgentContext): Effect.Effect<void> =>
    Effect.asVoid(handle.await.pipe(Effect.exit, Effect.andThen(checkpoint(parentCtx)), Effect.forkIn(scope)))

  // A host that restarts may get an answer to a restored prompt before it has resumed
  // that execution: the answer is kept and handed over when the run goes live.
  const earlyAnswers = new Map<string, Map<string, unknown>>()

  const answerAskUser = (executionId: string, promptId: string, output: unknown) =>
    Effect.suspend(() => {
      const ctx = live.get(executionId)
      if (ctx !== undefined) return ctx.resolveAskUser(promptId, output)
      const unknown = new UnknownAskUserPrompt({ executionId, promptId })
      if (Option.isNone(store)) return Effect.fail(unknown)
      return store.value.load(executionId).pipe(
        Effect.catchCause((cause) =>
          Effect.as(logWarning("ask-user answer: the execution's snapshot could not be read", cause), Option.none())
        ),
        Effect.flatMap((snapshot) => {
          if (Option.isNone(snapshot) || !snapshot.value.askUser.some((prompt) => prompt.id === promptId)) {
            return Effect.fail(unknown)
          }
          // The run may have gone live while the snapshot was read: it took its early answers already.
          const wentLive = live.get(executionId)
          if (wentLive !== undefined) return wentLive.resolveAskUser(promptId, output)
          const answers = earlyAnswers.get(executionId) ?? new Map<string, unknown>()
          answers.set(promptId, output)
          earlyAnswers.set(executionId, answers)
          return Effect.void
        })
      )
    })

  /** Hands the answers given before `ctx`'s execution went live to its restored prompts. */
  const deliverEarlyAnswers = (ctx: AgentContext) =>
    Effect.suspend(() => {
      const answers = earlyAnswers.get(ctx.id)
      if (answers === undefined) return Effect.void
      earlyAnswers.delete(ctx.id)
      return Effect.forEach(answers, ([promptId, output]) => Effect.ignore(ctx.resolveAskUser(promptId, output)), {
        discard: true
      })
    })

  return {
    name: options.name,
    params: options.params,
    agentGraph: options.agentGraph as G,
    durable: Option.isSome(store),
    checkpointStore: store,
    subprocess,
    execute: execute as AgentHarness<G>["execute"],
    checkpoint,
    restore,
    resume: resume as AgentHarness<G>["resume"],
    clearCheckpoint: (executionId) => {
      if (Option.isNone(store)) return Effect.void
      // The ledger may live apart from the snapshots (noetic's storage.adapter): it is
      // cleared by its own service; in the store's storage this finds nothing left.
      const ledgers = ledgersOf(executionId)
      return ledgers === undefined
        ? store.value.clear(executionId)
        : Effect.andThen(store.value.clear(executionId), ledgers.clear(executionId))
    },
    createContext,
    run: run as AgentHarness<G>["run"],
    detachedSpawn: detachedSpawn as unknown as AgentHarness<G>["detachedSpawn"],
    adopt,
    answerAskUser,
    liveContext: (executionId) => Option.fromUndefinedOr(live.get(executionId)),
    channels,
    layerStorage,
    cancel: (ctx, reason) =>
      Effect.suspend(() => {
        if (ctx.aborted) return Effect.void
        ctx.adopt({ layerStorage, channels })
        // The live contexts under ctx, deepest first: each is torn down before its parent.
        const below = (c: AgentContext): boolean => c.parent !== undefined && (c.parent.store === ctx.store || below(c.parent))
        const tree = [...new Set([...live.values()].filter(below))].sort((a, b) => b.depth - a.depth)
        ctx.abort(reason)
        return Effect.forEach([...tree, ctx], (node) => LayerLifecycle.teardownLayers(node, "aborted"), {
          discard: true
        }).pipe(Effect.andThen(Effect.sync(() => {
          if (ctx.parent === undefined) channels.closeExecution(ctx.id)
        })))
      })
  } satisfies AgentHarness<G>
})
