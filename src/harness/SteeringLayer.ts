/**
 * noetic's `steering(config)` in the engine's form: rules checked before each tool
 * call and after each model response, their most restrictive verdict returned, and
 * every check recorded in a bounded ledger; docs/layers-and-channels.md#built-in-layers.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { AgentContext, ContextLayer } from "./AgentContext.ts"
import { LayerOptionInvalid, Slot } from "./BuiltinLayers.ts"
import type { ContextScope, ModelResponse, SteeringDecision } from "./LayerHooks.ts"
import { estimateTokens, message, mostRestrictive } from "./LayerLifecycle.ts"

/** One ledger entry: a checked tool call, a checked model turn, or the outcome (noetic's `LedgerEntry`). */
export interface LedgerEntry {
  readonly kind: "tool_call" | "model_turn" | "custom"
  readonly timestamp: number
  readonly toolName?: string
  readonly toolArgs?: unknown
  readonly tokenUsage?: { readonly input: number; readonly output: number }
  readonly custom?: Readonly<Record<string, unknown>>
  readonly ruleId?: string
  readonly action?: SteeringDecision["action"]
  readonly guidance?: string
}

/** The steering layer's state (noetic's `SteeringState`): the ledger and the feedback waiting for the next recall. */
export interface SteeringState {
  readonly ledger: ReadonlyArray<LedgerEntry>
  readonly pendingAsync: ReadonlyArray<{ readonly ruleId: string; readonly guidance: string }>
}

/** What a rule's predicate is given: the pending tool call, or the model response. */
export type SteeringRuleParams =
  | { readonly toolName: string; readonly toolArgs: unknown; readonly callId?: string | undefined; readonly ctx: AgentContext; readonly state: SteeringState }
  | { readonly response: ModelResponse; readonly ctx: AgentContext; readonly state: SteeringState }

/** A steering rule (noetic's `SteeringRule`): checked by its `predicate` at the hooks in `appliesTo`. */
export interface SteeringRule {
  readonly id: string
  readonly name?: string | undefined
  readonly appliesTo: ReadonlyArray<"beforeToolCall" | "afterModelCall">
  /** The verdict; null or none: the rule has no say. A throw fails the hook. */
  readonly predicate?: ((params: SteeringRuleParams) => SteeringDecision | null | undefined) | undefined
  /** Rules a model evaluates: refused (`UNSUPPORTED_OPTION`), hooks have no model to ask here. */
  readonly llmEval?: unknown
}

/** Options of `steering()` (noetic's `SteeringConfig`). */
export interface SteeringOptions {
  readonly rules: ReadonlyArray<SteeringRule>
  readonly maxLedgerEntries?: number | undefined
  readonly maxRetries?: number | undefined
  readonly scope?: ContextScope | undefined
}

const HOOKS = new Set(["beforeToolCall", "afterModelCall"])

const invalid = (code: string, message: string, hint: string) => Effect.fail(new LayerOptionInvalid({ code, message, hint }))

const isCount = (n: unknown, min: number) => typeof n === "number" && Number.isInteger(n) && n >= min

/**
 * noetic's steering: for each hook in a rule's `appliesTo`, the rules are checked in
 * order, a deny stopping the check; the verdict is the most restrictive (deny, then
 * guide with guidances joined, then allow). Each check appends a ledger entry
 * (`tool_call` / `model_turn`), `onComplete` one with the outcome, the newest
 * `maxLedgerEntries` (default 100) kept; a child starts with a copy of the ledger.
 * Slot 90, scope `execution` by default, placed `live`. Fails with
 * `LayerOptionInvalid` for bad rules or counts, and `UNSUPPORTED_OPTION` for a rule
 * with `llmEval`.
 */
export const steering = (options: SteeringOptions): Effect.Effect<ContextLayer<SteeringState>, LayerOptionInvalid> => {
  if (typeof options !== "object" || options === null || !Array.isArray(options.rules)) {
    return invalid("INVALID_CONTEXT_LAYER", "steering: `rules` must be an array of rules", "Pass steering({ rules: [{ id, appliesTo, predicate }] }).")
  }
  const ids = new Set<string>()
  for (const rule of options.rules) {
    const id = typeof rule?.id === "string" && rule.id !== "" ? rule.id : undefined
    if (id === undefined || ids.has(id)) {
      return invalid("INVALID_CONTEXT_LAYER", `steering: each rule needs a unique non-empty id, got ${JSON.stringify(rule?.id)}`, "Give every rule an id.")
    }
    ids.add(id)
    if (!Array.isArray(rule.appliesTo) || (rule.appliesTo as ReadonlyArray<unknown>).some((hook) => !HOOKS.has(hook as string))) {
      return invalid(
        "INVALID_CONTEXT_LAYER",
        `steering: rule '${id}' has appliesTo ${JSON.stringify(rule.appliesTo)}`,
        "List 'beforeToolCall' and/or 'afterModelCall'."
      )
    }
    if (rule.llmEval !== undefined) {
      return invalid(
        "UNSUPPORTED_OPTION",
        `steering: rule '${id}' has 'llmEval', which noetic-effect does not run (a layer hook has no model to ask)`,
        "Write the rule as a predicate, or check the response in a step of your own."
      )
    }
    if (typeof rule.predicate !== "function") {
      return invalid("INVALID_CONTEXT_LAYER", `steering: rule '${id}' needs a predicate function`, "Pass predicate: (params) => ({ action: 'allow' }).")
    }
  }
  const maxLedger = options.maxLedgerEntries ?? 100
  if (!isCount(maxLedger, 1)) {
    return invalid("INVALID_CONTEXT_LAYER", `steering: maxLedgerEntries ${JSON.stringify(maxLedger)}`, "Give a positive integer (default 100).")
  }
  if (options.maxRetries !== undefined && !isCount(options.maxRetries, 0)) {
    return invalid("INVALID_CONTEXT_LAYER", `steering: maxRetries ${JSON.stringify(options.maxRetries)}`, "Give a non-negative integer (default 1).")
  }
  const rules = options.rules
  const evaluate = (hook: "beforeToolCall" | "afterModelCall", params: SteeringRuleParams) =>
    Effect.try({
      try: () => {
        const decisions: Array<SteeringDecision> = []
        for (const rule of rules) {
          if (!rule.appliesTo.includes(hook)) continue
          const decision = rule.predicate!(params)
          if (decision === null || decision === undefined) continue
          decisions.push(decision)
          if (decision.action === "deny") break
        }
        return mostRestrictive(decisions)
      },
      catch: (cause) => cause
    })
  const record = (state: SteeringState, entry: Omit<LedgerEntry, "timestamp">) =>
    Effect.map(Clock.currentTimeMillis, (timestamp): SteeringState => {
      const ledger = [...state.ledger, { ...entry, timestamp }]
      return { ...state, ledger: ledger.length <= maxLedger ? ledger : ledger.slice(ledger.length - maxLedger) }
    })
  const verdict = (decision: SteeringDecision) => ({
    ...(decision.action === "allow" ? {} : { ruleId: "steering" }),
    action: decision.action,
    ...(decision.guidance === undefined ? {} : { guidance: decision.guidance })
  })
  return Effect.succeed({
    id: "steering",
    name: "Steering",
    slot: Slot.STEERING,
    scope: options.scope ?? "execution",
    // Recall drains the pending feedback: its render can never be replayed from a pin.
    placement: "live",
    budget: { min: 0, max: 500 },
    timeouts: { beforeToolCall: 5_000, afterModelCall: 10_000 },
    lifecycle: {
      init: ({ storage }) =>
        Effect.map(storage.get("state"), (saved) => ({ state: (saved as SteeringState | null) ?? { ledger: [], pendingAsync: [] } })),
      recall: ({ state }) =>
        Effect.sync(() => {
          if (state.pendingAsync.length === 0) return null
          const content = `<steering_feedback>\n${state.pendingAsync.map((p) => `[${p.ruleId}] ${p.guidance}`).join("\n")}\n</steering_feedback>`
          return { items: [message(content, "developer")], tokenCount: estimateTokens(content), state: { ...state, pendingAsync: [] } }
        }),
      beforeToolCall: ({ toolName, toolArgs, callId, ctx, state }) =>
        Effect.gen(function*() {
          const decision = yield* evaluate("beforeToolCall", { toolName, toolArgs, callId, ctx, state })
          const next = yield* record(state, { kind: "tool_call", toolName, toolArgs, ...verdict(decision) })
          return { decision, state: next }
        }),
      afterModelCall: ({ response, ctx, state }) =>
        Effect.gen(function*() {
          const decision = yield* evaluate("afterModelCall", { response, ctx, state })
          const tokenUsage = { input: response.usage?.inputTokens ?? 0, output: response.usage?.outputTokens ?? 0 }
          const next = yield* record(state, { kind: "model_turn", tokenUsage, ...verdict(decision) })
          return { decision, state: next }
        }),
      onSpawn: ({ parentState }) => Effect.sync(() => ({ childState: { ledger: structuredClone(parentState.ledger), pendingAsync: [] } })),
      onComplete: ({ state, outcome }) => Effect.map(record(state, { kind: "custom", custom: { outcome } }), (next) => ({ state: next }))
    }
  })
}
