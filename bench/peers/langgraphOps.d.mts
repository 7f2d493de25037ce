/** Types of `langgraphOps.mjs` (plain JavaScript, shared with the SQLite saver's child process). */
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint"

/** A LangGraph checkpoint config. */
export type SaverConfig = { readonly configurable?: Record<string, unknown> }
/** The output of step `i`. */
export declare const stepOutput: (i: number) => { readonly step: number; readonly value: number }
/** A run of `steps` steps putting a checkpoint after each; milliseconds. */
export declare const runSteps: (saver: BaseCheckpointSaver, threadId: string, steps: number) => Promise<number>
/** Loads the latest checkpoint of a thread. */
export declare const loadLatest: (
  saver: BaseCheckpointSaver,
  threadId: string
) => Promise<{ readonly ms: number; readonly count: number }>
/** Fills a thread as `runSteps` would, untimed. */
export declare const fillThread: (saver: BaseCheckpointSaver, threadId: string, steps: number) => Promise<void>
/** Puts a checkpoint holding `items`; milliseconds and the new config. */
export declare const saveItems: (
  saver: BaseCheckpointSaver,
  threadId: string,
  seq: number,
  items: ReadonlyArray<unknown>,
  parent: SaverConfig | undefined
) => Promise<{ readonly ms: number; readonly config: SaverConfig }>
