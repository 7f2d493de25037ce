/**
 * noetic's `createDetachedSignal`: a single-shot deferred that wires a detached piece of
 * work (a terminal tool, an IPC handler, a watchdog) back to whoever awaits its
 * outcome. `done` settles once, with the first `resolve` or `reject`; later calls are
 * dropped, so a duplicate settlement never overwrites the first.
 *
 * @since 0.1.0
 */

/** A single-shot signal: await `done`, settle with `resolve` or `reject` (the first call wins). */
export interface DetachedSignal<TOutcome> {
  readonly done: Promise<TOutcome>
  resolve(outcome: TOutcome): void
  reject(error: unknown): void
}

/** A fresh single-shot signal. */
export const createDetachedSignal = <TOutcome>(): DetachedSignal<TOutcome> => {
  let settle: { readonly resolve: (outcome: TOutcome) => void; readonly reject: (error: unknown) => void } | undefined
  const done = new Promise<TOutcome>((resolve, reject) => {
    settle = { resolve, reject }
  })
  const once = (f: (pending: NonNullable<typeof settle>) => void) => {
    const pending = settle
    settle = undefined
    if (pending !== undefined) f(pending)
  }
  return {
    done,
    resolve: (outcome) => once((pending) => pending.resolve(outcome)),
    reject: (error) => once((pending) => pending.reject(error))
  }
}
