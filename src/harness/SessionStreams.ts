/**
 * The derived streams of a session (docs/architecture.md#sessions): text deltas,
 * reasoning deltas and cumulative item snapshots, each read off the session's full
 * event stream as noetic's `getTextStream`, `getReasoningStream` and `getItemStream`
 * read theirs.
 *
 * @since 0.2.0
 */
import type * as Stream from "effect/Stream"

/** The `effect/Stream` module, loaded by the caller when a stream is first asked for. */
export type StreamModule = typeof Stream
import type { Item } from "./AgentContext.ts"
import type { RunEvent } from "../services/ModelProvider.ts"
import type { StreamEvent } from "./SessionTurn.ts"

/** An item as it streams: complete once the provider (or the framework) says so. */
export type StreamingItem = Item & { readonly isComplete: boolean }

const deltaOf = (event: StreamEvent, type: string): ReadonlyArray<string> =>
  event.source === "sdk" && event.type === type && typeof event.data.delta === "string" ? [event.data.delta] : []

/** The text deltas (`response.output_text.delta`). */
export const text = (S: StreamModule, events: Stream.Stream<StreamEvent>): Stream.Stream<string> =>
  S.mapAccum(events, () => undefined, (s, event) => [s, deltaOf(event, "response.output_text.delta")])

/** The reasoning deltas (`response.reasoning.delta`). */
export const reasoning = (S: StreamModule, events: Stream.Stream<StreamEvent>): Stream.Stream<string> =>
  S.mapAccum(events, () => undefined, (s, event) => [s, deltaOf(event, "response.reasoning.delta")])

interface Accumulator {
  item: Record<string, unknown>
  isComplete: boolean
}

interface ItemState {
  /** Bumped at every `response.created`: output indexes restart with each model round. */
  round: number
  readonly open: Map<string, Accumulator>
}

const snapshot = (acc: Accumulator): StreamingItem => ({
  ...(acc.item as Item),
  ...(acc.isComplete && "status" in acc.item ? { status: "completed" } : {}),
  isComplete: acc.isComplete
})

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

/** The item an `output_item.added` opens: a message with empty text, a function call with empty arguments. */
const opened = (given: Record<string, unknown>): Record<string, unknown> => {
  const id = typeof given.id === "string" ? given.id : crypto.randomUUID()
  if (given.type === "message") {
    return { id, type: "message", role: "assistant", status: "in_progress", content: [{ type: "output_text", text: "" }] }
  }
  if (given.type === "function_call") {
    return {
      ...given,
      id,
      type: "function_call",
      status: "in_progress",
      callId: typeof given.callId === "string" ? given.callId : typeof given.call_id === "string" ? given.call_id : "",
      name: typeof given.name === "string" ? given.name : "",
      arguments: ""
    }
  }
  return { ...given, id }
}

const step = (state: ItemState, event: StreamEvent): readonly [ItemState, ReadonlyArray<StreamingItem>] => {
  if (event.source === "framework") {
    // Framework-authored items (turn inputs, injected messages, tool results) arrive whole.
    if (event.type.endsWith(":item_appended") && isRecord(event.data.item)) {
      return [state, [{ ...(event.data.item as Item), isComplete: true }]]
    }
    return [state, []]
  }
  if (event.type === "response.created") {
    state.round++
    return [state, []]
  }
  const key = `${state.round}:${event.outputIndex ?? 0}`
  if (event.type === "response.output_item.added") {
    if (!isRecord(event.data.item)) return [state, []]
    const acc: Accumulator = { item: opened(event.data.item), isComplete: false }
    state.open.set(`${state.round}:${event.outputIndex ?? state.open.size}`, acc)
    return [state, [snapshot(acc)]]
  }
  const acc = state.open.get(key)
  if (acc === undefined) return [state, []]
  switch (event.type) {
    case "response.output_item.done": {
      if (isRecord(event.data.item)) acc.item = { ...event.data.item }
      acc.isComplete = true
      state.open.delete(key)
      return [state, [snapshot(acc)]]
    }
    case "response.output_text.delta": {
      const content = acc.item.content
      const last = Array.isArray(content) ? content[content.length - 1] : undefined
      if (typeof event.data.delta === "string" && isRecord(last) && typeof last.text === "string") {
        acc.item = {
          ...acc.item,
          content: [...(content as Array<unknown>).slice(0, -1), { ...last, text: last.text + event.data.delta }]
        }
      }
      return [state, [snapshot(acc)]]
    }
    case "response.output_text.done":
    case "response.function_call_arguments.done": {
      acc.isComplete = true
      return [state, [snapshot(acc)]]
    }
    case "response.function_call_arguments.delta": {
      if (typeof event.data.delta === "string" && typeof acc.item.arguments === "string") {
        acc.item = { ...acc.item, arguments: acc.item.arguments + event.data.delta }
      }
      return [state, [snapshot(acc)]]
    }
    default:
      return [state, []]
  }
}

/** Cumulative item snapshots, keyed by model round and output index so rounds and turns never collide. */
export const items = (S: StreamModule, events: Stream.Stream<StreamEvent>): Stream.Stream<StreamingItem> =>
  S.mapAccum(events, (): ItemState => ({ round: 0, open: new Map() }), step)

/** What translating one turn's run events keeps: the items open in the current round and their output indexes. */
export interface RunEventState {
  readonly open: Map<string, number>
}

export const newRunEventState = (): RunEventState => ({ open: new Map() })

/**
 * A `RunEvent` of the tool loop as the session streams publish it, in noetic's names:
 * provider deltas as `sdk` events (`response.created` per round, `output_item.added`
 * when an item starts streaming, `output_text.delta`, `reasoning.delta`,
 * `function_call_arguments.delta`, `output_item.done` when it lands), the lifecycle as
 * framework events (`model_call_started`, `model_call_first_event`, `model_call_stalled`,
 * `model_call_completed`, `tool_round_started`, `tool_call_started`, `tool_call_progress`,
 * `tool_call_completed`, `tool_round_completed`), and an item that did not stream (a tool result, a replayed
 * round's items) as `item_appended`.
 */
export const fromRunEvent = (
  state: RunEventState,
  event: RunEvent,
  harness: string
): ReadonlyArray<StreamEvent> => {
  const framework = (name: string, data: Readonly<Record<string, unknown>>): StreamEvent => ({
    source: "framework",
    type: `${harness}:${name}`,
    data
  })
  const sdk = (type: string, data: Readonly<Record<string, unknown>>, outputIndex?: number): StreamEvent =>
    outputIndex === undefined ? { source: "sdk", type, data } : { source: "sdk", type, data, outputIndex }
  const opening = (id: string, item: Readonly<Record<string, unknown>>): Array<StreamEvent> => {
    if (state.open.has(id)) return []
    state.open.set(id, state.open.size)
    return [sdk("response.output_item.added", { item }, state.open.get(id))]
  }
  switch (event.type) {
    case "model_call_started":
      state.open.clear()
      return [
        sdk("response.created", { model: event.model }),
        framework("model_call_started", {
          round: event.round,
          model: event.model,
          messageCount: event.messageCount,
          toolCount: event.toolCount
        })
      ]
    case "model_call_first_event":
      return [framework("model_call_first_event", { round: event.round, model: event.model })]
    case "model_call_stalled":
      return [framework("model_call_stalled", { round: event.round, model: event.model, idleTimeoutMs: event.idleTimeoutMs })]
    case "tool_round_started":
    case "tool_round_completed":
      return [framework(event.type, { round: event.round, toolCount: event.toolCount })]
    case "model_call_completed":
      return [
        framework("model_call_completed", {
          round: event.round,
          model: event.model,
          itemCount: event.itemCount,
          usage: event.usage,
          ...(event.cost === undefined ? {} : { cost: event.cost }),
          replayed: event.replayed
        })
      ]
    case "text_delta":
      return [
        ...opening(event.itemId, { type: "message", id: event.itemId }),
        sdk("response.output_text.delta", { delta: event.delta, itemId: event.itemId }, state.open.get(event.itemId))
      ]
    case "reasoning_delta":
      return [sdk("response.reasoning.delta", { delta: event.delta, itemId: event.itemId })]
    case "tool_call_delta":
      return [
        ...opening(event.callId, { type: "function_call", id: event.callId, callId: event.callId, name: event.name }),
        sdk(
          "response.function_call_arguments.delta",
          { delta: event.argumentsDelta, callId: event.callId },
          state.open.get(event.callId)
        )
      ]
    case "item": {
      // A tool result shares its call's callId, but it is the framework's item, not the streamed call.
      const key = event.item.type === "function_call_output"
        ? undefined
        : [event.item.id, event.item.callId].find((k): k is string => typeof k === "string" && state.open.has(k))
      return key === undefined
        ? [framework("item_appended", { item: event.item })]
        : [sdk("response.output_item.done", { item: event.item }, state.open.get(key))]
    }
    case "tool_call_started":
      return [framework("tool_call_started", { callId: event.callId, name: event.name, arguments: event.arguments })]
    case "tool_call_progress":
      return [framework("tool_call_progress", { callId: event.callId, name: event.name, event: event.event })]
    case "tool_call_completed":
      return [
        framework("tool_call_completed", {
          callId: event.callId,
          name: event.name,
          output: event.output,
          error: event.error,
          replayed: event.replayed
        })
      ]
  }
}
