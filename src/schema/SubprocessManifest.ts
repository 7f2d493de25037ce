/**
 * The records a subprocess adapter persists: one manifest per spawned child (what
 * `listLive` and `reattach` read after a host restart) and, for an out-of-process
 * child, its result (written by the child before it reports it, so a parent that
 * was down when the child finished still gets it).
 *
 * Keys: `subprocess:manifest:<handleId>`, `subprocess:result:<handleId>`,
 * `subprocess:watermark:<handleId>` (the parent's acked IPC seq), and the child's
 * IPC queue under `durableOutboundQueue:subprocess%3A<handleId>:`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Corrupt, StorageError } from "../Errors.ts"
import { SubprocessErrorReason } from "../services/SubprocessAdapter.ts"
import { keyPrefix as queueKeyPrefix } from "../services/DurableOutboundQueue.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"

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

/** How a child ended, as the child recorded it. */
export const SubprocessOutcome = Schema.Union([
  Schema.Struct({ _tag: Schema.Literal("Success"), value: Schema.Unknown }),
  Schema.Struct({ _tag: Schema.Literal("Failure"), error: SubprocessErrorReason })
])

/** How a child ended, as the child recorded it. */
export type SubprocessOutcome = typeof SubprocessOutcome.Type

/** A child's persisted result. */
export const SubprocessResult = Schema.Struct({
  version: Schema.Literal(1),
  handleId: Schema.String,
  outcome: SubprocessOutcome
})

/** A child's persisted result. */
export type SubprocessResult = typeof SubprocessResult.Type

const corrupt = (operation: string, key: string, message: string) =>
  new StorageError({ operation, reason: new Corrupt({ key, message }) })

/** Reads the record at `key`; one that does not decode is a `Corrupt` storage error naming the key. */
const loadRecord = <A, I>(
  storage: StorageAdapterShape,
  key: string,
  schema: Schema.Codec<A, I>,
  what: string
): Effect.Effect<Option.Option<A>, StorageError> =>
  Effect.flatMap(storage.get(key), (stored) =>
    Option.isNone(stored)
      ? Effect.succeedNone
      : Schema.decodeUnknownEffect(schema)(stored.value).pipe(
        Effect.mapError((error) => corrupt("reattach", key, `not a subprocess ${what}: ${error.message}`)),
        Effect.map(Option.some)
      ))

/** Reads a manifest; a record that does not decode is a `Corrupt` storage error naming its key. */
export const loadManifest = (
  storage: StorageAdapterShape,
  handleId: string
): Effect.Effect<Option.Option<SubprocessManifest>, StorageError> =>
  loadRecord(storage, manifestKey(handleId), SubprocessManifest, "manifest")

/** Writes a manifest. */
export const saveManifest = (storage: StorageAdapterShape, manifest: SubprocessManifest): Effect.Effect<void, StorageError> =>
  storage.set(manifestKey(manifest.handleId), manifest)

/** Reads a persisted result; a record that does not decode is a `Corrupt` storage error. */
export const loadResult = (
  storage: StorageAdapterShape,
  handleId: string
): Effect.Effect<Option.Option<SubprocessOutcome>, StorageError> =>
  Effect.map(loadRecord(storage, resultKey(handleId), SubprocessResult, "result"), Option.map((record) => record.outcome))

/** Persists a child's result (the error encoded to its JSON form). */
export const saveResult = (
  storage: StorageAdapterShape,
  handleId: string,
  outcome: SubprocessOutcome
): Effect.Effect<void, StorageError> =>
  Schema.encodeUnknownEffect(SubprocessResult)({ version: 1, handleId, outcome }).pipe(
    Effect.mapError((error) => corrupt("saveResult", resultKey(handleId), error.message)),
    Effect.flatMap((encoded) => storage.set(resultKey(handleId), encoded))
  )

/** Removes every record of a settled child: manifest, result, watermark and its IPC queue. */
export const clearChild = (storage: StorageAdapterShape, handleId: string): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    // The manifest goes first: once it is gone no restart tries to reattach the child.
    yield* storage.delete(manifestKey(handleId))
    yield* storage.delete(resultKey(handleId))
    yield* storage.delete(watermarkKey(handleId))
    const queueKeys = yield* storage.list(queueKeyPrefix(queueSocketId(handleId)))
    yield* Effect.forEach(queueKeys, (key) => storage.delete(key), { concurrency: 16, discard: true })
  })
