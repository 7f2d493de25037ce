/**
 * What a session turn offers the steps that run in it (docs/architecture.md#sessions):
 * the session's event streams, its between-rounds inbox and its usage count. Outside a
 * turn (`harness.run`, `execute` of the engine without `Sessions`) the reference holds
 * `noSession`, whose every method does nothing, so a step never has to ask whether it
 * runs in a session.
 *
 * The tool loop of `callModel` uses it at each model round:
 *
 * - before round `n >= 1` it calls `betweenRounds(ctx, n)`: the messages queued on the
 *   session with `deliveryMode: 'between-rounds'` are appended to `ctx`'s item log as
 *   user items (and checkpointed) and handed back, so the next model request holds them;
 * - it hands over its `RunEvent`s (`runEvent`): the session publishes them in noetic's
 *   names and totals each round's usage into the turn's response.
 *
 * @since 0.2.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { RunEvent } from "../services/ModelProvider.ts"
import type { AgentContext, Item } from "./AgentContext.ts"
import { allowsEvent, type AnyStep, type EmitOption, runsAs } from "./Step.ts"

/** A provider (OpenResponses SSE) event, as noetic's `SdkStreamEvent`. */
export interface SdkStreamEvent {
  readonly source: "sdk"
  readonly type: string
  readonly data: Readonly<Record<string, unknown>>
  readonly outputIndex?: number
  readonly contentIndex?: number
}

/** A lifecycle event, `<harness name>:<event>`, as noetic's `FrameworkStreamEvent`. */
export interface FrameworkStreamEvent {
  readonly source: "framework"
  readonly type: `${string}:${string}`
  readonly data: Readonly<Record<string, unknown>>
}

/** One event of a session's full stream. */
export type StreamEvent = SdkStreamEvent | FrameworkStreamEvent

/** The session services of the turn a step runs in. */
export interface SessionTurnShape {
  /** The session's thread, or undefined outside a session turn. */
  readonly threadId: string | undefined
  /** The turn's id (its execution id), or undefined outside a session turn. */
  readonly turnId: string | undefined
  /** Publishes an event on the session's streams. */
  readonly emit: (event: StreamEvent) => Effect.Effect<void>
  /** Publishes the framework event `<harness name>:<name>` with `data`. */
  readonly emitFramework: (name: string, data: Readonly<Record<string, unknown>>) => Effect.Effect<void>
  /**
   * The between-rounds inbox, asked by the tool loop before model round `round`
   * (`round >= 1`) of a `callModel` on `ctx`. When `ctx` is the turn's own context, the
   * messages queued with `deliveryMode: 'between-rounds'` leave the queue, are appended
   * to `ctx` as user items, `ctx` is checkpointed, `item_appended` and `inbox_injected`
   * are published, and the appended items are returned. Otherwise (a child context,
   * no session, nothing queued) it returns no items and changes nothing.
   */
  readonly betweenRounds: (ctx: AgentContext, round: number) => Effect.Effect<ReadonlyArray<Item>>
  /**
   * Takes one event of the tool loop (`RunEvent`): the session publishes it on its
   * streams in noetic's names and totals the rounds' usage into the turn's response
   * (not with `counted: false`: a direct `harness.callModel`'s usage is its caller's, as
   * in noetic, where only steps charge the context).
   */
  readonly runEvent: (event: RunEvent, emit?: EmitOption, options?: { readonly counted?: boolean }) => Effect.Effect<void>
}

/** The services of no session: nothing is published, nothing is injected, nothing counted. */
export const noSession: SessionTurnShape = {
  threadId: undefined,
  turnId: undefined,
  emit: () => Effect.void,
  emitFramework: () => Effect.void,
  betweenRounds: () => Effect.succeed([]),
  runEvent: () => Effect.void
}

const boundTurns = new WeakMap<object, SessionTurnShape>()

/**
 * Binds a turn's services to the turn's root context while it runs, so a call given
 * that context from outside the turn's fiber (noetic's `harness.callModel({ ..., ctx })`
 * from a Promise step body) still reaches the session's streams. `unbind` when it ends.
 */
export const bindTurn = (ctx: AgentContext, turn: SessionTurnShape): void => void boundTurns.set(ctx, turn)
export const unbindTurn = (ctx: AgentContext): void => void boundTurns.delete(ctx)

/**
 * The session turn `ctx` runs in: the one bound to it, to the context a step's view of it
 * is made from (its prototype), or to a parent (a spawned child streams to its parent's
 * session, as noetic's broadcaster lookup walks the parents); `noSession` when none is.
 */
export const turnOf = (ctx: AgentContext): SessionTurnShape => {
  for (let context: AgentContext | undefined = ctx; context !== undefined; context = context.parent) {
    for (let at: object | null = context; at !== null && at !== Object.prototype; at = Object.getPrototypeOf(at)) {
      const turn = boundTurns.get(at)
      if (turn !== undefined) return turn
    }
  }
  return noSession
}

/** The session turn of the running step; `noSession` outside one. */
export const SessionTurn: Context.Reference<SessionTurnShape> = Context.Reference<SessionTurnShape>(
  "noetic-effect/SessionTurn",
  { defaultValue: () => noSession }
)

/**
 * noetic's `AgentHooks` in Effect form: `beforeStep` before a step's dispatch runs (or
 * replays), `afterStep` once it completed, with its output. A hook that fails fails the step.
 */
export interface StepHooks {
  readonly beforeStep?: ((step: AnyStep, ctx: AgentContext) => Effect.Effect<void, unknown>) | undefined
  readonly afterStep?: ((step: AnyStep, output: unknown, ctx: AgentContext) => Effect.Effect<void, unknown>) | undefined
}

const toolLoopSteps = new WeakSet<object>()

/**
 * Marks a step the tool loop makes for itself (a model round, a tool call): noetic has
 * no such steps, so the session publishes no `step_started` / `step_completed` for it
 * and the harness's `beforeStep` / `afterStep` hooks are not called for it.
 */
export const toolLoopStep = <S extends object>(step: S): S => {
  toolLoopSteps.add(step)
  return step
}

/**
 * A step's dispatch `run`, observed: `step_started` before it and `step_completed`
 * after it succeeded on the session's streams (noetic's interpreter events, data
 * `{ stepId, kind }`), and the harness's step hooks around it.
 */
export const observeStep = <A, E, R>(
  hooks: StepHooks | undefined,
  step: AnyStep,
  ctx: AgentContext,
  run: Effect.Effect<A, E, R>
): Effect.Effect<A, unknown, R> =>
  // The tool loop's own steps are no steps of noetic's: neither the streams nor the hooks see them.
  toolLoopSteps.has(step) ? run : SessionTurn.use((turn) => {
    const data = { stepId: step.id, kind: step.kind }
    const before = hooks?.beforeStep
    const after = hooks?.afterStep
    // A callModel's `emit` gates its step events too, as noetic's interpreter does.
    const runs = runsAs(step)
    const emit = runs.kind === "callModel" ? runs.emit : undefined
    const framework = (name: string) => allowsEvent(emit, name, data) ? turn.emitFramework(name, data) : Effect.void
    return framework("step_started").pipe(
      Effect.andThen(before === undefined ? Effect.void : Effect.suspend(() => before(step, ctx))),
      Effect.andThen(run),
      Effect.tap((output) =>
        Effect.andThen(
          after === undefined ? Effect.void : Effect.suspend(() => after(step, output, ctx)),
          framework("step_completed")
        )
      )
    )
  })

/**
 * The items an `execute` input adds to its turn's item log (noetic's `inputToItems`):
 * a non-empty string becomes one user message, an item (an object with a string
 * `type`) itself, an array of items those items. Any other input (a number, a plain
 * object) is the root step's input only and adds nothing.
 */
export const inputItems = (input: unknown, id: string): ReadonlyArray<Item> => {
  if (typeof input === "string") {
    return input.length === 0 ? [] : [{
      id,
      type: "message",
      role: "user",
      status: "completed",
      content: [{ type: "input_text", text: input }]
    }]
  }
  if (isItem(input)) return [input]
  if (Array.isArray(input) && input.length > 0 && input.every(isItem)) return input
  return []
}

const isItem = (value: unknown): value is Item =>
  typeof value === "object" && value !== null && !Array.isArray(value) &&
  typeof (value as { readonly type?: unknown }).type === "string"

/**
 * Whether `items` ends with a user message whose text is `text`: a session turn puts
 * its input in the log before the root runs, so a `callModel` given that same input
 * does not add it a second time.
 */
export const endsWithUserText = (items: ReadonlyArray<Item>, text: string): boolean => {
  const last = items[items.length - 1]
  if (last === undefined || last.type !== "message" || last.role !== "user") return false
  const content = last.content
  if (typeof content === "string") return content === text
  return Array.isArray(content) && content.length === 1 && typeof content[0] === "object" && content[0] !== null &&
    (content[0] as { readonly text?: unknown }).text === text
}
