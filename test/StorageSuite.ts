/**
 * The behaviour every `StorageAdapter` backend must show. Each backend's test file
 * calls `suite(name, layer)` with a layer that builds a fresh, empty storage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import type { StorageError } from "../src/Errors.ts"
import { getMany, StorageAdapter } from "../src/services/StorageAdapter.ts"

const awkwardKeys = [
  "plain",
  "execution:abc:snapshot",
  "execution:abc:ledger:0000000000000001",
  "a/b/../../etc/passwd",
  "..",
  ".",
  ".hidden",
  "100%",
  "%2F",
  "a__b",
  "a:b",
  "a_b",
  "nul\u0000byte",
  "ünïcødé ☃ 𝄞",
  "~7E",
  "~~",
  "x".repeat(1000),
  "y".repeat(1000) + ":tail",
  "é".repeat(600)
]

const Op = Schema.Union([
  Schema.TaggedStruct("set", {
    key: Schema.Literals(["a", "b", "a:b", "a:c", "ab", "b:a", "é"]),
    value: Schema.Union([Schema.Int, Schema.String, Schema.Boolean, Schema.Null, Schema.Array(Schema.Int)])
  }),
  Schema.TaggedStruct("delete", { key: Schema.Literals(["a", "b", "a:b", "a:c", "ab", "b:a", "é"]) }),
  Schema.TaggedStruct("get", { key: Schema.Literals(["a", "b", "a:b", "a:c", "ab", "b:a", "é", "zz"]) }),
  Schema.TaggedStruct("list", { prefix: Schema.Literals(["", "a", "a:", "b", "é", "zz"]) }),
  Schema.TaggedStruct("getMany", { keys: Schema.Array(Schema.Literals(["a", "b", "a:b", "zz", "é"])) })
])

/** Runs the storage conformance suite against a layer that builds a fresh storage. */
export const suite = (name: string, makeLayer: () => Layer.Layer<StorageAdapter, StorageError>) =>
  describe(`StorageAdapter conformance: ${name}`, () => {
    const withStorage = <A, E>(
      f: (storage: StorageAdapter["Service"]) => Effect.Effect<A, E>
    ): Effect.Effect<A, E | StorageError> =>
      Effect.gen(function*() {
        return yield* f(yield* StorageAdapter)
      }).pipe(Effect.provide(makeLayer()))

    it.effect("get of a missing key is none, not an error", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          assert.isTrue(Option.isNone(yield* storage.get("missing")))
        })
      ))

    it.effect("set then get returns an equal copy, and set overwrites", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const value = { nested: { list: [1, "two", null, false] }, n: 0 }
          yield* storage.set("k", value)
          const first = yield* storage.get("k")
          assert.deepStrictEqual(first, Option.some(value))
          if (Option.isSome(first)) assert.notStrictEqual(first.value, value)
          yield* storage.set("k", "replaced")
          assert.deepStrictEqual(yield* storage.get("k"), Option.some("replaced"))
        })
      ))

    it.effect("falsy values survive", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          for (const [key, value] of [["zero", 0], ["empty", ""], ["false", false], ["null", null]] as const) {
            yield* storage.set(key, value)
            assert.deepStrictEqual(yield* storage.get(key), Option.some(value))
          }
          const found = yield* getMany(storage, ["zero", "empty", "false", "null", "missing"])
          assert.deepStrictEqual([...found.entries()].sort(), [["empty", ""], ["false", false], ["null", null], [
            "zero",
            0
          ]])
        })
      ))

    it.effect("delete removes a key and deleting a missing key succeeds", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          yield* storage.set("k", 1)
          yield* storage.delete("k")
          yield* storage.delete("k")
          yield* storage.delete("never-set")
          assert.isTrue(Option.isNone(yield* storage.get("k")))
          assert.deepStrictEqual(yield* storage.list(""), [])
        })
      ))

    it.effect("list returns the keys under a prefix, sorted", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          for (const key of ["b:2", "a:10", "a:2", "a:1", "ab", "a"]) yield* storage.set(key, key)
          assert.deepStrictEqual(yield* storage.list("a:"), ["a:1", "a:10", "a:2"])
          assert.deepStrictEqual(yield* storage.list(""), ["a", "a:1", "a:10", "a:2", "ab", "b:2"])
          assert.deepStrictEqual(yield* storage.list("c"), [])
        })
      ))

    it.effect("awkward keys round-trip through set, get, list and getMany", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          for (const [i, key] of awkwardKeys.entries()) yield* storage.set(key, { i })
          for (const [i, key] of awkwardKeys.entries()) {
            assert.deepStrictEqual(yield* storage.get(key), Option.some({ i }), JSON.stringify(key).slice(0, 40))
          }
          assert.deepStrictEqual(yield* storage.list(""), [...awkwardKeys].sort())
          assert.deepStrictEqual(yield* storage.list("y"), ["y".repeat(1000) + ":tail"])
          assert.deepStrictEqual(yield* storage.list("x".repeat(999)), ["x".repeat(1000)])
          assert.deepStrictEqual(yield* storage.list("y".repeat(1000) + ":"), ["y".repeat(1000) + ":tail"])
          const found = yield* getMany(storage, awkwardKeys)
          assert.strictEqual(found.size, awkwardKeys.length)
          for (const key of awkwardKeys) yield* storage.delete(key)
          assert.deepStrictEqual(yield* storage.list(""), [])
        })
      ))

    it.effect("getMany omits missing keys and touches nothing for an empty list", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          yield* storage.set("present", { ok: true })
          const found = yield* getMany(storage, ["present", "absent"])
          assert.deepStrictEqual([...found.entries()], [["present", { ok: true }]])
          assert.isFalse(found.has("absent"))
          assert.strictEqual((yield* getMany(storage, [])).size, 0)
        })
      ))

    it.effect("a value JSON cannot hold is refused with Unserializable and stores nothing", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const cyclic: Record<string, unknown> = {}
          cyclic.self = cyclic
          const cycleError = yield* Effect.flip(storage.set("cyclic", cyclic))
          assert.strictEqual(cycleError.reason._tag, "Unserializable")
          const bigintError = yield* Effect.flip(storage.set("big", { n: 1n }))
          assert.strictEqual(bigintError.reason._tag, "Unserializable")
          assert.deepStrictEqual(yield* storage.list(""), [])
        })
      ))

    it.effect("concurrent writes to distinct keys all land", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const keys = Array.from({ length: 50 }, (_, i) => `concurrent:${String(i).padStart(3, "0")}`)
          yield* Effect.forEach(keys, (key) => storage.set(key, key), { concurrency: "unbounded" })
          assert.deepStrictEqual(yield* storage.list("concurrent:"), keys)
        })
      ))

    it.effect.prop(
      "random operation sequences agree with a Map model",
      [Schema.Array(Op).check(Schema.isMaxLength(40))],
      ([ops]) =>
        withStorage((storage) =>
          Effect.gen(function*() {
            const model = new Map<string, string>()
            for (const op of ops) {
              switch (op._tag) {
                case "set": {
                  yield* storage.set(op.key, op.value)
                  model.set(op.key, JSON.stringify(op.value))
                  break
                }
                case "delete": {
                  yield* storage.delete(op.key)
                  model.delete(op.key)
                  break
                }
                case "get": {
                  const expected = model.get(op.key)
                  const actual = yield* storage.get(op.key)
                  assert.deepStrictEqual(
                    actual,
                    expected === undefined ? Option.none() : Option.some(JSON.parse(expected))
                  )
                  break
                }
                case "list": {
                  const expected = [...model.keys()].filter((key) => key.startsWith(op.prefix)).sort()
                  assert.deepStrictEqual(yield* storage.list(op.prefix), expected)
                  break
                }
                case "getMany": {
                  const found = yield* getMany(storage, op.keys)
                  const expected = new Map<string, unknown>()
                  for (const key of op.keys) {
                    const text = model.get(key)
                    if (text !== undefined) expected.set(key, JSON.parse(text))
                  }
                  assert.deepStrictEqual(new Map(found), expected)
                  break
                }
              }
            }
          })
        ),
      { timeout: 120_000, arbitrary: { runs: 40 } }
    )
  })
