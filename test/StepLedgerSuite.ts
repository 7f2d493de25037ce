/**
 * The behaviour of `StepLedger` on a storage backend. Each backend's test file calls
 * `suite(name, layer)` with a layer that builds a fresh, empty storage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger, Option, Schema } from "effect"
import { StepLedgerRetentionInvalid, type StorageError } from "../src/Errors.ts"
import { snapshotKey } from "../src/schema/CheckpointSnapshot.ts"
import { ledgerKey, ledgerPrefix, parseLedgerSeq } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { StorageAdapter, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { sampleSnapshot } from "./CheckpointStoreSuite.ts"

const step = { stepId: "s", kind: "runCode" } as const
const other = { stepId: "t", kind: "runCode" } as const

/** A fresh ledger service over `storage`, as a restarted host would build it. */
const ledgerOver = (storage: StorageAdapterShape, retention?: Partial<StepLedger.StepLedgerRetention>) =>
  Effect.flatMap(CheckpointStore.makeWith(storage), (store) => StepLedger.makeWith(store, { retention }))

/** The seqs of the ledger keys of `executionId` in storage, ascending. */
const storedSeqs = (storage: StorageAdapterShape, executionId: string) =>
  Effect.map(storage.list(ledgerPrefix(executionId)), (keys) =>
    keys.flatMap((key) => {
      const seq = parseLedgerSeq(ledgerPrefix(executionId), key)
      return seq === undefined ? [] : [seq]
    }).sort((a, b) => a - b))

/** Runs `effect` with its warnings captured into `warnings`. */
const capturingWarnings = (warnings: Array<string>) =>
  Effect.provide(Logger.layer([
    Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
    })
  ]))

const PATHS = ["/a#0", "/a#0/b#0", "/a#0[1]", "/a#01", "/c#0", "/c#0/d#0/e#0"] as const
const Path = Schema.Literals(PATHS)
const StepId = Schema.Literals(["s", "t"])
const Output = Schema.Union([
  Schema.Int,
  Schema.String.check(Schema.isMaxLength(24)),
  Schema.Null,
  Schema.Literals(["<undefined>", "<bigint>", "<cycle>"])
])
const Op = Schema.Union([
  Schema.TaggedStruct("Record", { path: Path, stepId: StepId, output: Output }),
  Schema.TaggedStruct("Burst", {
    records: Schema.Array(Schema.Struct({ path: Path, stepId: StepId, output: Output })).check(Schema.isMaxLength(4))
  }),
  Schema.TaggedStruct("Lookup", { path: Path, stepId: StepId }),
  Schema.TaggedStruct("Reload", {}),
  Schema.TaggedStruct("Crash", {})
])
const Caps = Schema.Struct({
  maxEntries: Schema.Literals([1, 2, 3, 5, 1000]),
  maxEntryBytes: Schema.Literals([8, 16, 1000])
})

/** The value the property test records for a generated output. */
const outputOf = (output: typeof Output.Type): unknown => {
  if (output === "<undefined>") return undefined
  if (output === "<bigint>") return 1n
  if (output === "<cycle>") {
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    return cyclic
  }
  return output
}

/** The ledger as a list of keys: what a correct implementation leaves in storage. */
class LedgerModel {
  keys: Array<
    | { seq: number; tag: "step"; path: string; stepId: string; output: unknown }
    | { seq: number; tag: "discard"; path: string }
  > = []
  next = 0
  /**
   * What the open ledger replays: the view of the keys when it was opened (those
   * entries stay even once their keys are evicted, so they serve the whole resumed
   * run), updated by its own records and discards.
   */
  memory = new Map<string, { seq: number; stepId: string; output: unknown; loaded: boolean }>()
  constructor(readonly maxEntries: number, readonly maxEntryBytes: number) {}

  private append(entry: { tag: "step"; path: string; stepId: string; output: unknown } | { tag: "discard"; path: string }) {
    const seq = this.next++
    this.keys.push({ ...entry, seq })
    while (this.keys.length > this.maxEntries) {
      const evicted = this.keys.shift()!
      const held = evicted.tag === "step" ? this.memory.get(evicted.path) : undefined
      if (held !== undefined && held.seq === evicted.seq && !held.loaded) this.memory.delete(evicted.path)
    }
    return seq
  }

  /** A ledger opened now: it starts from what the keys say. */
  open() {
    this.memory = new Map([...this.storedView()].map(([path, entry]) => [path, { ...entry, loaded: true }]))
  }

  record(path: string, stepId: string, output: unknown) {
    let text: string | undefined
    try {
      text = output === undefined ? "" : JSON.stringify(output)
    } catch {
      return
    }
    if (Buffer.byteLength(text ?? "", "utf8") > this.maxEntryBytes) return
    const value = output === undefined ? undefined : JSON.parse(text!)
    const seq = this.append({ tag: "step", path, stepId, output: value })
    this.memory.set(path, { seq, stepId, output: value, loaded: false })
  }

  /** What a ledger opened on the stored keys would replay. */
  storedView() {
    const live = new Map<string, { seq: number; stepId: string; output: unknown }>()
    for (const key of this.keys) {
      if (key.tag === "step") live.set(key.path, { seq: key.seq, stepId: key.stepId, output: key.output })
      else {
        for (const path of [...live.keys()]) {
          if (isBelowOrAt(path, key.path)) live.delete(path)
        }
      }
    }
    return live
  }

  /** What the open ledger replays. */
  view() {
    return this.memory
  }

  lookup(path: string, stepId: string): Option.Option<unknown> {
    const entry = this.memory.get(path)
    if (entry === undefined) return Option.none()
    if (entry.stepId === stepId) return Option.some(entry.output)
    const seq = this.append({ tag: "discard", path })
    for (const [candidate, held] of [...this.memory]) {
      if (held.seq < seq && isBelowOrAt(candidate, path)) this.memory.delete(candidate)
    }
    return Option.none()
  }
}

const isBelowOrAt = (path: string, root: string) =>
  path === root || path.startsWith(root + "/") || path.startsWith(root + "[")

/** Runs the step ledger suite against a layer that builds a fresh storage. */
export const suite = (name: string, makeLayer: () => Layer.Layer<StorageAdapter, StorageError>) =>
  describe(`StepLedger: ${name}`, () => {
    const withStorage = <A, E>(f: (storage: StorageAdapterShape) => Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        return yield* f(yield* StorageAdapter)
      }).pipe(Effect.provide(makeLayer()))

    it.effect("a recorded output replays on a matching identity, in this process and after a restart", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const ledger = yield* (yield* ledgerOver(storage)).open("e")
          yield* ledger.record("/root#0", step, { answer: 42, list: [1, "two"] })
          assert.deepStrictEqual(yield* ledger.lookup("/root#0", step), Option.some({ answer: 42, list: [1, "two"] }))
          assert.isTrue(Option.isNone(yield* ledger.lookup("/other#0", step)))
          assert.deepStrictEqual(yield* storage.list(ledgerPrefix("e")), [ledgerKey("e", 0)])
          assert.strictEqual(ledgerKey("e", 7), "execution:e:ledger:0000000000000007")

          const restarted = yield* (yield* ledgerOver(storage)).open("e")
          assert.deepStrictEqual(yield* restarted.lookup("/root#0", step), Option.some({ answer: 42, list: [1, "two"] }))
        })
      ))

    it.effect("undefined and falsy outputs are recorded and replay as themselves", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const ledger = yield* (yield* ledgerOver(storage)).open("e")
          const outputs = [undefined, null, 0, "", false] as const
          for (const [i, output] of outputs.entries()) yield* ledger.record(`/s#${i}`, step, output)
          const restarted = yield* (yield* ledgerOver(storage)).open("e")
          for (const [i, output] of outputs.entries()) {
            assert.deepStrictEqual(yield* restarted.lookup(`/s#${i}`, step), Option.some(output))
          }
        })
      ))

    it.effect("an identity mismatch discards the path and everything below it, durably", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const ledger = yield* (yield* ledgerOver(storage)).open("e")
          for (const path of ["/a#0", "/a#0/b#0", "/a#0/b#0/c#0", "/a#0[1]", "/a#01", "/z#0"]) {
            yield* ledger.record(path, step, path)
          }
          assert.isTrue(Option.isNone(yield* ledger.lookup("/a#0", { stepId: "s", kind: "callModel" })))
          const expectSurvivors = (l: StepLedger.ExecutionLedger) =>
            Effect.gen(function*() {
              for (const path of ["/a#0/b#0", "/a#0/b#0/c#0", "/a#0[1]", "/a#0"]) {
                assert.isTrue(Option.isNone(yield* l.lookup(path, step)), path)
              }
              assert.deepStrictEqual(yield* l.lookup("/a#01", step), Option.some("/a#01"))
              assert.deepStrictEqual(yield* l.lookup("/z#0", step), Option.some("/z#0"))
            })
          yield* expectSurvivors(ledger)
          yield* expectSurvivors(yield* (yield* ledgerOver(storage)).open("e"))

          // The fresh run records again and that replays.
          yield* ledger.record("/a#0/b#0", other, "fresh")
          const restarted = yield* (yield* ledgerOver(storage)).open("e")
          assert.deepStrictEqual(yield* restarted.lookup("/a#0/b#0", other), Option.some("fresh"))
        })
      ))

    it.effect("children and childAt report the steps recorded directly below a path, in record order", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const ledger = yield* (yield* ledgerOver(storage)).open("e")
          yield* ledger.record("/p#0/a#0", step, 1, 0)
          yield* ledger.record("/p#0/b#0", step, 2, 1)
          // Below b, below a branch of p, below another parent sharing p's text: none is p's child.
          yield* ledger.record("/p#0/b#0/deep#0", step, 3, 0)
          yield* ledger.record("/p#0[0]/x#0", step, 4, 0)
          yield* ledger.record("/p#01/z#0", step, 5, 0)
          // A second child at position 1 (the workflow changed), and an intent.
          yield* ledger.record("/p#0/c#0", other, 6, 1)
          yield* ledger.recordIntent("/p#0/d#0", step, 2)
          const expectChildren = (l: StepLedger.ExecutionLedger) => {
            assert.deepStrictEqual(l.children("/p#0").map((child) => [child.path, child.position]), [
              ["/p#0/a#0", 0],
              ["/p#0/b#0", 1],
              ["/p#0/c#0", 1],
              ["/p#0/d#0", 2]
            ])
            assert.strictEqual(l.childAt("/p#0", 1, "/p#0/new#0")?.path, "/p#0/b#0")
            assert.strictEqual(l.childAt("/p#0", 1, "/p#0/b#0")?.path, "/p#0/c#0")
            assert.strictEqual(l.childAt("/p#0", 1, "/p#0/b#0")?.stepId, "t")
            assert.isUndefined(l.childAt("/p#0", 0, "/p#0/a#0"))
            assert.isUndefined(l.childAt("/p#0", 3, "/p#0/a#0"))
            assert.deepStrictEqual(l.children("/p#0[0]").map((child) => child.path), ["/p#0[0]/x#0"])
            assert.deepStrictEqual(l.children("/p#0/b#0").map((child) => child.path), ["/p#0/b#0/deep#0"])
          }
          expectChildren(ledger)
          expectChildren(yield* (yield* ledgerOver(storage)).open("e"))

          // A re-record moves a path to its new position; a discard takes it and what is below it.
          yield* ledger.record("/p#0/b#0", step, 7, 3)
          assert.strictEqual(ledger.childAt("/p#0", 1, "/p#0/new#0")?.path, "/p#0/c#0")
          assert.strictEqual(ledger.childAt("/p#0", 3, "/p#0/new#0")?.path, "/p#0/b#0")
          assert.deepStrictEqual(ledger.children("/p#0").map((child) => child.path).at(-1), "/p#0/b#0")
          yield* ledger.discard("/p#0/c#0")
          assert.isUndefined(ledger.childAt("/p#0", 1, "/p#0/new#0"))
          yield* ledger.discard("/p#0")
          for (const l of [ledger, yield* (yield* ledgerOver(storage)).open("e")]) {
            assert.deepStrictEqual(l.children("/p#0"), [])
            assert.deepStrictEqual(l.children("/p#0[0]"), [])
            assert.isUndefined(l.childAt("/p#0", 2, "/p#0/new#0"))
            assert.deepStrictEqual(l.children("/p#01").map((child) => child.path), ["/p#01/z#0"])
          }
        })
      ))

    it.effect("a later entry at the same path wins, ordered by numeric seq whatever the listing order", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const ledger = yield* (yield* ledgerOver(storage)).open("e")
          for (let i = 0; i < 12; i++) yield* ledger.record("/loop#0", step, i)
          assert.deepStrictEqual(yield* ledger.lookup("/loop#0", step), Option.some(11))
          const reversed: StorageAdapterShape = {
            ...storage,
            list: (prefix) => Effect.map(storage.list(prefix), (keys) => [...keys].reverse()),
            scan: (prefix) => Effect.map(storage.scan(prefix), (rows) => [...rows].reverse())
          }
          const restarted = yield* (yield* ledgerOver(reversed)).open("e")
          assert.deepStrictEqual(yield* restarted.lookup("/loop#0", step), Option.some(11))
          yield* restarted.record("/next#0", step, "n")
          assert.deepStrictEqual((yield* storedSeqs(storage, "e")).at(-1), 12)
        })
      ))

    it.effect("a corrupt row is skipped with a warning and its seq is not reused", () => {
      const warnings: Array<string> = []
      return withStorage((storage) =>
        Effect.gen(function*() {
          const ledger = yield* (yield* ledgerOver(storage)).open("e")
          yield* ledger.record("/a#0", step, "a")
          yield* storage.set(ledgerKey("e", 1), { version: 99, what: "garbage" })
          yield* storage.set(ledgerKey("e", 2), "not even an object")
          const restarted = yield* (yield* ledgerOver(storage)).open("e")
          assert.strictEqual(warnings.length, 2)
          assert.include(warnings[0]!, ledgerKey("e", 1))
          assert.deepStrictEqual(yield* restarted.lookup("/a#0", step), Option.some("a"))
          yield* restarted.record("/b#0", step, "b")
          assert.deepStrictEqual(yield* storedSeqs(storage, "e"), [0, 1, 2, 3])
        })
      ).pipe(capturingWarnings(warnings))
    })

    it.effect("seqs are never reused: across restarts, concurrent records and two ledgers of one execution", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const service = yield* ledgerOver(storage, { maxEntries: Infinity })
          const ledger = yield* service.open("e")
          yield* Effect.forEach(
            Array.from({ length: 40 }, (_, i) => i),
            (i) => ledger.record(`/p#${i}`, step, i),
            { concurrency: "unbounded", discard: true }
          )
          const second = yield* service.open("e")
          yield* Effect.all([ledger.record("/x#0", step, 1), second.record("/y#0", step, 2)], { concurrency: 2 })
          const restarted = yield* (yield* ledgerOver(storage, { maxEntries: Infinity })).open("e")
          yield* restarted.record("/z#0", step, 3)
          assert.deepStrictEqual(yield* storedSeqs(storage, "e"), Array.from({ length: 43 }, (_, i) => i))
          assert.strictEqual((yield* restarted.entries).length, 43)
        })
      ))

    it.effect("execution a never sees the keys of execution a:ledger:x", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const service = yield* ledgerOver(storage)
          const nested = yield* service.open("a:ledger:x")
          for (let i = 0; i < 5; i++) yield* nested.record(`/n#${i}`, step, i)
          const a = yield* service.open("a")
          assert.deepStrictEqual(yield* a.entries, [])
          yield* a.record("/a#0", step, "mine")
          assert.deepStrictEqual(yield* storedSeqs(storage, "a"), [0])
          const store = yield* CheckpointStore.makeWith(storage)
          yield* store.clear("a")
          assert.strictEqual((yield* (yield* service.open("a:ledger:x")).entries).length, 5)
        })
      ))

    it.effect("clear removes the snapshot and every ledger key; a reopened ledger is empty", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const store = yield* CheckpointStore.makeWith(storage)
          const service = yield* StepLedger.makeWith(store)
          yield* store.save(sampleSnapshot("e"))
          const ledger = yield* service.open("e")
          for (let i = 0; i < 5; i++) yield* ledger.record(`/s#${i}`, step, i)
          yield* store.clear("e")
          assert.deepStrictEqual(yield* storage.list("execution:e:"), [])
          assert.isTrue(Option.isNone(yield* storage.get(snapshotKey("e"))))
          assert.deepStrictEqual(yield* (yield* service.open("e")).entries, [])
        })
      ))

    it.effect("the byte cap is inclusive and counts UTF-8 bytes of the output's JSON", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          // JSON of "éé" is 6 bytes (two quotes, two 2-byte characters); "😀" is 4 + 2.
          const service = yield* ledgerOver(storage, { maxEntryBytes: 6 })
          const ledger = yield* service.open("e")
          yield* ledger.record("/at-cap#0", step, "éé")
          yield* ledger.record("/emoji#0", step, "😀")
          yield* ledger.record("/ascii#0", step, "abcd")
          yield* ledger.record("/over#0", step, "éé!")
          yield* ledger.record("/over-ascii#0", step, "abcde")
          const restarted = yield* (yield* ledgerOver(storage, { maxEntryBytes: 6 })).open("e")
          assert.deepStrictEqual(yield* restarted.lookup("/at-cap#0", step), Option.some("éé"))
          assert.deepStrictEqual(yield* restarted.lookup("/emoji#0", step), Option.some("😀"))
          assert.deepStrictEqual(yield* restarted.lookup("/ascii#0", step), Option.some("abcd"))
          assert.isTrue(Option.isNone(yield* restarted.lookup("/over#0", step)))
          assert.isTrue(Option.isNone(yield* restarted.lookup("/over-ascii#0", step)))
          assert.deepStrictEqual(yield* service.stats, {
            recorded: 3,
            droppedOversize: 2,
            droppedUnserializable: 0,
            evicted: 0,
            recordFailed: 0
          })
          assert.strictEqual(StepLedger.utf8Length(JSON.stringify("é😀a")), 9)
        })
      ))

    it.effect("unserialisable outputs are dropped; the first drop of each kind warns once", () => {
      const warnings: Array<string> = []
      return withStorage((storage) =>
        Effect.gen(function*() {
          const service = yield* ledgerOver(storage, { maxEntryBytes: 16 })
          const ledger = yield* service.open("e")
          const cyclic: Record<string, unknown> = {}
          cyclic.self = cyclic
          yield* ledger.record("/cycle#0", step, cyclic)
          yield* ledger.record("/big#0", step, { n: 10n })
          yield* ledger.record("/fn#0", step, () => 1)
          yield* ledger.record("/huge#0", step, "x".repeat(100))
          yield* ledger.record("/huge#1", step, "y".repeat(100))
          yield* ledger.record("/ok#0", step, "ok")
          assert.deepStrictEqual(yield* service.stats, {
            recorded: 1,
            droppedOversize: 2,
            droppedUnserializable: 3,
            evicted: 0,
            recordFailed: 0
          })
          assert.strictEqual(warnings.length, 2)
          assert.isTrue(warnings.some((w) => w.includes("no JSON form")))
          assert.isTrue(warnings.some((w) => w.includes("maxEntryBytes")))
          assert.deepStrictEqual(yield* storedSeqs(storage, "e"), [0])
        })
      ).pipe(capturingWarnings(warnings))
    })

    it.effect("an output JSON would give back altered is dropped, never replayed as something else", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const service = yield* ledgerOver(storage)
          const ledger = yield* service.open("e")
          class Money {
            constructor(readonly cents: number) {}
          }
          // Each would replay as a different value: a string, {}, null, a plain object.
          const altered: ReadonlyArray<unknown> = [
            new Date(0),
            new Map([["k", 1]]),
            Number.NaN,
            { total: Infinity },
            new Money(5),
            [1, undefined]
          ]
          for (const [i, output] of altered.entries()) yield* ledger.record(`/alt#${i}`, step, output)
          yield* ledger.record("/ok#0", step, { at: "1970-01-01", list: [1, null], nested: { n: -1.5 }, gone: undefined })
          const reloaded = yield* service.open("e")
          for (const i of altered.keys()) assert.isTrue(Option.isNone(yield* reloaded.lookup(`/alt#${i}`, step)))
          assert.deepStrictEqual(
            yield* reloaded.lookup("/ok#0", step),
            Option.some({ at: "1970-01-01", list: [1, null], nested: { n: -1.5 } })
          )
          assert.strictEqual((yield* service.stats).droppedUnserializable, altered.length)
        })
      ))

    it.effect("past maxEntries the oldest entries are evicted and the newest kept", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const service = yield* ledgerOver(storage, { maxEntries: 3 })
          const ledger = yield* service.open("e")
          for (let i = 0; i < 7; i++) yield* ledger.record(`/s#${i}`, step, i)
          assert.deepStrictEqual(yield* storedSeqs(storage, "e"), [4, 5, 6])
          assert.strictEqual((yield* service.stats).evicted, 4)
          const restarted = yield* (yield* ledgerOver(storage, { maxEntries: 3 })).open("e")
          assert.deepStrictEqual((yield* restarted.entries).map((entry) => entry.output), [4, 5, 6])
          assert.isTrue(Option.isNone(yield* restarted.lookup("/s#3", step)))
          yield* restarted.record("/s#7", step, 7)
          assert.deepStrictEqual(yield* storedSeqs(storage, "e"), [5, 6, 7])
        })
      ))

    it.effect("Infinity disables an axis", () =>
      withStorage((storage) =>
        Effect.gen(function*() {
          const service = yield* ledgerOver(storage, { maxEntries: Infinity, maxEntryBytes: Infinity })
          const ledger = yield* service.open("e")
          yield* Effect.forEach(
            Array.from({ length: 1005 }, (_, i) => i),
            (i) => ledger.record(`/s#${i}`, step, i),
            { concurrency: 64, discard: true }
          )
          yield* ledger.record("/big#0", step, "x".repeat(200 * 1024))
          assert.strictEqual((yield* storedSeqs(storage, "e")).length, 1006)
          assert.deepStrictEqual(yield* service.stats, {
            recorded: 1006,
            droppedOversize: 0,
            droppedUnserializable: 0,
            evicted: 0,
            recordFailed: 0
          })
        })
      ), { timeout: 60_000 })

    it.effect("a zero, negative or NaN cap fails when the layer is built", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* StepLedger.validateRetention(undefined), StepLedger.DEFAULT_STEP_LEDGER_RETENTION)
        assert.deepStrictEqual(StepLedger.DEFAULT_STEP_LEDGER_RETENTION, { maxEntryBytes: 131072, maxEntries: 1000 })
        for (
          const [field, value] of [["maxEntries", 0], ["maxEntries", -1], ["maxEntryBytes", Number.NaN], [
            "maxEntryBytes",
            0
          ]] as const
        ) {
          const error = yield* Effect.flip(
            Layer.build(StepLedger.layer({ retention: { [field]: value } })).pipe(
              Effect.provide(CheckpointStore.layerMemory),
              Effect.scoped
            )
          )
          assert.instanceOf(error, StepLedgerRetentionInvalid)
          assert.strictEqual(error.code, "STEP_LEDGER_RETENTION_INVALID")
          assert.strictEqual(error.field, field)
          assert.isAbove(error.hint.length, 0)
        }
        const built = yield* Layer.build(StepLedger.layer({ retention: { maxEntries: Infinity } })).pipe(
          Effect.provide(CheckpointStore.layerMemory),
          Effect.scoped
        )
        assert.strictEqual(Context.get(built, StepLedger.StepLedger).retention.maxEntries, Infinity)
      }))

    it.effect.prop(
      "record / evict / reload / crash sequences agree with a model of the retained keys",
      [Caps, Schema.Array(Op).check(Schema.isMinLength(15), Schema.isMaxLength(40))],
      ([caps, ops]) =>
        withStorage((storage) =>
          Effect.gen(function*() {
            const model = new LedgerModel(caps.maxEntries, caps.maxEntryBytes)
            const newService = () => ledgerOver(storage, caps)
            let service = yield* newService()
            let ledger = yield* service.open("e")
            const seen = new Map<number, string>()

            const check = Effect.gen(function*() {
              const seqs = yield* storedSeqs(storage, "e")
              assert.deepStrictEqual(seqs, model.keys.map((key) => key.seq))
              const records = yield* Effect.forEach(seqs, (seq) => storage.get(ledgerKey("e", seq)))
              for (const [i, seq] of seqs.entries()) {
                const text = JSON.stringify(Option.getOrUndefined(records[i]!))
                const before = seen.get(seq)
                assert.isTrue(before === undefined || before === text, `seq ${seq} was reused`)
                seen.set(seq, text)
              }
              const expected = [...model.view()].map(([path, entry]) => ({ seq: entry.seq, path, output: entry.output }))
                .sort((a, b) => a.seq - b.seq)
              const actual = (yield* ledger.entries).map(({ seq, path, output }) => ({ seq, path, output }))
              assert.deepStrictEqual(actual, expected)
            })

            for (const op of ops) {
              switch (op._tag) {
                case "Record": {
                  yield* ledger.record(op.path, { stepId: op.stepId, kind: "runCode" }, outputOf(op.output))
                  model.record(op.path, op.stepId, outputOf(op.output))
                  break
                }
                case "Burst": {
                  const distinct = [...new Map(op.records.map((r) => [r.path, r])).values()]
                  yield* Effect.forEach(
                    distinct,
                    (r) => ledger.record(r.path, { stepId: r.stepId, kind: "runCode" }, outputOf(r.output)),
                    { concurrency: "unbounded", discard: true }
                  )
                  for (const r of distinct) model.record(r.path, r.stepId, outputOf(r.output))
                  break
                }
                case "Lookup": {
                  const actual = yield* ledger.lookup(op.path, { stepId: op.stepId, kind: "runCode" })
                  assert.deepStrictEqual(actual, model.lookup(op.path, op.stepId))
                  break
                }
                case "Reload": {
                  ledger = yield* service.open("e")
                  model.open()
                  break
                }
                case "Crash": {
                  service = yield* newService()
                  ledger = yield* service.open("e")
                  model.open()
                  break
                }
              }
              yield* check
            }
          })
        ),
      { timeout: 120_000, arbitrary: { runs: 30 } }
    )
  })
