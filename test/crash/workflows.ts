/**
 * Reference workflows for the crash-point suite: each records which step bodies ran
 * in which attempt, and which steps storage had recorded when the host crashed, so a
 * check can tell a replay from a re-run.
 */
import { Effect, Option, Schedule, Stream } from "effect"
import { LanguageModel } from "effect/ai"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { callModel, inParallel, loop, runCode, type StepContext } from "../../src/harness/Step.ts"
import type { StorageError } from "../../src/Errors.ts"
import * as InMemorySubprocessAdapter from "../../src/layers/InMemorySubprocessAdapter.ts"
import * as IpcClient from "../../src/layers/IpcClient.ts"
import * as IpcServer from "../../src/layers/IpcServer.ts"
import { fromGenerate } from "../../src/layers/ScriptedModel.ts"
import * as DurableOutboundQueue from "../../src/services/DurableOutboundQueue.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import * as StepLedger from "../../src/services/StepLedger.ts"
import type { StorageAdapterShape } from "../../src/services/StorageAdapter.ts"
import type { CrashOutcome, Host, Workflow } from "../../src/testing/CrashRecovery.ts"

/** What bodies ran, per attempt (0: the first, 1: the resume), and what was recorded at the crash. */
export class RunLog {
  attempt = 0
  host: Host = { alive: () => true }
  readonly ran: Array<{ readonly key: string; readonly attempt: number }> = []
  /** Step paths and ids the ledger held when the resume started. */
  recorded = new Set<string>()

  note(key: string): void {
    if (this.host.alive()) this.ran.push({ key, attempt: this.attempt })
  }

  /** Throws unless no step recorded before the crash ran again, and at most `inFlight` bodies ran twice. */
  assertReplayed(inFlight: number): void {
    const first = new Set(this.ran.filter((r) => r.attempt === 0).map((r) => r.key))
    const again = this.ran.filter((r) => r.attempt === 1).map((r) => r.key)
    for (const key of again) {
      if (this.recorded.has(key)) throw new Error(`step ${key} was recorded before the crash but its body ran again`)
    }
    const twice = new Set(again.filter((key) => first.has(key)))
    if (twice.size > inFlight) {
      throw new Error(`${twice.size} bodies ran in both attempts (${[...twice].join(", ")}); at most ${inFlight} were in flight`)
    }
    const counts = new Map<string, number>()
    for (const { key } of this.ran) counts.set(key, (counts.get(key) ?? 0) + 1)
    for (const [key, n] of counts) if (n > 2) throw new Error(`step ${key} ran ${n} times`)
  }
}

/** The ledger paths and step ids of `executionId` as storage holds them now. */
export const recordedSteps = (storage: StorageAdapterShape, executionId: string) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    const ledger = yield* (yield* Effect.orDie(StepLedger.makeWith(store))).open(executionId)
    const keys = new Set<string>()
    for (const entry of yield* ledger.entries) {
      keys.add(entry.path)
      keys.add(entry.stepId)
    }
    return keys
  })

/** A model whose answer and response id follow from the prompt, so a re-run call answers the same. */
const echoModel = (log: RunLog) =>
  fromGenerate((request) =>
    Effect.sync(() => {
      const last = request.messages[request.messages.length - 1]
      const text = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content)
      const label = text.slice(0, 1)
      // Noted under the step's id, which is what the ledger's entries name.
      log.note(label === "A" ? "ask-a" : "ask-b")
      return { text: `answer to ${text}`, id: `resp-${label}-${text.length}` }
    })
  )

export const MIXED_ID = "mixed-run"

/**
 * Sequence, loop, parallel branches and model calls with response ids: root runs
 * `plan`, a `refine` loop of `improve` (three iterations), then `fan` (two model calls
 * and a code branch in parallel), then `summarise`.
 */
export const mixedWorkflow = (
  open: Effect.Effect<StorageAdapterShape, StorageError>,
  log: RunLog
): Workflow<unknown> => {
  const body = <A>(ctx: StepContext, f: () => A) => Effect.sync(() => (log.note(ctx.path), f()))
  const plan = runCode("plan", (input: string, ctx) => body(ctx, () => ({ topic: input, words: input.split(" ").length })))
  const improve = runCode("improve", (n: number, ctx) => body(ctx, () => n + 1))
  const refine = loop("refine", improve, { until: (n) => n >= 3, maxIterations: 10 })
  const askA = callModel<string>("ask-a", { prompt: (input) => [{ role: "user", content: `A: ${input}` }] })
  const askB = callModel<string>("ask-b", { prompt: (input) => [{ role: "user", content: `B: ${input}` }] })
  const tally = runCode("tally", (input: string, ctx) => body(ctx, () => input.length))
  const fan = inParallel("fan", [askA, askB, tally])
  const summarise = runCode("summarise", (input: ReadonlyArray<unknown>, ctx) => body(ctx, () => JSON.stringify(input)))
  const root = runCode("root", (input: string, ctx) =>
    Effect.gen(function*() {
      const planned = yield* ctx.run(plan, input)
      const refined = yield* ctx.run(refine, 0)
      const answers = yield* ctx.run(fan, `${planned.topic} after ${refined}`)
      const summary = yield* ctx.run(summarise, [planned, refined, answers])
      return { summary, responseIds: [answers[0].responseId, answers[1].responseId] }
    }))

  const harnessOver = (storage: StorageAdapterShape) =>
    Effect.gen(function*() {
      const store = yield* CheckpointStore.makeWith(storage)
      return yield* AgentHarness.make({ name: "mixed", agentGraph: root }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store)
      )
    })
  const withModel = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.flatMap(echoModel(log), (model) => Effect.provideService(effect, LanguageModel.LanguageModel, model))

  return {
    open,
    start: (storage, host) =>
      Effect.gen(function*() {
        log.attempt = 0
        log.host = host
        const harness = yield* harnessOver(storage)
        return (yield* withModel(harness.execute("durable agents", { executionId: MIXED_ID }))).output
      }),
    resume: (storage, host) =>
      Effect.gen(function*() {
        log.recorded = yield* recordedSteps(storage, MIXED_ID)
        log.attempt = 1
        log.host = host
        const harness = yield* harnessOver(storage)
        const resumed = yield* withModel(harness.resume(MIXED_ID))
        if (Option.isSome(resumed)) return resumed.value.output
        // Crashed before the first snapshot landed: nothing to resume, so run again.
        return (yield* withModel(harness.execute("durable agents", { executionId: MIXED_ID }))).output
      })
  }
}

/** Every key of `storage` reads back (no unreadable record was left). */
export const allReadable = (storage: StorageAdapterShape) =>
  Effect.gen(function*() {
    for (const key of yield* storage.list("")) yield* storage.get(key)
  })

/** The default check: the output equals the crash-free one and replay held. */
export const outputAndReplay = (log: RunLog, inFlight: number) => (outcome: CrashOutcome<unknown>, expected: unknown) =>
  Effect.suspend(() => {
    if (JSON.stringify(outcome.output) !== JSON.stringify(expected)) {
      return Effect.fail(`output ${JSON.stringify(outcome.output)} differs from ${JSON.stringify(expected)}`)
    }
    if (outcome.resumed) log.assertReplayed(inFlight)
    return Effect.void
  })

/** A harness whose graph types are erased: the workflows only need outputs as `unknown`. */
interface Erased {
  readonly execute: (input: unknown, options: { readonly executionId: string }) => Effect.Effect<{ readonly output: unknown }, unknown>
  readonly resume: (executionId: string) => Effect.Effect<Option.Option<{ readonly output: unknown }>, unknown>
  readonly detachedSpawn: AgentHarness.AgentHarness["detachedSpawn"]
}

const erase = (harness: AgentHarness.AgentHarness<any>): Erased => harness as unknown as Erased

// ---------------------------------------------------------------------------
// Detached spawn
// ---------------------------------------------------------------------------

export const SPAWN_PARENT_ID = "spawn-parent"
const SPAWN_CHILD_ID = "spawn-child"
const SPAWN_HANDLE = "spawn-handle"

/**
 * A parent that prepares, starts a detached child (two recorded steps of its own,
 * exported from `crashSteps.ts`) through the in-memory adapter with storage, and
 * collects its output. A restarted host reattaches the child from its manifest
 * (`listLive`, which re-runs it under its execution id, so its recorded steps
 * replay), then resumes the parent. `launch` adopts a live child instead of starting
 * a second; `collect` reads the child's output back from its own run when the child
 * had already finished (its manifest is gone) before the crash.
 */
export const detachedSpawnWorkflow = (
  open: Effect.Effect<StorageAdapterShape, StorageError>,
  log: RunLog
): Workflow<unknown> => {
  ;(globalThis as { __noeticCrashChildLog?: unknown }).__noeticCrashChildLog = { note: (key: string) => log.note(`child${key}`) }
  const body = <A>(ctx: StepContext, f: () => A) => Effect.sync(() => (log.note(ctx.path), f()))

  const attemptOver = (storage: StorageAdapterShape) =>
    Effect.gen(function*() {
      const { crashChild } = yield* Effect.promise(() => import("./crashSteps.ts"))
      const store = yield* CheckpointStore.makeWith(storage)
      const adapter = yield* InMemorySubprocessAdapter.make({ storage, checkpointStore: store })
      const childHarness = yield* AgentHarness.make({ name: "child", agentGraph: crashChild }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store)
      )
      let parent: Erased | undefined
      const prepare = runCode("prepare", (input: string, ctx) => body(ctx, () => `${input}!`))
      const launch = runCode("launch", (input: string, ctx) =>
        Effect.gen(function*() {
          log.note(ctx.path)
          const live = yield* Effect.orDie(adapter.reattach(SPAWN_HANDLE))
          if (Option.isNone(live)) {
            yield* Effect.orDie(parent!.detachedSpawn(crashChild, input, ctx, { handleId: SPAWN_HANDLE, executionId: SPAWN_CHILD_ID }))
          }
          return SPAWN_HANDLE
        }))
      const collect = runCode("collect", (handleId: string, ctx) =>
        Effect.gen(function*() {
          log.note(ctx.path)
          const live = yield* Effect.orDie(adapter.reattach(handleId))
          if (Option.isSome(live)) return yield* Effect.orDie(live.value.await)
          // Finished before the crash: its run is recorded, so resuming it replays every step.
          const resumed = yield* Effect.orDie(childHarness.resume(SPAWN_CHILD_ID))
          return Option.getOrThrowWith(resumed, () => new Error("the child left neither a live handle nor a run")).output
        }))
      const root = runCode("root", (input: string, ctx) =>
        Effect.gen(function*() {
          const prepared = yield* ctx.run(prepare, input)
          const handleId = yield* ctx.run(launch, prepared)
          return yield* ctx.run(collect, handleId)
        }))
      parent = erase(
        yield* AgentHarness.make({ name: "parent", agentGraph: root, subprocess: adapter }).pipe(
          Effect.provideService(CheckpointStore.CheckpointStore, store)
        )
      )
      return { parent, adapter }
    })

  return {
    open,
    start: (storage, host) =>
      Effect.gen(function*() {
        log.attempt = 0
        log.host = host
        const { parent } = yield* attemptOver(storage)
        return (yield* Effect.orDie(parent.execute("report", { executionId: SPAWN_PARENT_ID }))).output
      }),
    resume: (storage, host) =>
      Effect.gen(function*() {
        const parentSteps = yield* recordedSteps(storage, SPAWN_PARENT_ID)
        const childSteps = yield* recordedSteps(storage, SPAWN_CHILD_ID)
        log.recorded = new Set([...parentSteps, ...[...childSteps].map((key) => `child${key}`)])
        log.attempt = 1
        log.host = host
        const { adapter, parent } = yield* attemptOver(storage)
        // The recovery step of a restart: children first, then the parent.
        yield* Effect.orDie(adapter.listLive)
        const resumed = yield* Effect.orDie(parent.resume(SPAWN_PARENT_ID))
        if (Option.isSome(resumed)) return resumed.value.output
        return (yield* Effect.orDie(parent.execute("report", { executionId: SPAWN_PARENT_ID }))).output
      })
  }
}

// ---------------------------------------------------------------------------
// Durable IPC stream
// ---------------------------------------------------------------------------

export const STREAM_ID = "stream-run"
const STREAM_ITEMS = 4

/** What the consumer of the stream received. */
export class StreamConsumer {
  readonly received: Array<{ readonly seq: number; readonly n: number }> = []

  /** Throws unless every seq came once, in order, and every item arrived (one in flight may repeat). */
  assertExactlyOnce(): void {
    const seqs = this.received.map((r) => r.seq)
    // Every durable frame once, in order. Seqs need not be contiguous: a queue reopened
    // after a crash numbers above the seqs it had reserved.
    for (let i = 1; i < seqs.length; i++) {
      if (seqs[i]! <= seqs[i - 1]!) throw new Error(`seq ${seqs[i]} delivered after ${seqs[i - 1]}: ${seqs.join(",")}`)
    }
    const counts = new Map<number, number>()
    for (const { n } of this.received) counts.set(n, (counts.get(n) ?? 0) + 1)
    for (let n = 0; n < STREAM_ITEMS; n++) {
      if (!counts.has(n)) throw new Error(`item ${n} never reached the consumer: ${JSON.stringify(this.received)}`)
    }
    const repeats = [...counts.values()].reduce((sum, c) => sum + c - 1, 0)
    if (repeats > 1) throw new Error(`${repeats} items were emitted twice; only the one in flight may be`)
  }
}

/** Starts a durable client on `socketPath` that records and acks every frame, in the current scope. */
export const startConsumer = (socketPath: string, consumer: StreamConsumer) =>
  Effect.gen(function*() {
    const client = yield* IpcClient.connect({
      socketPath,
      durable: true,
      watermark: IpcClient.memoryWatermark(),
      reconnect: Schedule.spaced("5 millis")
    })
    yield* client.frames.pipe(
      Stream.runForEach((delivery) =>
        Effect.gen(function*() {
          if (delivery.seq === undefined || delivery.frame.type !== "item") return
          consumer.received.push({ seq: delivery.seq, n: (delivery.frame.item as { n: number }).n })
          yield* Effect.orDie(client.ack(delivery.seq))
        })
      ),
      Effect.forkScoped
    )
    return client
  })

/**
 * Steps emit items on a durable IPC stream (a server over a durable outbound queue on
 * the workflow's storage); the run ends once the consumer acknowledged the head. A
 * restarted host serves the same queue on the same socket, and the consumer (another
 * process, which does not crash) reconnects and resumes from its watermark.
 */
export const ipcStreamWorkflow = (
  open: Effect.Effect<StorageAdapterShape, StorageError>,
  socketPath: string,
  log: RunLog
): Workflow<unknown> => {
  const attempt = (storage: StorageAdapterShape, run: (harness: Erased) => Effect.Effect<unknown, unknown>) =>
    Effect.gen(function*() {
      const queue = yield* DurableOutboundQueue.makeWith(storage, { socketId: "crash-stream" })
      const server = yield* IpcServer.make({ socketPath, queue })
      // Each step emits one item and records its seq; the run ends once the consumer
      // acknowledged the last one (a replayed step's seq was emitted before the crash).
      const emit = runCode("emit", (last: { readonly n: number; readonly seq: number }, ctx) =>
        Effect.gen(function*() {
          log.note(ctx.path)
          const seq = yield* Effect.orDie(server.emit({ type: "item", item: { n: last.n } }))
          return { n: last.n + 1, seq }
        }))
      const emitAll = loop("emit-all", emit, { until: (last) => last.n >= STREAM_ITEMS, maxIterations: STREAM_ITEMS })
      const root = runCode("root", (_: void, ctx) =>
        Effect.gen(function*() {
          const last = yield* ctx.run(emitAll, { n: 0, seq: 0 })
          yield* server.awaitAcked(last.seq).pipe(
            Effect.timeoutOrElse({ duration: "30 seconds", orElse: () => Effect.die(new Error(`the consumer never acked ${last.seq}`)) })
          )
          return last.n
        }))
      const store = yield* CheckpointStore.makeWith(storage)
      const harness = yield* AgentHarness.make({ name: "stream", agentGraph: root }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store)
      )
      return yield* Effect.orDie(run(erase(harness)))
    })
  return {
    open,
    start: (storage, host) =>
      Effect.gen(function*() {
        log.attempt = 0
        log.host = host
        return yield* attempt(storage, (harness) => Effect.map(harness.execute(undefined, { executionId: STREAM_ID }), (r) => r.output))
      }),
    resume: (storage, host) =>
      Effect.gen(function*() {
        log.recorded = yield* recordedSteps(storage, STREAM_ID)
        log.attempt = 1
        log.host = host
        return yield* attempt(storage, (harness) =>
          Effect.flatMap(harness.resume(STREAM_ID), (resumed) =>
            Option.isSome(resumed)
              ? Effect.succeed(resumed.value.output)
              : Effect.map(harness.execute(undefined, { executionId: STREAM_ID }), (r) => r.output)))
      })
  }
}
