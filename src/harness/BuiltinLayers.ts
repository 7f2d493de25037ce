/**
 * noetic's built-in context layers as factories, in the engine's form (Effect
 * hooks): `scratchpad()`, `history()`, `instructions()`,
 * `taskState()`, `toolCalls()`. The facade exports them
 * under noetic's names; docs/layers-and-channels.md#built-in-layers.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ContextLayer, Item } from "./AgentContext.ts"
import type { ContextScope } from "./LayerHooks.ts"
import { estimateTokens, message, parseWith } from "./LayerLifecycle.ts"

/** noetic's slot constants. */
export const Slot = {
  REMINDER: 80,
  STEERING: 90,
  SCRATCHPAD: 100,
  WORKING_MEMORY: 100,
  ENTITY: 150,
  OBSERVATIONS: 200,
  PROCEDURAL: 250,
  EPISODIC: 300,
  RAG: 350,
  SEMANTIC_RECALL: 400
} as const

/** A built-in layer's options out of range (noetic's `INVALID_HISTORY_MAX_ITEMS` ...). */
export class LayerOptionInvalid extends Schema.TaggedError<LayerOptionInvalid>("noetic-effect/LayerOptionInvalid")(
  "LayerOptionInvalid",
  { code: Schema.String, message: Schema.String, hint: Schema.String }
) {}

/** The scratchpad's state: free text, or an object when a schema is given. */
export type ScratchpadState = string | Record<string, unknown>

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const deepMerge = (target: Record<string, unknown>, source: Record<string, unknown>, depth = 0): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...target }
  for (const [key, value] of Object.entries(source)) {
    if (key === "__proto__" || key === "constructor") continue
    const existing = out[key]
    out[key] = isPlainObject(value) && depth < 32
      ? deepMerge(isPlainObject(existing) ? existing : {}, value, depth + 1)
      : value
  }
  return out
}

const mergeInto = (state: ScratchpadState, args: Record<string, unknown>): ScratchpadState => {
  if (isPlainObject(state)) return deepMerge(state, args)
  const merged = deepMerge({}, args)
  return typeof state === "string" && state.length > 0 ? { ...merged, _previous: state } : merged
}

/** The arguments of the last function call named one of `names` among `items`. */
const lastCallArgs = (items: ReadonlyArray<Item>, names: ReadonlyArray<string>): Record<string, unknown> | undefined => {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i]!
    if (item.type !== "function_call" || !names.includes(String(item.name))) continue
    try {
      const parsed = typeof item.arguments === "string" ? JSON.parse(item.arguments) : item.arguments
      return isPlainObject(parsed) ? parsed : undefined
    } catch {
      return undefined
    }
  }
  return undefined
}

/**
 * noetic's scratchpad: notes the agent keeps across turns (scope `thread` by
 * default, so a thread's notes survive between executions when the storage is
 * durable). Recalled as a `<scratchpad>` developer message; updated by the model's
 * `scratchpad/update` tool calls (deep-merged, checked against `schema`), or by
 * `ctx.context.scratchpad.update(...)`; `readOnly` ignores the model's updates.
 */
export const scratchpad = (config: {
  readonly scope?: "thread" | "resource"
  readonly schema?: unknown
  readonly template?: string
  readonly readOnly?: boolean
} = {}): ContextLayer<ScratchpadState> => {
  const scope: ContextScope = config.scope ?? "thread"
  const checked = (merged: ScratchpadState) =>
    config.schema === undefined ? Effect.succeed(merged) : Effect.as(parseWith(config.schema, merged), merged)
  return {
    id: "scratchpad",
    name: "Scratchpad",
    slot: Slot.SCRATCHPAD,
    scope,
    budget: { min: 200, max: 1500 },
    provides: {
      snapshot: { kind: "data", read: (state: ScratchpadState) => state },
      update: {
        kind: "function",
        description: "Update the agent working context with new key-value pairs.",
        execute: (args: Record<string, unknown>, state: ScratchpadState) =>
          isPlainObject(args)
            ? Effect.map(checked(mergeInto(state ?? "", args)), (next) => ({ result: undefined, state: next }))
            : Effect.fail(new Error("scratchpad/update takes an object of key-value pairs"))
      }
    },
    lifecycle: {
      init: ({ storage }) =>
        Effect.gen(function*() {
          const saved = (yield* storage.get("state")) as ScratchpadState | null
          if (saved !== null && saved !== undefined && config.schema !== undefined) {
            const ok = yield* Effect.match(parseWith(config.schema, saved), { onFailure: () => false, onSuccess: () => true })
            if (!ok) return { state: {} }
          }
          return { state: saved ?? (config.schema !== undefined ? {} : config.template ?? "") }
        }),
      recall: ({ state }) =>
        Effect.sync(() => {
          if (!state || (isPlainObject(state) && Object.keys(state).length === 0)) return null
          const text = typeof state === "string" ? state : JSON.stringify(state, null, 2)
          const content = `<scratchpad>\n${text}\n</scratchpad>`
          return { items: [message(content, "developer")], tokenCount: estimateTokens(content) }
        }),
      store: ({ newItems, state }) => {
        if (config.readOnly === true) return Effect.succeed(undefined)
        // The tool call itself ran `update` through `provides`; this catches a reply that
        // only named it (noetic's implicit `updateWorkingMemory` too).
        const args = lastCallArgs(newItems, ["updateWorkingMemory"])
        return args === undefined ? Effect.succeed(undefined) : Effect.map(checked(mergeInto(state, args)), (next) => ({ state: next }))
      },
      onSpawn: ({ parentState }) =>
        Effect.sync(() => scope === "resource" ? { childState: structuredClone(parentState) } : null)
    }
  }
}

const isMessage = (item: Item, role: string) => item.type === "message" && item.role === role

/** Drops function calls without their output and outputs without their call (noetic's `stripUnresolvedToolCalls`). */
export const stripUnresolvedToolCalls = (items: ReadonlyArray<Item>): Array<Item> => {
  const outputs = new Set(items.filter((i) => i.type === "function_call_output").map((i) => String(i.callId)))
  const calls = new Set(items.filter((i) => i.type === "function_call").map((i) => String(i.callId)))
  return items.filter((item) =>
    !(item.type === "function_call" && !outputs.has(String(item.callId))) &&
    !(item.type === "function_call_output" && !calls.has(String(item.callId)))
  )
}

/**
 * noetic's history window: a read-side cap on the items projected to the model
 * (`maxItems`, default 40, an integer in [2, 10000]). Keeps at least one user and one
 * assistant message (growing the window up to 4 x maxItems), re-attaches a leading
 * system message, and drops tool calls or outputs whose pair fell outside. The
 * item log itself is never changed. Fails with `LayerOptionInvalid`
 * (`INVALID_HISTORY_MAX_ITEMS`) for a bad cap.
 */
export const history = (config: { readonly maxItems?: number } = {}): Effect.Effect<ContextLayer<null>, LayerOptionInvalid> => {
  const maxItems = config.maxItems ?? 40
  if (!Number.isInteger(maxItems) || maxItems < 2 || maxItems > 10_000) {
    return Effect.fail(
      new LayerOptionInvalid({
        code: "INVALID_HISTORY_MAX_ITEMS",
        message: `history: maxItems must be an integer in [2, 10000], got ${maxItems}`,
        hint: "Pass a sensible cap such as { maxItems: 40 }, or omit the layer to keep history uncapped."
      })
    )
  }
  return Effect.succeed({
    id: "history",
    name: "History",
    slot: Slot.PROCEDURAL + 25,
    scope: "execution",
    lifecycle: {
      init: () => Effect.succeed({ state: null }),
      projectHistory: ({ items }) =>
        Effect.sync(() => {
          if (items.length <= maxItems) return { items }
          let start = items.length - maxItems
          let needsUser = true
          let needsAssistant = true
          for (let i = items.length - 1; i >= start; i--) {
            if (isMessage(items[i]!, "user")) needsUser = false
            if (isMessage(items[i]!, "assistant")) needsAssistant = false
          }
          for (let i = start - 1; i >= 0 && (needsUser || needsAssistant); i--) {
            if (needsUser && isMessage(items[i]!, "user")) {
              needsUser = false
              start = i
            } else if (needsAssistant && isMessage(items[i]!, "assistant")) {
              needsAssistant = false
              start = i
            }
          }
          if (items.length - start > maxItems * 4) start = items.length - maxItems * 4
          const window = items.slice(start)
          const anchor = items.slice(0, Math.min(start, 4)).find((item) => isMessage(item, "system"))
          return { items: stripUnresolvedToolCalls(anchor === undefined ? window : [anchor, ...window]) }
        })
    }
  })
}

/**
 * noetic's instructions: content loaded once by `load` at init, wrapped in
 * `<tag>`, recalled as is in the anchor band (trimmed to the budget keeping the tag
 * well-formed; a budget of 0 or less does not trim).
 */
export const instructions = (options: {
  readonly id?: string
  readonly slot?: number
  readonly scope?: ContextScope
  readonly tag?: string
  readonly load: () => Effect.Effect<string, unknown>
}): ContextLayer<string> => {
  const tag = options.tag ?? "instructions"
  return {
    id: options.id ?? "instructions",
    name: "Instructions",
    slot: options.slot ?? Slot.SCRATCHPAD + 5,
    scope: options.scope ?? "resource",
    placement: "anchor",
    lifecycle: {
      init: () => Effect.map(options.load(), (text) => ({ state: text === "" ? "" : `<${tag}>\n${text}\n</${tag}>` })),
      recall: ({ state, budget }) =>
        Effect.sync(() => {
          if (!state) return null
          let content = state
          const close = `</${tag}>`
          if (budget > 0 && estimateTokens(content) > budget) {
            content = `${content.slice(0, Math.max(0, budget * 4 - close.length - 1))}\n${close}`
          }
          return { items: [message(content, "developer")], tokenCount: estimateTokens(content) }
        })
    }
  }
}

// -----------------------------------------------------------------------------
// taskState
// -----------------------------------------------------------------------------

/** The task-state layer's state (noetic's `TaskState`): checkpoints, file artifacts, free data. */
export interface TaskState {
  readonly checkpoints: ReadonlyArray<{ readonly timestamp: number; readonly depth: number }>
  readonly files: ReadonlyArray<string>
  readonly data: Readonly<Record<string, unknown>>
}

/** How a child's `data` merges into its parent's on return: spread over it, or kept whole under the child's id. */
export type TaskStateDataMerge = "shallow" | "namespace"

// A thread-scoped state written through at every store: without a cap it grows with every model call.
const MAX_CHECKPOINTS = 50

const emptyTaskState = (): TaskState => ({ checkpoints: [], files: [], data: {} })

const newestCheckpoints = (checkpoints: TaskState["checkpoints"]): TaskState["checkpoints"] =>
  checkpoints.length <= MAX_CHECKPOINTS ? checkpoints : checkpoints.slice(checkpoints.length - MAX_CHECKPOINTS)

const renderTaskState = (state: TaskState): string => `<task_state>\n${JSON.stringify(state, null, 2)}\n</task_state>`

/** A layer function's input schema: validated on call, and shown to the model as JSON Schema. */
const functionInput = <S extends Schema.Top>(schema: S) => Schema.toStandardJSONSchemaV1(Schema.toStandardSchemaV1(schema as never))

/**
 * noetic's task state: checkpoints (one per `store`, the newest 50 kept), file
 * artifacts and key-value data that persist across the executions of a thread.
 * Recalled as a `<task_state>` JSON block trimmed to the budget (oldest checkpoints
 * halved away first, then a char slice keeping the closing tag; budget 0: whole).
 * `onSpawn` always hands the child a copy; `onReturn` merges the child's checkpoints,
 * files and `data` (by `mergeData`); `onComplete` records `data.__outcome`. The model
 * writes through the tools `task-state/recordArtifact` and `task-state/setTaskData`.
 */
export const taskState = (options: { readonly mergeData?: TaskStateDataMerge } = {}): ContextLayer<TaskState> => {
  const mergeData = options.mergeData ?? "shallow"
  const checkpoint = (state: TaskState, depth: number) =>
    Effect.map(Clock.currentTimeMillis, (timestamp) => newestCheckpoints([...state.checkpoints, { timestamp, depth }]))
  return {
    id: "task-state",
    name: "Task State",
    slot: Slot.WORKING_MEMORY + 10,
    scope: "thread",
    budget: { min: 100, max: 800 },
    timeouts: { store: 30_000 },
    provides: {
      recordArtifact: {
        kind: "function",
        description:
          "Record a file this task produced or modified. Recorded paths survive the task boundary and merge back into the parent task.",
        input: functionInput(Schema.Struct({ path: Schema.NonEmptyString })),
        execute: (args: { readonly path: string }, state: TaskState) =>
          Effect.sync(() =>
            state.files.includes(args.path)
              ? { result: `Already recorded: ${args.path}`, state }
              : { result: `Recorded artifact: ${args.path}`, state: { ...state, files: [...state.files, args.path] } }
          )
      },
      setTaskData: {
        kind: "function",
        description:
          "Record a structured result for this task under a key (e.g. a PR url, a verdict, a summary). Values survive the task boundary and merge back into the parent task.",
        input: functionInput(Schema.Struct({ key: Schema.NonEmptyString, value: Schema.Unknown })),
        execute: (args: { readonly key: string; readonly value: unknown }, state: TaskState) =>
          Effect.sync(() =>
            // `onComplete` owns `__outcome`: a model writing it would make the recorded outcome unreliable.
            args.key === "__outcome"
              ? { result: "Cannot set reserved key \"__outcome\".", state }
              : { result: `Recorded ${args.key}.`, state: { ...state, data: { ...state.data, [args.key]: args.value } } }
          )
      }
    },
    lifecycle: {
      init: ({ storage }) => Effect.map(storage.get("state"), (saved) => ({ state: (saved as TaskState | null) ?? emptyTaskState() })),
      recall: ({ state, budget }) =>
        Effect.sync(() => {
          if (!state) return null
          let view = state
          let text = renderTaskState(view)
          if (budget > 0) {
            while (estimateTokens(text) > budget && view.checkpoints.length > 0) {
              view = { ...view, checkpoints: view.checkpoints.slice(Math.ceil(view.checkpoints.length / 2)) }
              text = renderTaskState(view)
            }
            if (estimateTokens(text) > budget) {
              const closing = "\n</task_state>"
              text = `${text.slice(0, Math.max(0, budget * 4 - closing.length))}${closing}`
            }
          }
          return { items: [message(text, "developer")], tokenCount: estimateTokens(text) }
        }),
      store: ({ state, ctx }) => {
        const current = state ?? emptyTaskState()
        return Effect.map(checkpoint(current, ctx.depth), (checkpoints) => ({ state: { ...current, checkpoints } }))
      },
      onSpawn: ({ parentState }) => Effect.sync(() => ({ childState: structuredClone(parentState), items: [] })),
      onReturn: ({ childState, parentState, childCtx }) =>
        Effect.sync(() => {
          const parent = parentState ?? emptyTaskState()
          return {
            parentState: {
              checkpoints: newestCheckpoints([...parent.checkpoints, ...childState.checkpoints]),
              files: [...new Set([...parent.files, ...childState.files])],
              data: mergeData === "shallow"
                ? { ...parent.data, ...childState.data }
                : { ...parent.data, [childCtx.id]: childState.data }
            }
          }
        }),
      onComplete: ({ state, outcome, ctx }) =>
        state === undefined || state === null
          ? Effect.succeed(undefined)
          : Effect.map(checkpoint(state, ctx.depth), (checkpoints) => ({
            state: { ...state, data: { ...state.data, __outcome: outcome }, checkpoints }
          }))
    }
  }
}

// -----------------------------------------------------------------------------
// toolCalls
// -----------------------------------------------------------------------------

/** State a tool keeps in a layer of its own (noetic's `ToolContextDeclaration`); tools with one `id` share it. */
export interface ToolContextDeclaration<S = any> {
  readonly id?: string | undefined
  readonly init: () => S
  readonly recall: (state: S) => string | null
}

/**
 * noetic's `toolCalls(tools, { slot? })`: one `execution`-scoped layer per distinct
 * `context.id` (else tool name) among the tools that declare a `context`; its state
 * starts as `init()` and is recalled as `recall(state)` (a developer message, none
 * for null). The tools read and write it through their context's layer state.
 */
export const toolCalls = (
  tools: ReadonlyArray<{ readonly name: string; readonly context?: ToolContextDeclaration | undefined }>,
  options: { readonly slot?: number | undefined } = {}
): Array<ContextLayer<unknown>> => {
  const seen = new Map<string, ToolContextDeclaration>()
  for (const tool of tools) {
    if (tool.context === undefined || tool.context === null) continue
    const id = tool.context.id ?? tool.name
    if (!seen.has(id)) seen.set(id, tool.context)
  }
  const slot = options.slot ?? Slot.WORKING_MEMORY + 10
  return [...seen].map(([id, declaration]): ContextLayer<unknown> => ({
    id,
    name: id,
    slot,
    scope: "execution",
    lifecycle: {
      init: () => Effect.sync(() => ({ state: declaration.init() })),
      recall: ({ state }) => Effect.sync(() => declaration.recall(state))
    }
  }))
}
