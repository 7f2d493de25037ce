/**
 * Clearing a settled child's records (SubprocessRecords.clearChild): every record of
 * that handle goes (manifest, result, watermark, IPC queue), in one atomic write on a
 * storage with `writeAll`, the manifest first on a storage without; another handle's stay.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { keyPrefix as queueKeyPrefix } from "../src/schema/DurableQueueRecord.ts"
import { manifestKey, queueSocketId, resultKey, watermarkKey } from "../src/schema/SubprocessManifest.ts"
import { make as makeStorage, makeMemory, type StorageAdapterShape, type StorageWrite } from "../src/services/StorageAdapter.ts"
import { clearChild } from "../src/services/SubprocessRecords.ts"

const recordsOf = (handleId: string) => [
  manifestKey(handleId),
  resultKey(handleId),
  watermarkKey(handleId),
  `${queueKeyPrefix(queueSocketId(handleId))}0000000000000001`,
  `${queueKeyPrefix(queueSocketId(handleId))}0000000000000002`
]

const seeded = (storage: StorageAdapterShape) =>
  Effect.forEach([...recordsOf("a"), ...recordsOf("b")], (key) => storage.set(key, { key }), { discard: true })

describe("clearChild", () => {
  it.effect("on a storage with writeAll: one atomic write takes every record of the handle, and only those", () =>
    Effect.gen(function*() {
      const memory = yield* makeMemory
      const groups: Array<ReadonlyArray<StorageWrite>> = []
      let deletes = 0
      const storage: StorageAdapterShape = {
        ...memory,
        delete: (key) => Effect.andThen(Effect.sync(() => void deletes++), memory.delete(key)),
        writeAll: (writes) => Effect.andThen(Effect.sync(() => void groups.push(writes)), memory.writeAll!(writes))
      }
      yield* seeded(storage)
      yield* clearChild(storage, "a")
      assert.strictEqual(groups.length, 1)
      assert.strictEqual(deletes, 0)
      assert.sameMembers(groups[0]!.map((write) => write.key), recordsOf("a"))
      assert.deepStrictEqual(yield* storage.list(""), [...recordsOf("b")].sort())
    }))

  it.effect("on a storage without writeAll: the manifest goes first, then the other records", () =>
    Effect.gen(function*() {
      const memory = yield* makeMemory
      const deleted: Array<string> = []
      const storage = makeStorage({
        get: memory.get,
        set: memory.set,
        list: memory.list,
        delete: (key) => Effect.andThen(Effect.sync(() => void deleted.push(key)), memory.delete(key))
      })
      assert.isUndefined(storage.writeAll)
      yield* seeded(storage)
      yield* clearChild(storage, "a")
      assert.strictEqual(deleted[0], manifestKey("a"))
      assert.sameMembers(deleted, recordsOf("a"))
      assert.deepStrictEqual(yield* storage.list(""), [...recordsOf("b")].sort())
    }))
})
