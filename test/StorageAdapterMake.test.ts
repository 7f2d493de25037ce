import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { make, makeMemory, StorageAdapter, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { suite } from "./StorageSuite.ts"

/**
 * A storage whose backend has no bulk reads (the four basic operations, plus the
 * memory backend's compare-and-set capability the suite also checks), counting calls.
 */
const basicOnly = (backend: StorageAdapterShape) => {
  const calls = { get: 0, list: 0 }
  const storage = make({
    get: (key) => Effect.suspend(() => (calls.get++, backend.get(key))),
    set: backend.set,
    delete: backend.delete,
    list: (prefix) => Effect.suspend(() => (calls.list++, backend.list(prefix))),
    compareAndSet: backend.compareAndSet!,
    setFenced: backend.setFenced!,
    deleteFenced: backend.deleteFenced!
  })
  return { storage, calls }
}

// The derived getMany and scan pass the same conformance suite as every backend's own.
suite("make(get, set, delete, list)", () => Layer.effect(StorageAdapter, Effect.map(makeMemory, (m) => basicOnly(m).storage)))

describe("StorageAdapter.make", () => {
  it.effect("derives getMany from get and scan from list + getMany; no key list touches nothing", () =>
    Effect.gen(function*() {
      const { calls, storage } = basicOnly(yield* makeMemory)
      yield* storage.set("a:1", 1)
      yield* storage.set("a:2", 0)
      yield* storage.set("b:1", "x")
      const found = yield* storage.getMany(["a:1", "a:2", "missing"])
      assert.deepStrictEqual([...found], [["a:1", 1], ["a:2", 0]])
      assert.strictEqual(calls.get, 3)
      assert.deepStrictEqual(yield* storage.scan("a:"), [["a:1", 1], ["a:2", 0]])
      assert.strictEqual(calls.list, 1)
      const before = calls.get
      assert.strictEqual((yield* storage.getMany([])).size, 0)
      assert.strictEqual(calls.get, before)
    }))

  it.effect("keeps a backend's own getMany and scan, and its compare-and-set capability", () =>
    Effect.gen(function*() {
      const memory = yield* makeMemory
      let own = 0
      const storage = make({
        ...memory,
        getMany: (keys) => Effect.suspend(() => (own++, memory.getMany(keys))),
        scan: (prefix) => Effect.suspend(() => (own++, memory.scan(prefix)))
      })
      yield* storage.set("k", 1)
      yield* storage.getMany(["k"])
      yield* storage.scan("")
      assert.strictEqual(own, 2)
      assert.isDefined(storage.compareAndSet)
      assert.isTrue(yield* storage.compareAndSet!("k", Option.some(1), 2))
      const basic = make({ get: memory.get, set: memory.set, delete: memory.delete, list: memory.list })
      assert.isUndefined(basic.compareAndSet)
    }))
})
