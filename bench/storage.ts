/**
 * One durable `set` on each write path against its raw baseline, interleaved in one
 * run: the file storage against a raw fsync'd write of the same bytes (open, write,
 * fsync, rename, fsync of the directory); the Postgres storage against a raw
 * single-row upsert of the same bytes through the same driver. Values of 1 KiB and
 * 100 KiB.
 */
import { Effect } from "effect"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { openBackends, rawPostgres } from "./backends.ts"
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
  sizedVariants,
  tempRoot,
  withCaseScope
} from "./harness.ts"

const storageCase: BenchCase = {
  id: "storage",
  title: "One durable set against the raw write of the same bytes (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const sizes = [1024, 100 * 1024]
      const rounds = context.quick ? 5 : 60
      const set = sizedVariants(sizes.map((bytes) => `${bytes / 1024}KiB`))
      const key = "bench:value"
      const valueOf = (bytes: number) => ({ payload: "x".repeat(bytes) })
      // The raw side writes exactly the bytes the storage writes (its versioned record).
      const textOf = (bytes: number) => JSON.stringify({ version: 1, key, value: valueOf(bytes) })
      const bytesOf = (size: string) => Number(size.replace("KiB", "")) * 1024
      const add = (id: string, label: string, kind: Figure["kind"], fn: (bytes: number) => () => Promise<number>) =>
        set.add(id, label, kind, (size) => fn(bytesOf(size)))
      const timedSet = (storage: StorageAdapterShape, bytes: number) => {
        const value = valueOf(bytes)
        return async () => {
          const start = now()
          await Effect.runPromise(storage.set(key, value))
          return now() - start
        }
      }
      for (const opened of await openBackends(["file", "postgres", "sqlite"], context, scope)) {
        add(opened.name, `${opened.description}, set`, "this", (bytes) => timedSet(opened.storage, bytes))
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
      const client = await rawPostgres(context, scope)
      if (client !== undefined) {
        add("raw-upsert", "raw single-row upsert of the same bytes (@effect/sql-pg)", "baseline", (bytes) => {
          const text = textOf(bytes)
          return async () => {
            const start = now()
            await client.upsert(key, text)
            return now() - start
          }
        })
      }

      context.log(`storage: ${Object.keys(set.variants).length} variants x ${rounds} rounds (+3 warm-up)`)
      const samples = await interleave(set.variants, { rounds, warmup: 3 })
      const figures = set.figures(samples, "ms", (label, size) => `${label}, ${size}`)
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
      return { id: "storage", title: storageCase.title, figures, ratios, skipped: scope.skipped, notes: scope.notes }
    })
}

/** The single-write case. */
export const cases: ReadonlyArray<BenchCase> = [storageCase]
