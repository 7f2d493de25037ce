/**
 * Sessions (noetic's `SessionRunner`, docs/architecture.md#sessions): one queue per
 * thread id, whose messages run as turns of the harness's agent graph one after
 * another. `enqueue` returns once the message is accepted (durably, on a durable
 * harness); the turn's outcome comes from `completion`, `response` and the session's
 * event stream.
 *
 * Each turn is one execution of the harness (`AgentHarness.execute` with the message's
 * execution id): a fresh context holding the session's history and the message's
 * items, checkpointed like any execution. On a durable harness every queued message is
 * a record in the checkpoint store's storage from its acceptance until its turn has
 * landed its last checkpoint (or failed); `resumeQueued` runs what a host that stopped
 * left behind, a turn it had started resuming from its ledger.
 *
 * @since 0.2.0
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import { NoStepConfigured, type StorageError } from "../Errors.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { type AgentContext, type ContextLayer, type Item, randomUuid } from "./AgentContext.ts"
import type { AgentHarness, ExecuteResult } from "./AgentHarness.ts"
import * as Streams from "./SessionStreams.ts"
import { bindTurn, inputItems, SessionTurn, type SessionTurnShape, type StreamEvent, unbindTurn } from "./SessionTurn.ts"
import { allowsEvent } from "./Step.ts"
import { logWarning } from "../internal/diagnostics.ts"

export type { StreamEvent } from "./SessionTurn.ts"
export type { StreamingItem } from "./SessionStreams.ts"

/** How a message is delivered (noetic's `DeliveryMode`). */
export type DeliveryMode = "next-turn" | "between-rounds" | "interrupt"

const DELIVERY_MODES: ReadonlySet<string> = new Set(["next-turn", "between-rounds", "interrupt"])

/** The thread of a message given none (noetic's default session). */
export const DEFAULT_THREAD_ID = "__default__"

/** A `deliveryMode` (or `defaultDeliveryMode`) that is none of noetic's three. */
export class DeliveryModeInvalid extends Schema.TaggedError<DeliveryModeInvalid>(
  "noetic-effect/DeliveryModeInvalid"
)("DeliveryModeInvalid", {
  message: Schema.String,
  hint: Schema.String
}) {
  /** The documented error code. */
  get code(): "DELIVERY_MODE_INVALID" {
    return "DELIVERY_MODE_INVALID"
  }
}

/** Validates a delivery mode; undefined is fine (the default applies). */
export const validateDeliveryMode = (mode: unknown, where: string): Effect.Effect<void, DeliveryModeInvalid> =>
  mode === undefined || (typeof mode === "string" && DELIVERY_MODES.has(mode))
    ? Effect.void
    : Effect.fail(
      new DeliveryModeInvalid({
        message: `${where} must be 'next-turn', 'between-rounds' or 'interrupt', got ${JSON.stringify(mode)}`,
        hint: "Leave it out for 'next-turn' (queue until the current turn completes)."
      })
    )

/** Options of `enqueue` (noetic's `ExecuteOptions`, plus this library's `executionId` and `cwd`). */
export interface EnqueueOptions {
  readonly threadId?: string | undefined
  readonly resourceId?: string | undefined
  /** Continues a recorded execution under this id instead of starting a fresh one. */
  readonly executionId?: string | undefined
  readonly messageId?: string | undefined
  readonly deliveryMode?: DeliveryMode | undefined
  /** Host wiring for the turn's context; never persisted. */
  readonly state?: unknown
  /** The turn context's layers instead of the harness's; never persisted. */
  readonly context?: ReadonlyArray<ContextLayer<any>> | undefined
  /** The turn context's working directory. */
  readonly cwd?: string | undefined
}

/** What `enqueue` gives back once the message is accepted. */
export interface Enqueued {
  readonly messageId: string
  /** The execution id of the message's turn (of the turn it joined, for a between-rounds message injected into one). */
  readonly executionId: string
  readonly threadId: string
  readonly deliveryMode: DeliveryMode
  /** The outcome of the message's turn: its execution id and root output, or its failure. */
  readonly completion: Effect.Effect<ExecuteResult<unknown>, unknown>
}

/** What a drained session answers (noetic's `HarnessResponse`, plus the turn's execution id and root output). */
export interface HarnessResponse {
  readonly items: ReadonlyArray<Item>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly cachedTokens?: number }
  readonly cost?: number
  readonly text: string
  /** What each layer contributed to the turn's last model round (noetic's `lastLayerUsage`). */
  readonly lastLayerUsage?: NonNullable<AgentContext["meter"]["lastLayerUsage"]>
  readonly executionId: string
  readonly output: unknown
}

/** A session's state (noetic's `HarnessStatus`). */
export type SessionStatus =
  | { readonly kind: "idle" }
  | { readonly kind: "generating"; readonly startedAt: number; readonly turnId: string }
  | { readonly kind: "aborting"; readonly turnId: string }

/** Host wiring for the turns `resumeQueued` runs (a snapshot cannot hold it). */
export interface ResumeQueuedOptions {
  readonly state?: unknown
  readonly context?: ReadonlyArray<ContextLayer<any>> | undefined
}

/** What `resumeQueued` found: the messages it queued again, by thread. */
export interface ResumedQueues {
  readonly threads: ReadonlyArray<{ readonly threadId: string; readonly messages: ReadonlyArray<Enqueued> }>
}

/** The sessions of one harness. */
export interface Sessions {
  /** Queues `input` on its thread's session; returns once it is accepted (persisted on a durable harness). */
  readonly enqueue: (
    input: unknown,
    options?: EnqueueOptions
  ) => Effect.Effect<Enqueued, NoStepConfigured | DeliveryModeInvalid | StorageError>
  /** The session's response once it has drained its queue (noetic's `getAgentResponse`); fails with a failed turn's error. */
  readonly response: (threadId?: string) => Effect.Effect<HarnessResponse, unknown>
  /** Every event of the session from its start (replayed up to 10,000), across turns; never ends while the harness lives. */
  readonly events: (threadId?: string) => Effect.Effect<Stream.Stream<StreamEvent>>
  /** The text deltas of the session's models. */
  readonly textStream: (threadId?: string) => Effect.Effect<Stream.Stream<string>>
  /** The reasoning deltas of the session's models. */
  readonly reasoningStream: (threadId?: string) => Effect.Effect<Stream.Stream<string>>
  /** Cumulative item snapshots: model output as it streams, turn inputs and other appended items complete. */
  readonly itemStream: (threadId?: string) => Effect.Effect<Stream.Stream<Streams.StreamingItem>>
  /** The messages waiting on the session (the running turn's not counted). */
  readonly queueSize: (threadId?: string) => number
  readonly status: (threadId?: string) => SessionStatus
  /** Stops the running turn (its context is aborted; it fails at its next step boundary); queued messages stay. */
  readonly abort: (threadId?: string, reason?: string) => Effect.Effect<void>
  /** Replaces the history the session's next turn starts from (noetic's `seedSessionHistory`). */
  readonly seedHistory: (threadId: string, items: ReadonlyArray<Item>) => void
  /** Queues again what a stopped host left in storage: each thread's history, then its messages in order. */
  readonly resumeQueued: (options?: ResumeQueuedOptions) => Effect.Effect<ResumedQueues, StorageError>
}

/** How sessions are built. */
export interface SessionsOptions {
  /** The delivery mode of a message given none; `next-turn` when absent. */
  readonly defaultDeliveryMode?: DeliveryMode | undefined
}

/** A queued message's record in storage. */
const QueuedRecord = Schema.Struct({
  version: Schema.Literal(1),
  kind: Schema.Literal("queued"),
  threadId: Schema.String,
  messageId: Schema.String,
  executionId: Schema.String,
  deliveryMode: Schema.Literals(["next-turn", "between-rounds", "interrupt"]),
  input: Schema.Unknown,
  resourceId: Schema.optionalKey(Schema.String),
  cwd: Schema.optionalKey(Schema.String),
  order: Schema.Number,
  enqueuedAt: Schema.Number,
  /** The id was the caller's: a recorded execution may exist under it. */
  continues: Schema.Boolean
})
type QueuedRecord = typeof QueuedRecord.Type

const HistoryRecord = Schema.Struct({
  version: Schema.Literal(1),
  kind: Schema.Literal("history"),
  threadId: Schema.String,
  executionId: Schema.String
})

const isQueuedRecord = Schema.is(QueuedRecord)
const isHistoryRecord = Schema.is(HistoryRecord)

/** The storage keys of a harness's sessions: `session:<harness>:<thread>:queue:<execution>`, `...:history`. */
const sessionPrefix = (harness: string) => `session:${encodeURIComponent(harness)}:`
const queueKey = (harness: string, record: Pick<QueuedRecord, "threadId" | "executionId">) =>
  `${sessionPrefix(harness)}${encodeURIComponent(record.threadId)}:queue:${record.executionId}`
const historyKey = (harness: string, threadId: string) =>
  `${sessionPrefix(harness)}${encodeURIComponent(threadId)}:history`

interface Message {
  readonly record: QueuedRecord
  readonly state: unknown
  readonly context: ReadonlyArray<ContextLayer<any>> | undefined
  readonly completion: Deferred.Deferred<ExecuteResult<unknown>, unknown>
  /** Found in storage after a restart: its turn may have started (a snapshot then exists). */
  readonly resumed: boolean
}

interface Turn {
  readonly message: Message
  readonly turnId: string
  readonly startedAt: number
  ctx: AgentContext | undefined
  aborting: boolean
  abortReason: string | undefined
  /** Between-rounds messages injected into this turn: they complete with it. */
  readonly absorbed: Array<Message>
  usage: { inputTokens: number; outputTokens: number; cachedTokens?: number; cost: number }
  readonly done: Deferred.Deferred<void>
  /** How the tool loop's events become stream events this turn. */
  readonly streamState: Streams.RunEventState
}

interface Session {
  readonly threadId: string
  readonly queue: Array<Message>
  readonly pubsub: PubSub.PubSub<StreamEvent>
  history: ReadonlyArray<Item>
  turn: Turn | undefined
  draining: boolean
  last: Option.Option<Exit.Exit<HarnessResponse, unknown>>
  readonly waiters: Array<Deferred.Deferred<HarnessResponse, unknown>>
}

/** The text of a turn's output, as noetic's response has it (a string is itself). */
const textOf = (output: unknown): string => {
  if (typeof output === "string") return output
  if (typeof output === "object" && output !== null && "text" in output && typeof output.text === "string") {
    return output.text
  }
  if (output === undefined || output === null) return ""
  try {
    return JSON.stringify(output) ?? ""
  } catch {
    return String(output)
  }
}

/**
 * What `turn_aborted` says of a failure besides its message: noetic's `errorKind` (the
 * error's `noeticKind`, `cancelled` for a cancellation, `step_failed` for a step's
 * failure, else the tag) and this library's `errorTag`, the engine error's `_tag`.
 */
const errorKindOf = (error: unknown): { readonly errorKind?: string; readonly errorTag?: string } => {
  if (typeof error !== "object" || error === null || !("_tag" in error) || typeof error._tag !== "string") return {}
  const { _tag, noeticKind, stepId } = error as { readonly _tag: string; readonly noeticKind?: unknown; readonly stepId?: unknown }
  const errorKind = typeof noeticKind === "string"
    ? noeticKind
    : _tag === "StepCancelled"
    ? "cancelled"
    : typeof stepId === "string"
    ? "step_failed"
    : _tag
  return { errorKind, errorTag: _tag }
}

/**
 * Builds the sessions of `harness`. Turns run in the scope of this call, with its
 * services (a model layer, say). On a durable harness queued messages live in the
 * checkpoint store's storage until their turn is done.
 */
export const make = Effect.fnUntraced(function*(
  harness: AgentHarness<any>,
  options: SessionsOptions = {}
): Effect.fn.Return<Sessions, DeliveryModeInvalid, Scope.Scope> {
  yield* validateDeliveryMode(options.defaultDeliveryMode, "defaultDeliveryMode")
  const scope = yield* Effect.scope
  const services = yield* Effect.context<never>()
  const defaultMode: DeliveryMode = options.defaultDeliveryMode ?? "next-turn"
  const storage: Option.Option<StorageAdapterShape> = Option.map(harness.checkpointStore, (store) => store.storage)
  const sessions = new Map<string, Session>()
  // Orders messages across a restart: next-turn at the tail, interrupt at the head.
  let tail = Date.now()
  let head = -Date.now()

  const sessionOf = (threadId: string): Session => {
    let session = sessions.get(threadId)
    if (session === undefined) {
      session = {
        threadId,
        queue: [],
        pubsub: Effect.runSync(PubSub.unbounded<StreamEvent>({ replay: 10_000 })),
        history: [],
        turn: undefined,
        draining: false,
        last: Option.none(),
        waiters: []
      }
      sessions.set(threadId, session)
    }
    return session
  }

  // A closing harness: waiting callers hear of it (an interruption) and the streams end.
  // Stored messages stay for resumeQueued.
  yield* Scope.addFinalizer(
    scope,
    Effect.forEach(sessions.values(), (session) =>
      Effect.andThen(
        Effect.andThen(
          Effect.forEach(session.queue, (m) => Deferred.interrupt(m.completion), { discard: true }),
          Effect.forEach(session.waiters.splice(0), (w) => Deferred.interrupt(w), { discard: true })
        ),
        PubSub.shutdown(session.pubsub)
      ), { discard: true })
  )

  const publish = (session: Session, event: StreamEvent) => Effect.asVoid(PubSub.publish(session.pubsub, event))
  const framework = (session: Session, name: string, data: Readonly<Record<string, unknown>>) =>
    publish(session, { source: "framework", type: `${harness.name}:${name}`, data })

  const persist = (record: QueuedRecord) =>
    Option.isNone(storage) ? Effect.void : storage.value.set(queueKey(harness.name, record), record)
  const forget = (records: ReadonlyArray<QueuedRecord>) =>
    Option.isNone(storage)
      ? Effect.void
      : Effect.forEach(records, (record) => storage.value.delete(queueKey(harness.name, record)), { discard: true })
  /** Storage trouble after acceptance is logged: the turn's outcome is already decided. */
  const quietly = (what: string) => (effect: Effect.Effect<void, StorageError>) =>
    Effect.catch(effect, (error) => logWarning(`session queue: ${what} failed (${error.message})`))

  /** The services a turn offers its steps. */
  const turnServices = (session: Session, turn: Turn): SessionTurnShape => ({
    threadId: session.threadId,
    turnId: turn.turnId,
    emit: (event) => publish(session, event),
    emitFramework: (name, data) => framework(session, name, data),
    runEvent: (event, emit, options) =>
      Effect.suspend(() => {
        if (event.type === "model_call_completed" && options?.counted !== false) {
          turn.usage.inputTokens += event.usage.inputTokens
          turn.usage.outputTokens += event.usage.outputTokens
          if (event.usage.cachedTokens !== undefined) {
            turn.usage.cachedTokens = (turn.usage.cachedTokens ?? 0) + event.usage.cachedTokens
          }
          turn.usage.cost += event.cost ?? 0
        }
        // The step's `emit` gates its framework events; provider events and appended items always go out.
        const prefix = `${harness.name}:`
        const allowed = (e: StreamEvent) =>
          e.source === "sdk" || e.type === `${prefix}item_appended` ||
          allowsEvent(emit, e.type.slice(prefix.length), e.data)
        return Effect.forEach(Streams.fromRunEvent(turn.streamState, event, harness.name), (e) =>
          allowed(e) ? publish(session, e) : Effect.void, { discard: true })
      }),
    betweenRounds: (ctx, round) =>
      Effect.gen(function*() {
        if (turn.ctx === undefined || ctx.id !== turn.ctx.id) return []
        const taken = session.queue.filter((message) => message.record.deliveryMode === "between-rounds")
        if (taken.length === 0) return []
        session.queue.splice(0, session.queue.length, ...session.queue.filter((m) => !taken.includes(m)))
        const items = taken.flatMap((message) => inputItems(message.record.input, `user-${message.record.messageId}`))
        const appended = yield* ctx.append(items)
        // The injected items are in a snapshot before their queue records go.
        yield* ctx.checkpoint()
        yield* quietly("removing injected messages")(forget(taken.map((message) => message.record)))
        turn.absorbed.push(...taken)
        for (const item of appended) yield* framework(session, "item_appended", { item })
        yield* framework(session, "inbox_injected", {
          round,
          count: taken.length,
          messageIds: taken.map((message) => message.record.messageId)
        })
        return appended
      })
  })

  const settleWaiters = (session: Session, exit: Exit.Exit<HarnessResponse, unknown>) => {
    const waiters = session.waiters.splice(0, session.waiters.length)
    return Effect.forEach(waiters, (waiter) => Deferred.done(waiter, exit), { discard: true })
  }

  const runTurn = (session: Session, message: Message) =>
    Effect.gen(function*() {
      const record = message.record
      const turn: Turn = {
        message,
        turnId: record.executionId,
        startedAt: Date.now(),
        ctx: undefined,
        aborting: false,
        abortReason: undefined,
        absorbed: [],
        usage: { inputTokens: 0, outputTokens: 0, cost: 0 },
        done: Deferred.makeUnsafe<void>(),
        streamState: Streams.newRunEventState()
      }
      session.turn = turn
      const items = inputItems(record.input, `user-${record.messageId}`)
      yield* framework(session, "turn_started", { turnId: turn.turnId, messageIds: [record.messageId] })
      for (const item of items) yield* framework(session, "item_appended", { item })
      const turnShape = turnServices(session, turn)
      const exit = yield* harness.execute(record.input, {
        executionId: record.executionId,
        // A fresh id cannot be recorded yet; a resumed message's turn may have started.
        ...(record.continues || message.resumed ? {} : { newExecution: true }),
        threadId: record.threadId,
        ...(record.resourceId === undefined ? {} : { resourceId: record.resourceId }),
        ...(record.cwd === undefined ? {} : { cwd: record.cwd }),
        ...(message.context === undefined ? {} : { context: message.context }),
        state: message.state,
        items: [...session.history, ...items],
        onContext: (ctx) => {
          turn.ctx = ctx
          bindTurn(ctx, turnShape)
          if (turn.aborting) ctx.abort(turn.abortReason)
        }
      }).pipe(
        Effect.provideService(SessionTurn, turnShape),
        Effect.provideContext(services),
        Effect.exit
      ) as Effect.Effect<Exit.Exit<ExecuteResult<unknown>, unknown>>
      const completed = [message, ...turn.absorbed]
      if (turn.ctx !== undefined) unbindTurn(turn.ctx)
      session.turn = undefined
      if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) {
        // The harness is closing: the messages stay queued in storage for resumeQueued.
        yield* Effect.forEach(completed, (m) => Deferred.failCause(m.completion, exit.cause), { discard: true })
        yield* Deferred.succeed(turn.done, undefined)
        return yield* Effect.interrupt
      }
      if (Exit.isSuccess(exit)) {
        const ctx = turn.ctx
        if (ctx !== undefined) session.history = ctx.items
        const response: HarnessResponse = {
          items: ctx?.items ?? [],
          usage: {
            inputTokens: turn.usage.inputTokens,
            outputTokens: turn.usage.outputTokens,
            ...(turn.usage.cachedTokens === undefined ? {} : { cachedTokens: turn.usage.cachedTokens })
          },
          ...(turn.usage.cost > 0 ? { cost: turn.usage.cost } : {}),
          text: textOf(exit.value.output),
          ...(ctx?.meter.lastLayerUsage === undefined ? {} : { lastLayerUsage: ctx.meter.lastLayerUsage }),
          executionId: exit.value.executionId,
          output: exit.value.output
        }
        if (Option.isSome(storage)) {
          yield* quietly("recording the thread's history")(
            storage.value.set(historyKey(harness.name, session.threadId), {
              version: 1,
              kind: "history",
              threadId: session.threadId,
              executionId: exit.value.executionId
            })
          )
        }
        yield* quietly("removing a finished turn's message")(forget(completed.map((m) => m.record)))
        session.last = Option.some(Exit.succeed(response))
        yield* framework(session, "turn_completed", { turnId: turn.turnId, durationMs: Date.now() - turn.startedAt })
        if (session.queue.length === 0) yield* settleWaiters(session, Exit.succeed(response))
      } else {
        const error = Option.getOrElse(Cause.findErrorOption(exit.cause), () => Cause.squash(exit.cause))
        yield* quietly("removing a failed turn's message")(forget(completed.map((m) => m.record)))
        session.last = Option.some(Exit.fail(error))
        yield* framework(session, "turn_aborted", {
          turnId: turn.turnId,
          reason: error instanceof Error ? error.message : String(error),
          ...errorKindOf(error)
        })
        yield* settleWaiters(session, Exit.fail(error))
      }
      yield* Effect.forEach(completed, (m) => Deferred.done(m.completion, exit), { discard: true })
      yield* Deferred.succeed(turn.done, undefined)
    })

  /** Runs the session's queue, one turn at a time, until it is empty. */
  const drain = (session: Session): Effect.Effect<void> =>
    Effect.suspend(() => {
      const next = session.queue.shift()
      if (next === undefined) {
        session.draining = false
        return Effect.void
      }
      return Effect.andThen(runTurn(session, next), drain(session))
    })

  const kick = (session: Session) =>
    Effect.suspend(() => {
      if (session.draining || session.queue.length === 0) return Effect.void
      session.draining = true
      return Effect.asVoid(Effect.forkIn(drain(session), scope))
    })

  const abortTurn = (session: Session, reason: string | undefined) =>
    Effect.suspend(() => {
      const turn = session.turn
      if (turn === undefined) return Effect.void
      turn.aborting = true
      turn.abortReason = reason
      turn.ctx?.abort(reason)
      return Deferred.await(turn.done)
    })

  const accept = (session: Session, message: Message) =>
    Effect.gen(function*() {
      const mode = message.record.deliveryMode
      if (mode === "interrupt" && session.turn !== undefined) {
        session.queue.unshift(message)
        // The running turn stops at its next step boundary; the drain then takes this message.
        const turn = session.turn
        turn.aborting = true
        turn.abortReason = "interrupt"
        turn.ctx?.abort("interrupt")
      } else {
        session.queue.push(message)
      }
      yield* kick(session)
    })

  const enqueue = (input: unknown, enqueueOptions: EnqueueOptions = {}) =>
    Effect.gen(function*() {
      if (harness.agentGraph === undefined) {
        return yield* new NoStepConfigured({
          harness: harness.name,
          message: `harness ${harness.name} has no agent graph to execute`,
          hint: "pass agentGraph when building the harness, or run a step directly with harness.run(step, input, ctx)"
        })
      }
      yield* validateDeliveryMode(enqueueOptions.deliveryMode, "deliveryMode")
      const threadId = enqueueOptions.threadId ?? DEFAULT_THREAD_ID
      const deliveryMode = enqueueOptions.deliveryMode ?? defaultMode
      // Not `??` around a `yield*`: the CommonJS build moves its right side into an arrow function.
      const executionId = enqueueOptions.executionId !== undefined ? enqueueOptions.executionId : yield* randomUuid
      const messageId = enqueueOptions.messageId !== undefined ? enqueueOptions.messageId : `msg-${yield* randomUuid}`
      const session = sessionOf(threadId)
      const interrupting = deliveryMode === "interrupt" && session.turn !== undefined
      const record: QueuedRecord = {
        version: 1,
        kind: "queued",
        threadId,
        messageId,
        executionId,
        deliveryMode,
        input,
        ...(enqueueOptions.resourceId === undefined ? {} : { resourceId: enqueueOptions.resourceId }),
        ...(enqueueOptions.cwd === undefined ? {} : { cwd: enqueueOptions.cwd }),
        order: interrupting ? --head : ++tail,
        enqueuedAt: Date.now(),
        continues: enqueueOptions.executionId !== undefined
      }
      // Accepted means durable: the record lands before the caller hears back.
      yield* persist(record)
      const message: Message = {
        record,
        state: enqueueOptions.state,
        context: enqueueOptions.context,
        completion: Deferred.makeUnsafe(),
        resumed: false
      }
      yield* accept(session, message)
      return {
        messageId,
        executionId,
        threadId,
        deliveryMode,
        completion: Deferred.await(message.completion)
      } satisfies Enqueued
    })

  const response = (threadId: string = DEFAULT_THREAD_ID) =>
    Effect.suspend(() => {
      const session = sessionOf(threadId)
      if (session.turn === undefined && session.queue.length === 0 && Option.isSome(session.last)) {
        return session.last.value
      }
      const waiter = Deferred.makeUnsafe<HarnessResponse, unknown>()
      session.waiters.push(waiter)
      return Deferred.await(waiter)
    })

  // `effect/Stream` is loaded when a stream is first asked for: importing the facade
  // (which every child process does) loads no stream stack (test/promise/ImportGraph.test.ts).
  const streamModule = Effect.promise(() => import("effect/Stream"))
  const events = (threadId: string = DEFAULT_THREAD_ID) =>
    Effect.map(streamModule, (S) => S.fromPubSub(sessionOf(threadId).pubsub))

  const resumeQueued = (resumeOptions: ResumeQueuedOptions = {}) =>
    Effect.gen(function*() {
      if (Option.isNone(storage)) return { threads: [] }
      const found = yield* storage.value.scan(sessionPrefix(harness.name))
      const histories = new Map<string, string>()
      const queued: Array<QueuedRecord> = []
      for (const [key, value] of found) {
        if (isQueuedRecord(value)) queued.push(value)
        else if (isHistoryRecord(value)) histories.set(value.threadId, value.executionId)
        else yield* logWarning(`session queue: the record at ${key} is not one this library wrote; skipped`)
      }
      // A message already queued here (accepted after this host started) is not queued twice.
      const known = new Set(Array.from(sessions.values(), (s) => [
        ...s.queue.map((m) => m.record.executionId),
        ...(s.turn === undefined ? [] : [s.turn.turnId])
      ]).flat())
      const byThread = new Map<string, Array<QueuedRecord>>()
      for (const record of queued.sort((a, b) => a.order - b.order)) {
        if (known.has(record.executionId)) continue
        byThread.set(record.threadId, [...(byThread.get(record.threadId) ?? []), record])
        tail = Math.max(tail, record.order)
        head = Math.min(head, record.order)
      }
      const threads: Array<{ readonly threadId: string; readonly messages: ReadonlyArray<Enqueued> }> = []
      for (const [threadId, records] of byThread) {
        const session = sessionOf(threadId)
        const last = histories.get(threadId)
        if (last !== undefined && session.turn === undefined && session.history.length === 0) {
          const restored = yield* harness.restore(last).pipe(
            Effect.catch((error) =>
              Effect.as(logWarning(`session ${threadId}: its history (execution ${last}) could not be restored`, error), Option.none())
            )
          )
          if (Option.isSome(restored)) session.history = restored.value.items
        }
        const messages = records.map((record): Message => ({
          record,
          state: resumeOptions.state,
          context: resumeOptions.context,
          completion: Deferred.makeUnsafe(),
          resumed: true
        }))
        session.queue.push(...messages)
        yield* kick(session)
        threads.push({
          threadId,
          messages: messages.map((m) => ({
            messageId: m.record.messageId,
            executionId: m.record.executionId,
            threadId,
            deliveryMode: m.record.deliveryMode,
            completion: Deferred.await(m.completion)
          }))
        })
      }
      return { threads }
    })

  return {
    enqueue,
    response,
    events,
    textStream: (threadId) => Effect.zipWith(streamModule, events(threadId), Streams.text),
    reasoningStream: (threadId) => Effect.zipWith(streamModule, events(threadId), Streams.reasoning),
    itemStream: (threadId) => Effect.zipWith(streamModule, events(threadId), Streams.items),
    queueSize: (threadId = DEFAULT_THREAD_ID) => sessions.get(threadId)?.queue.length ?? 0,
    status: (threadId = DEFAULT_THREAD_ID): SessionStatus => {
      const turn = sessions.get(threadId)?.turn
      if (turn === undefined) return { kind: "idle" }
      return turn.aborting
        ? { kind: "aborting", turnId: turn.turnId }
        : { kind: "generating", startedAt: turn.startedAt, turnId: turn.turnId }
    },
    abort: (threadId = DEFAULT_THREAD_ID, reason) =>
      Effect.suspend(() => {
        const session = sessions.get(threadId)
        return session === undefined ? Effect.void : abortTurn(session, reason)
      }),
    seedHistory: (threadId, items) => {
      sessionOf(threadId).history = [...items]
    },
    resumeQueued
  } satisfies Sessions
})
