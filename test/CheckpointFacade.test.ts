import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { toEngineCheckpointStore } from "../src/promise/checkpoint.ts"
import {
  createCheckpointStore,
  createFileStorage,
  createInMemoryStorage,
  DEFAULT_STEP_LEDGER_RETENTION,
  NoeticConfigError,
  resolveStepLedgerRetention,
  type StorageAdapter
} from "../src/promise/index.ts"
import { snapshotKey } from "../src/schema/CheckpointSnapshot.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { sampleSnapshot } from "./CheckpointStoreSuite.ts"

/** A storage a host wrote itself: Promises over a Map, no `getMany`. */
const hostStorage = (): StorageAdapter => {
  const entries = new Map<string, string>()
  return {
    get: async <T>(key: string) => (entries.has(key) ? JSON.parse(entries.get(key)!) as T : null),
    set: async (key, value) => void entries.set(key, JSON.stringify(value)),
    delete: async (key) => void entries.delete(key),
    list: async (prefix) => [...entries.keys()].filter((key) => key.startsWith(prefix)).sort()
  }
}

const backends: ReadonlyArray<[string, () => StorageAdapter]> = [
  ["memory", createInMemoryStorage],
  ["file", () => createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-")) })],
  ["host-written, without getMany", hostStorage]
]

describe("createCheckpointStore", () => {
  for (const [name, makeStorage] of backends) {
    it(`save, load, list and clear with Promises (${name})`, async () => {
      const storage = makeStorage()
      const store = createCheckpointStore({ storage })
      assert.isNull(await store.load("e"))
      await store.save(sampleSnapshot("e"))
      assert.strictEqual((await store.load("e"))?.executionId, "e")
      assert.deepStrictEqual(await store.list(), [{ executionId: "e" }])

      // The harness reaches the same engine store and keeps the ledger in its storage.
      const engine = toEngineCheckpointStore(store)
      assert.isDefined(engine)
      await Effect.runPromise(Effect.gen(function*() {
        const ledger = yield* (yield* StepLedger.makeWith(yield* engine!)).open("e")
        yield* ledger.record("/s#0", { stepId: "s", kind: "runCode" }, "out")
        const reopened = yield* (yield* StepLedger.makeWith(yield* engine!)).open("e")
        assert.deepStrictEqual(yield* reopened.lookup("/s#0", { stepId: "s", kind: "runCode" }), Option.some("out"))
      }))
      assert.strictEqual((await storage.list("execution:e:ledger:")).length, 1)

      await store.clear("e")
      assert.isNull(await store.load("e"))
      assert.deepStrictEqual(await store.list(), [])
      assert.deepStrictEqual(await storage.list("execution:e:"), [])
    })
  }

  it("a record of another schema version rejects with NoeticConfigError CHECKPOINT_SCHEMA_MISMATCH", async () => {
    const storage = createInMemoryStorage()
    const store = createCheckpointStore({ storage })
    await storage.set(snapshotKey("old"), { ...sampleSnapshot("old"), schemaVersion: 1 })
    const error = await store.load("old").then(() => undefined, (e: unknown) => e)
    assert.instanceOf(error, NoeticConfigError)
    if (!(error instanceof NoeticConfigError)) return
    assert.strictEqual(error.code, "CHECKPOINT_SCHEMA_MISMATCH")
    assert.include(error.hint, "clear")
    await store.clear("old")
    assert.isNull(await store.load("old"))
  })

  it("retention is resolved and checked synchronously", () => {
    assert.deepStrictEqual(resolveStepLedgerRetention(), DEFAULT_STEP_LEDGER_RETENTION)
    assert.deepStrictEqual(resolveStepLedgerRetention({ maxEntries: Infinity }), {
      maxEntryBytes: 128 * 1024,
      maxEntries: Infinity
    })
    for (const bad of [{ maxEntries: 0 }, { maxEntryBytes: -1 }, { maxEntryBytes: Number.NaN }]) {
      assert.throws(() => resolveStepLedgerRetention(bad), NoeticConfigError)
      try {
        resolveStepLedgerRetention(bad)
      } catch (error) {
        assert.strictEqual((error as NoeticConfigError).code, "STEP_LEDGER_RETENTION_INVALID")
        assert.isAbove((error as NoeticConfigError).hint.length, 0)
      }
    }
  })
})
