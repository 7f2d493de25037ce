/**
 * The manifest a subprocess adapter persists for each spawned child (what `listLive`
 * and `reattach` read after a host restart), and the keys of a child's records.
 * Reading and writing them is `services/SubprocessRecords.ts`.
 *
 * Keys: `subprocess:manifest:<handleId>`, `subprocess:result:<handleId>` (an
 * out-of-process child's result, written by the child before it reports it),
 * `subprocess:watermark:<handleId>` (the parent's acked IPC seq), and the child's
 * IPC queue under `durableOutboundQueue:subprocess%3A<handleId>:`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** The prefix every manifest key starts with. */
export const MANIFEST_PREFIX = "subprocess:manifest:"

/** The key of a child's manifest. */
export const manifestKey = (handleId: string): string => MANIFEST_PREFIX + handleId

/** The key of a child's persisted result. */
export const resultKey = (handleId: string): string => `subprocess:result:${handleId}`

/** The key where the parent keeps the highest IPC seq it has handled. */
export const watermarkKey = (handleId: string): string => `subprocess:watermark:${handleId}`

/** The id of a child's durable outbound queue. */
export const queueSocketId = (handleId: string): string => `subprocess:${handleId}`

const NullableString = Schema.NullOr(Schema.String)

/** A spawned child, as recorded when it starts. */
export const SubprocessManifest = Schema.Struct({
  version: Schema.Literal(1),
  /** Which adapter kind spawned it: each adapter only adopts its own. */
  adapter: Schema.Literals(["memory", "local"]),
  handleId: Schema.String,
  stepId: Schema.String,
  /** The module that defined the step (a file URL), imported by a child process or a re-run. */
  module: NullableString,
  /** An entry module given to the adapter; it wins over `module`. */
  entry: NullableString,
  /** The input as JSON text. */
  serializedInput: Schema.String,
  executionId: Schema.String,
  parentExecutionId: NullableString,
  threadId: NullableString,
  resourceId: NullableString,
  cwdInit: NullableString,
  /** The child's pid; null until the process started (and always for in-process children). */
  pid: Schema.NullOr(Schema.Int),
  /** Field 22 of `/proc/<pid>/stat`; null where there is no `/proc`. */
  pidStarttime: Schema.NullOr(Schema.Number),
  /** The unix socket the child serves its IPC stream on. */
  socketPath: NullableString,
  /** The root of the child's checkpoint storage (its durable harness). */
  checkpointRoot: NullableString,
  /** How long a finished child waits for its result to be acknowledged before it exits. */
  lingerMs: Schema.Number,
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: Schema.Number,
  /** Set for an OS command run as a child (noetic's process request) instead of a step. */
  process: Schema.optionalKey(Schema.Struct({
    command: Schema.String,
    args: Schema.Array(Schema.String),
    cwd: NullableString,
    /** Whether it leads its own process group (signals then go to the group). */
    detached: Schema.Boolean
  }))
})

/** A spawned child, as recorded when it starts. */
export type SubprocessManifest = typeof SubprocessManifest.Type
