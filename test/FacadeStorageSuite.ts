/**
 * The behaviour every closable storage of the Promise facade must show
 * (`createPostgresStorage`, `createSqliteStorage`). Each backend's test file calls
 * `facadeStorageSuite(name, place)` with a function that gives a fresh, empty place
 * for storages: `open` makes a storage on it (two calls, two storages on the same
 * data), `cleanup` removes it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { StorageError } from "../src/Errors.ts"
import { type StorageAdapter, toEngineStorage } from "../src/promise/storage.ts"
import { AgentHarness, createCheckpointStore, NoeticError, runCode } from "../src/promise/index.ts"
import { runTurn } from "./promise/turns.ts"

/** A storage of the facade that holds resources until `close()`. */
type ClosableStorage = StorageAdapter & { close(): Promise<void> }

export interface StoragePlace {
  readonly open: () => ClosableStorage
  readonly cleanup: () => Promise<void>
}

/** What a rejected Promise rejected with, or `undefined` when it fulfilled. */
const rejectionOf = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (error: unknown) => error)

export const facadeStorageSuite = (name: string, freshPlace: () => Promise<StoragePlace>) =>
  describe(`${name} (facade storage)`, () => {
    it("stores through Promises, shares its engine, and rejects after close()", async () => {
      const place = await freshPlace()
      try {
        const storage = place.open()
        await storage.set("a:1", { n: 1 })
        await storage.set("a:2", 0)
        assert.deepStrictEqual(await storage.get("a:1"), { n: 1 })
        assert.isNull(await storage.get("missing"))
        assert.deepStrictEqual(await storage.list("a:"), ["a:1", "a:2"])
        const found = await storage.getMany!(["a:2", "missing"])
        assert.deepStrictEqual([...found.entries()], [["a:2", 0]])

        const engine = await Effect.runPromise(toEngineStorage(storage))
        assert.deepStrictEqual(await Effect.runPromise(engine.get("a:1")), Option.some({ n: 1 }))

        await storage.close()
        await storage.close()
        const rejected = await rejectionOf(storage.get("a:1"))
        assert.instanceOf(rejected, NoeticError)
        assert.strictEqual((rejected as NoeticError).code, "STORAGE_IO")
        const engineError = await Effect.runPromise(Effect.flip(engine.get("a:1")))
        assert.strictEqual(engineError.reason._tag, "Io")
      } finally {
        await place.cleanup()
      }
    })

    it("after close() every engine operation, compare-and-set and fenced writes included, fails with Io naming it", async () => {
      const place = await freshPlace()
      try {
        const storage = place.open()
        await storage.set("k", 1)
        const engine = await Effect.runPromise(toEngineStorage(storage))
        await storage.close()
        const fence = { key: "lease", token: 1 }
        const operations: ReadonlyArray<readonly [string, Effect.Effect<unknown, StorageError>]> = [
          ["get", engine.get("k")],
          ["set", engine.set("k", 2)],
          ["delete", engine.delete("k")],
          ["list", engine.list("")],
          ["getMany", engine.getMany(["k"])],
          ["scan", engine.scan("")],
          ["compareAndSet", engine.compareAndSet!("k", Option.none(), 2)],
          ["setFenced", engine.setFenced!("k", 2, fence)],
          ["deleteFenced", engine.deleteFenced!("k", fence)]
        ]
        for (const [operation, effect] of operations) {
          const error = await Effect.runPromise(Effect.flip(effect))
          assert.strictEqual(error.operation, operation)
          assert.strictEqual(error.reason._tag, "Io")
          assert.match(error.reason.message, /^the \w+ storage is closed$/)
        }
      } finally {
        await place.cleanup()
      }
    })

    it("backs a leased harness: executions run under a lease, and a second host is refused while it is held", async () => {
      const place = await freshPlace()
      const storages = [place.open(), place.open()] as const
      let open!: () => void
      const gate = new Promise<void>((resolve) => (open = resolve))
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const hostOf = (owner: string, storage: ClosableStorage) =>
        new AgentHarness({
          name: owner,
          agentGraph: runCode("root", async (n: number) => {
            started()
            await gate
            return n + 1
          }),
          environment: {
            storage: { checkpointStore: createCheckpointStore({ storage }), lease: { owner, ttlMs: 60_000 } }
          }
        })
      const a = hostOf("host-a", storages[0])
      const b = hostOf("host-b", storages[1])
      try {
        const first = runTurn(a, 1, { executionId: "leased" })
        first.catch(() => {})
        await Promise.race([running, first.then(() => undefined, () => undefined)])
        const refused = await rejectionOf(runTurn(b, 1, { executionId: "leased" }))
        open()
        assert.deepStrictEqual(await first, { executionId: "leased", output: 2 })
        assert.instanceOf(refused, NoeticError)
        assert.strictEqual((refused as NoeticError).code, "EXECUTION_LEASE_HELD")
      } finally {
        open()
        await Promise.all([a.close(), b.close()])
        await Promise.all(storages.map((storage) => storage.close()))
        await place.cleanup()
      }
    })
  })
