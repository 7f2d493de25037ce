/**
 * The persisted snapshot of one execution, schema version 2, field for field as the
 * documented `CheckpointSnapshot`.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"

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
