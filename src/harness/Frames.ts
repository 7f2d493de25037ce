/**
 * Where a dispatch happens (a frame: the context, the path, the counters that number
 * the children below it, the ledger and the run's state), and the replay of a step
 * decided at once, for a caller that runs its dispatch at once (the Promise API's
 * `ctx.run`): see `replayNow`. The interpreter (`Interpreter.ts`) does the rest.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"
import type { ExecutionLedger } from "../services/StepLedger.ts"
import type { AgentContext } from "./AgentContext.ts"
import type { AnyStep, StepContext } from "./Step.ts"
import { settle } from "./ToolLoop.ts"

/** Where a dispatch happens: the context, its path, and the per-parent dispatch counters. */
export interface Frame {
  readonly ctx: AgentContext
  readonly path: string
  readonly counters: Map<string, number>
  readonly ledger: Option.Option<ExecutionLedger>
  readonly run: RunState
}

/** What one run (an `execute`, a `resume`, a `harness.run`) keeps across its dispatches. */
export interface RunState {
  /** The diverged paths already reported, so each is warned of once. */
  readonly divergencesReported: Set<string>
  /** Per parent path, the distinct child paths dispatched below it, each with its position (dispatch order). */
  readonly dispatched: Map<string, Map<string, number>>
  /** Called once the run's root step is dispatched: see `ExecuteOptions.onRootDispatch`. */
  readonly onRootDispatch: (() => void) | undefined
  /**
   * Whether a subprocess adapter runs this run's root (a detached spawn, a child
   * process, a re-run after a restart): that root is not dispatched through an adapter
   * again. See `ExecuteOptions.runByAdapter`.
   */
  readonly runByAdapter: boolean
}

export const newRunState = (onRootDispatch?: () => void, runByAdapter = false): RunState => ({
  divergencesReported: new Set(),
  dispatched: new Map(),
  onRootDispatch,
  runByAdapter
})

/** Notes a dispatch at `path` below `parent`; its position among the parent's distinct children. */
export const noteDispatch = (run: RunState, parent: string, path: string): number => {
  let positions = run.dispatched.get(parent)
  if (positions === undefined) {
    positions = new Map()
    run.dispatched.set(parent, positions)
  }
  const at = positions.get(path)
  if (at !== undefined) return at
  positions.set(path, positions.size)
  return positions.size - 1
}

/** A frame at `path` below `parent`, numbering its children afresh. */
export const frameAt = (parent: Frame, path: string): Frame => ({
  ctx: parent.ctx,
  path,
  counters: new Map(),
  ledger: parent.ledger,
  run: parent.run
})


/**
 * The frame a run starts from: the root of `ctx`, a fresh run state. `onRootDispatch`
 * is called once the root step below it is dispatched; `runByAdapter` when an adapter
 * runs that root.
 */
export const rootFrame = (
  ctx: AgentContext,
  ledger: Option.Option<ExecutionLedger>,
  counters: Map<string, number> = new Map(),
  onRootDispatch?: () => void,
  runByAdapter = false
): Frame => ({ ctx, path: "", counters, ledger, run: newRunState(onRootDispatch, runByAdapter) })

/** Where a step context made by the interpreter keeps its frame (see `withFrame`). */
const FRAME: unique symbol = Symbol.for("noetic-effect/Frames/frame")

/** Binds `view`, a step context of the dispatch at `frame`, to that frame, for `replayNow`. */
export const withFrame = <A extends object>(view: A, frame: Frame): A => {
  Object.defineProperty(view, FRAME, { value: frame })
  return view
}

/**
 * The dispatch of `step` below the step whose context is `ctx`, when the ledger
 * answers it at once: the replay hot path of the interpreter's dispatch, done now and
 * without an effect (the step's counter and position noted, the pass counted, a model
 * call's meta settled), returning the recorded output. Undefined, with nothing
 * changed, whenever the dispatch has more to do: no frame (a context the interpreter
 * did not make), a blank id, an aborted context, the run's root, no ledger entry that
 * replays (a miss, a divergence, an intent, a damaged row), or a tracing backend that
 * wants the step's span (`services` says which tracer runs). The caller then
 * dispatches as usual. For a dispatch the caller runs at once (a Promise), never for
 * an Effect, which may run later or more than once.
 */
export const replayNow = (
  ctx: StepContext,
  step: { readonly id: string; readonly kind: AnyStep["kind"] },
  services: Context.Context<never>
): { readonly output: unknown } | undefined => {
  const parent = (ctx as { readonly [FRAME]?: Frame })[FRAME]
  if (parent === undefined || Option.isNone(parent.ledger) || parent.path === "") return undefined
  if (step.id.trim() === "" || parent.ctx.aborted) return undefined
  if (Context.get(services, References.TracerEnabled) && Context.get(services, Tracer.Tracer) !== Tracer.nativeTracer) {
    return undefined
  }
  const n = parent.counters.get(step.id) ?? 0
  const path = `${parent.path}/${step.id}#${n}`
  const found = parent.ledger.value.replayAt(path, { stepId: step.id, kind: step.kind })
  if (found._tag !== "Hit") return undefined
  parent.counters.set(step.id, n + 1)
  noteDispatch(parent.run, parent.path, path)
  parent.ctx.passStep()
  return { output: step.kind === "callModel" ? settle(parent.ctx, found.output) : found.output }
}
