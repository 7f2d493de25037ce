/**
 * noetic's `DetachedHandle`: what `detachedSpawn` returns at once.
 *
 * @since 0.1.0
 */
import {
  isNoeticError,
  stepFailed,
  childError,
  childFailedReason,
  handleEvicted,
  handleEvictedOf,
  isPlainRecordedError
} from "./errors.ts"
import { type LiveSubprocessHandle as SubprocessHandle } from "./subprocess.ts"

// -----------------------------------------------------------------------------
// Detached handles
// -----------------------------------------------------------------------------

/** A detached child's lifecycle, as noetic reports it. */
export type DetachedStatus = (typeof DetachedStatus)[keyof typeof DetachedStatus]
/** The statuses by name, as noetic exports them (`DetachedStatus.Completed`). */
export const DetachedStatus = {
  Running: "running",
  Completed: "completed",
  Failed: "failed"
} as const

/**
 * What `detachedSpawn` returns at once (noetic's `DetachedHandle`): `id` (the child's
 * execution id), a `status` that changes as the child settles, `result`, `error` (a
 * message) and `await(timeout?)`. Extra: the adapter's `handleId`, `stepId`,
 * `executionId`, `parentExecutionId`, `metadata`, and `started()`.
 */
export interface DetachedHandle<O = unknown> {
  readonly id: string
  readonly status: DetachedStatus
  readonly result: O | undefined
  readonly error: string | undefined
  /**
   * The child's output. Rejects with a `NoeticError` carrying `noeticError { kind:
   * 'step_failed', stepId, cause }` when the child fails (a plain Error when a host
   * adapter recorded the failure without a `noeticError` payload, as noetic rehydrates
   * it), `handle_evicted` when the adapter lost the handle, or when `timeout` ms pass
   * first (the child keeps running).
   */
  await(timeout?: number): Promise<O>
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string
  readonly metadata: Readonly<Record<string, unknown>>
  /** Resolves once the adapter has started the child (its manifest is written). */
  started(): Promise<void>
}


export class DetachedHandleImpl<O> implements DetachedHandle<O> {
  readonly id: string
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string
  readonly metadata: Readonly<Record<string, unknown>>
  #status: DetachedStatus = "running"
  #result: O | undefined
  #error: string | undefined
  readonly #started: Promise<SubprocessHandle>
  readonly #settled: Promise<O>

  constructor(options: {
    readonly handleId: string
    readonly stepId: string
    readonly executionId: string
    readonly parentExecutionId: string
    readonly metadata: Readonly<Record<string, unknown>>
    readonly started: Promise<SubprocessHandle>
  }) {
    this.id = options.executionId
    this.handleId = options.handleId
    this.stepId = options.stepId
    this.executionId = options.executionId
    this.parentExecutionId = options.parentExecutionId
    this.metadata = options.metadata
    this.#started = options.started
    this.#settled = options.started.then((handle) => handle.await() as Promise<O>).then(
      (value) => {
        this.#result = value
        this.#status = "completed"
        return value
      },
      (failure: unknown) => {
        const evicted = handleEvictedOf(failure)
        // What the child failed with, rebuilt as noetic rehydrates it, rather than the adapter's wrapper.
        const child = childFailedReason(failure)
        const cause = child === undefined ? failure : childError(child.error)
        const error = evicted !== undefined
          ? handleEvicted(evicted.handleId, this.stepId, evicted.gracePeriodMs)
          : isNoeticError(cause) && cause.noeticError.kind === "step_failed" && cause.noeticError.stepId === this.stepId
          ? cause
          : child !== undefined && isPlainRecordedError(child.error) && cause instanceof Error
          ? cause
          : stepFailed(this.stepId, cause)
        this.#error = error.message
        this.#status = "failed"
        throw error
      }
    )
    // Observed here so a caller who never awaits sees no unhandled rejection; await() rethrows.
    this.#settled.catch(() => {})
  }

  get status(): DetachedStatus {
    return this.#status
  }
  get result(): O | undefined {
    return this.#result
  }
  get error(): string | undefined {
    return this.#error
  }

  started(): Promise<void> {
    return this.#started.then(() => undefined)
  }

  await(timeout?: number): Promise<O> {
    if (timeout === undefined || !(timeout > 0)) return this.#settled
    let timer: ReturnType<typeof setTimeout> | undefined
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(stepFailed(this.stepId, new Error(`Detached spawn timed out after ${timeout}ms`))),
        timeout
      )
    })
    return Promise.race([this.#settled, expired]).finally(() => clearTimeout(timer))
  }
}
