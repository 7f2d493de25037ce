/**
 * noetic's long-term memory layers in the engine's form: `observations()` (buffered
 * conversation text distilled into observations) and `temporal()` (a timestamped
 * fact ledger with date grounding and a search tool). Both buffer text from `store`
 * (the model's output) and from the append hook (user input and tool output), and
 * distil once the buffer passes a token threshold; docs/layers-and-channels.md#built-in-layers.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { logWarning } from "../internal/diagnostics.ts"
import type { AgentContext, ContextLayer, Item } from "./AgentContext.ts"
import { Slot } from "./BuiltinLayers.ts"
import { type ContextScope, timeoutOf, withHookTimeout } from "./LayerHooks.ts"
import { estimateTokens, message } from "./LayerLifecycle.ts"

type Part = { readonly type?: unknown; readonly text?: unknown }

const partsOf = (item: Item): ReadonlyArray<Part> =>
  typeof item.content === "string" ? [{ type: "output_text", text: item.content }] : Array.isArray(item.content) ? item.content : []

/** The model's text in `items`, one string per assistant message (noetic's `collectOutputText`). */
export const collectOutputText = (items: ReadonlyArray<Item>): Array<string> =>
  items
    .filter((item) => item.type === "message" && item.role === "assistant")
    .map((item) => partsOf(item).filter((p) => p.type === "output_text" && typeof p.text === "string").map((p) => p.text as string).join(""))
    .filter((text) => text.length > 0)

/** The text of messages and tool outputs in `items` (noetic's `collectInputText`). */
export const collectInputText = (items: ReadonlyArray<Item>): Array<string> => {
  const texts: Array<string> = []
  for (const item of items) {
    if (item.type === "message") {
      const text = partsOf(item).filter((p) => typeof p.text === "string").map((p) => p.text as string).join("")
      if (text.length > 0) texts.push(text)
    } else if (item.type === "function_call_output" && typeof item.output === "string" && item.output.length > 0) {
      texts.push(item.output)
    }
  }
  return texts
}

interface Buffered {
  readonly buffer: ReadonlyArray<string>
  readonly bufferTokens: number
  readonly version: number
}

/**
 * Adds `texts` to the buffer; once it holds `threshold` tokens, `distil` folds it into
 * the state (and the buffer empties, the version goes up).
 */
const accumulate = <S extends Buffered, E>(
  state: S,
  texts: ReadonlyArray<string>,
  threshold: number,
  distil: ((buffer: ReadonlyArray<string>) => Effect.Effect<S, E>) | undefined
): Effect.Effect<S, E> => {
  const buffer = [...state.buffer, ...texts]
  const bufferTokens = state.bufferTokens + texts.reduce((sum, text) => sum + estimateTokens(text), 0)
  if (distil !== undefined && bufferTokens >= threshold && buffer.length > 0) return distil(buffer)
  return Effect.succeed({ ...state, buffer, bufferTokens })
}

/**
 * An append hook that buffers the input text of the items on their way in (and
 * passes them on unchanged) under the layer's `onItemAppend` timeout; a failure or
 * timeout keeps the state and is warned of, as the append pipeline does for any hook.
 */
const bufferingAppend = <S>(
  layerId: string,
  timeout: number,
  empty: () => S,
  fold: (state: S, texts: ReadonlyArray<string>, ctx: AgentContext) => Effect.Effect<S, unknown>
): NonNullable<ContextLayer<S>["appendEffect"]> =>
({ items, state, ctx }) => {
  const texts = collectInputText(items)
  if (texts.length === 0) return Effect.succeed({ items })
  return withHookTimeout(fold(state ?? empty(), texts, ctx), layerId, "onItemAppend", timeout).pipe(
    Effect.map((next) => ({ items, state: next })),
    Effect.catch((error) => Effect.as(logWarning(`context layer '${layerId}': onItemAppend failed`, error), { items }))
  )
}

// -----------------------------------------------------------------------------
// observations
// -----------------------------------------------------------------------------

/** The observations layer's state (noetic's `ObservationsState`). */
export interface ObservationsState extends Buffered {
  readonly observations: ReadonlyArray<string>
}

const emptyObservations = (): ObservationsState => ({ observations: [], buffer: [], bufferTokens: 0, version: 0 })

const renderObservations = (observations: ReadonlyArray<string>): string =>
  `<observations>\n${observations.map((o) => `- ${o}`).join("\n")}\n</observations>`

/** Options of `observations()` (noetic's `ObservationsConfig`), the observer an Effect. */
export interface ObservationsOptions {
  readonly bufferThreshold?: number | undefined
  readonly maxObservations?: number | undefined
  readonly scope?: "thread" | "resource" | undefined
  /** Distils the buffered texts into observations; none: `Processed N items`. */
  readonly observer?: ((buffer: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, unknown>) | undefined
}

/**
 * noetic's observations: conversation text (the model's output at `store`, user
 * input and tool output as it is appended) is buffered; at `bufferThreshold` tokens
 * (default 2000) the `observer` distils the buffer into observations, the newest
 * `maxObservations` (default 50) kept. Recalled as an `<observations>` bullet list,
 * the newest that fit the budget. Scope `resource` by default; a child inherits a copy.
 */
export const observations = (options: ObservationsOptions = {}): ContextLayer<ObservationsState> => {
  const maxObservations = options.maxObservations ?? 50
  const threshold = options.bufferThreshold ?? 2_000
  const timeouts = { store: 60_000, onItemAppend: 60_000 }
  const distil = (state: ObservationsState) => (buffer: ReadonlyArray<string>) =>
    Effect.map(
      options.observer === undefined ? Effect.succeed([`Processed ${buffer.length} items`]) : options.observer(buffer),
      (distilled): ObservationsState => ({
        observations: [...state.observations, ...distilled].slice(-maxObservations),
        buffer: [],
        bufferTokens: 0,
        version: state.version + 1
      })
    )
  const fold = (state: ObservationsState, texts: ReadonlyArray<string>) => accumulate(state, texts, threshold, distil(state))
  return {
    id: "observations",
    name: "Observations",
    slot: Slot.OBSERVATIONS,
    scope: options.scope ?? "resource",
    budget: { min: 500, max: 2_500 },
    timeouts,
    lifecycle: {
      init: ({ storage }) => Effect.map(storage.get("state"), (saved) => ({ state: (saved as ObservationsState | null) ?? emptyObservations() })),
      recall: ({ state, budget }) =>
        Effect.sync(() => {
          const all = state?.observations ?? []
          for (let start = 0; start < all.length; start++) {
            const text = renderObservations(all.slice(start))
            if (estimateTokens(text) <= budget) return { items: [message(text, "developer")], tokenCount: estimateTokens(text) }
          }
          return null
        }),
      store: ({ newItems, state }) => Effect.map(fold(state ?? emptyObservations(), collectOutputText(newItems)), (next) => ({ state: next })),
      onSpawn: ({ parentState }) => Effect.sync(() => ({ childState: structuredClone(parentState) }))
    },
    appendEffect: bufferingAppend("observations", timeoutOf(timeouts, "onItemAppend"), emptyObservations, fold)
  }
}

// -----------------------------------------------------------------------------
// temporal
// -----------------------------------------------------------------------------

/** A remembered fact and the instant it belongs to (ISO-8601). */
export interface TemporalFact {
  readonly ts: string
  readonly fact: string
}

/** What `temporal/searchMemory` answers: matching facts, and a resolved (maybe approximate) date. */
export interface TemporalSearchResult {
  readonly facts: ReadonlyArray<string>
  readonly date?: string | undefined
  readonly fuzzy?: boolean | undefined
}

/** The temporal layer's state: facts by ISO timestamp, and the text not yet extracted from. */
export interface TemporalState extends Buffered {
  readonly facts: Readonly<Record<string, ReadonlyArray<string>>>
}

/** Options of `temporal()` (noetic's `TemporalConfig`), the callbacks Effects. */
export interface TemporalOptions {
  /** "Now" for grounding and extraction; default the `Clock`. */
  readonly now?: (() => Date) | undefined
  readonly scope?: ContextScope | undefined
  /** Extracts timestamped facts from the buffered transcript; none: the layer only buffers. */
  readonly extract?: ((input: { readonly transcript: string; readonly now: string }) => Effect.Effect<ReadonlyArray<TemporalFact>, unknown>) | undefined
  /** Answers `temporal/searchMemory`; none: the tool returns the whole ledger. */
  readonly search?: ((input: {
    readonly query: string
    readonly facts: ReadonlyArray<TemporalFact>
    readonly now: string
  }) => Effect.Effect<TemporalSearchResult, unknown>) | undefined
  readonly bufferThreshold?: number | undefined
  readonly maxFacts?: number | undefined
  readonly groundDateTime?: boolean | undefined
  readonly injectLedger?: boolean | undefined
}

const emptyTemporal = (): TemporalState => ({ facts: {}, buffer: [], bufferTokens: 0, version: 0 })

const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"] as const

const pad = (n: number) => String(n).padStart(2, "0")

/** `YYYY/MM/DD (Ddd) HH:MM` in local time, as noetic grounds dates. */
export const formatNow = (date: Date): string =>
  `${date.getFullYear()}/${pad(date.getMonth() + 1)}/${pad(date.getDate())} (${WEEKDAYS[date.getDay()]}) ${pad(date.getHours())}:${
    pad(date.getMinutes())
  }`

const dateTimeBlock = (date: Date): string =>
  [
    "<current_datetime>",
    `Now: ${formatNow(date)}`,
    "Resolve relative time (\"N days/weeks/months ago\", \"last/next <weekday>\",",
    "\"before/after\", \"first/earliest/most recent\", \"how long since/until\") against",
    "Now above and compute the difference explicitly before answering. Use the",
    "temporal/searchMemory tool to look up when something happened.",
    "</current_datetime>"
  ].join("\n")

const byTime = (a: TemporalFact, b: TemporalFact) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0)

/** The ledger as one list, oldest first. */
const factsOf = (facts: TemporalState["facts"]): Array<TemporalFact> =>
  Object.entries(facts).flatMap(([ts, list]) => list.map((fact) => ({ ts, fact }))).sort(byTime)

/** Adds `incoming` (a fact already at its instant is not repeated), keeping the newest `maxFacts` facts. */
const mergeFacts = (facts: TemporalState["facts"], incoming: ReadonlyArray<TemporalFact>, maxFacts: number): TemporalState["facts"] => {
  const merged: Record<string, Array<string>> = {}
  for (const [ts, list] of Object.entries(facts)) merged[ts] = [...list]
  for (const { fact, ts } of incoming) {
    const list = merged[ts] ?? []
    if (!list.includes(fact)) list.push(fact)
    merged[ts] = list
  }
  const all = factsOf(merged)
  if (all.length <= maxFacts) return merged
  // Capped per fact, not per instant: one large extraction cannot evict the newest facts.
  const capped: Record<string, Array<string>> = {}
  for (const { fact, ts } of all.slice(all.length - maxFacts)) (capped[ts] ??= []).push(fact)
  return capped
}

/** The `<remembered_facts>` block with the newest facts that fit `budget`; null when none does. */
const ledgerBlock = (facts: ReadonlyArray<TemporalFact>, budget: number): string | null => {
  const open = "<remembered_facts>"
  const close = "</remembered_facts>"
  const lines: Array<string> = []
  for (const f of [...facts].reverse()) {
    const line = `- [${f.ts}] ${f.fact}`
    if (estimateTokens([open, ...lines, line, close].join("\n")) > budget) break
    lines.push(line)
  }
  return lines.length === 0 ? null : [open, ...lines, close].join("\n")
}

/**
 * noetic's temporal memory: a `<current_datetime>` grounding block on recall (unless
 * `groundDateTime: false`), optionally the fact ledger (`injectLedger`), and the tool
 * `temporal/searchMemory`. Buffered conversation text is handed to `extract` at
 * `bufferThreshold` tokens (default 2000) and its facts merged into the ledger keyed
 * by ISO timestamp (newest `maxFacts`, default 200, kept). Without `extract` nothing
 * is ever extracted. Slot 80, scope `resource`, placed `live` while it grounds the date.
 */
export const temporal = (options: TemporalOptions = {}): ContextLayer<TemporalState> => {
  const threshold = options.bufferThreshold ?? 2_000
  const maxFacts = options.maxFacts ?? 200
  const groundDateTime = options.groundDateTime ?? true
  const injectLedger = options.injectLedger ?? false
  const timeouts = { store: 60_000, onItemAppend: 60_000 }
  const now: Effect.Effect<Date> = options.now === undefined
    ? Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
    : Effect.sync(options.now)
  const extract = options.extract
  const fold = (state: TemporalState, texts: ReadonlyArray<string>) =>
    accumulate(
      state,
      texts,
      threshold,
      extract === undefined ? undefined : (buffer) =>
        Effect.gen(function*() {
          const at = yield* now
          const extracted = yield* extract({ transcript: buffer.join("\n"), now: formatNow(at) })
          return { facts: mergeFacts(state.facts, extracted, maxFacts), buffer: [], bufferTokens: 0, version: state.version + 1 }
        })
    )
  return {
    id: "temporal",
    name: "Temporal",
    slot: Slot.REMINDER,
    scope: options.scope ?? "resource",
    // The date block changes every turn: anchored, it would re-bill the window each time.
    placement: groundDateTime ? "live" : "auto",
    budget: { min: 0, max: injectLedger ? 800 : 200 },
    timeouts,
    provides: {
      searchMemory: {
        kind: "function",
        description:
          "Search remembered facts about the user by topic or fact, and resolve relative time. Returns matching facts and, when the query implies a time, a resolved date (which may be approximate).",
        input: Schema.toStandardJSONSchemaV1(Schema.toStandardSchemaV1(Schema.Struct({ query: Schema.String }))),
        execute: (args: { readonly query: string }, state: TemporalState) => {
          const facts = factsOf((state ?? emptyTemporal()).facts)
          if (options.search === undefined) return Effect.succeed({ result: { facts: facts.map((f) => `[${f.ts}] ${f.fact}`) } })
          const search = options.search
          return Effect.flatMap(now, (at) =>
            Effect.map(search({ query: args.query, facts, now: formatNow(at) }), (result) => ({ result })))
        }
      }
    },
    lifecycle: {
      init: ({ storage }) => Effect.map(storage.get("state"), (saved) => ({ state: (saved as TemporalState | null) ?? emptyTemporal() })),
      recall: ({ state, budget }) =>
        Effect.map(now, (at) => {
          const blocks: Array<string> = groundDateTime ? [dateTimeBlock(at)] : []
          if (injectLedger) {
            // What the date block (and its separator) took comes off the ledger's share.
            const used = blocks.length > 0 ? estimateTokens(`${blocks.join("\n\n")}\n\n`) : 0
            const block = ledgerBlock(factsOf((state ?? emptyTemporal()).facts), budget - used)
            if (block !== null) blocks.push(block)
          }
          if (blocks.length === 0) return null
          const text = blocks.join("\n\n")
          return { items: [message(text, "developer")], tokenCount: estimateTokens(text) }
        }),
      store: ({ newItems, state }) => Effect.map(fold(state ?? emptyTemporal(), collectOutputText(newItems)), (next) => ({ state: next })),
      onSpawn: ({ parentState }) => Effect.sync(() => ({ childState: structuredClone(parentState) }))
    },
    appendEffect: bufferingAppend("temporal", timeoutOf(timeouts, "onItemAppend"), emptyTemporal, fold)
  }
}
