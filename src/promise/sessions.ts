/**
 * The facade's side of sessions (docs/runtime.md#sessions): what `execute` resolves
 * with, the session streams as `AsyncIterable`s, and noetic's session types. The
 * behaviour is the engine's (`src/harness/Sessions.ts`); this module only translates.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Stream from "effect/Stream"
import type * as Sessions from "../harness/Sessions.ts"
import { harnessClosed, unwrapExit } from "./errors.ts"

export type { DeliveryMode, HarnessResponse, SessionStatus as HarnessStatus } from "../harness/Sessions.ts"
export type { FrameworkStreamEvent, SdkStreamEvent, StreamEvent } from "../harness/SessionTurn.ts"
export type { StreamingItem } from "../harness/SessionStreams.ts"

/** Which session a session accessor reads (noetic's `SessionScope`). */
export interface SessionScope {
  readonly threadId?: string
}

/**
 * What `execute` resolves with once the input is queued (noetic resolves with nothing;
 * this is a superset): the turn's execution id, the message id, the thread, the delivery
 * mode, and `result()`, the outcome of that message's turn (`{ executionId, output }`,
 * or its failure) for a caller that wants to wait for it.
 */
export interface ExecuteReceipt<O = unknown> {
  readonly executionId: string
  readonly messageId: string
  readonly threadId: string
  readonly deliveryMode: Sessions.DeliveryMode
  result(): Promise<{ readonly executionId: string; readonly output: O }>
}

/** The receipt of an accepted message; `closed` says whether the harness was closed. */
export const receipt = <O>(enqueued: Sessions.Enqueued, harness: string, closed: () => boolean): ExecuteReceipt<O> => {
  let result: Promise<{ readonly executionId: string; readonly output: O }> | undefined
  return {
    executionId: enqueued.executionId,
    messageId: enqueued.messageId,
    threadId: enqueued.threadId,
    deliveryMode: enqueued.deliveryMode,
    result: () => {
      result ??= Effect.runPromiseExit(enqueued.completion).then((exit) => {
        if (Exit.isFailure(exit) && closed() && exit.cause.reasons.every((r) => r._tag === "Interrupt")) {
          throw harnessClosed(harness)
        }
        return unwrapExit(exit) as { readonly executionId: string; readonly output: O }
      })
      return result
    }
  }
}

/**
 * An `AsyncIterable` over a session stream the harness builds asynchronously: it can
 * be taken before the first `execute` (noetic's accessors can), and each iteration
 * subscribes afresh, from the session's replayed start.
 */
export const iterable = <A>(stream: () => Promise<Stream.Stream<A>>): AsyncIterable<A> => ({
  [Symbol.asyncIterator](): AsyncIterator<A> {
    let inner: AsyncIterator<A> | undefined
    const open = async () => {
      // `effect/Stream` loaded with the first stream read, not with the facade.
      inner ??= (await import("effect/Stream")).toAsyncIterable(await stream())[Symbol.asyncIterator]()
      return inner
    }
    return {
      next: () => open().then((it) => it.next()),
      return: async (value?: unknown) => {
        if (inner?.return !== undefined) await inner.return(value)
        return { done: true, value: undefined as never }
      }
    }
  }
})
