/**
 * The contexts of the executions this process holds, by execution id, and the latest
 * root context per thread, held weakly: `context.ts` notes each root context here and
 * the harness's layer methods (`layerMethods.ts`: `getLayerState`, previews) find them.
 * See docs/layers-and-channels.md#hook-order.
 *
 * @since 0.2.0
 */
import type { AgentContext as EngineContext, Item } from "../harness/AgentContext.ts"

// Contexts by execution id, and the latest per thread (for previews), held weakly.
const byId = new Map<string, WeakRef<EngineContext>>()
const latestByThread = new Map<string, WeakRef<EngineContext>>()

/** Whether `ref` holds `ctx`. */
const holds = (ref: WeakRef<EngineContext> | undefined, ctx: EngineContext): boolean => ref !== undefined && ref.deref() === ctx

/** The size of `byId` past which the entries of collected contexts are dropped (doubles with what stays). */
let sweepAbove = 10_000

/** @internal Notes a context, so `getLayerState(executionId, ...)` and previews find it. */
export const register = (ctx: EngineContext): void => {
  const root = ctx.threadId !== undefined && ctx.parent === undefined
  // Every step's view of a context notes it again: most find it noted already.
  if (holds(byId.get(ctx.id), ctx) && (!root || holds(latestByThread.get(ctx.threadId!), ctx))) return
  byId.set(ctx.id, new WeakRef(ctx))
  if (root) latestByThread.set(ctx.threadId!, new WeakRef(ctx))
  if (byId.size > sweepAbove) {
    for (const [id, ref] of byId) if (ref.deref() === undefined) byId.delete(id)
    // While many contexts stay alive, a sweep per new context would cost O(n) each time.
    sweepAbove = Math.max(10_000, byId.size * 2)
  }
}

/** The context of an execution this process holds, if any. */
export const contextById = (executionId: string): EngineContext | undefined => byId.get(executionId)?.deref()

/** The item log of the latest root context of a thread (empty when none). */
export const latestItems = (threadId: string): ReadonlyArray<Item> => latestByThread.get(threadId)?.deref()?.items ?? []
