/**
 * What the last `callModel` on a context produced (noetic's `StepMeta`): the loop
 * state of `Step.ts` carries it and `ToolLoop.ts` records it (and re-exports it, its
 * public home), so both import it from here, one way.
 * See docs/runtime.md#the-tool-loop.
 */
import type { Item as ModelItem, RoundUsage } from "../services/ModelProvider.ts"

/** What the last `callModel` on a context produced (noetic's `StepMeta`), as a loop's `until` sees it. */
export interface StepMeta {
  readonly toolCalls?: ReadonlyArray<ModelItem> | undefined
  readonly usage?: RoundUsage | undefined
  readonly cost?: number | undefined
  readonly responseItems: ReadonlyArray<ModelItem>
}
