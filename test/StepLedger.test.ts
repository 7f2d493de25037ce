import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Option } from "effect"
import { ledgerPrefix } from "../src/schema/LedgerEntry.ts"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { encodeKey } from "../src/internal/fileKey.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { ledgerKey } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { layerMemory, makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { suite } from "./StepLedgerSuite.ts"

const freshRoot = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-ledger-"))

suite("memory", () => layerMemory)
suite("file", () => FileStorage.layer({ root: freshRoot() }))

describe("StepLedger on file storage", () => {
  it.effect("a torn ledger file is skipped with a warning; the rest of the ledger loads", () => {
    const warnings: Array<unknown> = []
    return Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const ledger = yield* StepLedger.makeWith(yield* CheckpointStore.makeWith(storage)).pipe(
        Effect.flatMap((service) => service.open("e"))
      )
      const step = { stepId: "s", kind: "runCode" }
      for (let i = 0; i < 3; i++) yield* ledger.record(`/s#${i}`, step, { i, pad: "x".repeat(200) })
      const torn = Path.join(root, encodeKey(ledgerKey("e", 1)))
      Fs.truncateSync(torn, Math.floor(Fs.statSync(torn).size / 2))

      const restarted = yield* StepLedger.makeWith(yield* CheckpointStore.makeWith(storage)).pipe(
        Effect.flatMap((service) => service.open("e"))
      )
      assert.strictEqual(warnings.length, 1)
      assert.isTrue(Option.isSome(yield* restarted.lookup("/s#0", step)))
      assert.isTrue(Option.isNone(yield* restarted.lookup("/s#1", step)))
      assert.isTrue(Option.isSome(yield* restarted.lookup("/s#2", step)))
      yield* restarted.record("/s#3", step, 3)
      assert.deepStrictEqual((yield* restarted.entries).map((entry) => entry.seq), [0, 2, 3])
    }).pipe(Effect.provide(Logger.layer([Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(options.message)
    })])))
  })
})

/** `storage` with the text `scanText` gives for `key` replaced by `damage` of it. */
const damaging = (storage: StorageAdapterShape, key: string, damage: (text: string) => string): StorageAdapterShape => ({
  ...storage,
  scanText: (prefix) =>
    Effect.map(storage.scanText!(prefix), (rows) => rows.map(([k, text]) => [k, k === key ? damage(text) : text] as const))
})

/** A record's text with its output's value cut short: the record still reads as a step's, its output is not JSON. */
const cutValue = (text: string) => text.slice(0, -4) + "}}"

describe("StepLedger over a storage that reads rows as text", () => {
  const step = { stepId: "s", kind: "runCode" }
  const warned = (warnings: Array<string>) =>
    Effect.provide(Logger.layer([Logger.make((options) => {
      if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
    })]))
  const reopen = (storage: StorageAdapterShape) =>
    Effect.flatMap(CheckpointStore.makeWith(storage), (store) =>
      Effect.flatMap(StepLedger.makeWith(store), (service) => service.open("e")))

  it.effect("an output found damaged when it replays is Unreadable, with a warning; the step's new record supersedes it", () => {
    const warnings: Array<string> = []
    return Effect.gen(function*() {
      const storage = yield* makeMemory
      const ledger = yield* reopen(storage)
      yield* ledger.record("/a#0", step, { long: "enough to cut" }, 0)
      yield* ledger.record("/b#0", step, "b", 1)
      const restarted = yield* reopen(damaging(storage, ledgerKey("e", 0), cutValue))
      assert.deepStrictEqual(warnings, [])
      // Its identity was read: it is still the step recorded at its position.
      assert.deepStrictEqual(restarted.children("").map((child) => child.path), ["/a#0", "/b#0"])
      assert.deepStrictEqual(restarted.childAt("", 0, "/other#0")?.path, "/a#0")
      const found = restarted.replayAt("/a#0", step)
      assert.strictEqual(found._tag, "Unreadable")
      if (found._tag === "Unreadable") {
        assert.strictEqual(found.key, ledgerKey("e", 0))
        assert.include(found.message, "not valid JSON")
      }
      assert.deepStrictEqual(restarted.replayAt("/a#0", { stepId: "t", kind: "runCode" }), {
        _tag: "Diverged",
        recorded: step
      })
      assert.deepStrictEqual(yield* restarted.lookup("/a#0", step), Option.none())
      assert.strictEqual(warnings.length, 1)
      assert.include(warnings[0]!, ledgerKey("e", 0))
      assert.deepStrictEqual((yield* restarted.entries).map((entry) => entry.path), ["/b#0"])
      assert.strictEqual(warnings.length, 2)
      assert.deepStrictEqual(yield* restarted.lookup("/b#0", step), Option.some("b"))
      // The step ran again: its record replays, in this ledger and in the next.
      yield* restarted.record("/a#0", step, "again", 0)
      assert.deepStrictEqual(restarted.replayAt("/a#0", step), { _tag: "Hit", output: "again" })
      const third = yield* reopen(damaging(storage, ledgerKey("e", 0), cutValue))
      assert.deepStrictEqual(yield* third.lookup("/a#0", step), Option.some("again"))
      assert.deepStrictEqual((yield* third.entries).map((entry) => entry.seq), [1, 2])
    }).pipe(warned(warnings))
  })

  it.effect("a row that is not JSON at all is skipped at load with a warning, and its seq is not reused", () => {
    const warnings: Array<string> = []
    return Effect.gen(function*() {
      const storage = yield* makeMemory
      const ledger = yield* reopen(storage)
      yield* ledger.record("/a#0", step, "a")
      yield* ledger.record("/a#0", step, "a2")
      const restarted = yield* reopen(damaging(storage, ledgerKey("e", 1), (text) => text.slice(0, 10)))
      assert.strictEqual(warnings.length, 1)
      assert.include(warnings[0]!, ledgerKey("e", 1))
      // The earlier record at the path is what is left.
      assert.deepStrictEqual(yield* restarted.lookup("/a#0", step), Option.some("a"))
      yield* restarted.record("/b#0", step, "b")
      assert.deepStrictEqual((yield* storage.list(ledgerPrefix("e"))).at(-1), ledgerKey("e", 2))
    }).pipe(warned(warnings))
  })

  it.effect("records in another field order (written before the output went last) load and replay", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      yield* storage.set(ledgerKey("e", 0), {
        _tag: "StepRecorded",
        version: 1,
        path: "/a#0",
        stepId: "s",
        kind: "runCode",
        output: { _tag: "Json", value: { x: 1 } },
        at: 5,
        position: 0
      })
      yield* storage.set(ledgerKey("e", 1), {
        _tag: "StepRecorded",
        version: 1,
        path: "/b#0",
        stepId: "s",
        kind: "runCode",
        output: { _tag: "Undefined" }
      })
      const restarted = yield* reopen(storage)
      assert.deepStrictEqual(yield* restarted.lookup("/a#0", step), Option.some({ x: 1 }))
      assert.deepStrictEqual(restarted.replayAt("/b#0", step), { _tag: "Hit", output: undefined })
      assert.deepStrictEqual(restarted.childAt("", 0, "/c#0")?.path, "/a#0")
    }))
})
