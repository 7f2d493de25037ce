/**
 * Type-level test (checked by `npm run typecheck`, never run): code written against
 * noetic's documented signatures (`@noetic-tools/core` / `@noetic-tools/types`) must
 * type-check against `noetic-effect/promise` under `strict`. The `Noetic*` interfaces
 * below restate noetic's declarations; every value this library returns is assigned
 * to them, and every value a noetic user writes is passed to this library.
 */
import {
  AgentHarness,
  callModel,
  type CheckpointSnapshot,
  CheckpointSchemaVersion,
  CheckpointSnapshotSchema,
  type CheckpointStore,
  conditional,
  type Context,
  type ContextLayer,
  createCheckpointStore,
  createInMemoryStorage,
  type CwdSnapshot,
  DEFAULT_STEP_LEDGER_RETENTION,
  type FrontierFrame,
  inParallel,
  invokeTool,
  isNoeticConfigError,
  isNoeticError,
  loop,
  NoeticConfigError,
  type PendingAskUserSnapshot,
  runCode,
  spawn,
  type Step
} from "../../src/promise/index.ts"

// -----------------------------------------------------------------------------
// noetic's declarations, restated
// -----------------------------------------------------------------------------

type NoeticDetachedStatus = "running" | "completed" | "failed"

interface NoeticDetachedHandle<O> {
  readonly id: string
  readonly status: NoeticDetachedStatus
  readonly result: O | undefined
  readonly error: string | undefined
  await(timeout?: number): Promise<O>
}

interface NoeticCwdState {
  cwd: string
  previousCwd?: string
}

interface NoeticContext {
  readonly id: string
  state: unknown
  readonly parent: NoeticContext | null
  readonly depth: number
  readonly threadId: string
  readonly resourceId?: string | undefined
  readonly itemLog: { readonly items: ReadonlyArray<unknown> }
  readonly cwdState: NoeticCwdState
  readonly layers?: Array<unknown>
  checkpoint(): Promise<void>
  readonly aborted: boolean
  abort(reason?: string): void
}

interface NoeticCheckpointStore {
  save(snapshot: CheckpointSnapshot): Promise<void>
  load(executionId: string): Promise<CheckpointSnapshot | null>
  list(): Promise<ReadonlyArray<{ executionId: string }>>
  clear(executionId: string): Promise<void>
}

interface NoeticSnapshot {
  stepCount: number
  tokens: { input: number; output: number; total: number }
  elapsed: number
  cost: number
  lastOutput: unknown
  lastText: string
  history: unknown[]
  depth: number
}

interface NoeticVerdict {
  stop: boolean
  reason?: string
  feedback?: string
}

interface NoeticSettleResult<O> {
  stepId: string
  status: "fulfilled" | "rejected"
  value?: O
  error?: { kind: string }
}

// -----------------------------------------------------------------------------
// Builders, as noetic's docs write them
// -----------------------------------------------------------------------------

const research = runCode({
  id: "research",
  execute: async (topic: string, ctx) => {
    const notes: string = `${topic} @ ${ctx.threadId}`
    return notes
  },
  retry: { maxAttempts: 3, backoff: "exponential", initialDelay: 100 }
})

const draft = callModel({
  id: "draft",
  model: "anthropic/claude-sonnet-4",
  instructions: "Write a short summary.",
  params: { temperature: 0.2, topP: 0.9, maxTokens: 500, stopSequences: ["\n\n"] }
})
const lazyModel = callModel({ id: "lazy", model: (ctx) => (ctx.depth > 0 ? "small" : "large") })

const searchTool = {
  name: "search",
  description: "web search",
  execute: async (args: { query: string; limit: number }) => [args.query]
}
const search = invokeTool({ id: "search", tool: searchTool, args: { limit: 5 } })

const child = spawn({ id: "child", child: research, timeout: 60_000 })

const refine = loop({
  id: "refine",
  steps: [runCode({ id: "step", execute: async (n: number) => n + 1 })],
  until: (snapshot: NoeticSnapshot): NoeticVerdict => ({ stop: snapshot.stepCount >= 3 }),
  maxIterations: 10,
  prepareNext: (output: number, verdict) => (verdict.feedback === undefined ? output : output + 1),
  onError: (error) => (error.kind === "cancelled" ? "abort" : "retry")
})
const asyncUntil = loop({
  id: "async-until",
  steps: [research],
  until: async (snapshot) => ({ stop: snapshot.lastText.length > 100, reason: "long enough" })
})

const fanOut = inParallel({
  id: "fan-out",
  mode: "settle",
  paths: (topic: string) => [research, runCode({ id: "other", execute: async (t: string) => t })],
  merge: (results: Array<NoeticSettleResult<string>>) => results.map((r) => r.value ?? "").join(","),
  concurrency: 2
})
const all = inParallel({
  id: "all",
  mode: "all",
  paths: () => [research],
  merge: (results: string[]) => results.join("\n")
})
const race = inParallel({ id: "race", mode: "race", paths: () => [research] })

const route = conditional({
  id: "route",
  route: async (input: string) => (input.length > 10 ? research : null)
})

// noetic's builders take <TContext, I, O> explicitly.
type AppContext = Readonly<Record<string, Record<string, unknown>>>
const explicit = runCode<AppContext, string, number>({ id: "explicit", execute: async (s) => s.length })
const explicitLoop = loop<AppContext, number, number>({
  id: "explicit-loop",
  steps: [runCode<AppContext, number, number>({ id: "inc2", execute: async (n) => n + 1 })],
  until: () => ({ stop: true })
})
const explicitSpawn = spawn<AppContext, string, number>({ id: "explicit-spawn", child: explicit })
const explicitModel = callModel<AppContext, string, string>({ id: "explicit-model", model: "m" })
const explicitRoute = conditional<AppContext, string, number>({ id: "explicit-route", route: () => explicit })
const explicitFan = inParallel<AppContext, string, number>({
  id: "explicit-fan",
  mode: "all",
  paths: () => [explicit],
  merge: (results) => results.length
})
const explicitTool = invokeTool<AppContext, { query: string; limit: number }, string[]>({ id: "explicit-tool", tool: searchTool })

void [draft, lazyModel, search, child, refine, asyncUntil, fanOut, all, race, route]
const asNoeticStep: Step<AppContext, string, number> = explicit
const takesContext = (ctx: Context<AppContext>): string => ctx.threadId
void [asNoeticStep, takesContext]
void [explicitLoop, explicitSpawn, explicitModel, explicitRoute, explicitFan, explicitTool]

// noetic's steps are plain data: the fields read back as noetic's Step types declare them.
const toolName: string | undefined = search.tool.name
const searchArgs: Partial<{ query: string; limit: number }> | undefined = search.args
const pathsNow: ReadonlyArray<unknown> = fanOut.paths("topic", undefined as never) as ReadonlyArray<unknown>
const executeAgain: (input: string, ctx: never) => unknown = explicit.execute
const loopSteps: ReadonlyArray<unknown> = refine.steps
const loopCap: number | undefined = refine.maxIterations
const childStep: unknown = child.child
const childTimeout: number | undefined = child.timeout
const modelName: unknown = draft.model
void [toolName, searchArgs, pathsNow, executeAgain, loopSteps, loopCap, childStep, childTimeout, modelName, route.route]

// -----------------------------------------------------------------------------
// The harness, contexts and handles
// -----------------------------------------------------------------------------

const layer: ContextLayer = {
  id: "notes",
  name: "Notes",
  slot: 100,
  scope: "thread",
  hooks: {
    async init({ storage, scopeKey }) {
      return { state: { notes: (await storage.get<Array<string>>(scopeKey)) ?? [] } }
    },
    async onItemAppend({ items, state }) {
      return { items, state }
    }
  }
}

const checkpointStorage = createInMemoryStorage()
// noetic's StorageAdapter: `set<T>` takes a type argument, `list` resolves a mutable `string[]`;
// a storage made here is one, and one written to that interface is accepted where storage goes.
interface NoeticStorageAdapter {
  get<T>(key: string): Promise<T | null>
  set<T>(key: string, value: T): Promise<void>
  delete(key: string): Promise<void>
  list(prefix: string): Promise<string[]>
  getMany?<T>(keys: string[]): Promise<Map<string, T>>
}
const asNoetic: NoeticStorageAdapter = checkpointStorage
const typedSet: Promise<void> = checkpointStorage.set<{ n: number }>("k", { n: 1 })
const listed = async (): Promise<string[]> => {
  const keys: string[] = await checkpointStorage.list("")
  return keys
}
const hostWritten: NoeticStorageAdapter = {
  get: async () => null,
  set: async () => {},
  delete: async () => {},
  list: async () => []
}
const hostStore: NoeticCheckpointStore = {
  save: async () => {},
  load: async () => null,
  list: async () => [],
  clear: async () => {}
}
const accepted: CheckpointStore = hostStore
const made: NoeticCheckpointStore = createCheckpointStore({ storage: checkpointStorage })

const harness = new AgentHarness({
  name: "durable-agent",
  agentGraph: research,
  params: {},
  contextLayers: [layer],
  environment: {
    storage: {
      adapter: hostWritten,
      checkpointStore: accepted,
      stepLedgerRetention: { maxEntryBytes: 128 * 1024, maxEntries: 1e3 }
    }
  }
})
void made
void DEFAULT_STEP_LEDGER_RETENTION

async function noeticUsage(): Promise<void> {
  const ctx: NoeticContext = harness.createContext({
    items: [],
    state: { queue: [] },
    threadId: "t",
    resourceId: "r",
    contextLayers: [layer],
    extraContextLayers: [layer],
    cwdInit: "/tmp"
  })
  ctx.state = { queue: ["x"] }
  const cwd: string = ctx.cwdState.cwd
  const previous: string | undefined = ctx.cwdState.previousCwd
  await ctx.checkpoint()
  ctx.abort("user pressed stop")
  const aborted: boolean = ctx.aborted
  void [cwd, previous, aborted]

  const context = harness.createContext()
  const composed: string = await context.harness.run(research, "topic", context)
  const direct: string = await harness.run(research, "topic", context)
  const reply: string = await context.harness.run(draft, "summarise this", context)
  void [composed, direct, reply]

  const handle: NoeticDetachedHandle<string> = harness.detachedSpawn(research, "topic", context, {
    cwdInit: "/tmp/research-workspace",
    threadId: "t2",
    resourceId: "r2"
  })
  const status: NoeticDetachedStatus = handle.status
  const value: string = await handle.await(30_000)
  void [status, value]

  await harness.execute("topic")
  await harness.checkpoint(context)
  const restored = await harness.restore("exec-1", { state: {}, contextLayers: [layer] })
  if (restored !== null) {
    const id: string = restored.id
    void id
  }
  await harness.restore("exec-1", { context: [layer] })
  await harness.clearCheckpoint("exec-1")
  await harness.subprocess.listLive()
  await harness.close()

  try {
    runCode({ id: "", execute: async () => 1 })
  } catch (e) {
    if (isNoeticConfigError(e)) {
      const code: string = e.code
      const hint: string = e.hint
      const docs: string | undefined = e.docsUrl
      void [code, hint, docs]
    }
    if (isNoeticError(e)) {
      const kind: string = e.noeticError.kind
      void kind
    }
  }
  const custom = new NoeticConfigError({ code: "MY_CODE", message: "m", hint: "h" })
  void custom

  const parsed: CheckpointSnapshot = CheckpointSnapshotSchema.parse({})
  const version: 2 = CheckpointSchemaVersion
  const frame: FrontierFrame = { stepId: "s", input: 1 }
  const cwdSnapshot: CwdSnapshot = { current: "/tmp", previous: null }
  const pending: PendingAskUserSnapshot = { id: "p", input: {}, createdAt: 0 }
  void [parsed, version, frame, cwdSnapshot, pending]
}
void noeticUsage
void [asNoetic, typedSet, listed]
