/**
 * How a durable outbound queue (`services/DurableOutboundQueue.ts`) reads its stored
 * records: many keys at once, and one by one around a damaged record.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StorageError } from "../../Errors.ts"
import { getMany, type StorageAdapterShape } from "../../services/StorageAdapter.ts"

/** A record read and checked: its frames and the range of the record written before it. */
export interface DecodedRecord {
  readonly frames: ReadonlyArray<string>
  readonly prev: readonly [number, number] | null
}

/**
 * The stored values of `keys` in one `getMany`; when the storage fails it `Corrupt`
 * (one damaged record fails the whole read on file storage), each key is read on its
 * own, so the records around the damaged one are still read, and the damaged ones
 * are named with their storage's error.
 */
export const readValues = (storage: StorageAdapterShape, keys: ReadonlyArray<string>) =>
  getMany(storage, keys).pipe(
    Effect.map((values) => ({ values, unreadable: new Map<string, StorageError>() })),
    Effect.catchIf(
      (error) => error.reason._tag === "Corrupt",
      () =>
        Effect.gen(function*() {
          const values = new Map<string, unknown>()
          const unreadable = new Map<string, StorageError>()
          for (const key of keys) {
            const read = yield* Effect.result(storage.get(key))
            if (read._tag === "Failure") {
              if (read.failure.reason._tag !== "Corrupt") return yield* Effect.fail(read.failure)
              unreadable.set(key, read.failure)
            } else if (Option.isSome(read.success)) values.set(key, read.success.value)
          }
          return { values: values as ReadonlyMap<string, unknown>, unreadable }
        })
    )
  )
