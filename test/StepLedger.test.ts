import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { encodeKey } from "../src/internal/fileKey.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { ledgerKey } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { layerMemory } from "../src/services/StorageAdapter.ts"
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
