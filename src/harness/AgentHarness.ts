/**
 * The agent harness: runs an agent graph of steps against a context and, when given a
 * `CheckpointStore`, makes the run durable: snapshots at the documented boundaries,
 * a step ledger whose recorded outputs replay on resume, restore of contexts.
 *
 * Without a checkpoint store every durability hook is a no-op.
 *
 * @since 0.1.0
 */
import { Cause, DateTime, Duration, Effect, Hash, Option, Result, Schedule, Scope, Semaphore } from "effect"
import { LanguageModel } from "effect/ai"
import { type CheckpointSchemaMismatch, EmptyStepId, NoStepConfigured, type StorageError } from "../Errors.ts"
import { CHECKPOINT_SCHEMA_VERSION, type CheckpointSnapshot, snapshotKey } from "../schema/CheckpointSnapshot.ts"
import { CheckpointStore, type CheckpointStoreShape } from "../services/CheckpointStore.ts"
import type { ExecutionLeaseError } from "../services/ExecutionLease.ts"
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
import {
  AgentContext,
  type ContextLayer,
  type ContextStore,
  defaultLayers,
  type Item,
  randomUuid
} from "./AgentContext.ts"
import {
  LoopMaxIterations,
  ModelOutputInvalid,
  ResumeInputUnavailable,
  SpawnTimeout,
  StepCancelled,
  ToolFailed,
  UnknownAskUserPrompt,
  UnknownTool
} from "./HarnessError.ts"
import { type HarnessLeaseOptions, make as makeLeasedRuns } from "./LeasedRuns.ts"
import {
  type AnyStep,
  type CallModel,
  type Error as StepError,
  type Input as StepInput,
  type Output as StepOutput,
  type Services as StepServices,
  type RetryPolicy,
  type Settled,
  type Snapshot,
  type StandardSchema,
  staticChildren,
  type Step,
  type StepContext,
  type Verdict
} from "./Step.ts"

/** A tool the harness offers to `invokeTool` steps. */
export type ToolHandler = (input: unknown, ctx: StepContext) => Effect.Effect<unknown, unknown>

/** How a harness is built. */
export interface AgentHarnessOptions<G extends AnyStep | undefined = AnyStep | undefined> {
  readonly name: string
  /** The root step `execute` runs. */
  readonly agentGraph?: G
  /** Free-form parameters the host gives its steps (read them from `harness.params`). */
  readonly params?: unknown
  /** Tools `invokeTool` steps call by name. */
  readonly tools?: Readonly<Record<string, ToolHandler>>
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
}

export { DEFAULT_LEASE_TTL, type HarnessLeaseOptions } from "./LeasedRuns.ts"

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
export type RunError = EmptyStepId | StorageError

/** What can fail `execute` and `resume` of a harness with `lease` besides a run. */
export type LeaseError = ExecutionLeaseError

/** A harness whose root graph is `G`. */
export interface AgentHarness<G extends AnyStep | undefined = AnyStep | undefined> {
  readonly name: string
  readonly params: unknown
  readonly agentGraph: G
  /** Whether a checkpoint store is configured. */
  readonly durable: boolean
  /** The default subprocess adapter (`listLive`, `reattach`). */
  readonly subprocess: SubprocessAdapterShape
  /** Runs the root graph on a fresh context (or continues a recorded execution id). */
  readonly execute: (
    input: GraphInput<G>,
    options?: ExecuteOptions
  ) => Effect.Effect<
    ExecuteResult<GraphOutput<G>>,
    GraphError<G> | RunError | NoStepConfigured | CheckpointSchemaMismatch | LeaseError,
    GraphServices<G>
  >
  /** Saves a snapshot of `ctx`; a no-op without a checkpoint store. Never fails: a failing save is logged. */
  readonly checkpoint: (ctx: AgentContext) => Effect.Effect<void>
  /** Rebuilds the context of a recorded execution; none when nothing is recorded. */
  readonly restore: (
    executionId: string,
    options?: RestoreContextOptions
  ) => Effect.Effect<Option.Option<AgentContext>, StorageError | CheckpointSchemaMismatch>
  /** Restores an execution and runs the root graph again: completed steps replay, the rest runs. */
  readonly resume: (
    executionId: string,
    options?: RestoreContextOptions
  ) => Effect.Effect<
    Option.Option<ExecuteResult<GraphOutput<G>>>,
    GraphError<G> | RunError | NoStepConfigured | CheckpointSchemaMismatch | ResumeInputUnavailable | LeaseError,
    GraphServices<G>
  >
  /** Discards an execution's snapshot and every ledger entry. */
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
}

type GraphInput<G> = G extends AnyStep ? StepInput<G> : never
type GraphOutput<G> = G extends AnyStep ? StepOutput<G> : never
type GraphError<G> = G extends AnyStep ? StepError<G> : never
type GraphServices<G> = G extends AnyStep ? StepServices<G> : never

/** Where a dispatch happens: the context, its path, and the per-parent dispatch counters. */
interface Frame {
  readonly ctx: AgentContext
  readonly path: string
  readonly counters: Map<string, number>
  readonly ledger: Option.Option<ExecutionLedger>
}

const frameAt = (parent: Frame, path: string): Frame => ({
  ctx: parent.ctx,
  path,
  counters: new Map(),
  ledger: parent.ledger
})

/** Checks every step id reachable without running anything. */
const validateGraph = (step: AnyStep): Effect.Effect<void, EmptyStepId> =>
  Effect.suspend(() => {
    if (typeof step.id !== "string" || step.id.trim() === "") return Effect.fail(emptyStepId(step))
    return Effect.forEach(staticChildren(step), validateGraph, { discard: true })
  })

const emptyStepId = (step: AnyStep) =>
  new EmptyStepId({
    kind: step.kind,
    message: `a ${step.kind} step has an empty id`,
    hint: "every step needs a non-empty id: it names the step's path in the ledger"
  })

/**
 * The schedule of a retry policy: `fixed` waits `initialDelay` each time, `linear`
 * `initialDelay * n` before retry n, `exponential` doubles from `initialDelay`; each
 * delay is capped by `maxDelay` (30 s when absent, as in noetic).
 */
export const retrySchedule = (policy: RetryPolicy): Schedule.Schedule<Duration.Duration> =>
  Schedule.fromStepWithMetadata(Effect.succeed((meta: { readonly attempt: number }) => {
    const n = Math.max(1, meta.attempt)
    const raw = policy.backoff === "fixed"
      ? policy.initialDelay
      : policy.backoff === "linear"
      ? policy.initialDelay * n
      : policy.initialDelay * 2 ** (n - 1)
    // noetic caps every delay at maxDelay, 30 s when not given.
    const delay = Duration.millis(Math.min(raw, policy.maxDelay ?? 30_000))
    return Effect.succeed([delay, delay] as [Duration.Duration, Duration.Duration])
  }))

/** The `output` schema's value of a reply: its text as JSON, validated. */
const parseOutput = (step: CallModel<any, any, any>, text: string) =>
  Effect.gen(function*() {
    const invalid = (issues: ReadonlyArray<string>) => new ModelOutputInvalid({ stepId: step.id, raw: text, issues })
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      return yield* invalid([`not JSON: ${String(error)}`])
    }
    const schema = step.output as StandardSchema
    const result = yield* Effect.promise(async () => schema["~standard"].validate(json))
    if (result.issues !== undefined) return yield* invalid(result.issues.map((issue) => issue.message))
    return result.value
  })

const cancelledFields = (ctx: AgentContext) =>
  ctx.abortReason === undefined ? { executionId: ctx.id } : { executionId: ctx.id, reason: ctx.abortReason }

const isCancelled = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "StepCancelled"

/** The text of a loop iteration's output, as noetic's snapshot has it. */
const textOf = (output: unknown): string => {
  if (typeof output === "string") return output
  if (typeof output === "object" && output !== null && "text" in output) return String(output.text)
  if (output === undefined) return ""
  try {
    return JSON.stringify(output) ?? ""
  } catch {
    return String(output)
  }
}

/** A frontier input that a snapshot can hold: the input itself when JSON can carry it. */
const persistableInput = (input: unknown): { readonly input: unknown; readonly serializable: boolean } => {
  try {
    return JSON.stringify(input) === undefined && input !== undefined
      ? { input: null, serializable: false }
      : { input, serializable: true }
  } catch {
    return { input: null, serializable: false }
  }
}

/** The snapshot of a context at `capturedAt`. */
export const toSnapshot = (ctx: AgentContext, capturedAt: string): CheckpointSnapshot => ({
  schemaVersion: CHECKPOINT_SCHEMA_VERSION,
  executionId: ctx.id,
  ...(ctx.threadId === undefined ? {} : { threadId: ctx.threadId }),
  ...(ctx.resourceId === undefined ? {} : { resourceId: ctx.resourceId }),
  frontier: ctx.frontier.map((entry) => {
    const { input, serializable } = persistableInput(entry.input)
    return serializable ? entry : { ...entry, input, state: { ...(entry.state as object), inputUnserializable: true } }
  }),
  layers: ctx.layers,
  cwd: ctx.cwd,
  askUser: ctx.pendingAskUser,
  itemLog: { items: [...ctx.items] },
  capturedAt
})

/**
 * Builds a harness. A `CheckpointStore` in the context makes it durable (with the
 * `StepLedger` service, or a ledger with default retention over the store). The
 * harness's background work (detached-spawn watchers, in-process children) belongs
 * to the surrounding scope.
 */
export const make = Effect.fnUntraced(function*<const G extends AnyStep | undefined = undefined>(
  options: AgentHarnessOptions<G>
): Effect.fn.Return<AgentHarness<G>, EmptyStepId, Scope.Scope> {
  if (options.agentGraph !== undefined) yield* validateGraph(options.agentGraph)
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
  const tools = options.tools ?? {}
  const live = new Map<string, AgentContext>()
  // Keyed by the context's shared state, not the object: every step's view of a
  // context (parallel branches each have one) must queue on the same lock.
  const checkpointLocks = new WeakMap<ContextStore, Semaphore.Semaphore>()
  // By shared state too: harness.run given different views of one context numbers on.
  const runCounters = new WeakMap<ContextStore, Map<string, number>>()
  /** The context version the last snapshot that landed was taken at. */
  const savedVersions = new WeakMap<ContextStore, number>()
  // Execution leases (DESIGN 16): only with `options.lease` on a durable harness.
  const leases = yield* makeLeasedRuns(options.lease, store, ledgerService)
  const { storeOf, withLease } = leases

  // ---------------------------------------------------------------------------
  // Checkpoints
  // ---------------------------------------------------------------------------

  const checkpoint = (ctx: AgentContext): Effect.Effect<void> => {
    if (Option.isNone(store)) return Effect.void
    if (leases.enabled && !leases.holds(ctx.id)) {
      // Outside a leased run (a detached child settling after its parent returned, a
      // context of harness.run): the save takes the lease for its own duration.
      return withLease(ctx.id, Effect.suspend(() => checkpoint(ctx)), "join").pipe(
        Effect.catchCause((cause) =>
          Effect.logWarning("checkpoint not saved: the execution's lease could not be taken", cause).pipe(
            Effect.annotateLogs({ executionId: ctx.id, harness: options.name })
          )
        )
      )
    }
    const target = Option.getOrElse(storeOf(ctx.id), () => store.value)
    let lock = checkpointLocks.get(ctx.store)
    if (lock === undefined) {
      lock = Semaphore.makeUnsafe(1)
      checkpointLocks.set(ctx.store, lock)
    }
    // The snapshot is taken inside the lock so a slower, older save never lands last.
    return lock.withPermit(
      Effect.gen(function*() {
        const capturedAt = DateTime.formatIso(yield* DateTime.now)
        const version = ctx.version
        yield* target.save(toSnapshot(ctx, capturedAt))
        savedVersions.set(ctx.store, version)
      })
    ).pipe(
      Effect.catchCause((cause) =>
        // A save refused because the lease was taken over interrupts the run (see
        // withLease); only ordinary failures are logged and swallowed.
        leases.holds(ctx.id) && Cause.hasInterruptsOnly(cause) ? Effect.interrupt : Effect.logWarning("checkpoint save failed; the run continues", cause).pipe(
          Effect.annotateLogs({ executionId: ctx.id, harness: options.name })
        )
      )
    )
  }

  const newContext = (init: {
    readonly id: string
    readonly threadId?: string | undefined
    readonly resourceId?: string | undefined
    readonly cwd?: string | undefined
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
      items: init.snapshot?.itemLog.items,
      cwd: init.snapshot !== undefined ? init.snapshot.cwd : init.cwd === undefined ? null : { current: init.cwd },
      askUser: init.snapshot?.askUser,
      frontier: init.snapshot?.frontier,
      checkpoint
    })

  // A fresh root context gets a random thread id when none is given (noetic does),
  // so every snapshot names a thread.
  const createContext = (createOptions: CreateContextOptions = {}) =>
    Effect.map(
      Effect.all([
        createOptions.id === undefined ? randomUuid : Effect.succeed(createOptions.id),
        createOptions.threadId !== undefined
          ? Effect.succeed(createOptions.threadId)
          : createOptions.parent?.threadId !== undefined
          ? Effect.succeed(createOptions.parent.threadId)
          : randomUuid
      ]),
      ([id, threadId]) =>
        newContext({
          id,
          threadId,
          resourceId: createOptions.resourceId,
          cwd: createOptions.cwd,
          restore: createOptions
        })
    )

  const restore = (executionId: string, restoreOptions?: RestoreContextOptions) =>
    Option.isNone(store)
      ? Effect.succeedNone
      : Effect.map(
        Option.getOrElse(storeOf(executionId), () => store.value).load(executionId),
        Option.map((snapshot) => newContext({ id: snapshot.executionId, snapshot, restore: restoreOptions }))
      )

  const openLedger = (executionId: string): Effect.Effect<Option.Option<ExecutionLedger>, StorageError> => {
    const ledgers = leases.ledgerOf(executionId) ?? Option.getOrUndefined(ledgerService)
    return ledgers === undefined ? Effect.succeedNone : Effect.asSome(ledgers.open(executionId))
  }

  // ---------------------------------------------------------------------------
  // Dispatch: replay from the ledger, or run and record
  // ---------------------------------------------------------------------------

  const stepContext = (frame: Frame): StepContext => {
    let asks = 0
    // A view of the context bound to this dispatch: it reads and writes the same
    // context (AgentContext keeps its state in one shared store object).
    const view = Object.create(frame.ctx) as AgentContext & { -readonly [K in keyof StepContext]: StepContext[K] }
    view.path = frame.path
    view.run = (step, input) => dispatch(step as AnyStep, input, frame) as any
    // Prompt ids follow the path, so a step re-run after a restore joins its restored prompt.
    view.askUser = (input, askOptions = {}) =>
      frame.ctx.askUser(input, { id: askOptions.id ?? `${frame.ctx.id}${frame.path}/askUser#${asks++}` })
    return view
  }

  const dispatch = (step: AnyStep, input: unknown, parent: Frame): Effect.Effect<unknown, unknown, unknown> =>
    Effect.suspend(() => {
      if (step.id.trim() === "") return Effect.fail(emptyStepId(step))
      // noetic: an aborted context throws `cancelled` at the next step boundary.
      if (parent.ctx.aborted) return Effect.fail(new StepCancelled(cancelledFields(parent.ctx)))
      const n = parent.counters.get(step.id) ?? 0
      parent.counters.set(step.id, n + 1)
      const path = `${parent.path}/${step.id}#${n}`
      const frame = frameAt(parent, path)
      const ctx = parent.ctx
      ctx.enterStep(path, { stepId: step.id, input, state: { path } })
      const settle = Effect.sync(() => ctx.exitStep(path))
      // Suspended, so a body that throws while building its Effect still settles the frontier.
      const body = Effect.suspend(() => interpret(step, input, frame))
      if (Option.isNone(frame.ledger)) return Effect.ensuring(body, settle)
      const ledger = frame.ledger.value
      const identity = { stepId: step.id, kind: step.kind }
      // The body may be interrupted (a failing sibling branch, a race); once it has
      // completed, its record is not: a completed step interrupted before its record
      // landed would run again on resume. A step that replays does not redo what it
      // changed in the context (cwd, layer state, answered prompts), so a change no
      // snapshot holds yet is saved before the record that makes the step replay.
      const runAndRecord = Effect.uninterruptibleMask((restore) =>
        Effect.tap(restore(body), (output) =>
          Effect.andThen(
            Effect.suspend(() => savedVersions.get(ctx.store) === ctx.version ? Effect.void : checkpoint(ctx)),
            ledger.record(path, identity, output).pipe(
              Effect.catch((error) => Effect.logWarning("step ledger record failed; the step will re-run on resume", error))
            )
          ))
      )
      return ledger.lookup(path, identity).pipe(
        Effect.catch((error) =>
          Effect.as(Effect.logWarning("step ledger lookup failed; running the step", error), Option.none<unknown>())
        ),
        Effect.flatMap(Option.match({ onNone: () => runAndRecord, onSome: Effect.succeed })),
        Effect.ensuring(settle)
      )
    })

  const interpret = (step: AnyStep, input: unknown, frame: Frame): Effect.Effect<unknown, unknown, unknown> => {
    switch (step.kind) {
      case "runCode": {
        // Each attempt numbers its child steps afresh, so a retried body replays its
        // children at the same paths as its first attempt did.
        const attempt = Effect.suspend(() => step.body(input, stepContext({ ...frame, counters: new Map() })))
        return step.retry === undefined || step.retry.maxAttempts <= 1
          ? attempt
          : Effect.retry(attempt, {
            schedule: retrySchedule(step.retry),
            times: step.retry.maxAttempts - 1,
            // A cancelled context is not a failure to retry: it would redo work after the abort.
            while: (error) => !isCancelled(error)
          })
      }
      case "callModel":
        return Effect.gen(function*() {
          const ctx = stepContext(frame)
          const model = yield* LanguageModel.LanguageModel
          const response = yield* model.generateText({ prompt: step.prompt(input, ctx) })
          const metadata = response.content.find((part) => part.type === "response-metadata")
          const text = response.text
          // Without a provider id, the made-up one also names the text: a turn re-issued
          // after a crash that returns the same answer is not doubled, and one that
          // returns another answer is a new turn in the log, as it is downstream.
          const responseId = metadata?.id ?? `${frame.ctx.id}${frame.path}:${(Hash.string(text) >>> 0).toString(16)}`
          const turn: Array<Item> = [
            { type: "message", role: "user", id: `${frame.ctx.id}${frame.path}:input`, content: input },
            { type: "message", role: "assistant", responseId, content: text }
          ]
          yield* frame.ctx.append(turn)
          if (step.result === "turn") return { responseId, text }
          if (step.result === "text") return text
          return yield* parseOutput(step, text)
        })
      case "invokeTool": {
        const ctx = stepContext(frame)
        const args = step.args === undefined
          ? input
          : typeof input === "object" && input !== null && !Array.isArray(input)
          ? { ...input, ...step.args }
          : input === undefined
          ? { ...step.args }
          : input
        const handler = step.definition !== undefined ? step.definition.execute : tools[step.tool]
        if (handler === undefined) {
          return Effect.fail(new UnknownTool({ stepId: step.id, tool: step.tool, known: Object.keys(tools) }))
        }
        return Effect.mapError(
          Effect.suspend(() => handler(args, ctx)),
          (cause) => new ToolFailed({ stepId: step.id, tool: step.tool, cause })
        )
      }
      case "conditional":
        return Effect.flatMap(
          step.route(input, stepContext(frame)),
          (next) => next === null ? Effect.succeed(input) : dispatch(next, input, frame)
        )
      case "inParallel":
        return Effect.flatMap(step.paths(input, stepContext(frame)), (paths) => {
          const branches = paths.map((branch, i) => dispatch(branch, input, frameAt(frame, `${frame.path}[${i}]`)))
          const concurrency = step.concurrency ?? "unbounded"
          const merged = (results: ReadonlyArray<unknown>) =>
            step.merge === undefined ? Effect.succeed(results) : step.merge(results, stepContext(frame))
          switch (step.mode) {
            case "all":
              return Effect.flatMap(Effect.all(branches, { concurrency }), merged)
            case "race":
              // Every path starts at once: a race limited to some of them could be won by none.
              return Effect.raceAll(branches)
            case "settle":
              return Effect.flatMap(
                Effect.all(
                  branches.map((branch, i) =>
                    Effect.map(Effect.result(branch), (result): Settled<unknown, unknown> =>
                      Result.isSuccess(result)
                        ? { _tag: "Success", stepId: paths[i]!.id, status: "fulfilled", value: result.success }
                        : { _tag: "Failure", stepId: paths[i]!.id, status: "rejected", error: result.failure })
                  ),
                  { concurrency }
                ),
                merged
              )
          }
        })
      case "loop":
        return Effect.gen(function*() {
          const ctx = stepContext(frame)
          const startedAt = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const history: Array<unknown> = []
          let current = input
          let lastOutput: { readonly value: unknown } | undefined
          let stepCount = 0
          for (let iteration = 1;; iteration++) {
            if (frame.ctx.aborted) {
              return yield* new StepCancelled(cancelledFields(frame.ctx))
            }
            if (iteration > step.maxIterations) {
              return yield* new LoopMaxIterations({ stepId: step.id, maxIterations: step.maxIterations })
            }
            const run = Effect.suspend(() => {
              let chain: Effect.Effect<unknown, unknown, unknown> = Effect.succeed(current)
              for (const body of step.steps) chain = Effect.flatMap(chain, (value) => dispatch(body, value, frame))
              return chain
            })
            const outcome = yield* Effect.result(run)
            let output: unknown
            if (Result.isFailure(outcome)) {
              const error = outcome.failure
              const action = step.onError === undefined || isCancelled(error) ? "abort" : step.onError(error, ctx)
              if (action === "retry") continue
              if (action !== "skip") return yield* Effect.fail(error)
              if (lastOutput === undefined) continue
              output = lastOutput.value
            } else {
              output = outcome.success
              stepCount++
            }
            lastOutput = { value: output }
            history.push(output)
            if (history.length > step.maxHistorySize) history.splice(0, history.length - step.maxHistorySize)
            const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
            const snapshot: Snapshot = {
              stepCount,
              tokens: { input: 0, output: 0, total: 0 },
              elapsed: now - startedAt,
              cost: 0,
              lastOutput: output,
              lastText: textOf(output),
              history: [...history],
              depth: frame.ctx.depth
            }
            // noetic: an until that throws stops the loop.
            const verdict = yield* step.until(snapshot).pipe(
              Effect.catchCause((cause) =>
                Effect.succeed<Verdict>({ stop: true, reason: `Predicate error: ${String(Cause.squash(cause))}` })
              )
            )
            if (verdict.stop) return output
            current = step.prepareNext === undefined ? output : step.prepareNext(output, verdict, ctx)
          }
        })
      case "spawn":
        return Effect.suspend(() => {
          // An in-process child agent: its own context (parent = the caller's), its steps
          // recorded below the spawn's path in the same execution ledger. A child that
          // ran before a crash gets its context back: its replayed steps do not append
          // again, so a fresh context would lose what they added to its log and layers.
          const id = `${frame.ctx.id}${frame.path}`
          // Like a failed ledger lookup, a child snapshot that cannot be read only costs
          // the child its earlier log.
          const childOptions: RestoreContextOptions = step.context === undefined
            ? { parent: frame.ctx }
            : { parent: frame.ctx, context: step.context }
          const restoredChild = Effect.catch(restore(id, childOptions), (error) =>
            Effect.as(
              Effect.logWarning("child agent context could not be restored; it starts fresh", error),
              Option.none<AgentContext>()
            ))
          return Effect.flatMap(restoredChild, (restored) => {
            const child = Option.getOrElse(restored, () =>
              newContext({
                id,
                threadId: frame.ctx.threadId,
                resourceId: frame.ctx.resourceId,
                restore: childOptions
              }))
            // Live while it runs, so the host can answer its ask-user prompts by its id.
            live.set(child.id, child)
            const run = dispatch(step.child, input, { ...frame, ctx: child, counters: new Map() })
            const timed = step.timeout === undefined ? run : Effect.timeoutOrElse(run, {
              duration: Duration.millis(step.timeout),
              orElse: () => Effect.fail(new SpawnTimeout({ stepId: step.id, timeoutMs: step.timeout! }))
            })
            return timed.pipe(Effect.ensuring(Effect.sync(() => live.delete(child.id))))
          })
        })
    }
  }

  // ---------------------------------------------------------------------------
  // Entry points
  // ---------------------------------------------------------------------------

  /** Runs `root` as the root of `ctx`'s execution: first checkpoint, replay, final checkpoint. */
  const runRoot = (root: AnyStep, ctx: AgentContext, input: unknown) =>
    Effect.gen(function*() {
      const ledger = yield* openLedger(ctx.id)
      const frame: Frame = { ctx, path: "", counters: new Map(), ledger }
      const rootPath = `/${root.id}#0`
      live.set(ctx.id, ctx)
      yield* ctx.ensureLayersInit()
      const before = ctx.version
      yield* deliverEarlyAnswers(ctx)
      // Every turn lands a checkpoint, with the root in flight so resume knows its input.
      ctx.enterStep(rootPath, { stepId: root.id, input, state: { path: rootPath } })
      yield* checkpoint(ctx)
      const output = yield* dispatch(root, input, frame)
      if (ctx.version !== before) yield* checkpoint(ctx)
      return { executionId: ctx.id, output }
    }).pipe(Effect.ensuring(Effect.sync(() => live.delete(ctx.id))))

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
          const restored = executeOptions.executionId === undefined
            ? Option.none<AgentContext>()
            : yield* restore(executionId, { state: executeOptions.state })
          const ctx = Option.isSome(restored) ? restored.value : yield* createContext({
            id: executionId,
            ...(executeOptions.threadId === undefined ? {} : { threadId: executeOptions.threadId }),
            ...(executeOptions.resourceId === undefined ? {} : { resourceId: executeOptions.resourceId }),
            ...(executeOptions.cwd === undefined ? {} : { cwd: executeOptions.cwd }),
            ...(executeOptions.context === undefined ? {} : { context: executeOptions.context }),
            state: executeOptions.state
          })
          return yield* runRoot(root, ctx, input)
        }),
        "exclusive"
      )
    })

  const resume = (executionId: string, restoreOptions?: RestoreContextOptions) =>
    Effect.gen(function*() {
      const root = yield* requireGraph
      // An execution with nothing recorded gets no lease record either.
      if (leases.enabled && Option.isSome(store)) {
        if (Option.isNone(yield* store.value.storage.get(snapshotKey(executionId)))) return Option.none()
      }
      return yield* withLease(executionId, resumeRestored(root, executionId, restoreOptions), "exclusive")
    })

  const resumeRestored = (root: AnyStep, executionId: string, restoreOptions?: RestoreContextOptions) =>
    Effect.gen(function*() {
      const restored = yield* restore(executionId, restoreOptions)
      if (Option.isNone(restored)) return Option.none()
      const ctx = restored.value
      const rootPath = `/${root.id}#0`
      const inFlight = ctx.restoredFrontier.find((entry) =>
        typeof entry.state === "object" && entry.state !== null && "path" in entry.state &&
        entry.state.path === rootPath
      )
      if (inFlight === undefined || (inFlight.state as { inputUnserializable?: boolean }).inputUnserializable) {
        // The root finished (or its input could not be persisted): only its recorded output can answer.
        const ledger = yield* openLedger(executionId)
        const recorded = Option.isNone(ledger)
          ? Option.none()
          : yield* ledger.value.lookup(rootPath, { stepId: root.id, kind: root.kind })
        if (Option.isNone(recorded)) {
          return yield* new ResumeInputUnavailable({ executionId, rootStepId: root.id })
        }
        return Option.some({ executionId, output: recorded.value })
      }
      return Option.some(yield* runRoot(root, ctx, inFlight.input))
    })

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
        const ledger = yield* openLedger(ctx.id)
        yield* ctx.ensureLayersInit()
        return yield* dispatch(step, input, { ctx, path: "", counters, ledger })
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
      yield* validateGraph(step)
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
        step,
        input,
        executionId: child.id,
        parentExecutionId: parentCtx.id,
        threadId: child.threadId,
        resourceId: child.resourceId,
        cwdInit: spawnOptions.cwdInit,
        metadata: spawnOptions.metadata,
        // The child runs with the services of the caller of detachedSpawn.
        runInProcess: Effect.provideContext(
          Effect.map(runRoot(step, child, input), (result) => result.output),
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
          Effect.as(Effect.logWarning("ask-user answer: the execution's snapshot could not be read", cause), Option.none())
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
    subprocess,
    execute: execute as AgentHarness<G>["execute"],
    checkpoint,
    restore,
    resume: resume as AgentHarness<G>["resume"],
    clearCheckpoint: (executionId) => Option.isNone(store) ? Effect.void : store.value.clear(executionId),
    createContext,
    run: run as AgentHarness<G>["run"],
    detachedSpawn: detachedSpawn as unknown as AgentHarness<G>["detachedSpawn"],
    adopt,
    answerAskUser,
    liveContext: (executionId) => Option.fromUndefinedOr(live.get(executionId))
  } satisfies AgentHarness<G>
})
