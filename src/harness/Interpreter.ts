/**
 * The interpreter of agent graphs: one dispatch that replays a step from the ledger
 * or runs it (and records it), and one function per step kind. Checkpoint policy,
 * contexts and the entry points (`execute`, `resume`, `run`) are the harness's; it
 * hands the interpreter what it needs of them.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"
import { type CheckpointSchemaMismatch, EmptyStepId, StepLedgerDurabilityInvalid, type StorageError } from "../Errors.ts"
import type { ItemSchemaMismatch } from "../services/ItemSchemas.ts"
import type { CheckpointSnapshot } from "../schema/CheckpointSnapshot.ts"
import type { ExecutionLedger, StepIdentity } from "../services/StepLedger.ts"
import type { SubprocessAdapterShape } from "../services/SubprocessAdapter.ts"
import type { AgentContext, ContextLayer } from "./AgentContext.ts"
import type { AgentStreams } from "./AgentStreams.ts"
import {
  describeAnswer, ForkPartial, HarnessClosed, InvalidMaxIterations, LoopMaxIterations, ReconcileAnswerInvalid,
  ReplayDiverged, SpawnTimeout, StepCancelled, StepLedgerWriteFailed, ToolFailed, ToolOutcomeUnknown, UnknownTool
} from "./HarnessError.ts"
import {
  type AnyStep,
  type CallModel,
  Reconciled,
  type Conditional,
  type InParallel,
  type InvokeTool,
  type Loop,
  type RunCode,
  type Spawn,
  type RetryPolicy,
  type Settled,
  type Snapshot,
  runsAs,
  staticChildren,
  type StepContext,
  type Verdict
} from "./Step.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { observeStep, type StepHooks } from "./SessionTurn.ts"
import * as LayerLifecycle from "./LayerLifecycle.ts"
import { inboxWakes } from "./Channels.ts"
import * as ToolLoop from "./ToolLoop.ts"
import { type Frame, frameAt, noteDispatch, withFrame } from "./Frames.ts"

export { type Frame, newRunState, rootFrame, type RunState } from "./Frames.ts"

/** A tool the harness offers to `invokeTool` steps. */
export type ToolHandler = (input: unknown, ctx: StepContext) => Effect.Effect<unknown, unknown>

/** What a resume does at a recorded path whose step changed: see `AgentHarnessOptions.onDivergence`. */
export type DivergencePolicy = "warn" | "fail"

/**
 * What a failed ledger write costs: `best-effort` (the default, noetic's) warns and
 * counts it, and the run goes on (the step re-runs on resume); `strict` fails the step
 * with `StepLedgerWriteFailed`, so nothing downstream runs. See `AgentHarnessOptions.stepLedgerDurability`.
 */
export type LedgerDurability = "best-effort" | "strict"

/** Host wiring handed to a restored context (the spawn step's child agent). */
export interface ChildContextOptions {
  readonly parent?: AgentContext
  readonly state?: unknown
  readonly context?: ReadonlyArray<ContextLayer<any>>
}

/** What interpreting a step gives: its output, failing with what the step fails with. */
type Interpreted = Effect.Effect<unknown, unknown, unknown>

/** What the interpreter needs of its harness. */
export interface InterpreterDeps {
  /** The harness's name, for log annotations. */
  readonly harness: string
  /** noetic's `AgentHooks`, around every dispatch (docs/architecture.md#sessions). */
  readonly hooks?: StepHooks | undefined
  readonly tools: Readonly<Record<string, ToolHandler>>
  readonly onDivergence: DivergencePolicy
  /** What a failed ledger write costs. */
  readonly ledgerDurability: LedgerDurability
  /** Whether the harness's scope is closed: an outcome learned after it is not recorded. */
  readonly closed: () => boolean
  /** The contexts the harness runs, by execution id (a spawn step's child agent joins while it runs). */
  readonly live: Map<string, AgentContext>
  /**
   * The harness default adapter: a `runCode` or `spawn` step without an adapter of its
   * own dispatches through it, unless it runs nested steps in place (`nestedInProcess`).
   */
  readonly subprocess: SubprocessAdapterShape
  /** Saves `ctx` unless the last snapshot that landed is current (before a record that makes a step replay). */
  readonly checkpointIfChanged: (ctx: AgentContext) => Effect.Effect<void>
  /** The recorded context of an execution id, if any. */
  readonly restore: (
    executionId: string,
    options?: ChildContextOptions
  ) => Effect.Effect<Option.Option<AgentContext>, StorageError | CheckpointSchemaMismatch | ItemSchemaMismatch>
  /** The harness's agent streams (docs/agent-streams.md). */
  readonly streams: AgentStreams
  /** A fresh context with the harness's layers and checkpoint hook. */
  readonly newContext: (init: {
    readonly id: string
    readonly threadId?: string | undefined
    readonly resourceId?: string | undefined
    readonly cwd?: string | undefined
    readonly snapshot?: CheckpointSnapshot
    readonly restore?: ChildContextOptions | undefined
  }) => AgentContext
}

/** The interpreter of one harness. */
export interface Interpreter {
  /** Runs (or replays) `step` below `parent`. */
  readonly dispatch: (step: AnyStep, input: unknown, parent: Frame) => Effect.Effect<unknown, unknown, unknown>
}

/** How a step's span marks its dispatch: replayed, run afresh, run after a divergence or an eviction. */
export type ReplayMark = "hit" | "miss" | "diverged" | "evicted"

/** Sets a step span's `replay` attribute. */
const mark = (span: Tracer.Span, replay: ReplayMark): void => span.attribute("replay", replay)

/** Checks every step id reachable without running anything: the engine's check, the facade calls it too. */
export const validateGraph = (step: AnyStep): Effect.Effect<void, EmptyStepId> =>
  Effect.suspend(() => {
    if (typeof step.id !== "string" || step.id.trim() === "") return Effect.fail(emptyStepId(step))
    return Effect.forEach(staticChildren(step), validateGraph, { discard: true })
  })

/** Fails unless `durability` (the harness's `stepLedgerDurability`) is absent, `"best-effort"` or `"strict"`. */
export const validateDurability = (durability: unknown): Effect.Effect<void, StepLedgerDurabilityInvalid> =>
  durability === undefined || durability === "best-effort" || durability === "strict"
    ? Effect.void
    : Effect.fail(
      new StepLedgerDurabilityInvalid({
        message: `stepLedgerDurability must be 'best-effort' or 'strict', got ${JSON.stringify(durability)}`,
        hint: "Leave it out for best-effort (a failed ledger write is warned of and counted), or pass 'strict' to stop the run on one."
      })
    )

/** The error of a step whose id is blank. */
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
const cancelledFields = (ctx: AgentContext) =>
  ctx.abortReason === undefined ? { executionId: ctx.id } : { executionId: ctx.id, reason: ctx.abortReason }

const isCancelled = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "StepCancelled"

/** The failures that are the run's rather than one step's: an `inParallel` passes them on as they are. */
const RUN_FAILURES: ReadonlySet<string> = new Set([
  "StepCancelled",
  "ReplayDiverged",
  "ToolOutcomeUnknown",
  "ReconcileAnswerInvalid",
  "HarnessClosed",
  "StepLedgerWriteFailed",
  "StorageError",
  "CheckpointSchemaMismatch",
  "ExecutionLeaseHeld",
  "ExecutionLeaseLost",
  "ExecutionLeaseUnsupported"
])

const isRunFailure = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" &&
  RUN_FAILURES.has(error._tag)

/**
 * The `ForkPartial` of an `inParallel` from how each path ended: an output, a failure,
 * or (interrupted, or never started) a cancellation because a sibling failed.
 */
const forkPartial = (
  stepId: string,
  paths: ReadonlyArray<AnyStep>,
  exits: ReadonlyArray<Exit.Exit<unknown, unknown> | undefined>,
  ctx: AgentContext
): ForkPartial => {
  const succeeded: Array<{ readonly stepId: string; readonly value: unknown }> = []
  const failed: Array<{ readonly stepId: string; readonly error: unknown }> = []
  paths.forEach((path, i) => {
    const exit = exits[i]
    if (exit !== undefined && Exit.isSuccess(exit)) return void succeeded.push({ stepId: path.id, value: exit.value })
    const error = exit === undefined ? Option.none() : Cause.findErrorOption(exit.cause)
    failed.push({
      stepId: path.id,
      error: Option.isSome(error)
        ? error.value
        : new StepCancelled({ executionId: ctx.id, reason: `inParallel '${stepId}' sibling failed` })
    })
  })
  return new ForkPartial({ stepId, succeeded, failed })
}

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

/** The interpreter over a harness's contexts, tools and policies. */
export const make = (deps: InterpreterDeps): Interpreter => {
  const stepContext = (frame: Frame): StepContext => {
    let asks = 0
    // A view of the context bound to this dispatch: it reads and writes the same
    // context (AgentContext keeps its state in one shared store object).
    const view = Object.create(frame.ctx) as AgentContext & { -readonly [K in keyof StepContext]: StepContext[K] }
    view.path = frame.path
    view.run = (step, input) => dispatch(step as AnyStep, input, frame) as any
    // Chunk indexes count from 0 per attempt and name: an attempt that runs again rewrites
    // the same indexes, which the stream takes as duplicates (docs/agent-streams.md).
    const indexes = new Map<string, { next: number }>()
    view.stream = (name) => deps.streams.open(frame.ctx.id, frame.path, name, indexes)
    // Prompt ids follow the path, so a step re-run after a restore joins its restored prompt.
    view.askUser = (input, askOptions = {}) =>
      frame.ctx.askUser(input, { id: askOptions.id ?? `${frame.ctx.id}${frame.path}/askUser#${asks++}` })
    return withFrame(view, frame)
  }

  // A model call's recorded value carries its meta: noted on the context, its output passed on.
  const dispatch = (step: AnyStep, input: unknown, parent: Frame): Effect.Effect<unknown, unknown, unknown> =>
    step.kind === "callModel"
      ? Effect.map(dispatchStep(step, input, parent), (value) => ToolLoop.settle(parent.ctx, value))
      : dispatchStep(step, input, parent)

  const dispatchStep = (step: AnyStep, input: unknown, parent: Frame): Effect.Effect<unknown, unknown, unknown> =>
    Effect.withFiber((fiber) => {
      if (step.id.trim() === "") return Effect.fail(emptyStepId(step))
      // noetic: an aborted context throws `cancelled` at the next step boundary.
      if (parent.ctx.aborted) return Effect.fail(new StepCancelled(cancelledFields(parent.ctx)))
      const n = parent.counters.get(step.id) ?? 0
      parent.counters.set(step.id, n + 1)
      const path = `${parent.path}/${step.id}#${n}`
      const ctx = parent.ctx
      const position = noteDispatch(parent.run, parent.path, path)
      // The run's root step, dispatched: its hook runs just before the replay is decided
      // and the body (or reconciler) starts.
      const onDispatch = parent.path === "" ? parent.run.onRootDispatch : undefined
      const identity = { stepId: step.id, kind: step.kind }
      // The replay hot path: a step that replays runs nothing below it, so it needs no
      // frame, record, finalizer or place in the frontier (docs/architecture.md#replay-by-path).
      const decided = onDispatch === undefined && Option.isSome(parent.ledger)
        ? parent.ledger.value.replayAt(path, identity)
        : undefined
      if (decided?._tag === "Hit") {
        ctx.passStep()
        // Its span (`hit`) is for a tracing backend: none under Effect's native tracer or tracing off.
        const output = Effect.succeed(decided.output)
        if (!fiber.getRef(References.TracerEnabled) || fiber.getRef(Tracer.Tracer) === Tracer.nativeTracer) return output
        const attributes = { executionId: ctx.id, path, stepId: step.id, kind: step.kind }
        return Effect.useSpan(`${step.kind} ${step.id}`, { attributes }, (span) => {
          mark(span, "hit")
          return output
        })
      }
      ctx.enterStep(path, { stepId: step.id, input, state: { path } })
      // One span per dispatch; its `replay` attribute says whether the ledger answered.
      // It captures no call site (always this line), which would cost a stack trace
      // per step; `run` gets the span to mark, so marking it is no effect of its own.
      const spanOptions = {
        attributes: { executionId: ctx.id, path, stepId: step.id, kind: step.kind },
        captureStackTrace: false
      }
      const frame = frameAt(parent, path)
      const settle = Effect.sync(() => ctx.exitStep(path))
      const traced = (run: (span: Tracer.Span) => Effect.Effect<unknown, unknown, unknown>) =>
        Effect.useSpan(
          `${step.kind} ${step.id}`,
          spanOptions,
          (span) =>
            Effect.withParentSpan(
              Effect.ensuring(
                Effect.suspend(() => {
                  onDispatch?.()
                  return observeStep(deps.hooks, step, ctx, run(span))
                }),
                settle
              ),
              span,
              spanOptions
            )
        )
      // Suspended, so a body that throws while building its Effect still settles the frontier.
      const body = Effect.suspend(() => interpret(step, input, frame))
      if (Option.isNone(frame.ledger)) {
        return traced((span) => {
          mark(span, "miss")
          return body
        })
      }
      const ledger = frame.ledger.value
      const atMostOnce = (step.kind === "runCode" || step.kind === "invokeTool") && step.effects === "at-most-once"
      // A failed write costs resumability, not the run (noetic), unless the harness asks
      // for strict durability: then the step fails and nothing downstream runs.
      const writeFailed = (what: string) => (error: StorageError) =>
        deps.ledgerDurability === "strict"
          ? Effect.fail(new StepLedgerWriteFailed({ executionId: ctx.id, path, step: identity, cause: error }))
          : logWarning(
            `step ledger of execution ${JSON.stringify(ctx.id)}: the ${what} at ${path} failed (${error.message}); ` +
              "the run goes on, and that step re-runs on resume (stepLedgerDurability: 'strict' stops the run instead)"
          ).pipe(Effect.annotateLogs({ executionId: ctx.id, path, harness: deps.harness }))
      const record = (output: unknown) =>
        Effect.andThen(
          deps.checkpointIfChanged(ctx),
          ledger.record(path, identity, output, position).pipe(Effect.catch(writeFailed("record")))
        )
      // The body may be interrupted (a failing sibling branch, a race); once it has
      // completed, its record is not: a completed step interrupted before its record
      // landed would run again on resume. A step that replays does not redo what it
      // changed in the context (cwd, layer state, answered prompts), so a change no
      // snapshot holds yet is saved before the record that makes the step replay.
      // An at-most-once body starts only once its intent is durable: a failed intent
      // write fails the step without running it.
      const runAndRecord = Effect.uninterruptibleMask((restore) =>
        Effect.andThen(
          atMostOnce ? ledger.recordIntent(path, identity, position) : Effect.void,
          Effect.tap(restore(body), record)
        )
      )
      // Only an explicit `Reconciled.rerun` runs an at-most-once body again: any other
      // answer (a plain object, the output itself) fails, an answer that comes after the
      // harness closed records nothing, and a reconcile that fails fails the step. In
      // each case the intent stays, so the next resume asks again.
      const reconcile = (): Effect.Effect<unknown, unknown, unknown> => {
        const reconciler = (step.kind === "runCode" || step.kind === "invokeTool") ? step.reconcile : undefined
        if (reconciler === undefined) {
          return Effect.fail(new ToolOutcomeUnknown({ executionId: ctx.id, path, step: identity }))
        }
        return Effect.annotateCurrentSpan("reconciled", true).pipe(
          Effect.andThen(Effect.suspend(() => reconciler(input, stepContext({ ...frame, counters: new Map() })))),
          Effect.flatMap((answer: unknown) => {
            if (!Reconciled.is(answer)) {
              return Effect.fail(
                new ReconcileAnswerInvalid({ executionId: ctx.id, path, step: identity, answer: describeAnswer(answer) })
              )
            }
            if (deps.closed()) {
              return Effect.fail(new HarnessClosed({ harness: deps.harness, executionId: ctx.id, path }))
            }
            return answer._tag === "Completed"
              ? Effect.as(Effect.uninterruptible(record(answer.output)), answer.output)
              : runAndRecord
          })
        )
      }
      return traced((span) => {
        const found = decided ?? ledger.replayAt(path, identity)
        switch (found._tag) {
          case "Hit":
            mark(span, "hit")
            return Effect.succeed(found.output)
          case "Miss": {
            if (found.evicted) {
              mark(span, "evicted")
              return runAndRecord
            }
            // Nothing here, but the ledger recorded another step, not dispatched by this run, at
            // this position below the parent: the workflow renamed it (or put a step before it).
            // A child that failed records nothing, so it leaves no false position behind.
            const displaced = parent.path === "" ? undefined : ledger.childAt(parent.path, position, path)
            if (displaced !== undefined && parent.run.dispatched.get(parent.path)?.has(displaced.path) !== true) {
              mark(span, "diverged")
              return diverged(frame, displaced.path, displaced, identity, ledger, runAndRecord)
            }
            mark(span, "miss")
            return runAndRecord
          }
          case "Pending":
            // An intent of a step now at-least-once is only a record of an earlier policy.
            mark(span, "miss")
            return atMostOnce ? reconcile() : runAndRecord
          case "Unreadable":
            // The step completed, but its recorded output is damaged. As for a corrupt
            // row skipped at load, it runs again (its new record supersedes the row),
            // or, at most once, its intent is what is left: it is reconciled.
            mark(span, "miss")
            return logWarning(
              `step ledger: the output recorded at ${path} cannot be read from the corrupt row ${found.key} ` +
                `(${found.message}); ${atMostOnce ? "reconciling the step" : "running the step again"}`
            ).pipe(
              Effect.annotateLogs({ executionId: ctx.id, path, harness: deps.harness }),
              Effect.andThen(atMostOnce ? reconcile() : runAndRecord)
            )
          case "Diverged":
            mark(span, "diverged")
            return diverged(frame, path, found.recorded, identity, ledger, runAndRecord)
        }
      })
    })

  /** A changed identity at a recorded path: fail under `"fail"`, else warn (once per run), discard, run fresh. */
  const diverged = (
    frame: Frame,
    recordedPath: string,
    recorded: StepIdentity,
    current: StepIdentity,
    ledger: ExecutionLedger,
    runFresh: Effect.Effect<unknown, unknown, unknown>
  ): Effect.Effect<unknown, unknown, unknown> => {
    if (deps.onDivergence === "fail") {
      return Effect.fail(
        new ReplayDiverged({
          executionId: frame.ctx.id,
          path: recordedPath,
          recorded: { stepId: recorded.stepId, kind: recorded.kind },
          current,
          currentPath: frame.path
        })
      )
    }
    const reported = frame.run.divergencesReported.has(recordedPath)
    frame.run.divergencesReported.add(recordedPath)
    const where = recordedPath === frame.path ? "" : ` (now at ${frame.path})`
    const warn = reported ? Effect.void : logWarning(
      `replay diverged at ${recordedPath}: the ledger recorded ${recorded.kind} ${JSON.stringify(recorded.stepId)}, ` +
        `the workflow now has ${current.kind} ${
          JSON.stringify(current.stepId)
        }${where}; running it fresh and discarding what was recorded there`
    ).pipe(Effect.annotateLogs({ executionId: frame.ctx.id, path: recordedPath, harness: deps.harness }))
    return warn.pipe(
      Effect.andThen(ledger.discard(recordedPath).pipe(
        Effect.catch((error) =>
          deps.ledgerDurability === "strict"
            ? Effect.fail(
              new StepLedgerWriteFailed({ executionId: frame.ctx.id, path: recordedPath, step: current, cause: error })
            )
            : logWarning(
              `step ledger of execution ${JSON.stringify(frame.ctx.id)}: the discard at ${recordedPath} failed (${error.message}); running the step`
            )
        )
      )),
      Effect.andThen(runFresh)
    )
  }

  /** One function per step kind. */
  const interpret = (shown: AnyStep, input: unknown, frame: Frame): Effect.Effect<unknown, unknown, unknown> => {
    // A step shown as noetic's plain data runs as the engine step behind it.
    const step = runsAs(shown)
    switch (step.kind) {
      case "runCode":
        return runCodeStep(step, input, frame)
      case "callModel":
        return callModelStep(step, input, frame)
      case "invokeTool":
        return invokeToolStep(step, input, frame)
      case "conditional":
        return conditionalStep(step, input, frame)
      case "inParallel":
        return inParallelStep(step, input, frame)
      case "loop":
        return loopStep(step, input, frame)
      case "spawn":
        return spawnStep(step, input, frame)
    }
  }

  /** Runs a body, retried on its policy. */
  const runCodeStep = (step: RunCode<any, any, any, any>, input: unknown, frame: Frame): Interpreted => {
    // Each attempt numbers its child steps afresh, so a retried body replays its
    // children at the same paths as its first attempt did.
    const attempt = Effect.suspend(() => step.body(input, stepContext({ ...frame, counters: new Map() })))
    const retried = step.retry === undefined || step.retry.maxAttempts <= 1
      ? attempt
      : Effect.retry(attempt, {
        schedule: retrySchedule(step.retry),
        times: step.retry.maxAttempts - 1,
        // A cancelled context is not a failure to retry: it would redo work after the abort.
        while: (error) => !isCancelled(error)
      })
    const adapter = adapterOf(step, frame)
    return adapter === undefined
      ? retried
      : throughAdapter(adapter, step, input, {
        id: `${frame.ctx.id}${frame.path}`,
        threadId: frame.ctx.threadId,
        resourceId: frame.ctx.resourceId
      }, frame.ctx, retried)
  }

  /**
   * The adapter a `runCode` or `spawn` step at `frame` dispatches through (docs/architecture.md#adapter-precedence):
   * its own, else the harness default; none when that default runs steps in place, and
   * none for the root of a run an adapter runs (that is the adapter's dispatch of it).
   */
  const adapterOf = (
    step: RunCode<any, any, any, any> | Spawn<any, any, any, any>,
    frame: Frame
  ): SubprocessAdapterShape | undefined =>
    frame.run.runByAdapter && frame.path.lastIndexOf("/") === 0
      ? undefined
      : step.subprocess !== undefined
      ? step.subprocess
      : deps.subprocess.nestedInProcess === true
      ? undefined
      : deps.subprocess

  /** Runs `run` (the in-process dispatch of `step`) as a child of `adapter`, and waits for its output. */
  const throughAdapter = (
    adapter: SubprocessAdapterShape,
    step: AnyStep,
    input: unknown,
    child: { readonly id: string; readonly threadId: string | undefined; readonly resourceId: string | undefined },
    parent: AgentContext,
    run: Effect.Effect<unknown, unknown, unknown>
  ): Effect.Effect<unknown, unknown, unknown> =>
    Effect.flatMap(Effect.context<never>(), (services) =>
      Effect.flatMap(
        adapter.spawn({
          stepId: step.id,
          module: step.module,
          input,
          executionId: child.id,
          parentExecutionId: parent.id,
          threadId: child.threadId,
          resourceId: child.resourceId,
          runInProcess: Effect.provideContext(run, services as never) as Effect.Effect<unknown, unknown>
        }),
        (handle) => handle.await
      ))

  /** One model call (docs/runtime.md#the-tool-loop). */
  const callModelStep = (step: CallModel<any, any, any>, input: unknown, frame: Frame): Interpreted =>
    ToolLoop.callModelStep(step, input, stepContext(frame), frame.ctx)

  /** Calls the step's tool, or the harness tool it names. */
  const invokeToolStep = (step: InvokeTool<any>, input: unknown, frame: Frame): Interpreted => {
    const ctx = stepContext(frame)
    const args = step.args === undefined
      ? input
      : typeof input === "object" && input !== null && !Array.isArray(input)
      ? { ...input, ...step.args }
      : input === undefined
      ? { ...step.args }
      : input
    const handler = step.definition !== undefined ? step.definition.execute : deps.tools[step.tool]
    if (handler === undefined) {
      return Effect.fail(new UnknownTool({ stepId: step.id, tool: step.tool, known: Object.keys(deps.tools) }))
    }
    return Effect.mapError(
      Effect.suspend(() => handler(args, ctx)),
      (cause) => new ToolFailed({ stepId: step.id, tool: step.tool, cause })
    )
  }

  /** Runs the step the route picks, or passes the input through. */
  const conditionalStep = (step: Conditional<any, any, any, any>, input: unknown, frame: Frame): Interpreted => {
    return Effect.flatMap(
      step.route(input, stepContext(frame)),
      (next) => next === null ? Effect.succeed(input) : dispatch(next, input, frame)
    )
  }

  /** Runs the branches concurrently and combines them by mode. */
  const inParallelStep = (step: InParallel<any, any, any, any>, input: unknown, frame: Frame): Interpreted => {
    return Effect.flatMap(step.paths(input, stepContext(frame)), (paths) => {
      const branches = paths.map((branch, i) => dispatch(branch, input, frameAt(frame, `${frame.path}[${i}]`)))
      const concurrency = step.concurrency ?? "unbounded"
      const merged = (results: ReadonlyArray<unknown>) =>
        step.merge === undefined ? Effect.succeed(results) : step.merge(results, stepContext(frame))
      // How each path ended, for the ForkPartial of a failed `all` or `race`.
      const exits: Array<Exit.Exit<unknown, unknown> | undefined> = paths.map(() => undefined)
      const tracked = branches.map((branch, i) => Effect.onExit(branch, (exit) => Effect.sync(() => void (exits[i] = exit))))
      const partial = (error: unknown) =>
        Effect.fail(isRunFailure(error) ? error : forkPartial(step.id, paths, exits, frame.ctx))
      switch (step.mode) {
        case "all":
          // The first failure interrupts the paths still running.
          return Effect.matchEffect(Effect.all(tracked, { concurrency }), { onSuccess: merged, onFailure: partial })
        case "race":
          // Every path starts at once: a race limited to some of them could be won by none.
          return Effect.catch(Effect.raceAll(tracked), partial)
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
  }

  /** Runs the body steps until the verdict stops it. */
  const loopStep = (step: Loop<any, any, any, any>, input: unknown, frame: Frame): Interpreted => {
    return Effect.gen(function*() {
      if (!(Number.isFinite(step.maxIterations) && step.maxIterations >= 1)) {
        return yield* new InvalidMaxIterations({ stepId: step.id, maxIterations: step.maxIterations })
      }
      const ctx = stepContext(frame)
      const startedAt = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const history: Array<unknown> = []
      let current = input
      let lastOutput: { readonly value: unknown } | undefined
      let stepCount = 0
      // Tokens and cost of the model calls made in the loop (docs/runtime.md#the-tool-loop).
      const spent = { input: 0, output: 0, cost: 0, meta: ToolLoop.lastStepMeta(frame.ctx) }
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
        const meta = ToolLoop.lastStepMeta(frame.ctx)
        if (meta !== undefined && meta !== spent.meta) {
          spent.meta = meta
          spent.input += meta.usage?.inputTokens ?? 0
          spent.output += meta.usage?.outputTokens ?? 0
          spent.cost += meta.cost ?? 0
        }
        const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        const snapshot: Snapshot = {
          stepCount,
          tokens: { input: spent.input, output: spent.output, total: spent.input + spent.output },
          elapsed: now - startedAt,
          cost: spent.cost,
          lastOutput: output,
          lastText: textOf(output),
          history: [...history],
          depth: frame.ctx.depth,
          lastStepMeta: ToolLoop.lastStepMeta(frame.ctx)
        }
        // noetic: an until that throws stops the loop.
        const verdict = yield* step.until(snapshot).pipe(
          Effect.catchCause((cause) =>
            Effect.succeed<Verdict>({ stop: true, reason: `Predicate error: ${String(Cause.squash(cause))}` })
          )
        )
        if (verdict.stop && !(yield* inboxWakes(step, frame.ctx))) return output
        current = step.prepareNext === undefined ? output : step.prepareNext(output, verdict, ctx)
      }
    })
  }

  /** Runs a child agent in its own context below this path. */
  const spawnStep = (step: Spawn<any, any, any, any>, input: unknown, frame: Frame): Interpreted => {
    return Effect.suspend(() => {
      // An in-process child agent: its own context (parent = the caller's), its steps
      // recorded below the spawn's path in the same execution ledger. A child that
      // ran before a crash gets its context back: its replayed steps do not append
      // again, so a fresh context would lose what they added to its log and layers.
      const id = `${frame.ctx.id}${frame.path}`
      // Like a failed ledger lookup, a child snapshot that cannot be read only costs
      // the child its earlier log.
      const childOptions: ChildContextOptions = step.context === undefined
        ? { parent: frame.ctx }
        : { parent: frame.ctx, context: step.context }
      // A log the item schemas refuse fails the spawn (fail closed) rather than be dropped.
      const restoredChild = Effect.catch(deps.restore(id, childOptions), (error) =>
        error._tag === "ItemSchemaMismatch" ? Effect.fail(error) : Effect.as(
          logWarning("child agent context could not be restored; it starts fresh", error),
          Option.none<AgentContext>()
        ))
      return Effect.flatMap(restoredChild, (restored) => {
        const child = Option.getOrElse(restored, () =>
          deps.newContext({
            id,
            threadId: frame.ctx.threadId,
            resourceId: frame.ctx.resourceId,
            restore: childOptions
          }))
        // Live while it runs, so the host can answer its ask-user prompts by its id.
        deps.live.set(child.id, child)
        const run = LayerLifecycle.aroundSpawn(frame.ctx, child, Option.isNone(restored), dispatch(step.child, input, { ...frame, ctx: child, counters: new Map() }))
        // A spawn step dispatches its child through its adapter (noetic's `subprocess`).
        const adapter = adapterOf(step, frame)
        const dispatched = adapter === undefined
          ? run
          : throughAdapter(adapter, step.child, input, child, frame.ctx, run)
        const timed = step.timeout === undefined ? dispatched : Effect.timeoutOrElse(dispatched, {
          duration: Duration.millis(step.timeout),
          orElse: () => Effect.fail(new SpawnTimeout({ stepId: step.id, timeoutMs: step.timeout! }))
        })
        return timed.pipe(Effect.ensuring(Effect.sync(() => deps.live.delete(child.id))))
      })
    })
  }

  return { dispatch }
}
