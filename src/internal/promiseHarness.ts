/**
 * How the facade's `AgentHarness` builds its `ManagedRuntime`: the same layers an
 * Effect user composes (the engine harness, its sessions, the checkpoint store and
 * step ledger, the subprocess adapter, the model), from the documented constructor
 * options. The options' checks throw `NoeticConfigError` here, at construction.
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Result from "effect/Result"
import type { StorageError } from "../Errors.ts"
import type { ContextLayer as EngineContextLayer, Item } from "../harness/AgentContext.ts"
import * as EngineHarness from "../harness/AgentHarness.ts"
import type { ChannelHub } from "../harness/Channels.ts"
import type { LayerStateStore as EngineLayerStateStore } from "../harness/LayerHooks.ts"
import type { StepHooks } from "../harness/SessionTurn.ts"
import * as EngineSessions from "../harness/Sessions.ts"
import type * as Step from "../harness/Step.ts"
import { CheckpointStore as CheckpointStoreTag, type CheckpointStoreShape } from "../services/CheckpointStore.ts"
import { makeWith as makeStepLedger, StepLedger } from "../services/StepLedger.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { SubprocessAdapter as SubprocessAdapterTag } from "../services/SubprocessAdapter.ts"
import * as Bridge from "../promise/bridge.ts"
import { holdsExecutionLeases, isEngineBackedCheckpointStore, resolveStepLedgerRetention, toEngineCheckpointStore } from "../promise/checkpoint.ts"
import { type FacadeHarness, hostCall, StepContext } from "../promise/context.ts"
import { NoeticConfigError, toFacadeError } from "../promise/errors.ts"
import { modelLayer, modelRuntimeLayer, namedTools } from "../promise/models.ts"
import type { AgentHarnessOptions, RestoreContextOptions } from "../promise/options.ts"
import { toEngineStorage } from "../promise/storage.ts"
import { toEngineSubprocessShape } from "../promise/subprocessBridge.ts"

/** The engine harness a facade harness's runtime serves. */
export class Engine extends Context.Service<Engine, EngineHarness.AgentHarness<any>>()("noetic-effect/promise/Engine") {}

/** The engine's sessions a facade harness's runtime serves. */
export class SessionsService
  extends Context.Service<SessionsService, EngineSessions.Sessions>()("noetic-effect/promise/Sessions")
{}

/** The services a facade harness's runtime provides. */
export type HarnessServices = Engine | SessionsService | FacadeHarness

/** The engine harness, from the runtime. */
export const engineService: Effect.Effect<EngineHarness.AgentHarness<any>, never, Engine> = Effect.gen(function*() {
  return yield* Engine
})

/** How a facade call's restore options reach the engine: the parent unwrapped, the layers resolved. */
export const engineRestoreOptions = (
  options: RestoreContextOptions | undefined,
  layersFor: (options: RestoreContextOptions | undefined) => ReadonlyArray<EngineContextLayer<any>> | undefined
): EngineHarness.RestoreContextOptions => {
  const layers = layersFor(options)
  return {
    ...(options?.parent === undefined ? {} : { parent: Bridge.context.of(options.parent) }),
    ...(options?.state === undefined ? {} : { state: options.state }),
    ...(layers === undefined ? {} : { context: layers })
  }
}

const configError = (code: string, message: string, hint: string) => new NoeticConfigError({ code, message, hint })

/** A storage opened at its first use (the facade builds contexts before its engine). */
export const lazyStorage = (open: Effect.Effect<StorageAdapterShape, StorageError>): StorageAdapterShape => {
  const cached = Effect.runSync(Effect.cached(open))
  const via = <A, E>(f: (s: StorageAdapterShape) => Effect.Effect<A, E>) => Effect.flatMap(cached, f)
  return {
    get: (key) => via((s) => s.get(key)),
    set: (key, value) => via((s) => s.set(key, value)),
    delete: (key) => via((s) => s.delete(key)),
    list: (prefix) => via((s) => s.list(prefix)),
    getMany: (keys) => via((s) => s.getMany(keys)),
    scan: (prefix) => via((s) => s.scan(prefix))
  }
}

/** `params` through noetic's `paramsSchema`: zod's `parse`, else a Standard Schema (issues thrown as `PARAMS_INVALID`). */
export const validateParams = (schema: unknown, params: unknown): unknown => {
  if (schema === undefined) return params
  if (typeof schema === "object" && schema !== null && typeof (schema as { parse?: unknown }).parse === "function") {
    return (schema as { parse: (value: unknown) => unknown }).parse(params)
  }
  const standard = typeof schema === "object" && schema !== null
    ? (schema as { "~standard"?: { validate?: (value: unknown) => unknown } })["~standard"]
    : undefined
  if (standard === undefined || typeof standard.validate !== "function") {
    throw configError("PARAMS_SCHEMA_INVALID", "paramsSchema has neither parse() nor a Standard Schema ~standard.validate", "Pass a zod schema or any Standard Schema.")
  }
  const result = standard.validate(params) as { value?: unknown; issues?: ReadonlyArray<{ message: string }> } | PromiseLike<unknown>
  if (typeof (result as PromiseLike<unknown>).then === "function") {
    throw configError("PARAMS_SCHEMA_INVALID", "paramsSchema validates asynchronously", "Use a schema that validates synchronously: params are checked in the constructor.")
  }
  const sync = result as { value?: unknown; issues?: ReadonlyArray<{ message: string }> }
  if (sync.issues !== undefined) {
    throw configError("PARAMS_INVALID", `params do not match paramsSchema: ${sync.issues.map((issue) => issue.message).join("; ")}`, "Fix the params given to the AgentHarness constructor.")
  }
  return sync.value
}

type Storage = NonNullable<NonNullable<AgentHarnessOptions["environment"]>["storage"]>

const engineLease = (storage: Storage | undefined): Pick<EngineHarness.AgentHarnessOptions<any>, "lease"> =>
  storage?.lease === undefined ? {} : {
    lease: { owner: storage.lease.owner, ...(storage.lease.ttlMs === undefined ? {} : { ttl: storage.lease.ttlMs }) }
  }

/**
 * The retention cap and the engine's checks (step ids, lease ttl), thrown as
 * `NoeticConfigError` now rather than at the first run.
 */
export const checkEngineOptions = (agentGraph: Step.AnyStep | undefined, storage: Storage | undefined): void => {
  resolveStepLedgerRetention(storage?.stepLedgerRetention)
  const checked = Effect.runSync(Effect.result(EngineHarness.validateOptions({
    ...(agentGraph === undefined ? {} : { agentGraph }),
    ...(storage?.stepLedgerDurability === undefined ? {} : { stepLedgerDurability: storage.stepLedgerDurability }),
    ...engineLease(storage)
  })))
  if (Result.isFailure(checked)) throw toFacadeError(checked.failure)
}

/**
 * The checkpoint store and step ledger of `environment.storage` (none without a
 * checkpoint store). Throws `STORAGE_ADAPTER_UNSUPPORTED` or
 * `EXECUTION_LEASE_UNSUPPORTED` for a lease the storage cannot hold.
 */
const durabilityLayer = (
  storage: Storage | undefined
): Layer.Layer<never> | Layer.Layer<CheckpointStoreTag | StepLedger, StorageError> => {
  if (storage?.checkpointStore === undefined) return Layer.empty
  const retention = resolveStepLedgerRetention(storage.stepLedgerRetention)
  const checkpointStore = storage.checkpointStore
  const engineBacked = isEngineBackedCheckpointStore(checkpointStore)
  if (storage.lease !== undefined && (!engineBacked || storage.adapter !== undefined)) {
    throw configError(
      "STORAGE_ADAPTER_UNSUPPORTED",
      "environment.storage.lease needs a checkpoint store made by createCheckpointStore and no separate storage.adapter",
      "Leased runs fence their ledger writes in the checkpoint store's storage: build the store with createCheckpointStore({ storage }) and drop storage.adapter (the ledger then lives in that storage)."
    )
  }
  if (storage.lease !== undefined && !holdsExecutionLeases(checkpointStore)) {
    throw configError(
      "EXECUTION_LEASE_UNSUPPORTED",
      "environment.storage.lease needs a storage with compareAndSet, setFenced and deleteFenced; the checkpoint store's storage is a host-written one",
      "Build the checkpoint store over one of this library's storages (createFileStorage, createSqliteStorage, createPostgresStorage, createInMemoryStorage), or drop lease."
    )
  }
  const adapter = storage.adapter
  const ledgerStorage = adapter === undefined ? undefined : toEngineStorage(adapter)
  const store = Layer.effect(CheckpointStoreTag, toEngineCheckpointStore(checkpointStore, ledgerStorage))
  return Layer.provideMerge(
    Layer.effect(
      StepLedger,
      Effect.gen(function*() {
        const checkpoints = yield* CheckpointStoreTag
        // noetic keeps the ledger in storage.adapter: given one, the ledger lives there.
        const base: CheckpointStoreShape = ledgerStorage === undefined || !engineBacked
          ? checkpoints
          : { ...checkpoints, storage: yield* ledgerStorage }
        return yield* Effect.orDie(makeStepLedger(base, { retention }))
      })
    ),
    store
  )
}

/** The harness's plain-function tools as the engine's tool handlers (each called with a `StepContext`). */
const toolHandlers = (tools: AgentHarnessOptions["tools"]): Record<string, EngineHarness.ToolHandler> =>
  Object.fromEntries(
    Object.entries(namedTools(tools)).map(([name, tool]) => [
      name,
      ((input, ctx) =>
        Effect.contextWith((services: Context.Context<never>) =>
          hostCall(
            (signal) => Promise.resolve().then(() => tool(input, new StepContext(ctx, services, signal))),
            (error) => error
          ))) satisfies EngineHarness.ToolHandler
    ])
  )

/** What the facade harness hands its runtime besides its options. */
export interface RuntimeWiring {
  /** The harness's (validated) params. */
  readonly params: unknown
  readonly agentGraph: Step.AnyStep | undefined
  /** The harness's layers, converted. */
  readonly layers: ReadonlyArray<EngineContextLayer<any>>
  readonly channels: ChannelHub
  /** `storage.adapter` as the engine's layer storage, when given. */
  readonly layerStorage: StorageAdapterShape | undefined
  /** The host's `beforeStep`/`afterStep`, as the engine's hooks. */
  readonly hooks: StepHooks | undefined
  /** The facade harness itself, served as `ctx.harness` to step bodies. */
  readonly self: Layer.Layer<FacadeHarness>
  /** `storage.layerStateStore` as the engine's, when given. */
  readonly layerStateStore?: EngineLayerStateStore | undefined
  /** Histories seeded before the sessions were built. */
  readonly seeds: Map<string, ReadonlyArray<Item>>
  /** Called once the engine's sessions are built (the harness's synchronous accessors read them). */
  readonly onSessions: (sessions: EngineSessions.Sessions) => void
}

/**
 * The runtime of a facade harness: the engine harness and its sessions over the
 * durability, subprocess and model layers `options` ask for. Throws
 * `NoeticConfigError` for options the engine refuses.
 */
export const makeRuntime = <I, O>(
  options: AgentHarnessOptions<I, O>,
  wiring: RuntimeWiring
): ManagedRuntime.ManagedRuntime<HarnessServices, StorageError> => {
  const storage = options.environment?.storage
  const durability = durabilityLayer(storage)
  const subprocessOption = options.environment?.subprocess
  // A host-written adapter is used, never ignored: one the engine cannot use throws here.
  const subprocess: Layer.Layer<SubprocessAdapterTag> | Layer.Layer<never> = subprocessOption === undefined
    ? Layer.empty
    : Layer.succeed(SubprocessAdapterTag, toEngineSubprocessShape(subprocessOption, "environment.subprocess"))
  const model = Layer.mergeAll(modelLayer(options.model), modelRuntimeLayer(options), wiring.self)
  const tools = toolHandlers(options.tools)
  const engine = Layer.effect(
    Engine,
    Effect.orDie(EngineHarness.make({
      ...(wiring.layerStorage === undefined ? {} : { layerStorage: wiring.layerStorage }),
      ...(wiring.layerStateStore === undefined ? {} : { layerStateStore: wiring.layerStateStore }),
      channels: wiring.channels,
      name: options.name,
      agentGraph: wiring.agentGraph,
      params: wiring.params,
      ...(wiring.hooks === undefined ? {} : { hooks: wiring.hooks }),
      tools,
      context: wiring.layers,
      ...(options.onDivergence === undefined ? {} : { onDivergence: options.onDivergence }),
      ...(storage?.stepLedgerDurability === undefined ? {} : { stepLedgerDurability: storage.stepLedgerDurability }),
      ...engineLease(storage)
    }))
  ).pipe(Layer.provide(Layer.mergeAll(durability, subprocess, model)))
  const defaultDeliveryMode = options.defaultDeliveryMode
  const modeChecked = Effect.runSync(Effect.result(
    EngineSessions.validateDeliveryMode(defaultDeliveryMode, "defaultDeliveryMode")
  ))
  if (Result.isFailure(modeChecked)) throw toFacadeError(modeChecked.failure)
  const sessions = Layer.effect(
    SessionsService,
    Effect.gen(function*() {
      const made = yield* Effect.orDie(EngineSessions.make(yield* Engine, {
        ...(defaultDeliveryMode === undefined ? {} : { defaultDeliveryMode })
      }))
      for (const [threadId, items] of wiring.seeds) made.seedHistory(threadId, items)
      wiring.seeds.clear()
      wiring.onSessions(made)
      return made
    })
  ).pipe(Layer.provide(Layer.mergeAll(engine, model)))
  return ManagedRuntime.make(
    Layer.mergeAll(engine, sessions, model) as Layer.Layer<HarnessServices, StorageError>
  )
}
