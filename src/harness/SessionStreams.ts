/**
 * The derived streams of a session (docs/architecture.md#sessions): text deltas,
 * reasoning deltas and cumulative item snapshots, each read off the session's full
 * event stream as noetic's `getTextStream`, `getReasoningStream` and `getItemStream`
 * read theirs.
 *
 * @since 0.2.0
 */
import * as Stream from "effect/Stream"
import type { Item } from "./AgentContext.ts"
import type { StreamEvent } from "./SessionTurn.ts"

/** An item as it streams: complete once the provider (or the framework) says so. */
export type StreamingItem = Item & { readonly isComplete: boolean }

const deltaOf = (event: StreamEvent, type: string): ReadonlyArray<string> =>
  event.source === "sdk" && event.type === type && typeof event.data.delta === "string" ? [event.data.delta] : []

/** The text deltas (`response.output_text.delta`). */
export const text = (events: Stream.Stream<StreamEvent>): Stream.Stream<string> =>
  Stream.mapAccum(events, () => undefined, (s, event) => [s, deltaOf(event, "response.output_text.delta")])

/** The reasoning deltas (`response.reasoning.delta`). */
export const reasoning = (events: Stream.Stream<StreamEvent>): Stream.Stream<string> =>
  Stream.mapAccum(events, () => undefined, (s, event) => [s, deltaOf(event, "response.reasoning.delta")])

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
export const items = (events: Stream.Stream<StreamEvent>): Stream.Stream<StreamingItem> =>
  Stream.mapAccum(events, (): ItemState => ({ round: 0, open: new Map() }), step)
