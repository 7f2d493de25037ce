/**
 * File storage `set` latency against a raw Node write of the same bytes with the same
 * durability (open, write, fsync, close, rename, fsync of the directory), interleaved
 * in one run so both see the same disk.
 */
import { Effect } from "effect"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { now, rawDurableWrite, round, summarize, tempRoot } from "./harness.ts"

const measure = async (valueBytes: number, iterations: number) => {
  const storage = await Effect.runPromise(FileStorage.make({ root: tempRoot("storage") }))
  const rawDir = tempRoot("raw")
  const value = { payload: "x".repeat(valueBytes) }
  const key = "bench:value"
  // The raw side writes exactly the bytes the storage writes (its versioned record).
  const text = JSON.stringify({ version: 1, key, value })
  const storageSamples: Array<number> = []
  const rawSamples: Array<number> = []
  for (let i = 0; i < 10; i++) {
    await Effect.runPromise(storage.set(key, value))
    await rawDurableWrite(rawDir, "bench-value", text)
  }
  for (let i = 0; i < iterations; i++) {
    let start = now()
    await Effect.runPromise(storage.set(key, value))
    storageSamples.push(now() - start)
    start = now()
    await rawDurableWrite(rawDir, "bench-value", text)
    rawSamples.push(now() - start)
  }
  const fileStorage = summarize(storageSamples)
  const raw = summarize(rawSamples)
  return { valueBytes, fileStorage, raw, ratio: round(fileStorage.medianMs / raw.medianMs), target: 1.3 }
}

/** Runs the storage benchmark and returns its figures. */
export const run = async () => ({
  benchmark: "file storage set latency vs raw durable write",
  results: [await measure(1024, 300), await measure(100 * 1024, 150)]
})
