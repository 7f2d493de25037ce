/**
 * Promise-shaped subprocess adapters and handles, over the `SubprocessAdapter` service.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { HandleStatus, SubprocessAdapterShape, SubprocessHandle as EngineHandle } from "../services/SubprocessAdapter.ts"
import { runForFacade } from "./storage.ts"

/** A running or settled child, with Promises. */
export interface SubprocessHandle {
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string | undefined
  readonly metadata: Readonly<Record<string, unknown>>
  status(): Promise<HandleStatus>
  /** The child's output; rejects with `NoeticError` when it failed or was stopped. */
  await(): Promise<unknown>
}

/** The documented adapter surface: spawn happens through the harness; these find children. */
export interface SubprocessAdapter {
  get(handleId: string): Promise<SubprocessHandle | null>
  stop(handleId: string): Promise<void>
  listLive(): Promise<ReadonlyArray<SubprocessHandle>>
  reattach(handleId: string): Promise<SubprocessHandle | null>
}

const engineSubprocessAdapter = Symbol.for("noetic-effect/promise/engineSubprocessAdapter")

interface EngineBacked {
  readonly [engineSubprocessAdapter]: Effect.Effect<SubprocessAdapterShape>
}

/** The Promise view of an engine handle. */
export const toFacadeHandle = (handle: EngineHandle): SubprocessHandle => ({
  handleId: handle.handleId,
  stepId: handle.stepId,
  executionId: handle.executionId,
  parentExecutionId: handle.parentExecutionId,
  metadata: handle.metadata,
  status: () => runForFacade(handle.status),
  await: () => runForFacade(handle.await)
})

/** Wraps an engine adapter (built lazily, once) as a Promise adapter. */
export const fromEngineSubprocessAdapter = (
  build: Effect.Effect<SubprocessAdapterShape>
): SubprocessAdapter & EngineBacked => {
  const engine = Effect.runSync(Effect.cached(build))
  const use = <A, E>(f: (adapter: SubprocessAdapterShape) => Effect.Effect<A, E>) =>
    runForFacade(Effect.flatMap(engine, f))
  return {
    [engineSubprocessAdapter]: engine,
    get: (handleId) => use((a) => Effect.map(a.get(handleId), (h) => Option.getOrNull(Option.map(h, toFacadeHandle)))),
    stop: (handleId) => use((a) => a.stop(handleId)),
    listLive: () => use((a) => Effect.map(a.listLive, (handles) => handles.map(toFacadeHandle))),
    reattach: (handleId) =>
      use((a) => Effect.map(a.reattach(handleId), (h) => Option.getOrNull(Option.map(h, toFacadeHandle))))
  }
}

/** The engine adapter behind a facade adapter, or undefined for one not made by this library. */
export const toEngineSubprocessAdapter = (
  adapter: SubprocessAdapter
): Effect.Effect<SubprocessAdapterShape> | undefined =>
  engineSubprocessAdapter in adapter ? (adapter as SubprocessAdapter & EngineBacked)[engineSubprocessAdapter] : undefined
