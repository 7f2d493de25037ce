/**
 * The behaviour of `CheckpointStore` on a storage backend. Each backend's test file
 * calls `suite(name, layer)` with a layer that builds a fresh, empty storage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { CheckpointSchemaMismatch, type StorageError } from "../src/Errors.ts"
import {
  CheckpointSnapshot,
  ITEM_CHUNK_SIZE,
  itemChunkKey,
  itemChunkPrefix,
  snapshotKey
} from "../src/schema/CheckpointSnapshot.ts"
import { ledgerKey } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import { indexKey } from "../src/services/CheckpointStore.ts"
import { StorageAdapter, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"

/** A v2 snapshot of `executionId` with `items` log items. */
export const sampleSnapshot = (executionId: string, items = 3): CheckpointSnapshot => ({
  schemaVersion: 2,
  executionId,
  threadId: "thread-1",
  frontier: [{ stepId: "root", input: { q: "why" } }, { stepId: "child", input: "x", state: { n: 1 } }],
  layers: { scratchpad: { notes: ["a"] }, instructions: "be brief", history: { window: 20 } },
  cwd: { current: "/work", previous: null },
  askUser: [{ id: "ask-1", input: { question: "ok?" }, createdAt: 1_700_000_000_000 }],
  itemLog: { items: Array.from({ length: items }, (_, i) => ({ type: "message", id: `r${i}`, text: `item ${i}` })) },
  capturedAt: "2025-01-01T00:00:00.000Z"
})

const equivalent = Schema.toEquivalence(CheckpointSnapshot)

/** A storage that records which prefixes were listed and which keys were read. */
export const spyStorage = (storage: StorageAdapterShape) => {
  const listed: Array<string> = []
  const read: Array<string> = []
  const spied: StorageAdapterShape = {
    ...storage,
    get: (key) => Effect.suspend(() => (read.push(key), storage.get(key))),
    list: (prefix) => Effect.suspend(() => (listed.push(prefix), storage.list(prefix))),
    getMany: (keys) => Effect.suspend(() => (read.push(...keys), storage.getMany!(keys)))
  }
  return { storage: spied, listed, read }
}

/** Runs the checkpoint store suite against a layer that builds a fresh storage. */
export const suite = (name: string, makeLayer: () => Layer.Layer<StorageAdapter, StorageError>) =>
  describe(`CheckpointStore: ${name}`, () => {
    const withStore = <A, E>(
      f: (store: CheckpointStore.CheckpointStoreShape, storage: StorageAdapterShape) => Effect.Effect<A, E>
    ): Effect.Effect<A, E | StorageError> =>
      Effect.gen(function*() {
        const storage = yield* StorageAdapter
        return yield* f(yield* CheckpointStore.makeWith(storage), storage)
      }).pipe(Effect.provide(makeLayer()))

    const expectMismatch = (store: CheckpointStore.CheckpointStoreShape, executionId: string) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(store.load(executionId))
        assert.instanceOf(error, CheckpointSchemaMismatch)
        if (!(error instanceof CheckpointSchemaMismatch)) throw error
        assert.strictEqual(error.code, "CHECKPOINT_SCHEMA_MISMATCH")
        assert.include(error.hint, `clear(${JSON.stringify(executionId)})`)
        return error
      })

    it.effect("load of an execution with nothing recorded is none", () =>
      withStore((store) =>
        Effect.gen(function*() {
          assert.isTrue(Option.isNone(yield* store.load("never")))
          assert.deepStrictEqual(yield* store.list, [])
        })
      ))

    it.effect("save then load returns the snapshot, at execution:<id>:snapshot, and a later save overwrites", () =>
      withStore((store, storage) =>
        Effect.gen(function*() {
          const first = sampleSnapshot("exec-1")
          yield* store.save(first)
          const loaded = yield* store.load("exec-1")
          assert.isTrue(Option.isSome(loaded) && equivalent(loaded.value, first))
          assert.isTrue(Option.isSome(yield* storage.get(snapshotKey("exec-1"))))

          const second = { ...sampleSnapshot("exec-1", 5), cwd: null, capturedAt: "2025-01-02T00:00:00.000Z" }
          yield* store.save(second)
          const reloaded = yield* store.load("exec-1")
          assert.isTrue(Option.isSome(reloaded) && equivalent(reloaded.value, second))
          assert.isFalse(Option.isSome(reloaded) && equivalent(reloaded.value, first))
        })
      ))

    it.effect("a frontier step or prompt whose input is undefined survives the JSON round trip", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const snapshot: CheckpointSnapshot = {
            ...sampleSnapshot("no-input"),
            frontier: [{ stepId: "root", input: undefined }],
            askUser: [{ id: "ask", input: undefined, createdAt: 1 }]
          }
          yield* store.save(snapshot)
          const loaded = yield* store.load("no-input")
          assert.isTrue(Option.isSome(loaded))
          if (Option.isSome(loaded)) {
            assert.strictEqual(loaded.value.frontier[0]!.input, undefined)
            assert.strictEqual(loaded.value.askUser[0]!.input, undefined)
          }
        })
      ))

    it.effect("a v1 snapshot (old layer ids) and a v3 snapshot are refused, naming the version seen", () =>
      withStore((store, storage) =>
        Effect.gen(function*() {
          const v1 = {
            ...sampleSnapshot("old"),
            schemaVersion: 1,
            layers: { "working-context": {}, "static-content": "x", "history-window": { window: 5 } }
          }
          yield* storage.set(snapshotKey("old"), v1)
          const v1Error = yield* expectMismatch(store, "old")
          assert.strictEqual(v1Error.seenVersion, 1)

          yield* storage.set(snapshotKey("new"), { ...sampleSnapshot("new"), schemaVersion: 3 })
          const v3Error = yield* expectMismatch(store, "new")
          assert.strictEqual(v3Error.seenVersion, 3)

          // The refusal is a discard instruction, and following it works.
          yield* store.clear("old")
          assert.isTrue(Option.isNone(yield* store.load("old")))
        })
      ))

    it.effect("a malformed record is refused: missing fields, wrong types, no version, another execution's", () =>
      withStore((store, storage) =>
        Effect.gen(function*() {
          const { itemLog: _, ...withoutItemLog } = sampleSnapshot("torn")
          yield* storage.set(snapshotKey("torn"), withoutItemLog)
          assert.strictEqual((yield* expectMismatch(store, "torn")).seenVersion, 2)

          yield* storage.set(snapshotKey("typed"), { ...sampleSnapshot("typed"), askUser: [{ id: 1 }] })
          assert.strictEqual((yield* expectMismatch(store, "typed")).seenVersion, 2)

          yield* storage.set(snapshotKey("text"), "not a snapshot")
          assert.strictEqual((yield* expectMismatch(store, "text")).seenVersion, null)

          yield* storage.set(snapshotKey("swapped"), sampleSnapshot("someone-else"))
          assert.include((yield* expectMismatch(store, "swapped")).message, "someone-else")
        })
      ))

    it.effect("list returns the executions with a snapshot, ids with ':' included, and never lists ledger keys", () =>
      Effect.gen(function*() {
        const spy = spyStorage(yield* StorageAdapter)
        const store = yield* CheckpointStore.makeWith(spy.storage)
        for (const id of ["b", "a", "a:ledger:x", "with:colons:snapshot"]) yield* store.save(sampleSnapshot(id))
        for (let seq = 0; seq < 50; seq++) yield* spy.storage.set(ledgerKey("a", seq), { filler: seq })
        const ledgerKeys = yield* spy.storage.list("execution:a:ledger:")
        spy.listed.length = 0
        spy.read.length = 0

        assert.deepStrictEqual([...(yield* store.list)].sort(), ["a", "a:ledger:x", "b", "with:colons:snapshot"])
        assert.isAbove(spy.listed.length, 0)
        for (const prefix of spy.listed) {
          assert.isFalse(
            ledgerKeys.some((key) => key.startsWith(prefix)),
            `list scanned ${prefix}, which covers ledger keys`
          )
        }
        assert.deepStrictEqual(spy.read, [])
      }).pipe(Effect.provide(makeLayer())))

    it.effect("clear removes the snapshot and every ledger key of exactly that execution", () =>
      withStore((store, storage) =>
        Effect.gen(function*() {
          for (const id of ["a", "a:ledger:x", "ab"]) {
            yield* store.save(sampleSnapshot(id))
            for (let seq = 0; seq < 3; seq++) yield* storage.set(ledgerKey(id, seq), { id, seq })
          }
          yield* storage.set("execution:a:ledger:not-a-seq", "foreign")

          yield* store.clear("a")
          assert.isTrue(Option.isNone(yield* store.load("a")))
          assert.deepStrictEqual([...(yield* store.list)].sort(), ["a:ledger:x", "ab"])
          assert.deepStrictEqual(yield* storage.list("execution:a:"), [
            "execution:a:ledger:not-a-seq",
            ...[0, 1, 2].map((seq) => ledgerKey("a:ledger:x", seq)),
            snapshotKey("a:ledger:x")
          ])
          assert.strictEqual((yield* storage.list("execution:ab:")).length, 4)

          // A cleared execution saved again lists again.
          yield* store.save(sampleSnapshot("a"))
          assert.include(yield* store.list, "a")
          yield* store.clear("never-saved")
        })
      ))

    it.effect("clear removes the snapshots of the execution's in-process child agents too, and nothing else", () =>
      withStore((store, storage) =>
        Effect.gen(function*() {
          // A spawn step's child context checkpoints as `<id><path of the spawn>`,
          // naming its parent when it saves; a grandchild names the child.
          const children = [
            ["run/root#0/sub#0", "run"],
            ["run/root#0/sub#0/inner#2/deeper#0", "run/root#0/sub#0"],
            ["run/root#0/fan#0[1]/sub#3", "run"]
          ] as const
          for (const id of ["run", "run/not-a-child", "runner"]) yield* store.save(sampleSnapshot(id, ITEM_CHUNK_SIZE + 1))
          for (const [id, parent] of children) {
            yield* store.save(sampleSnapshot(id, ITEM_CHUNK_SIZE + 1), { parentExecutionId: parent })
          }
          yield* store.clear("run")
          assert.deepStrictEqual([...(yield* store.list)].sort(), ["run/not-a-child", "runner"])
          for (const [id] of children) {
            assert.isTrue(Option.isNone(yield* store.load(id)))
            assert.deepStrictEqual(yield* storage.list(`execution:${id}:`), [])
          }
        })
      ))

    it.effect("clear keeps an independent execution whose id only looks like a child's", () =>
      withStore((store, storage) =>
        Effect.gen(function*() {
          // Users pick execution ids freely: "acme/issue#42" is an execution of its own.
          for (const id of ["acme", "acme/issue#42", "acme/root#0/sub#0", "acme/x#1/y#2"]) {
            yield* store.save(sampleSnapshot(id, ITEM_CHUNK_SIZE + 1))
          }
          yield* storage.set(ledgerKey("acme/issue#42", 1), { kept: true })
          yield* store.clear("acme")
          assert.deepStrictEqual([...(yield* store.list)].sort(), ["acme/issue#42", "acme/root#0/sub#0", "acme/x#1/y#2"])
          for (const id of ["acme/issue#42", "acme/root#0/sub#0", "acme/x#1/y#2"]) {
            assert.isTrue(equivalent(Option.getOrThrow(yield* store.load(id)), sampleSnapshot(id, ITEM_CHUNK_SIZE + 1)))
          }
          assert.deepStrictEqual(yield* storage.get(ledgerKey("acme/issue#42", 1)), Option.some({ kept: true }))
          // A fresh store (another process) knows the children from storage alone.
          yield* store.save(sampleSnapshot("acme"))
          yield* store.save(sampleSnapshot("acme/spawn#0"), { parentExecutionId: "acme" })
          yield* (yield* CheckpointStore.makeWith(storage)).clear("acme")
          assert.deepStrictEqual([...(yield* store.list)].sort(), ["acme/issue#42", "acme/root#0/sub#0", "acme/x#1/y#2"])
        })
      ))

    describe("item-log chunks", () => {
      it.effect("a head whose chunk count is corrupt (huge, negative, size 0) is a typed error, not a crash", () =>
        withStore((store, storage) =>
          Effect.gen(function*() {
            yield* store.save(sampleSnapshot("big", 2 * ITEM_CHUNK_SIZE + 1))
            const head = Option.getOrThrow(yield* storage.get(snapshotKey("big"))) as Record<string, any>
            for (const chunks of [
              { size: ITEM_CHUNK_SIZE, count: 2_147_483_647 },
              { size: ITEM_CHUNK_SIZE, count: Number.MAX_SAFE_INTEGER },
              { size: ITEM_CHUNK_SIZE, count: -1 },
              { size: 0, count: 2 },
              { size: -5, count: 2 }
            ]) {
              yield* storage.set(snapshotKey("big"), { ...head, itemLog: { ...head.itemLog, chunks } })
              const error = yield* Effect.flip(store.load("big"))
              assert.include(["StorageError", "CheckpointSchemaMismatch"], error._tag, JSON.stringify(chunks))
            }
            yield* storage.set(snapshotKey("big"), head)
            assert.strictEqual(Option.getOrThrow(yield* store.load("big")).itemLog.items.length, 2 * ITEM_CHUNK_SIZE + 1)
          })
        ))

      /** A storage that records every key it writes. */
      const recording = (storage: StorageAdapterShape) => {
        const writes: Array<string> = []
        const wrapped: StorageAdapterShape = {
          ...storage,
          set: (key, value) => Effect.suspend(() => (writes.push(key), storage.set(key, value)))
        }
        return { storage: wrapped, writes }
      }

      it.effect("a long log round-trips; a save writes a chunk only when one fills, else the head alone", () =>
        withStore((_, raw) =>
          Effect.gen(function*() {
            const { storage, writes } = recording(raw)
            const store = yield* CheckpointStore.makeWith(storage)
            const first = sampleSnapshot("long", 2 * ITEM_CHUNK_SIZE - 1)
            yield* store.save(first)
            assert.deepStrictEqual(writes.filter((key) => key !== indexKey("long")), [
              itemChunkKey("long", 0),
              snapshotKey("long")
            ])
            assert.isTrue(equivalent(Option.getOrThrow(yield* store.load("long")), first))

            // One more item fills chunk 1: it is written once, before the head.
            writes.length = 0
            const filled = {
              ...first,
              itemLog: { items: [...first.itemLog.items, { type: "message", id: "fills", text: "256th" }] }
            }
            yield* store.save(filled)
            assert.deepStrictEqual(writes, [itemChunkKey("long", 1), snapshotKey("long")])

            // Growing further, and saving an unchanged log, writes the head alone.
            writes.length = 0
            const grown = {
              ...filled,
              itemLog: { items: [...filled.itemLog.items, { type: "message", id: "late", text: "late" }] }
            }
            yield* store.save(grown)
            yield* store.save({ ...grown, capturedAt: "2025-01-02T00:00:00.000Z" })
            assert.deepStrictEqual(writes, [snapshotKey("long"), snapshotKey("long")])
            assert.isTrue(equivalent(Option.getOrThrow(yield* store.load("long")), { ...grown, capturedAt: "2025-01-02T00:00:00.000Z" }))
          })
        ))

      it.effect("the first save after a load writes the head alone: the loaded chunks are known", () =>
        withStore((store, raw) =>
          Effect.gen(function*() {
            yield* store.save(sampleSnapshot("reloaded", 3 * ITEM_CHUNK_SIZE + 2))
            const { storage, writes } = recording(raw)
            const fresh = yield* CheckpointStore.makeWith(storage)
            const loaded = Option.getOrThrow(yield* fresh.load("reloaded"))
            yield* fresh.save({
              ...loaded,
              itemLog: { items: [...loaded.itemLog.items, { type: "message", id: "after-restart" }] }
            })
            assert.deepStrictEqual(writes.filter((key) => key !== indexKey("reloaded")), [snapshotKey("reloaded")])
          })
        ))

      it.effect("a crash between a chunk write and its head leaves the previous snapshot loadable as it was", () =>
        withStore((store, storage) =>
          Effect.gen(function*() {
            const saved = sampleSnapshot("torn-save", ITEM_CHUNK_SIZE + 5)
            yield* store.save(saved)
            // A later save wrote chunk 1, then the host died before the head.
            const lost = Array.from({ length: ITEM_CHUNK_SIZE }, (_, i) => ({ type: "message", id: `lost-${i}` }))
            yield* storage.set(itemChunkKey("torn-save", 1), { version: 1, items: lost })
            const fresh = yield* CheckpointStore.makeWith(storage)
            assert.isTrue(equivalent(Option.getOrThrow(yield* fresh.load("torn-save")), saved))
          })
        ))

      it.effect("a missing chunk is a Corrupt storage error naming the chunk, not a shorter log", () =>
        withStore((store, storage) =>
          Effect.gen(function*() {
            yield* store.save(sampleSnapshot("lost-chunk", ITEM_CHUNK_SIZE + 1))
            yield* storage.delete(itemChunkKey("lost-chunk", 0))
            const error = yield* Effect.flip(store.load("lost-chunk"))
            assert.strictEqual(error._tag, "StorageError")
            if (error._tag === "StorageError") {
              assert.strictEqual(error.reason._tag, "Corrupt")
              assert.strictEqual(error.reason.key, itemChunkKey("lost-chunk", 0))
            }
          })
        ))

      it.effect("a v2 record with its items inline still loads; clear removes every chunk", () =>
        withStore((store, storage) =>
          Effect.gen(function*() {
            const inline = sampleSnapshot("inline", 4)
            yield* storage.set(snapshotKey("inline"), inline)
            assert.isTrue(equivalent(Option.getOrThrow(yield* store.load("inline")), inline))

            yield* store.save(sampleSnapshot("chunked", 3 * ITEM_CHUNK_SIZE))
            yield* store.clear("chunked")
            assert.deepStrictEqual(yield* storage.list(itemChunkPrefix("chunked")), [])
            assert.isTrue(Option.isNone(yield* store.load("chunked")))
          })
        ))
    })
  })
