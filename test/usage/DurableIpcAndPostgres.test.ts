/**
 * A user's program: durable IPC over a file-backed queue with a client that keeps
 * its watermark in storage, execution leases used directly, and a durable harness
 * on Postgres (when NOETIC_PG_URL is set).
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, expectTypeOf, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Queue, Redacted, Schedule, Stream } from "effect"
import { SqlClient } from "effect/sql"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  AgentHarness,
  CheckpointStore,
  DurableOutboundQueue,
  ExecutionLease,
  type ExecutionLeaseHeld,
  FileStorage,
  IpcClient,
  IpcServer,
  PostgresStorage,
  runCode,
  StepLedger,
  StorageAdapter,
  type StorageError
} from "../../src/index.ts"

/** Where the application's frame handler puts what clients send. */
class Inbox extends Context.Service<Inbox, Queue.Queue<string>>()("usage/Inbox") {}

const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "nu-"))

describe("usage: durable IPC", () => {
  it.live("a server emits durably; a client that restarts resumes after its stored watermark", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const socketPath = Path.join(dir, "s.sock")
      const storage = yield* StorageAdapter.StorageAdapter
      const queue = yield* DurableOutboundQueue.DurableOutboundQueue
      const server = yield* IpcServer.make({ socketPath, queue })
      for (let i = 1; i <= 3; i++) yield* server.emit({ type: "item", item: i })

      const watermark = IpcClient.storageWatermark(storage, "client:watermark")
      const firstTwo = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* IpcClient.connect({ socketPath, watermark, reconnect: Schedule.spaced("5 millis") })
        const a = yield* client.take
        const b = yield* client.take
        yield* client.ack(b.seq!)
        return [a, b].map((d) => d.frame)
      }))
      assert.deepStrictEqual(firstTwo, [{ type: "item", item: 1 }, { type: "item", item: 2 }])

      yield* server.emit({ type: "item", item: 4 })
      const rest = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* IpcClient.connect({ socketPath, watermark, reconnect: Schedule.spaced("5 millis") })
        return yield* client.frames.pipe(Stream.take(2), Stream.map((d) => d.frame), Stream.runCollect)
      }))
      assert.deepStrictEqual(rest, [{ type: "item", item: 3 }, { type: "item", item: 4 }])
    }).pipe(
      Effect.provide(
        DurableOutboundQueue.layer({ socketId: "usage" }).pipe(
          Layer.provideMerge(FileStorage.layer({ root: tempDir() }))
        )
      )
    ))

  it.live("IpcServer.layer over a DurableOutboundQueue layer composes at the edge", () =>
    Effect.gen(function*() {
      const server = yield* IpcServer.IpcServer
      yield* server.emit({ type: "item", item: "hello" })
      const client = yield* IpcClient.connect({ socketPath: server.socketPath })
      assert.deepStrictEqual((yield* client.take).frame, { type: "item", item: "hello" })
    }).pipe(
      Effect.provide(
        IpcServer.layer({ socketPath: Path.join(tempDir(), "s.sock") }).pipe(
          Layer.provide(DurableOutboundQueue.layer({ socketId: "edge" })),
          Layer.provide(StorageAdapter.layerMemory)
        )
      )
    ))

  it.live("IpcServer.layer's frame handler may use services the edge provides", () =>
    Effect.gen(function*() {
      const server = yield* IpcServer.IpcServer
      const inbox = yield* Inbox
      const client = yield* IpcClient.connect({ socketPath: server.socketPath })
      yield* client.connected
      yield* client.send({ type: "send", messageId: "m1", text: "hi" })
      assert.deepStrictEqual(yield* Queue.take(inbox), "m1:hi")
    }).pipe(
      Effect.provide(
        IpcServer.layer({
          socketPath: Path.join(tempDir(), "s.sock"),
          onClientFrame: (frame) =>
            frame.type === "send" ? Effect.flatMap(Inbox, (inbox) => Queue.offer(inbox, `${frame.messageId}:${frame.text}`)) : Effect.void
        }).pipe(
          Layer.provideMerge(Layer.effect(Inbox, Queue.unbounded<string>())),
          Layer.provide(DurableOutboundQueue.layer({ socketId: "handler" })),
          Layer.provide(StorageAdapter.layerMemory)
        )
      )
    ))
})

describe("usage: execution leases", () => {
  layer(ExecutionLease.layer.pipe(Layer.provideMerge(StorageAdapter.layerMemory)))((it) => {
    it.effect("acquire, held by another owner, release, take over with a higher token", () =>
      Effect.gen(function*() {
        const leases = yield* ExecutionLease.ExecutionLease
        const a = yield* leases.acquire("exec-1", { owner: "host-a", ttl: "30 seconds" })
        const held = yield* leases.acquire("exec-1", { owner: "host-b", ttl: "30 seconds" }).pipe(
          Effect.flip,
          Effect.map((e) => e._tag)
        )
        assert.strictEqual(held, "ExecutionLeaseHeld")
        const caught = yield* leases.acquire("exec-1", { owner: "host-b", ttl: "30 seconds" }).pipe(
          Effect.map(() => "taken"),
          Effect.catchTag("ExecutionLeaseHeld", (e: ExecutionLeaseHeld) => Effect.succeed(`held by ${e.owner}`))
        )
        assert.strictEqual(caught, "held by host-a")
        yield* leases.release(a)
        const b = yield* leases.acquire("exec-1", { owner: "host-b", ttl: "30 seconds" })
        assert.isAbove(b.token, a.token)
        const lost = yield* Effect.flip(leases.renew(a, "30 seconds"))
        assert.strictEqual(lost._tag, "ExecutionLeaseLost")
      }))
  })
})

const pgUrl = process.env.NOETIC_PG_URL

describe.runIf(pgUrl !== undefined)("usage: Postgres", () => {
  const table = `usage_${process.pid}_${Date.now()}`
  // The test's own table goes when the layer is released.
  const dropTable = Layer.effectDiscard(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
  })).pipe(Layer.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(pgUrl ?? "") }))))
  const Durable = StepLedger.layer({ retention: { maxEntries: 50 } }).pipe(
    Layer.provideMerge(CheckpointStore.layer),
    Layer.provideMerge(PostgresStorage.layerFromUrl(pgUrl ?? "", { table })),
    Layer.provideMerge(dropTable)
  )
  expectTypeOf(Durable).toEqualTypeOf<
    Layer.Layer<
      StepLedger.StepLedger | CheckpointStore.CheckpointStore | StorageAdapter.StorageAdapter,
      StorageError | import("../../src/index.ts").StepLedgerRetentionInvalid
    >
  >()

  layer(Durable)((it) => {
    it.effect("a durable harness replays on resume and clears every key", () =>
      Effect.gen(function*() {
        let runs = 0
        const graph = runCode("root", (n: number, ctx) =>
          Effect.gen(function*() {
            const a = yield* ctx.run(runCode("once", (x: number) => Effect.sync(() => (runs++, x * 2))), n)
            return a + 1
          }))
        const harness = yield* AgentHarness.make({ name: "pg", agentGraph: graph, lease: { owner: "pg-host" } })
        const first = yield* harness.execute(20, { executionId: "pg-1" })
        assert.strictEqual(first.output, 41)
        const again = yield* harness.execute(20, { executionId: "pg-1" })
        assert.strictEqual(again.output, 41)
        assert.strictEqual(runs, 1)
        const store = yield* CheckpointStore.CheckpointStore
        assert.include(yield* store.list, "pg-1")
        yield* harness.clearCheckpoint("pg-1")
        const storage = yield* StorageAdapter.StorageAdapter
        assert.deepStrictEqual((yield* storage.list("execution:pg-1:")).filter((k) => !k.endsWith(":lease")), [])
        assert.isTrue(Option.isNone(yield* store.load("pg-1")))
      }))
  })
})
