/**
 * Step-ledger append cost early and late in one execution (append must be O(1)), and
 * `CheckpointStore.save` of a 1,000-item snapshot on file storage against a raw Node
 * write of the whole record with the same durability, interleaved in one run.
 */
import { Effect } from "effect"
import * as FileStorage from "../src/layers/FileStorage.ts"
import type { CheckpointSnapshot } from "../src/schema/CheckpointSnapshot.ts"
import { snapshotKey } from "../src/schema/CheckpointSnapshot.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { now, rawDurableWrite, round, summarize, tempRoot } from "./harness.ts"

const identity = { stepId: "callModel", kind: "callModel" }
/** A step output of a realistic size: one model turn. */
const output = (i: number) => ({ role: "assistant", responseId: `resp-${i}`, text: "lorem ipsum ".repeat(40) })

const timed = async (effect: Effect.Effect<unknown, unknown>): Promise<number> => {
  const start = now()
  await Effect.runPromise(effect)
  return now() - start
}

/**
 * Interleaves appends that are the 10th entry of a fresh execution with appends near
 * the 10,000th entry of one long execution, so both see the same machine state. A
 * sample times `batch` appends in one run (memory appends are microseconds, below
 * what one `runPromise` and the timer resolve) and reports the time per append.
 */
const appendCost = async (
  backend: string,
  storage: StorageAdapterShape,
  samples: number,
  batch: number,
  retention: Partial<StepLedger.StepLedgerRetention>
) => {
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
  const store = await run(CheckpointStore.makeWith(storage))
  const service = await run(StepLedger.makeWith(store, { retention }))
  const long = await run(service.open("long"))
  // Filling is not measured: concurrent appends share directory fsyncs on file storage.
  await run(Effect.forEach(
    Array.from({ length: 9_999 }, (_, i) => i),
    (i) => long.record(`/loop#0/turn#${i}`, identity, output(i)),
    { concurrency: 64, discard: true }
  ))
  const loadStart = now()
  const reopened = await run(service.open("long"))
  const loadMs = now() - loadStart

  const early: Array<number> = []
  const late: Array<number> = []
  let next = 9_999
  for (let s = 0; s < samples; s++) {
    const fresh = await run(Effect.forEach(Array.from({ length: batch }, (_, b) => b), (b) =>
      Effect.flatMap(service.open(`short-${s}-${b}`), (ledger) =>
        Effect.as(
          Effect.forEach(
            Array.from({ length: 9 }, (_, i) => i),
            (i) => ledger.record(`/loop#0/turn#${i}`, identity, output(i)),
            { discard: true }
          ),
          ledger
        ))))
    early.push(
      (await timed(Effect.forEach(fresh, (ledger) => ledger.record("/loop#0/turn#9", identity, output(9)), {
        discard: true
      }))) / batch
    )
    const from = next
    next += batch
    late.push(
      (await timed(Effect.forEach(
        Array.from({ length: batch }, (_, b) => from + b),
        (i) => reopened.record(`/loop#0/turn#${i}`, identity, output(i)),
        { discard: true }
      ))) / batch
    )
  }
  const at10 = summarize(early)
  const at10000 = summarize(late)
  return {
    backend,
    retention,
    appendsPerSample: batch,
    appendAt10: at10,
    appendAt10000: at10000,
    ratio: round(at10000.medianMs / at10.medianMs),
    target: 1.2,
    loadOf10000EntriesMs: round(loadMs)
  }
}

const snapshotOf = (items: number): CheckpointSnapshot => ({
  schemaVersion: 2,
  executionId: "bench",
  threadId: "thread",
  frontier: [{ stepId: "agent", input: { task: "summarise" } }],
  layers: { scratchpad: { notes: [] }, instructions: "be brief", history: { window: 50 } },
  cwd: { current: "/work", previous: null },
  askUser: [],
  itemLog: {
    items: Array.from({ length: items }, (_, i) => ({
      type: "message",
      role: i % 2 === 0 ? "user" : "assistant",
      responseId: `resp-${i}`,
      content: `turn ${i}: ` + "lorem ipsum dolor ".repeat(8)
    }))
  },
  capturedAt: new Date(0).toISOString()
})

/**
 * Saves of a snapshot holding `items` items on file storage, against a raw durable
 * write of the documented record (the whole snapshot, serialised) in the same run:
 * - steady: the log did not change since the last save (the head alone is written);
 * - growing: one new item per save, as after each step of a run (the last chunk and
 *   the head are written), against a raw write of the grown record;
 * - cold: a store that has written nothing yet (every chunk and the head).
 */
const saveCost = async (items: number, iterations: number) => {
  const root = tempRoot("checkpoint")
  const storage = await Effect.runPromise(FileStorage.make({ root }))
  const store = await Effect.runPromise(CheckpointStore.makeWith(storage))
  const rawDir = tempRoot("checkpoint-raw")
  let snapshot = snapshotOf(items)
  const key = snapshotKey(snapshot.executionId)
  const rawText = () => JSON.stringify({ version: 1, key, value: snapshot })
  const steady: Array<number> = []
  const growing: Array<number> = []
  const cold: Array<number> = []
  const raws: Array<number> = []
  for (let i = 0; i < 10; i++) {
    await Effect.runPromise(store.save(snapshot))
    await rawDurableWrite(rawDir, "snapshot", rawText())
  }
  for (let i = 0; i < iterations; i++) {
    steady.push(await timed(store.save(snapshot)))
    snapshot = {
      ...snapshot,
      itemLog: { items: [...snapshot.itemLog.items, { type: "message", role: "assistant", content: `late ${i}` }] }
    }
    growing.push(await timed(store.save(snapshot)))
    const fresh = await Effect.runPromise(CheckpointStore.makeWith(storage))
    cold.push(await timed(fresh.save(snapshot)))
    const text = rawText()
    const start = now()
    await rawDurableWrite(rawDir, "snapshot", text)
    raws.push(now() - start)
  }
  const raw = summarize(raws)
  const figure = (samples: Array<number>) => {
    const summary = summarize(samples)
    return { ...summary, ratioToRaw: round(summary.medianMs / raw.medianMs) }
  }
  return {
    items,
    recordBytes: rawText().length,
    rawWriteOfWholeRecord: raw,
    steady: figure(steady),
    growing: { ...figure(growing), target: 1.3 },
    cold: figure(cold)
  }
}

/** Runs the checkpoint benchmark and returns its figures. */
export const run = async () => {
  const unbounded = { maxEntries: Infinity }
  return {
    benchmark: "step-ledger append at the 10th vs 10,000th entry; snapshot save vs raw durable write",
    append: [
      await appendCost("memory", await Effect.runPromise(makeMemory), 40, 100, unbounded),
      await appendCost("file", await Effect.runPromise(FileStorage.make({ root: tempRoot("ledger") })), 200, 1, unbounded),
      // With the default cap every late append also evicts one key, concurrently with its write.
      await appendCost(
        "file",
        await Effect.runPromise(FileStorage.make({ root: tempRoot("ledger-default") })),
        200,
        1,
        StepLedger.DEFAULT_STEP_LEDGER_RETENTION
      )
    ],
    save: await saveCost(1_000, 100)
  }
}
