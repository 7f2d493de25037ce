/**
 * Handles of an adapter that reports its children only when asked (a host-written
 * adapter, noetic's interface): each handle settles by polling the adapter until the
 * child is terminal, the way noetic's `DetachedHandle` reads it. The pace (64 polls a
 * microtask apart, then every 10 ms, every 100 ms after a second), the eviction rule (a
 * child the adapter answers none for during 500 ms before it settled is gone:
 * `HandleEvicted`) and the one handle per id live here; the Promise facade
 * (`promise/subprocessBridge.ts`) only translates noetic's handles to and from
 * {@link PolledChild}.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import {
  HandleEvicted,
  type HandleStatus,
  SubprocessError,
  type SubprocessHandle
} from "../services/SubprocessAdapter.ts"
import { logWarning } from "./diagnostics.ts"

/** How the settlement poll paces itself: as noetic's `DetachedHandle`. */
const MICROTASK_POLLS = 64
const INITIAL_POLL_MS = 10
const MAX_POLL_MS = 100
const RAMP_AFTER_MS = 1_000
/** How long the adapter may answer none before the handle counts as gone. */
export const EVICTED_GRACE_MS = 500

/** What one answer of the adapter says of a child. */
export interface PolledChild {
  readonly status: HandleStatus
  /** The reason its stop was given, when it was stopped with one. */
  readonly stopReason: string | undefined
  /** How a terminal child settles: its value or its failure (called once it is terminal). */
  readonly outcome: () => Exit.Exit<unknown, SubprocessError>
}

/** What a handle is known by before any poll. */
export interface PolledHandleFields {
  readonly handleId: string
  readonly stepId: string
  readonly executionId: string
  readonly parentExecutionId: string | undefined
  readonly metadata: Readonly<Record<string, unknown>>
  readonly startedAt: number
}

/** The handles of one adapter, one per id, each settled by polling `poll(handleId)`. */
export const makePolledHandles = (
  /** The adapter's answer for a child, none when it has none; a failure is logged and the last answer kept. */
  poll: (handleId: string) => Effect.Effect<Option.Option<PolledChild>, unknown>
) => {
  const known = new Map<string, { readonly handle: SubprocessHandle; latest: PolledChild }>()

  /** The handle of a child the adapter answered `initial` for: the one already made for its id, else a new one. */
  const handleOf = (fields: PolledHandleFields, initial: PolledChild): SubprocessHandle => {
    const existing = known.get(fields.handleId)
    if (existing !== undefined) return existing.handle
    const handleId = fields.handleId
    const result = Deferred.makeUnsafe<unknown, SubprocessError>()
    let status: HandleStatus = initial.status
    const note = (child: PolledChild) => {
      entry.latest = child
      status = child.status
    }
    const settling = Effect.gen(function*() {
      let current = initial
      let noneSince: number | undefined
      const startedAt = Date.now()
      for (let attempt = 0; current.status === "running"; attempt++) {
        if (attempt >= MICROTASK_POLLS) {
          yield* Effect.sleep(Duration.millis(Date.now() - startedAt >= RAMP_AFTER_MS ? MAX_POLL_MS : INITIAL_POLL_MS))
        } else {
          yield* Effect.yieldNow
        }
        const next = yield* poll(handleId).pipe(
          Effect.catchCause((cause) =>
            Effect.as(logWarning(`subprocess ${handleId}: the adapter's get failed`, cause), Option.some(current))
          )
        )
        if (Option.isNone(next)) {
          noneSince ??= Date.now()
          if (Date.now() - noneSince >= EVICTED_GRACE_MS) {
            status = "failed"
            return yield* Deferred.fail(result, evicted(handleId))
          }
          continue
        }
        noneSince = undefined
        current = next.value
        note(current)
      }
      note(current)
      yield* Deferred.done(result, current.outcome())
    })
    // Each waiter polls until the outcome is in (noetic's handle polls once awaited), so
    // a waiter that goes away (a closed harness) takes its polling with it and no timer
    // outlives the host's interest.
    const handle: SubprocessHandle = {
      ...fields,
      status: Effect.sync(() => status),
      stopReason: Effect.sync(() => entry.latest.stopReason),
      await: Effect.raceFirst(Deferred.await(result), Effect.andThen(settling, Deferred.await(result)))
    }
    const entry = { handle, latest: initial }
    known.set(handleId, entry)
    return handle
  }

  /** Records a later answer of the adapter for a child (what its `stop` answered with). */
  const update = (handleId: string, child: PolledChild): void => {
    const entry = known.get(handleId)
    if (entry !== undefined) entry.latest = child
  }

  return { handleOf, update }
}

const evicted = (handleId: string) =>
  new SubprocessError({
    reason: new HandleEvicted({
      handleId,
      gracePeriodMs: EVICTED_GRACE_MS,
      message: `the host adapter answered null for handle ${handleId} for ${EVICTED_GRACE_MS} ms before it settled`
    })
  })
