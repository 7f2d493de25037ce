/**
 * One durable `set` on each write path against its raw baseline, interleaved in one
 * run: the file storage against a raw fsync'd write of the same bytes (open, write,
 * fsync, rename, fsync of the directory); the Postgres storage against a raw
 * single-row upsert of the same bytes through the same driver. Values of 1 KiB and
 * 100 KiB.
 */
import { Effect } from "effect"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { openBackend } from "./backends.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  type Figure,
  interleave,
  now,
  type Ratio,
  ratioOf,
  rawDurableWrite,
  reasonOf,
  type Skipped,
  summarize,
  tempRoot
} from "./harness.ts"
import * as Pg from "./postgres.ts"

const storageCase: BenchCase = {
  id: "storage",
  title: "One durable set against the raw write of the same bytes (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    const sizes = [1024, 100 * 1024]
    const rounds = context.quick ? 5 : 60
    const skipped: Array<Skipped> = []
    const closers: Array<() => Promise<void>> = []
    const variants: Record<string, () => Promise<number>> = {}
    const labels: Record<string, { label: string; kind: Figure["kind"] }> = {}
    const key = "bench:value"
    const valueOf = (bytes: number) => ({ payload: "x".repeat(bytes) })
    // The raw side writes exactly the bytes the storage writes (its versioned record).
    const textOf = (bytes: number) => JSON.stringify({ version: 1, key, value: valueOf(bytes) })
    const add = (id: string, label: string, kind: Figure["kind"], fn: (bytes: number) => () => Promise<number>) => {
      labels[id] = { label, kind }
      for (const bytes of sizes) variants[`${id}@${bytes / 1024}KiB`] = fn(bytes)
    }
    const timedSet = (storage: StorageAdapterShape, bytes: number) => {
      const value = valueOf(bytes)
      return async () => {
        const start = now()
        await Effect.runPromise(storage.set(key, value))
        return now() - start
      }
    }
    try {
      for (const name of ["file", "postgres", "sqlite"] as const) {
        const opened = await openBackend(name, context).catch((cause) => ({ skipped: reasonOf(cause) }))
        if ("skipped" in opened) {
          skipped.push({ label: `this library on ${name}`, reason: opened.skipped })
          continue
        }
        closers.push(opened.close)
        add(name, `${opened.description}, set`, "this", (bytes) => timedSet(opened.storage, bytes))
      }
      const rawDir = tempRoot("raw")
      add("raw-fsync", "raw fsync'd write of the same bytes", "baseline", (bytes) => {
        const text = textOf(bytes)
        return async () => {
          const start = now()
          await rawDurableWrite(rawDir, `value-${bytes}`, text)
          return now() - start
        }
      })
      if (context.postgres._tag === "Available") {
        const table = Pg.freshName("noetic_bench_raw")
        const client = await Pg.raw(context.postgres.url, table)
        closers.push(async () => {
          await client.value.dropTables([table])
          await client.close()
        })
        add("raw-upsert", "raw single-row upsert of the same bytes (@effect/sql-pg)", "baseline", (bytes) => {
          const text = textOf(bytes)
          return async () => {
            const start = now()
            await client.value.upsert(key, text)
            return now() - start
          }
        })
      } else skipped.push({ label: "raw Postgres upsert", reason: context.postgres.reason })

      context.log(`storage: ${Object.keys(variants).length} variants x ${rounds} rounds (+3 warm-up)`)
      const samples = await interleave(variants, { rounds, warmup: 3 })
      const figures: Array<Figure> = Object.entries(samples).map(([id, values]) => {
        const [name, size] = id.split("@") as [string, string]
        return { id, label: `${labels[name]!.label}, ${size}`, kind: labels[name]!.kind, unit: "ms", summary: summarize(values) }
      })
      const ratios: Array<Ratio> = []
      for (const bytes of sizes) {
        const size = `${bytes / 1024}KiB`
        for (
          const ratio of [
            ratioOf(figures, samples, `file set / raw fsync'd write, ${size}`, `file@${size}`, `raw-fsync@${size}`, 1.5),
            ratioOf(figures, samples, `sqlite set / raw fsync'd write, ${size}`, `sqlite@${size}`, `raw-fsync@${size}`),
            ratioOf(figures, samples, `postgres set / raw upsert, ${size}`, `postgres@${size}`, `raw-upsert@${size}`, 1.5)
          ]
        ) if (ratio !== undefined) ratios.push(ratio)
      }
      return { id: "storage", title: storageCase.title, figures, ratios, skipped, notes: [] }
    } finally {
      for (const close of closers.reverse()) await close().catch(() => {})
    }
  }
}

/** The single-write case. */
export const cases: ReadonlyArray<BenchCase> = [storageCase]
