/**
 * The records a subprocess adapter keeps on a `StorageAdapter`: reading and writing
 * each child's manifest, its persisted result (written by an out-of-process child
 * before it reports it, so a parent that was down when the child finished still gets
 * it), and clearing them all once the child settles. The manifest schema and the keys
 * are `schema/SubprocessManifest.ts`, re-exported here.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Corrupt, StorageError } from "../Errors.ts"
import {
  manifestKey,
  queueSocketId,
  resultKey,
  SubprocessManifest,
  watermarkKey
} from "../schema/SubprocessManifest.ts"
import { keyPrefix as queueKeyPrefix } from "../schema/DurableQueueRecord.ts"
import type { StorageAdapterShape } from "./StorageAdapter.ts"
import { SubprocessErrorReason } from "./SubprocessAdapter.ts"

export * from "../schema/SubprocessManifest.ts"

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

/**
 * Removes every record of a settled child: manifest, result, watermark and its IPC
 * queue. On a storage with `writeAll` they go in one atomic write (one commit where a
 * host waits for it before handing the result out), else the manifest first, then the
 * rest at once.
 */
export const clearChild = (storage: StorageAdapterShape, handleId: string): Effect.Effect<void, StorageError> =>
  storage.writeAll !== undefined
    ? Effect.flatMap(storage.list(queueKeyPrefix(queueSocketId(handleId))), (queueKeys) =>
      storage.writeAll!(
        [manifestKey(handleId), resultKey(handleId), watermarkKey(handleId), ...queueKeys].map((key) => ({
          op: "delete" as const,
          key
        }))
      ))
    : clearOneByOne(storage, handleId)

const clearOneByOne = (storage: StorageAdapterShape, handleId: string): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    // The manifest goes first: once it is gone no restart tries to reattach the child.
    // The rest is then no one's, in any order: its deletes go at once.
    yield* storage.delete(manifestKey(handleId))
    const queueKeys = yield* storage.list(queueKeyPrefix(queueSocketId(handleId)))
    yield* Effect.forEach([resultKey(handleId), watermarkKey(handleId), ...queueKeys], (key) => storage.delete(key), {
      concurrency: 16,
      discard: true
    })
  })
