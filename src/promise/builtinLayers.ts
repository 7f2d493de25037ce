/**
 * noetic's built-in context layers as its factories (`scratchpad`, `history`,
 * `instructions`, `taskState`, `toolCalls`, `observations`, `temporal`, `steering`):
 * options checked (`NoeticConfigError`), Promise callbacks lifted, the layers built by
 * the engine (src/harness/BuiltinLayers.ts, MemoryLayers.ts, SteeringLayer.ts);
 * docs/layers-and-channels.md#built-in-layers.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { AgentContext as EngineContext } from "../harness/AgentContext.ts"
import * as Builtin from "../harness/BuiltinLayers.ts"
import * as FilesystemLayer from "../harness/FilesystemLayer.ts"
import * as MemoryLayers from "../harness/MemoryLayers.ts"
import * as SteeringLayer from "../harness/SteeringLayer.ts"
import * as Bridge from "./bridge.ts"
import {
  type ContextLayer,
  type ContextScope,
  type ExecutionContext,
  executionContextOf,
  layerConfigError,
  lift,
  type LLMResponse,
  SCOPES,
  type SteeringDecision
} from "./layers.ts"

export type { ScratchpadState, TaskState, TaskStateDataMerge, ToolContextDeclaration } from "../harness/BuiltinLayers.ts"
export type { ObservationsState, TemporalFact, TemporalSearchResult, TemporalState } from "../harness/MemoryLayers.ts"
export type { LedgerEntry, SteeringState } from "../harness/SteeringLayer.ts"
export type { FilesystemState, TrackedFile } from "../harness/FilesystemLayer.ts"

/** noetic's slot constants. */
export const Slot = Builtin.Slot

/**
 * noetic's `scratchpad(config?)`: notes kept across turns, scope `thread` by default
 * (durable between executions of a thread on durable storage); `ctx.context.scratchpad`
 * has `snapshot` and `update`, and the model gets the tool `scratchpad/update`.
 */
export const scratchpad = (config: {
  scope?: "thread" | "resource"
  schema?: unknown
  template?: string
  readOnly?: boolean
} = {}): ContextLayer<Builtin.ScratchpadState> => {
  if (config.scope !== undefined && config.scope !== "thread" && config.scope !== "resource") {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `scratchpad: scope ${JSON.stringify(config.scope)}`, "Use 'thread' or 'resource'.")
  }
  return Builtin.scratchpad(config)
}

/**
 * noetic's `history({ maxItems })`: caps the items projected to the model (default 40)
 * keeping the last exchange and dropping orphaned tool calls; throws
 * `NoeticConfigError` `INVALID_HISTORY_MAX_ITEMS` for a cap outside [2, 10000].
 */
export const history = (config: { maxItems?: number } = {}): ContextLayer<null> => {
  const made = Effect.runSync(Effect.result(Builtin.history(config)))
  if (Result.isFailure(made)) throw layerConfigError(made.failure.code, made.failure.message, made.failure.hint)
  return made.success
}

/** noetic's `instructions({ load, id?, slot?, scope?, tag? })`: content loaded once, in the anchor band. */
export const instructions = (options: {
  id?: string
  slot?: number
  scope?: ContextScope
  tag?: string
  load: () => Promise<string>
}): ContextLayer<string> => {
  if (typeof options?.load !== "function") {
    throw layerConfigError("INVALID_CONTEXT_LAYER", "instructions: `load` must be a function returning the content", "Pass { load: async () => '...' }.")
  }
  return Builtin.instructions({ ...options, load: () => lift(() => options.load()) })
}

const refusedLayer = (name: string) => (..._args: Array<unknown>): never => {
  throw layerConfigError(
    "UNSUPPORTED_OPTION",
    `the built-in layer '${name}()' of noetic is not in noetic-effect`,
    `Write it as a custom layer (docs/layers-and-channels.md#custom-layers); see docs/layers-and-channels.md#built-in-layers for the built-in ones.`
  )
}

/**
 * noetic's `taskState({ mergeData? })`: checkpoints, file artifacts and data kept
 * across a thread's executions (layer id `task-state`, tools
 * `task-state/recordArtifact` and `task-state/setTaskData`).
 */
export const taskState = (options: { mergeData?: Builtin.TaskStateDataMerge } = {}): ContextLayer<Builtin.TaskState> => {
  if (options?.mergeData !== undefined && options.mergeData !== "shallow" && options.mergeData !== "namespace") {
    throw layerConfigError(
      "INVALID_CONTEXT_LAYER",
      `taskState: mergeData ${JSON.stringify(options.mergeData)}`,
      "Use 'shallow' (the default) or 'namespace'."
    )
  }
  return Builtin.taskState(options ?? {})
}

/**
 * noetic's `toolCalls(tools, { slot? })`: one `execution`-scoped layer per distinct
 * `context.id` of the tools declaring a `context`; tools reach it through
 * `toolCtx.context.get(id)` / `set(id, state)`.
 */
export const toolCalls = (
  tools: ReadonlyArray<{ readonly name?: string | undefined; readonly context?: Builtin.ToolContextDeclaration | undefined }>,
  options?: { slot?: number }
): Array<ContextLayer> => {
  if (!Array.isArray(tools)) {
    throw layerConfigError("INVALID_CONTEXT_LAYER", "toolCalls: `tools` must be an array of tools", "Pass the tools the model is given: toolCalls([writeTodos, ...]).")
  }
  for (const t of tools) {
    const declaration = (t as { context?: unknown } | null)?.context
    if (declaration === undefined || declaration === null) continue
    const d = declaration as Partial<Builtin.ToolContextDeclaration>
    if (typeof d.init !== "function" || typeof d.recall !== "function") {
      throw layerConfigError(
        "INVALID_CONTEXT_LAYER",
        `toolCalls: the context of tool '${String(t.name)}' needs init() and recall(state) functions`,
        "Declare context: { id?, init: () => state, recall: (state) => string | null }."
      )
    }
  }
  if (options?.slot !== undefined && !Number.isFinite(options.slot)) {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `toolCalls: slot ${JSON.stringify(options.slot)}`, "Give a finite slot number, e.g. Slot.WORKING_MEMORY + 10.")
  }
  return Builtin.toolCalls(tools.map((t) => ({ name: String(t.name), context: t.context })), options ?? {})
}

const checkCount = (layer: string, field: string, value: unknown, min: number) => {
  if (value !== undefined && !(typeof value === "number" && Number.isInteger(value) && value >= min)) {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `${layer}: ${field} ${JSON.stringify(value)}`, `Give an integer of at least ${min}.`)
  }
}

const checkFunction = (layer: string, field: string, value: unknown) => {
  if (value !== undefined && typeof value !== "function") {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `${layer}: ${field} must be a function`, `Pass ${field}: async (...) => ... or leave it out.`)
  }
}

/** noetic's `ObserverFn`: distils buffered conversation text into observations. */
export type ObserverFn = (buffer: Array<string>) => Promise<Array<string>>

/**
 * noetic's `observations({ bufferThreshold?, maxObservations?, scope?, observer? })`:
 * conversation text buffered and distilled by `observer` into an `<observations>` list
 * (scope `resource` by default).
 */
export const observations = (config: {
  bufferThreshold?: number
  maxObservations?: number
  scope?: "thread" | "resource"
  observer?: ObserverFn
} = {}): ContextLayer<MemoryLayers.ObservationsState> => {
  const c = config ?? {}
  if (c.scope !== undefined && c.scope !== "thread" && c.scope !== "resource") {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `observations: scope ${JSON.stringify(c.scope)}`, "Use 'thread' or 'resource'.")
  }
  checkCount("observations", "bufferThreshold", c.bufferThreshold, 0)
  checkCount("observations", "maxObservations", c.maxObservations, 1)
  checkFunction("observations", "observer", c.observer)
  const observer = c.observer
  return MemoryLayers.observations({
    ...(c.bufferThreshold === undefined ? {} : { bufferThreshold: c.bufferThreshold }),
    ...(c.maxObservations === undefined ? {} : { maxObservations: c.maxObservations }),
    ...(c.scope === undefined ? {} : { scope: c.scope }),
    ...(observer === undefined ? {} : { observer: (buffer) => lift(() => observer([...buffer])) })
  })
}

/** noetic's `FactExtractor`. */
export type FactExtractor = (input: { transcript: string; now: string }) => Promise<Array<MemoryLayers.TemporalFact>>
/** noetic's `FactSearcher`. */
export type FactSearcher = (input: {
  query: string
  facts: ReadonlyArray<MemoryLayers.TemporalFact>
  now: string
}) => Promise<MemoryLayers.TemporalSearchResult>

/**
 * noetic's `temporal(config?)`: a `<current_datetime>` grounding block, a fact ledger
 * filled by `extract`, and the tool `temporal/searchMemory` (answered by `search`, else
 * the whole ledger).
 */
export const temporal = (config: {
  now?: () => Date
  scope?: ContextScope
  extract?: FactExtractor
  search?: FactSearcher
  bufferThreshold?: number
  maxFacts?: number
  groundDateTime?: boolean
  injectLedger?: boolean
} = {}): ContextLayer<MemoryLayers.TemporalState> => {
  const c = config ?? {}
  if (c.scope !== undefined && !SCOPES.has(c.scope)) {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `temporal: scope ${JSON.stringify(c.scope)}`, "Use one of 'thread', 'resource', 'global' or 'execution'.")
  }
  checkCount("temporal", "bufferThreshold", c.bufferThreshold, 0)
  checkCount("temporal", "maxFacts", c.maxFacts, 1)
  checkFunction("temporal", "now", c.now)
  checkFunction("temporal", "extract", c.extract)
  checkFunction("temporal", "search", c.search)
  const { extract, search } = c
  return MemoryLayers.temporal({
    ...c,
    extract: extract === undefined ? undefined : (input) => lift(() => extract(input)),
    search: search === undefined ? undefined : (input) => lift(() => search(input))
  })
}

/** What a steering check before a tool call is given (noetic's `BeforeToolCallParams`). */
export interface BeforeToolCallParams<TState = unknown> {
  toolName: string
  toolArgs: unknown
  callId?: string
  ctx: ExecutionContext
  state: TState
}

/** What a steering check after a model call is given (noetic's `AfterModelCallParams`). */
export interface AfterModelCallParams<TState = unknown> {
  response: LLMResponse
  ctx: ExecutionContext
  state: TState
}

/** What a steering rule's predicate is given. */
export type SteeringRuleParams = BeforeToolCallParams | AfterModelCallParams

/** noetic's `SteeringRule`; `llmEval` is refused by name. */
export interface SteeringRule {
  id: string
  name?: string
  appliesTo: Array<"beforeToolCall" | "afterModelCall">
  predicate?: (params: SteeringRuleParams) => SteeringDecision
  llmEval?: { mode: "sync" | "async"; prompt: string; model?: string }
}

/** noetic's `SteeringAction`. */
export const SteeringAction = { Allow: "allow", Deny: "deny", Guide: "guide" } as const

/**
 * noetic's `steering({ rules, maxLedgerEntries?, maxRetries?, scope? })`: predicate
 * rules at `beforeToolCall` / `afterModelCall`, the most restrictive verdict, a ledger
 * on `getLayerState(executionId, 'steering')`. A rule with `llmEval` throws
 * `UNSUPPORTED_OPTION`.
 */
export const steering = (config: {
  rules: Array<SteeringRule>
  maxLedgerEntries?: number
  maxRetries?: number
  scope?: ContextScope
}): ContextLayer<SteeringLayer.SteeringState> => {
  if (config?.scope !== undefined && !SCOPES.has(config.scope)) {
    throw layerConfigError("INVALID_CONTEXT_LAYER", `steering: scope ${JSON.stringify(config.scope)}`, "Use one of 'thread', 'resource', 'global' or 'execution'.")
  }
  const rules = Array.isArray(config?.rules)
    ? config.rules.map((rule): SteeringLayer.SteeringRule => {
      const predicate = rule?.predicate
      return typeof predicate !== "function" ? rule as unknown as SteeringLayer.SteeringRule : {
        ...rule,
        predicate: ({ ctx, ...rest }) => predicate({ ...rest, ctx: executionContextOf(ctx) } as SteeringRuleParams)
      }
    })
    : config?.rules
  const made = Effect.runSync(Effect.result(SteeringLayer.steering({ ...config, rules })))
  if (Result.isFailure(made)) throw layerConfigError(made.failure.code, made.failure.message, made.failure.hint)
  return made.success
}

const readers = new WeakMap<object, FilesystemLayer.FileReader>()

/** The file reader of the harness that made `ctx` (or a context it was spawned under): its `environment.fs`. */
const environmentReader = (ctx: EngineContext): FilesystemLayer.FileReader | undefined => {
  for (let c: EngineContext | undefined = ctx; c !== undefined; c = c.parent) {
    const fs = Bridge.environmentFs.get(c)
    if (fs === undefined) continue
    let reader = readers.get(fs)
    if (reader === undefined) readers.set(fs, reader = FilesystemLayer.fileReaderOf(fs))
    return reader
  }
  return undefined
}

/**
 * noetic's `filesystem({ baseDir?, slot?, maxFileSize?, followSymlinks?, allowedExtensions? })`:
 * `#path` references in messages read through the harness's `environment.fs` and
 * recalled as `# Referenced Files`; `scoringModel` throws `UNSUPPORTED_OPTION`.
 */
export const filesystem = (options: {
  baseDir?: string
  slot?: number
  scoringModel?: string
  maxFileSize?: number
  followSymlinks?: boolean
  allowedExtensions?: Array<string>
} = {}): ContextLayer<FilesystemLayer.FilesystemState> => {
  const made = Effect.runSync(Effect.result(FilesystemLayer.filesystem({ ...(options ?? {}), fs: environmentReader })))
  if (Result.isFailure(made)) throw layerConfigError(made.failure.code, made.failure.message, made.failure.hint)
  return made.success
}

/** noetic's built-in layer this library does not have: it throws `UNSUPPORTED_OPTION` naming itself. */
export const plan = refusedLayer("plan")

