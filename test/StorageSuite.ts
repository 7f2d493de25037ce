/**
 * The behaviour every `StorageAdapter` backend must show. Each backend's test file
 * calls `suite(name, layer)` with a layer that builds a fresh, empty storage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import type { StorageError } from "../src/Errors.ts"
import { getMany, JsonText, keyProblem, scan, StorageAdapter } from "../src/services/StorageAdapter.ts"

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

/** Keys every backend refuses with the same typed error. */
const refusedKeys = ["", "\ud800", "lone\udc00low", "a\ud83d", "\udfffz"]

const Op = Schema.Union([
  Schema.TaggedStruct("set", {
    key: Schema.Literals(["a", "b", "a:b", "a:c", "ab", "b:a", "é"]),
    value: Schema.Union([Schema.Int, Schema.String, Schema.Boolean, Schema.Null, Schema.Array(Schema.Int)])
  }),
  Schema.TaggedStruct("delete", { key: Schema.Literals(["a", "b", "a:b", "a:c", "ab", "b:a", "é"]) }),
  Schema.TaggedStruct("get", { key: Schema.Literals(["a", "b", "a:b", "a:c", "ab", "b:a", "é", "zz"]) }),
  Schema.TaggedStruct("list", { prefix: Schema.Literals(["", "a", "a:", "b", "é", "zz"]) }),
  Schema.TaggedStruct("getMany", { keys: Schema.Array(Schema.Literals(["a", "b", "a:b", "zz", "é"])) }),
  Schema.TaggedStruct("scan", { prefix: Schema.Literals(["", "a", "a:", "b", "é", "zz"]) })
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

    it.effect("a JsonText value is stored as the value its text holds, under every key kind, alone or in writeAll", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const value = { version: 3, frames: [{ type: "item", item: { s: "q\" b\\ \u2028" } }, "x", -1.5, null, [true]] }
          const text = JSON.stringify(value)
          // The queue's batch keys go to a file storage's log; others to files of their own.
          const keys = ["json:plain", "durableOutboundQueue:jt:batch:0000000000000001-0000000000000005"]
          for (const key of keys) {
            yield* storage.set(key, new JsonText(text))
            assert.deepStrictEqual(yield* storage.get(key), Option.some(value))
          }
          if (storage.writeAll !== undefined) {
            yield* storage.writeAll([{ op: "set", key: "json:all", value: new JsonText(text) }])
            assert.deepStrictEqual(yield* storage.get("json:all"), Option.some(value))
          }
          // A storage that knows nothing of JsonText and stringifies it still writes the value.
          assert.strictEqual(JSON.stringify({ v: new JsonText(text) }), JSON.stringify({ v: value }))
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

    it.effect("scanText, where offered, is scan with each value as its JSON text", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          if (storage.scanText === undefined) return
          const values: Record<string, unknown> = { "a:2": { b: [1, "two", null], a: false }, "a:10": "ten", "a:1": 0, "ab": 1, "a": 2 }
          for (const [key, value] of Object.entries(values)) yield* storage.set(key, value)
          for (const key of ["y".repeat(1000) + ":tail", "x\u{1F600}:é"]) yield* storage.set(key, key)
          for (const prefix of ["a:", "", "c", "y".repeat(1000), "x\u{1F600}"]) {
            const texts = yield* storage.scanText(prefix)
            const scanned = yield* storage.scan(prefix)
            assert.deepStrictEqual(texts.map(([key]) => key), scanned.map(([key]) => key), prefix.slice(0, 10))
            assert.deepStrictEqual(texts.map(([, text]) => JSON.parse(text)), scanned.map(([, value]) => value))
          }
          assert.deepStrictEqual(yield* storage.scanText("a:"), [["a:1", "0"], ["a:10", "\"ten\""], [
            "a:2",
            "{\"b\":[1,\"two\",null],\"a\":false}"
          ]])
        })
      ))

    it.effect("scanBetween, where offered, reads the keys of a range under a prefix, sorted, with their values", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const scanBetween = storage.scanBetween
          if (scanBetween === undefined) return
          for (const key of ["c/0001", "c/0002", "c/0003", "c/0010", "c0", "b/0002", "c/0002x", "c/\u{1F600}"]) {
            yield* storage.set(key, { key })
          }
          assert.deepStrictEqual(yield* scanBetween("c/", "c/0002", "c/0010"), [
            ["c/0002", { key: "c/0002" }],
            ["c/0002x", { key: "c/0002x" }],
            ["c/0003", { key: "c/0003" }]
          ])
          assert.deepStrictEqual((yield* scanBetween("c/", "c/", "c/\u{1F600}~")).map(([key]) => key), [
            "c/0001",
            "c/0002",
            "c/0002x",
            "c/0003",
            "c/0010",
            "c/\u{1F600}"
          ])
          assert.deepStrictEqual(yield* scanBetween("c/", "c/0003", "c/0003"), [])
          assert.deepStrictEqual(yield* scanBetween("c/", "c/0004", "c/0009"), [])
        })
      ))

    it.effect("writeAll, where offered, applies its writes in order, all of them", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const writeAll = storage.writeAll
          if (writeAll === undefined) return
          yield* storage.set("old", 1)
          yield* writeAll([
            { op: "set", key: "a", value: 1 },
            { op: "set", key: "b", value: { n: [2] } },
            { op: "delete", key: "a" },
            { op: "delete", key: "old" },
            { op: "set", key: "c", value: 3 },
            { op: "set", key: "c", value: 4 },
            { op: "delete", key: "never-there" }
          ])
          assert.deepStrictEqual(yield* storage.scan(""), [["b", { n: [2] }], ["c", 4]])
          yield* writeAll([])
          assert.deepStrictEqual(yield* storage.list(""), ["b", "c"])
        })
      ))

    it.effect("writeAll, where offered, writes nothing when one of its keys or values is refused", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const writeAll = storage.writeAll
          if (writeAll === undefined) return
          yield* storage.set("kept", "before")
          const badKey = yield* Effect.flip(writeAll([
            { op: "set", key: "kept", value: "after" },
            { op: "set", key: "new", value: 1 },
            { op: "delete", key: "\ud800" }
          ]))
          assert.strictEqual(badKey.reason._tag, "Unserializable")
          const badValue = yield* Effect.flip(writeAll([
            { op: "delete", key: "kept" },
            { op: "set", key: "big", value: { n: 1n } }
          ]))
          assert.strictEqual(badValue.reason._tag, "Unserializable")
          assert.deepStrictEqual(yield* storage.scan(""), [["kept", "before"]])
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

    it.effect("refuses the empty key and keys that are not well-formed Unicode, the same way on every backend", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          yield* storage.set("kept", 1)
          for (const key of refusedKeys) {
            const label = JSON.stringify(key)
            const expectRefused = (operation: string, error: StorageError) => {
              assert.strictEqual(error.reason._tag, "Unserializable", `${operation} ${label}`)
              assert.strictEqual(error.operation, operation, `${operation} ${label}`)
              assert.strictEqual(error.reason.message, keyProblem(key), `${operation} ${label}`)
            }
            expectRefused("get", yield* Effect.flip(storage.get(key)))
            expectRefused("set", yield* Effect.flip(storage.set(key, 1)))
            expectRefused("delete", yield* Effect.flip(storage.delete(key)))
            expectRefused("getMany", yield* Effect.flip(getMany(storage, ["kept", key])))
            expectRefused("compareAndSet", yield* Effect.flip(casOf(storage)(key, Option.none(), 1)))
            const { deleteFenced, setFenced } = fencedOf(storage)
            expectRefused("setFenced", yield* Effect.flip(setFenced(key, 1, { key: "kept", token: 1 })))
            expectRefused("setFenced", yield* Effect.flip(setFenced("kept", 1, { key, token: 1 })))
            expectRefused("deleteFenced", yield* Effect.flip(deleteFenced(key, { key: "kept", token: 1 })))
          }
          // Nothing was written and the valid key is untouched.
          assert.deepStrictEqual(yield* storage.list(""), ["kept"])
          assert.deepStrictEqual(yield* storage.get("kept"), Option.some(1))
          // A prefix is not a key: the empty prefix lists everything.
          assert.deepStrictEqual(yield* scan(storage, ""), [["kept", 1]])
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
          // A value with no JSON form at all never replaces the one stored.
          yield* storage.set("kept", { precious: true })
          for (const bad of [undefined, () => 1, Symbol("s")]) {
            const error = yield* Effect.flip(storage.set("kept", bad))
            assert.strictEqual(error.reason._tag, "Unserializable")
          }
          assert.deepStrictEqual(yield* storage.get("kept"), Option.some({ precious: true }))
          assert.deepStrictEqual([...(yield* storage.getMany(["kept"]))], [["kept", { precious: true }]])
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

    /** The backend's compareAndSet; every built-in backend has one. */
    const casOf = (storage: StorageAdapter["Service"]) => {
      assert.isDefined(storage.compareAndSet, "this backend should implement compareAndSet")
      return storage.compareAndSet!
    }

    it.effect("compareAndSet on an absent key: expecting absence sets, expecting a value does not", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const cas = casOf(storage)
          assert.isFalse(yield* cas("lease", Option.some(null), { owner: "a" }))
          assert.isTrue(Option.isNone(yield* storage.get("lease")))
          assert.isTrue(yield* cas("lease", Option.none(), { owner: "a" }))
          assert.deepStrictEqual(yield* storage.get("lease"), Option.some({ owner: "a" }))
          assert.isFalse(yield* cas("lease", Option.none(), { owner: "b" }))
          assert.deepStrictEqual(yield* storage.get("lease"), Option.some({ owner: "a" }))
        })
      ))

    it.effect("compareAndSet replaces only the value it expects, falsy values included", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const cas = casOf(storage)
          yield* storage.set("lease", { owner: "a", token: 1 })
          assert.isFalse(yield* cas("lease", Option.some({ owner: "b", token: 1 }), { owner: "c", token: 2 }))
          assert.isFalse(yield* cas("lease", Option.some({ owner: "a", token: 2 }), { owner: "c", token: 2 }))
          assert.deepStrictEqual(yield* storage.get("lease"), Option.some({ owner: "a", token: 1 }))
          assert.isTrue(yield* cas("lease", Option.some({ owner: "a", token: 1 }), { owner: "c", token: 2 }))
          assert.deepStrictEqual(yield* storage.get("lease"), Option.some({ owner: "c", token: 2 }))
          // A write with the superseded value as its expectation is refused.
          assert.isFalse(yield* cas("lease", Option.some({ owner: "a", token: 1 }), { owner: "a", token: 3 }))

          yield* storage.set("falsy", null)
          assert.isFalse(yield* cas("falsy", Option.none(), 1))
          assert.isFalse(yield* cas("falsy", Option.some(0), 1))
          assert.isTrue(yield* cas("falsy", Option.some(null), 0))
          assert.isTrue(yield* cas("falsy", Option.some(0), ""))
          assert.deepStrictEqual(yield* storage.get("falsy"), Option.some(""))
        })
      ))

    it.effect("concurrent compareAndSets from one expected value: exactly one wins", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const cas = casOf(storage)
          const contenders = Array.from({ length: 16 }, (_, i) => ({ owner: i }))
          const fromAbsent = yield* Effect.forEach(contenders, (next) => cas("lease", Option.none(), next), {
            concurrency: "unbounded"
          })
          assert.strictEqual(fromAbsent.filter(Boolean).length, 1)
          const winner = contenders[fromAbsent.indexOf(true)]
          assert.deepStrictEqual(yield* storage.get("lease"), Option.some(winner))

          const again = yield* Effect.forEach(contenders, (next) => cas("lease", Option.some(winner), { next }), {
            concurrency: "unbounded"
          })
          assert.strictEqual(again.filter(Boolean).length, 1)
          assert.deepStrictEqual(yield* storage.get("lease"), Option.some({ next: contenders[again.indexOf(true)] }))
        })
      ))

    it.effect("concurrent read-compareAndSet loops lose no increment", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const cas = casOf(storage)
          yield* storage.set("counter", 0)
          const increment: Effect.Effect<void, StorageError> = Effect.gen(function*() {
            const current = yield* storage.get("counter")
            const n = Option.getOrThrow(current) as number
            if (!(yield* cas("counter", current, n + 1))) return yield* increment
          })
          yield* Effect.forEach(Array.from({ length: 8 }), () => Effect.repeat(increment, { times: 4 }), {
            concurrency: "unbounded",
            discard: true
          })
          assert.deepStrictEqual(yield* storage.get("counter"), Option.some(40))
        })
      ))

    it.effect("compareAndSet refuses a value JSON cannot hold and stores nothing", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(casOf(storage)("big", Option.none(), { n: 1n }))
          assert.strictEqual(error.reason._tag, "Unserializable")
          assert.deepStrictEqual(yield* storage.list(""), [])
        })
      ))

    /** The backend's fenced writes; every built-in backend has them. */
    const fencedOf = (storage: StorageAdapter["Service"]) => {
      assert.isDefined(storage.setFenced, "this backend should implement setFenced")
      assert.isDefined(storage.deleteFenced, "this backend should implement deleteFenced")
      return { setFenced: storage.setFenced!, deleteFenced: storage.deleteFenced! }
    }

    it.effect("a fenced write lands with the fence's current token and is refused with any other", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const { deleteFenced, setFenced } = fencedOf(storage)
          const absent = yield* Effect.flip(setFenced("data", 1, { key: "lease", token: 1 }))
          assert.strictEqual(absent.reason._tag, "Conflict")
          assert.isTrue(Option.isNone(yield* storage.get("data")))

          yield* storage.set("lease", { owner: "a", token: 1 })
          yield* setFenced("data", 1, { key: "lease", token: 1 })
          assert.deepStrictEqual(yield* storage.get("data"), Option.some(1))
          assert.isTrue(yield* casOf(storage)("lease", Option.some({ owner: "a", token: 1 }), { owner: "b", token: 2 }))

          const stale = yield* Effect.flip(setFenced("data", 2, { key: "lease", token: 1 }))
          assert.strictEqual(stale.reason._tag, "Conflict")
          assert.strictEqual(stale.reason.key, "data")
          const staleDelete = yield* Effect.flip(deleteFenced("data", { key: "lease", token: 1 }))
          assert.strictEqual(staleDelete.reason._tag, "Conflict")
          assert.deepStrictEqual(yield* storage.get("data"), Option.some(1))

          yield* setFenced("data", 3, { key: "lease", token: 2 })
          assert.deepStrictEqual(yield* storage.get("data"), Option.some(3))
          yield* deleteFenced("data", { key: "lease", token: 2 })
          yield* deleteFenced("data", { key: "lease", token: 2 })
          assert.isTrue(Option.isNone(yield* storage.get("data")))
        })
      ))

    it.effect("no fenced write with a superseded token lands after the fence moved on", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const { setFenced } = fencedOf(storage)
          yield* storage.set("lease", { owner: "a", token: 1 })
          const writes = yield* Effect.forEach(
            Array.from({ length: 24 }, (_, i) => `w:${String(i).padStart(2, "0")}`),
            (key) => Effect.map(Effect.exit(setFenced(key, key, { key: "lease", token: 1 })), (exit) => ({ key, exit })),
            { concurrency: "unbounded" }
          ).pipe(Effect.forkChild)
          yield* Effect.yieldNow
          assert.isTrue(yield* casOf(storage)("lease", Option.some({ owner: "a", token: 1 }), { owner: "b", token: 2 }))
          const atTakeover = yield* storage.list("w:")
          const outcomes = yield* Fiber.join(writes)
          assert.deepStrictEqual(yield* storage.list("w:"), atTakeover)
          for (const { exit, key } of outcomes) {
            if (Exit.isSuccess(exit)) assert.include(atTakeover, key)
            else {
              assert.isFalse(atTakeover.includes(key))
              const error = Cause.squash(exit.cause) as StorageError
              assert.strictEqual(error.reason._tag, "Conflict")
            }
          }
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
                case "scan": {
                  const expected = [...model.keys()].filter((key) => key.startsWith(op.prefix)).sort()
                    .map((key): readonly [string, unknown] => [key, JSON.parse(model.get(key)!)])
                  assert.deepStrictEqual(yield* scan(storage, op.prefix), expected)
                  break
                }
              }
            }
          })
        ),
      { timeout: 120_000, arbitrary: { runs: 40 } }
    )
  })
