/**
 * The recovery step of a host restart: rebind the children still running (or finished
 * while the host was down) and restore the parent context of each.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { CheckpointSchemaMismatch, StorageError } from "../Errors.ts"
import type { ItemSchemaMismatch } from "../services/ItemSchemas.ts"
import type { SubprocessError, SubprocessHandle } from "../services/SubprocessAdapter.ts"
import type { AgentContext } from "./AgentContext.ts"
import type { AgentHarness, RestoreContextOptions } from "./AgentHarness.ts"

/** What `reattachLiveChildren` found. */
export interface ReattachedChildren {
  /** Every child the adapter still knows: running, or finished while the host was down. */
  readonly handles: ReadonlyArray<SubprocessHandle>
  /** The restored parent context of each handle, by handle id (children without a recorded parent are absent). */
  readonly contexts: ReadonlyMap<string, AgentContext>
  /** The handles whose parent context could not be restored, with why; the others are unaffected. */
  readonly failures: ReadonlyArray<{
    readonly handle: SubprocessHandle
    readonly error: StorageError | CheckpointSchemaMismatch | ItemSchemaMismatch
  }>
}

/** Options of `reattachLiveChildren`. */
export interface ReattachLiveChildrenOptions {
  /** Host wiring handed to each restore (state, layers), per handle. */
  readonly restore?: RestoreContextOptions | ((handle: SubprocessHandle) => RestoreContextOptions) | undefined
  /** How many parent contexts are restored at once. Default: unbounded. */
  readonly concurrency?: number | undefined
}

/**
 * Lists the harness adapter's live children (`listLive`, which rebinds them) and
 * restores each one's parent context (`harness.restore(parentExecutionId)`; for a
 * handle that names no parent, the execution it carries, as noetic does) in
 * parallel. A snapshot that fails to load is reported in `failures` with its handle
 * and does not abort the others. Without durable storage it finds nothing and costs
 * nothing.
 */
export const reattachLiveChildren = Effect.fnUntraced(function*(
  harness: Pick<AgentHarness<any>, "subprocess" | "restore" | "adopt">,
  options: ReattachLiveChildrenOptions = {}
): Effect.fn.Return<ReattachedChildren, StorageError | SubprocessError> {
  const handles = yield* harness.subprocess.listLive
  const contexts = new Map<string, AgentContext>()
  const failures: Array<ReattachedChildren["failures"][number]> = []
  yield* Effect.forEach(handles, (handle) => {
    // The parent context a detached spawn recorded; a handle that names none (a host
    // adapter's, carrying only `metadata.executionId`) has the execution it carries
    // restored, as noetic's helper does. Either way, no snapshot means no context.
    const parent = handle.parentExecutionId ?? handle.executionId
    const wiring = typeof options.restore === "function" ? options.restore(handle) : options.restore
    return harness.restore(parent, wiring).pipe(
      Effect.match({
        onFailure: (error) => void failures.push({ handle, error }),
        onSuccess: (restored) => {
          if (Option.isSome(restored)) contexts.set(handle.handleId, restored.value)
          return restored
        }
      }),
      // The restored parent checkpoints when its child settles, as after detachedSpawn.
      Effect.flatMap((restored) =>
        restored !== undefined && Option.isSome(restored) ? harness.adopt(handle, restored.value) : Effect.void
      )
    )
  }, { concurrency: options.concurrency ?? "unbounded", discard: true })
  return { handles, contexts, failures }
})
