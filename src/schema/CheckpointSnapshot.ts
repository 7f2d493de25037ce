/**
 * The persisted snapshot of one execution, schema version 2, field for field as the
 * documented `CheckpointSnapshot`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** The only snapshot version this library reads and writes. */
export const CHECKPOINT_SCHEMA_VERSION = 2 as const

/**
 * An `unknown` field whose key JSON drops when the value is `undefined`: a missing key
 * decodes back to `undefined`, so a step or prompt with no input survives a save.
 */
const UnknownInput = Schema.Unknown.pipe(Schema.withDecodingDefaultKey(Effect.succeed(undefined)))

/** A step that was in flight when the snapshot was taken. */
export const FrontierEntry = Schema.Struct({
  stepId: Schema.String,
  input: UnknownInput,
  state: Schema.optionalKey(Schema.Unknown)
})

/** A step that was in flight when the snapshot was taken. */
export type FrontierEntry = typeof FrontierEntry.Type

/** A pending ask-user prompt. */
export const AskUserPrompt = Schema.Struct({
  id: Schema.String,
  input: UnknownInput,
  createdAt: Schema.Number
})

/** A pending ask-user prompt. */
export type AskUserPrompt = typeof AskUserPrompt.Type

/** The working directory of a context: current and, once it changed, the previous one. */
export const Cwd = Schema.Struct({
  current: Schema.NullOr(Schema.String),
  previous: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/** The working directory of a context. */
export type Cwd = typeof Cwd.Type

/** The documented snapshot record, schema version 2. */
export const CheckpointSnapshot = Schema.Struct({
  schemaVersion: Schema.Literal(CHECKPOINT_SCHEMA_VERSION),
  executionId: Schema.String,
  threadId: Schema.optionalKey(Schema.String),
  resourceId: Schema.optionalKey(Schema.String),
  frontier: Schema.Array(FrontierEntry),
  layers: Schema.Record(Schema.String, Schema.Unknown),
  cwd: Schema.NullOr(Cwd),
  askUser: Schema.Array(AskUserPrompt),
  itemLog: Schema.Struct({ items: Schema.Array(Schema.Unknown) }),
  capturedAt: Schema.String
})

/** The documented snapshot record, schema version 2. */
export type CheckpointSnapshot = typeof CheckpointSnapshot.Type

/** The storage key of an execution's snapshot. */
export const snapshotKey = (executionId: string): string => `execution:${executionId}:snapshot`

/** How many items one item-log chunk holds. */
export const ITEM_CHUNK_SIZE = 256

/** The storage key of an execution's item-log chunk `index`. */
export const itemChunkKey = (executionId: string, index: number): string =>
  `execution:${executionId}:items:${String(index).padStart(8, "0")}`

/** The prefix of an execution's item-log chunk keys. */
export const itemChunkPrefix = (executionId: string): string => `execution:${executionId}:items:`

/** One stored item-log chunk: a full run of items, never changed once written. */
export const ItemChunk = Schema.Struct({
  version: Schema.Literal(1),
  items: Schema.Array(Schema.Unknown)
})

/**
 * The record stored at the snapshot key: the documented v2 snapshot whose older items
 * may live in chunks. When `itemLog.chunks` is present, the log is the items of chunks
 * `0 .. count - 1` (each `size` items) followed by `itemLog.items`; without it, the
 * items are all inline.
 */
export const StoredSnapshotHead = Schema.Struct({
  ...CheckpointSnapshot.fields,
  itemLog: Schema.Struct({
    items: Schema.Array(Schema.Unknown),
    chunks: Schema.optionalKey(Schema.Struct({ size: Schema.Int, count: Schema.Int }))
  })
})

/** The record stored at the snapshot key. */
export type StoredSnapshotHead = typeof StoredSnapshotHead.Type

/**
 * The storage key of an execution's failure mark: written when a run of the execution
 * ends in a failure (not an interruption), so an operator's tools can tell a failed run
 * from one a crash cut short (docs/cli.md#execution-status). A later run that moves the
 * execution on (a newer snapshot, or the root's recorded output) outranks it.
 */
export const runFailedKey = (executionId: string): string => `execution:${executionId}:failed`

/** An execution's failure mark. */
export const RunFailed = Schema.Struct({
  version: Schema.Literal(1),
  /**
   * When the run failed, ISO text (compared with the snapshot's `capturedAt`). A resume
   * that fails again the same way, saving no snapshot, leaves the mark as it is: then
   * the first of those failures.
   */
  at: Schema.String,
  /** The failure, one line. */
  error: Schema.String
})

/** An execution's failure mark. */
export type RunFailed = typeof RunFailed.Type
