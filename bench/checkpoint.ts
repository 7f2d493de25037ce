/**
 * Snapshot save and restore with an item log of 10, 100 and 1,000 items, interleaved:
 * - this library: `CheckpointStore.save` of a snapshot whose log grew by one item since
 *   the previous save (as after each turn of a run), and `load` of it by a store that
 *   has not seen it (as a restarted host);
 * - LangGraph savers: a put of a checkpoint holding the same items as its message list,
 *   chained on the previous one, and a load of the latest (`getTuple`);
 * - raw baselines: a fsync'd write of the whole snapshot record and a read of it; a
 *   single-row upsert and a `SELECT ... WHERE key = ANY($1)` of it through the same
 *   Postgres driver.
 * Round trips of a save and a restore on Postgres are counted on the wire, untimed.
 */
import { Effect } from "effect"
import * as FsPromises from "node:fs/promises"
import * as Path from "node:path"
import type { CheckpointSnapshot } from "../src/schema/CheckpointSnapshot.ts"
import { snapshotKey } from "../src/schema/CheckpointSnapshot.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { type BackendName, langGraphPeers, openBackends, rawPostgres } from "./backends.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  fresh,
  interleave,
  now,
  type Ratio,
  ratioOf,
  rawDurableWrite,
  sizedVariants,
  tempRoot,
  withCaseScope
} from "./harness.ts"
import * as Savers from "./peers/savers.ts"
import * as Pg from "./postgres.ts"

/** Item `i` of the log: one message of a conversation, about 200 bytes. */
const item = (i: number) => ({
  type: "message",
  role: i % 2 === 0 ? "user" : "assistant",
  id: `msg-${i}`,
  content: `turn ${i}: ` + "lorem ipsum dolor ".repeat(8)
})

const snapshotOf = (executionId: string, items: ReadonlyArray<unknown>): CheckpointSnapshot => ({
  schemaVersion: 2,
  executionId,
  threadId: "thread",
  frontier: [{ stepId: "agent", input: { task: "summarise" } }],
  layers: { scratchpad: { notes: [] }, instructions: "be brief", history: { window: 50 } },
  cwd: { current: "/work", previous: null },
  askUser: [],
  itemLog: { items },
  capturedAt: new Date(0).toISOString()
})

/** The documented record of a snapshot, as a raw write would store it whole. */
const recordText = (snapshot: CheckpointSnapshot) =>
  JSON.stringify({ version: 1, key: snapshotKey(snapshot.executionId), value: snapshot })


/** A growing log: each call returns the previous items plus one. */
const growing = (size: number) => {
  const items = Array.from({ length: size }, (_, i) => item(i))
  return () => {
    items.push(item(items.length))
    return items
  }
}

const snapshotCase: BenchCase = {
  id: "checkpoint",
  title: "Snapshot save and restore with an item log of N items (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const { skipped, notes } = scope
      const sizes = context.quick ? [10, 100] : [10, 100, 1000]
      const rounds = context.quick ? 3 : 15
      const set = sizedVariants(sizes)
      const add = set.add
      const timed = async (effect: Effect.Effect<unknown, unknown>) => {
        const start = now()
        await Effect.runPromise(effect)
        return now() - start
      }

      const backends: Array<BackendName> = ["memory", "file", "postgres", "sqlite"]
      for (const opened of await openBackends(backends, context, scope)) {
        const storage: StorageAdapterShape = opened.storage
        const store = await Effect.runPromise(CheckpointStore.makeWith(storage))
        const saved: Record<number, string> = {}
        add(`save-${opened.name}`, `this library, save, ${opened.description}`, "this", (n) => {
          const id = fresh("exec")
          saved[n] = id
          const next = growing(n)
          return () => timed(store.save(snapshotOf(id, next())))
        })
        add(`load-${opened.name}`, `this library, restore (load by a fresh store), ${opened.description}`, "this", (n) => async () => {
          const cold = await Effect.runPromise(CheckpointStore.makeWith(storage))
          // The first round's save may not have run yet when the load goes first.
          if (saved[n] === undefined) return NaN
          return timed(cold.load(saved[n]))
        })
      }

      const rawDir = tempRoot("raw-snapshot")
      add("raw-write", "raw fsync'd write of the whole snapshot record", "baseline", (n) => {
        const next = growing(n)
        const name = fresh("snapshot")
        return async () => {
          const text = recordText(snapshotOf(name, next()))
          const start = now()
          await rawDurableWrite(rawDir, name, text)
          return now() - start
        }
      })
      add("raw-read", "raw read and parse of the whole snapshot record file", "baseline", (n) => {
        const name = fresh("snapshot-read")
        let written = false
        return async () => {
          if (!written) {
            await rawDurableWrite(rawDir, name, recordText(snapshotOf(name, growing(n)())))
            written = true
          }
          const start = now()
          JSON.parse(await FsPromises.readFile(Path.join(rawDir, name), "utf8"))
          return now() - start
        }
      })
      const rawPg = await rawPostgres(context, scope)
      if (rawPg !== undefined) {
        add("raw-upsert", "raw single-row upsert of the whole snapshot record", "baseline", (n) => {
          const next = growing(n)
          const key = fresh("snapshot")
          return async () => {
            const text = recordText(snapshotOf(key, next()))
            const start = now()
            await rawPg.upsert(key, text)
            return now() - start
          }
        })
        add("raw-select", "raw SELECT ... WHERE key = ANY($1) of the snapshot record", "baseline", (n) => {
          const key = fresh("snapshot-select")
          let written = false
          return async () => {
            if (!written) {
              await rawPg.upsert(key, recordText(snapshotOf(key, growing(n)())))
              written = true
            }
            const start = now()
            await rawPg.selectAny([key])
            return now() - start
          }
        })
      }

      for (const { id, peer } of await langGraphPeers(context, scope)) {
        const threads: Record<number, string> = {}
        add(`save-${id}`, `${peer.name}, put`, "peer", (n) => {
          const thread = fresh("thread")
          threads[n] = thread
          const next = growing(n)
          let seq = 0
          return () => peer.saveItems(thread, seq++, next())
        })
        add(`load-${id}`, `${peer.name}, load latest (getTuple)`, "peer", (n) => async () => {
          if (threads[n] === undefined) return NaN
          return (await peer.loadLatest(threads[n])).ms
        })
      }

      // A load that went first in the warm-up round found nothing yet: the warm-up discards it.
      context.log(`checkpoint: ${Object.keys(set.variants).length} variants x ${rounds} rounds (+1 warm-up)`)
      const samples = await interleave(set.variants, { rounds, warmup: 1 })
      const figures = set.figures(samples, "ms", (label, n) => `${label}, ${n} items`)
      const ratios: Array<Ratio> = []
      const push = (r: Ratio | undefined) => r !== undefined && ratios.push(r)
      for (const n of sizes) {
        const at = (id: string) => `${id}@${n}`
        push(ratioOf(figures, samples, `save, file / raw fsync'd write of the record, ${n} items`, at("save-file"), at("raw-write")))
        push(ratioOf(figures, samples, `save, postgres / raw upsert of the record, ${n} items`, at("save-postgres"), at("raw-upsert")))
        push(ratioOf(figures, samples, `restore, postgres / raw SELECT of the record, ${n} items`, at("load-postgres"), at("raw-select")))
        push(ratioOf(figures, samples, `restore, file / raw read of the record, ${n} items`, at("load-file"), at("raw-read")))
        push(ratioOf(figures, samples, `save, sqlite / raw fsync'd write of the record, ${n} items`, at("save-sqlite"), at("raw-write")))
        push(ratioOf(figures, samples, `restore, sqlite / raw read of the record, ${n} items`, at("load-sqlite"), at("raw-read")))
        push(ratioOf(figures, samples, `save, memory / LangGraph MemorySaver, ${n} items`, at("save-memory"), at("save-lg-memory"), 1))
        push(ratioOf(figures, samples, `restore, memory / LangGraph MemorySaver, ${n} items`, at("load-memory"), at("load-lg-memory"), 1))
        push(ratioOf(figures, samples, `save, file / LangGraph SqliteSaver, ${n} items`, at("save-file"), at("save-lg-sqlite"), 1))
        push(ratioOf(figures, samples, `restore, file / LangGraph SqliteSaver, ${n} items`, at("load-file"), at("load-lg-sqlite"), 1))
        push(ratioOf(figures, samples, `save, sqlite / LangGraph SqliteSaver, ${n} items`, at("save-sqlite"), at("save-lg-sqlite"), 1))
        push(ratioOf(figures, samples, `restore, sqlite / LangGraph SqliteSaver, ${n} items`, at("load-sqlite"), at("load-lg-sqlite"), 1))
        push(ratioOf(figures, samples, `save, postgres / LangGraph PostgresSaver, ${n} items`, at("save-postgres"), at("save-lg-postgres"), 1))
        push(ratioOf(figures, samples, `restore, postgres / LangGraph PostgresSaver, ${n} items`, at("load-postgres"), at("load-lg-postgres"), 1))
      }

      // Round trips of one save and one restore of the largest log, on the wire.
      if (context.postgres._tag === "Available") {
        const n = sizes[sizes.length - 1]!
        const proxy = await Pg.countingProxy(context.postgres.url)
        try {
          const table = Pg.freshName("noetic_bench_rt")
          const counted = await Pg.storage(proxy.url, table)
          const store = await Effect.runPromise(CheckpointStore.makeWith(counted.value))
          const id = fresh("exec")
          const next = growing(n)
          await Effect.runPromise(store.save(snapshotOf(id, next())))
          proxy.reset()
          await Effect.runPromise(store.save(snapshotOf(id, next())))
          const save = proxy.roundTrips()
          const cold = await Effect.runPromise(CheckpointStore.makeWith(counted.value))
          proxy.reset()
          await Effect.runPromise(cold.load(id))
          const load = proxy.roundTrips()
          await counted.close()
          await rawPg?.dropTables([table])
          const schema = Pg.freshName("noetic_bench_lgrt")
          const lg = await Pg.langGraphSaver(proxy.url, schema)
          const peer = Savers.inProcess("PostgresSaver", lg.value)
          const thread = fresh("thread")
          const lgNext = growing(n)
          await peer.saveItems(thread, 0, lgNext())
          proxy.reset()
          await peer.saveItems(thread, 1, lgNext())
          const lgSave = proxy.roundTrips()
          proxy.reset()
          await peer.loadLatest(thread)
          const lgLoad = proxy.roundTrips()
          await lg.close()
          await rawPg?.dropSchema(schema)
          notes.push(
            `Round trips on Postgres with ${n} items (counted on the wire): this library save ${save}, restore ${load}; ` +
              `LangGraph PostgresSaver put ${lgSave}, getTuple ${lgLoad}; raw upsert 1, raw SELECT 1.`
          )
          const tag = (id: string, trips: number) => {
            const i = figures.findIndex((f) => f.id === `${id}@${n}`)
            if (i >= 0) figures[i] = { ...figures[i]!, detail: { roundTrips: trips } }
          }
          tag("save-postgres", save)
          tag("load-postgres", load)
          tag("save-lg-postgres", lgSave)
          tag("load-lg-postgres", lgLoad)
        } finally {
          await proxy.close()
        }
      }
      notes.push(
        "Each save adds one item to the log (as after a turn). This library writes the item log in chunks, so a save " +
          "writes what changed; a LangGraph put serialises the whole message channel; the raw baselines write the whole record."
      )
      return { id: "checkpoint", title: snapshotCase.title, figures, ratios, skipped, notes }
    })
}

/** The snapshot save and restore case. */
export const cases: ReadonlyArray<BenchCase> = [snapshotCase]
