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

/** @internal Notes a context, so `getLayerState(executionId, ...)` and previews find it. */
export const register = (ctx: EngineContext): void => {
  byId.set(ctx.id, new WeakRef(ctx))
  if (ctx.threadId !== undefined && ctx.parent === undefined) latestByThread.set(ctx.threadId, new WeakRef(ctx))
  if (byId.size > 10_000) {
    for (const [id, ref] of byId) if (ref.deref() === undefined) byId.delete(id)
  }
}

/** The context of an execution this process holds, if any. */
export const contextById = (executionId: string): EngineContext | undefined => byId.get(executionId)?.deref()

/** The item log of the latest root context of a thread (empty when none). */
export const latestItems = (threadId: string): ReadonlyArray<Item> => latestByThread.get(threadId)?.deref()?.items ?? []
