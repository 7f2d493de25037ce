import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Logger, Schedule, Schema, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as NodeNet from "node:net"
import * as Path from "node:path"
import { Io, StorageError } from "../src/Errors.ts"
import * as IpcClient from "../src/layers/IpcClient.ts"
import * as IpcServer from "../src/layers/IpcServer.ts"
import { batchKey, keyPrefix, makeWith as makeQueue } from "../src/services/DurableOutboundQueue.ts"
import { getMany, makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { rawPeer, socketPathFor } from "./ipcHelpers.ts"

const fastReconnect = Schedule.spaced("5 millis")
const items = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ type: "item" as const, item: from + i }))
const itemOf = (delivery: IpcClient.Delivery) => (delivery.frame as { readonly item: number }).item

describe("IpcServer socket file", () => {
  it.live("is created 0600 and removed when the server's scope closes", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const scope = yield* Scope.make()
      yield* Scope.provide(IpcServer.make({ socketPath }), scope)
      assert.strictEqual(Fs.statSync(socketPath).mode & 0o777, 0o600)
      assert.isTrue(Fs.statSync(socketPath).isSocket())
      assert.deepStrictEqual(Fs.readdirSync(Path.dirname(socketPath)), ["s.sock"])
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(Fs.existsSync(socketPath))
    }))

  it.live("refuses a path a live server holds or a regular file occupies, and replaces a stale socket", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      yield* IpcServer.make({ socketPath })
      const held = yield* Effect.flip(Effect.scoped(IpcServer.make({ socketPath })))
      assert.strictEqual(held.reason._tag, "AddressInUse")

      const filePath = socketPathFor()
      Fs.writeFileSync(filePath, "mine")
      const occupied = yield* Effect.flip(Effect.scoped(IpcServer.make({ socketPath: filePath })))
      assert.strictEqual(occupied.reason._tag, "AddressInUse")
      assert.strictEqual(Fs.readFileSync(filePath, "utf8"), "mine")

      // A stale socket: bound, moved aside so closing does not unlink it, then closed.
      const stalePath = socketPathFor()
      const bound = socketPathFor()
      yield* Effect.callback<void>((resume) => {
        const server = NodeNet.createServer().listen(bound, () => {
          Fs.renameSync(bound, stalePath)
          server.close(() => resume(Effect.void))
        })
      })
      assert.isTrue(Fs.statSync(stalePath).isSocket())
      const server = yield* IpcServer.make({ socketPath: stalePath })
      yield* server.emit({ type: "item", item: 1 })
      const client = yield* IpcClient.connect({ socketPath: stalePath })
      assert.strictEqual(itemOf(yield* client.take), 1)
    }))
})

/** A queue in memory numbered from 1, so a test can name the seqs it expects. */
const queueFromOne = Effect.flatMap(makeMemory, (storage) => makeQueue(storage, { socketId: "test" }))

describe("IpcServer delivery", () => {
  it.live("durableResume replays every unacked frame then live ones, with no seq skipped or repeated", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({ socketPath, pageFrames: 7, queue: yield* queueFromOne })
      yield* server.emitAll(items(1, 1000))
      // Live frames keep landing while the replay runs.
      const emitter = yield* Effect.forkChild(
        Effect.forEach(items(1001, 500), (frame) => server.emit(frame), { discard: true })
      )
      const client = yield* IpcClient.connect({ socketPath, ackedThrough: 200 })
      const got = yield* client.frames.pipe(Stream.take(1300), Stream.runCollect)
      yield* Fiber.join(emitter)
      assert.deepStrictEqual(got.map((d) => d.seq), Array.from({ length: 1300 }, (_, i) => 201 + i))
      assert.deepStrictEqual(got.map(itemOf), Array.from({ length: 1300 }, (_, i) => 201 + i))
      // The resume watermark counts as an ack.
      assert.strictEqual(yield* server.queue.ackedSeq, 200)
    }))

  it.live("an ack that compacts the page a replay is reading does not make the replay skip the frames after it", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const memory = yield* makeMemory
      // A storage whose next multi-key read waits, once armed, until it is let go.
      let gate: { readonly entered: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> } | undefined
      const storage: StorageAdapterShape = {
        ...memory,
        getMany: (keys) =>
          Effect.suspend(() => {
            const held = gate
            gate = undefined
            const read = getMany(memory, keys)
            return held === undefined
              ? read
              : Deferred.succeed(held.entered, undefined).pipe(Effect.andThen(Deferred.await(held.release)), Effect.andThen(read))
          })
      }
      // Nothing cached: every replay page is read from storage.
      const queue = yield* makeQueue(storage, { socketId: "gated", cachedFrames: 0 })
      const server = yield* IpcServer.make({ socketPath, queue, pageFrames: 4 })
      // One record per frame, so an ack deletes records the page is reading.
      yield* Effect.forEach(items(1, 12), server.emit, { discard: true })
      const held = { entered: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
      gate = held
      const peer = yield* rawPeer(socketPath)
      yield* peer.write(`{"type":"durableResume","ackedThrough":0}\n`)
      yield* Deferred.await(held.entered)
      // The host acks (a client can only ack what it was sent) while the first page is read.
      yield* Effect.forkChild(queue.ackUpTo(4))
      yield* server.awaitAcked(4)
      // awaitAcked wakes once the watermark is written; the compaction follows it.
      while ((yield* memory.list(`${keyPrefix("gated")}batch:`)).length > 8) yield* Effect.yieldNow
      yield* Deferred.succeed(held.release, undefined)
      yield* server.emit({ type: "item", item: 13 })
      const seqs: Array<number> = []
      while (seqs[seqs.length - 1] !== 13) seqs.push((yield* peer.nextReply).seq)
      assert.deepStrictEqual(seqs, [5, 6, 7, 8, 9, 10, 11, 12, 13])
    }))

  it.live("acks compact the queue, a dropped connection resumes, and a delivered seq is never delivered twice", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({ socketPath, queue: yield* queueFromOne })
      const client = yield* IpcClient.connect({ socketPath, reconnect: fastReconnect })
      yield* server.emitAll(items(1, 10))
      const first = yield* client.frames.pipe(Stream.take(10), Stream.runCollect)
      yield* client.ack(4)
      yield* server.awaitAcked(4)
      assert.deepStrictEqual((yield* server.queue.frameRange(1)).map((e) => e.seq), [5, 6, 7, 8, 9, 10])
      // The server replays 5..10 to the new connection; the client drops them.
      yield* client.disconnect
      yield* client.connected
      yield* server.emit({ type: "item", item: 11 })
      const next = yield* client.take
      assert.deepStrictEqual([...first.map(itemOf), itemOf(next)], Array.from({ length: 11 }, (_, i) => i + 1))
      assert.strictEqual(next.seq, 11)
    }))

  it.live("a restarted client with a persisted watermark resumes after its last ack", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const storage = yield* makeMemory
      const watermark = IpcClient.storageWatermark(storage, "client:wm")
      const server = yield* IpcServer.make({ socketPath, queue: yield* queueFromOne })
      yield* server.emitAll(items(1, 5))
      yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* IpcClient.connect({ socketPath, watermark })
        yield* client.frames.pipe(Stream.take(5), Stream.runDrain)
        yield* client.ack(3)
      }))
      const again = yield* IpcClient.connect({ socketPath, watermark })
      assert.strictEqual(yield* again.ackedSeq, 3)
      const got = yield* again.frames.pipe(Stream.take(2), Stream.runCollect)
      assert.deepStrictEqual(got.map((d) => d.seq), [4, 5])
    }))

  it.live("a server restarted on a fresh default queue numbers above what it sent, so a connected client gets the new frames", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const firstLife = yield* Scope.make()
      const first = yield* Scope.provide(IpcServer.make({ socketPath }), firstLife)
      const client = yield* IpcClient.connect({ socketPath })
      yield* first.emitAll(items(1, 3))
      const before = yield* client.frames.pipe(Stream.take(3), Stream.runCollect)
      yield* Scope.close(firstLife, Exit.void)

      const second = yield* IpcServer.make({ socketPath })
      yield* second.emitAll(items(4, 5))
      const after = yield* client.frames.pipe(Stream.take(2), Stream.runCollect)
      assert.deepStrictEqual([...before, ...after].map(itemOf), [1, 2, 3, 4, 5])
      assert.isAbove(after[0]!.seq!, before[2]!.seq!)
    }))

  it.effect("a persisted watermark that is not a watermark record is a Corrupt error, not a restart from 0", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      yield* storage.set("client:wm", { ackedThrough: "three" })
      const error = yield* Effect.flip(IpcClient.storageWatermark(storage, "client:wm").load)
      assert.strictEqual(error.reason._tag, "Corrupt")
      assert.strictEqual(error.reason.key, "client:wm")
      assert.strictEqual(yield* IpcClient.storageWatermark(storage, "absent").load, 0)
    }))

  it.live("a client that never sends durableResume gets plain v1 frames", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({
        socketPath,
        onClientFrame: (frame, connection) =>
          frame.type === "getStatus" ? Effect.ignore(connection.send({ type: "status", status: "ok" })) : Effect.void
      })
      const peer = yield* rawPeer(socketPath)
      const hello = yield* peer.next
      assert.strictEqual(hello.type, "hello")
      assert.strictEqual(hello.protocolVersion, 2)
      // Frames are handled in order, so the status reply means the subscription is live.
      yield* peer.write(`{"type":"subscribe"}\n{"type":"getStatus"}\n`)
      assert.deepStrictEqual(yield* peer.next, { type: "status", status: "ok" })
      yield* server.emitAll([{ type: "event", event: { kind: "x" } }, { type: "askUserCleared", id: "q1" }])
      assert.deepStrictEqual(yield* peer.next, { type: "event", event: { kind: "x" } })
      assert.deepStrictEqual(yield* peer.next, { type: "askUserCleared", id: "q1" })

      const client = yield* IpcClient.connect({ socketPath, durable: false })
      yield* client.send({ type: "getStatus" })
      assert.deepStrictEqual(yield* client.take, { seq: undefined, frame: { type: "status", status: "ok" } })
      yield* server.emit({ type: "item", item: 3 })
      assert.deepStrictEqual(yield* client.take, { seq: undefined, frame: { type: "item", item: 3 } })
    }))

  it.live("send on a client whose scope has closed fails with SocketClosed instead of waiting forever", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      yield* IpcServer.make({ socketPath })
      const scope = yield* Scope.make()
      const client = yield* Scope.provide(IpcClient.connect({ socketPath }), scope)
      yield* client.connected
      yield* Scope.close(scope, Exit.void)
      const error = yield* Effect.flip(client.send({ type: "getStatus" }))
      assert.strictEqual(error.reason._tag, "SocketClosed")
    }))

  it.live("application frames reach onClientFrame, which can reply on the connection", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      yield* IpcServer.make({
        socketPath,
        onClientFrame: (frame, connection) =>
          frame.type === "send"
            ? Effect.ignore(connection.send({ type: "ack", messageId: frame.messageId }))
            : frame.type === "getStatus"
            ? Effect.ignore(connection.send({ type: "status", status: { connection: connection.id } }))
            : Effect.void
      })
      const client = yield* IpcClient.connect({ socketPath })
      yield* client.send({ type: "send", messageId: "m1", text: "hi" })
      assert.deepStrictEqual(yield* client.take, { seq: undefined, frame: { type: "ack", messageId: "m1" } })
      yield* client.send({ type: "getStatus" })
      assert.deepStrictEqual((yield* client.take).frame, { type: "status", status: { connection: 1 } })
    }))
})

describe("IpcServer bad input", () => {
  const replyingServer = (socketPath: string, maxFrameBytes?: number) =>
    Effect.flatMap(queueFromOne, (queue) => IpcServer.make({
      socketPath,
      queue,
      maxFrameBytes,
      onClientFrame: (frame, connection) =>
        frame.type === "getStatus" ? Effect.ignore(connection.send({ type: "status", status: "ok" })) : Effect.void
    }))

  it.live("an unparseable line or an unknown frame type gets an error frame and the connection stays usable", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      yield* replyingServer(socketPath)
      const peer = yield* rawPeer(socketPath)
      yield* peer.write("not json at all\n")
      const malformed = yield* peer.nextReply
      assert.strictEqual(malformed.type, "error")
      assert.strictEqual(malformed.kind, "MalformedFrame")
      yield* peer.write(`{"type":"teleport"}\n{"type":"send","messageId":1}\n`)
      assert.include(yield* peer.nextReply, { type: "error", kind: "UnknownFrameType" })
      assert.include(yield* peer.nextReply, { type: "error", kind: "MalformedFrame" })
      yield* peer.write(`{"type":"getStatus"}\r\n`)
      assert.deepStrictEqual(yield* peer.nextReply, { type: "status", status: "ok" })
    }))

  it.live("a frame over the limit closes that connection only, and the queue loses nothing", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* replyingServer(socketPath, 1024)
      yield* server.emitAll(items(1, 3))
      const client = yield* IpcClient.connect({ socketPath })
      const bad = yield* rawPeer(socketPath)
      // No newline needed: the server stops buffering at the limit.
      yield* bad.write("x".repeat(4096))
      const error = yield* bad.nextReply
      assert.include(error, { type: "error", kind: "FrameTooLarge" })
      assert.strictEqual(yield* Effect.flip(bad.next), "closed")

      yield* server.emit({ type: "item", item: 4 })
      const got = yield* client.frames.pipe(Stream.take(4), Stream.runCollect)
      assert.deepStrictEqual(got.map(itemOf), [1, 2, 3, 4])
      assert.strictEqual(yield* server.queue.headSeq, 4)

      // Emitting a frame the client could not read is refused before it is stored.
      const tooBig = yield* Effect.flip(server.emit({ type: "item", item: "y".repeat(2000) }))
      assert.strictEqual(tooBig._tag, "IpcError")
      if (tooBig._tag === "IpcError") assert.strictEqual(tooBig.reason._tag, "FrameTooLarge")
      assert.strictEqual(yield* server.queue.headSeq, 4)
    }))
})

const Op = Schema.Union([
  Schema.TaggedStruct("append", { count: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 6 })) }),
  Schema.TaggedStruct("take", { count: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 8 })) }),
  Schema.TaggedStruct("ack", {}),
  Schema.TaggedStruct("disconnect", {}),
  Schema.TaggedStruct("restartServer", {}),
  Schema.TaggedStruct("restartClient", {})
])

describe("IpcServer and IpcClient, property", () => {
  it.live.prop(
    "random appends, disconnects, acks and restarts deliver exactly the appended sequence",
    [Schema.Array(Op).check(Schema.isMaxLength(25))],
    ([ops]) =>
      Effect.gen(function*() {
        const socketPath = socketPathFor()
        const storage = yield* makeMemory
        const clientStorage = yield* makeMemory
        const watermark = IpcClient.storageWatermark(clientStorage, "wm")
        let serverScope = yield* Scope.make()
        let clientScope = yield* Scope.make()
        yield* Effect.addFinalizer(() => Effect.andThen(Scope.close(clientScope, Exit.void), Scope.close(serverScope, Exit.void)))
        const startServer = Effect.gen(function*() {
          const queue = yield* makeQueue(storage, { socketId: "prop" })
          // A clean restart: the queue records its exact high-water mark, so seqs stay contiguous.
          yield* Scope.addFinalizer(serverScope, queue.close)
          return yield* Scope.provide(IpcServer.make({ socketPath, queue, pageFrames: 3 }), serverScope)
        })
        const startClient = Effect.suspend(() =>
          Scope.provide(IpcClient.connect({ socketPath, watermark, reconnect: fastReconnect }), clientScope)
        )
        let server = yield* startServer
        let client = yield* startClient

        let appended = 0
        // What the application holds: durable up to its ack, volatile after it.
        let received: Array<{ seq: number; item: number }> = []
        let ackedCount = 0
        const takeOne = Effect.suspend(() => Effect.map(client.take, (d) => received.push({ seq: d.seq!, item: itemOf(d) })))

        for (const op of ops) {
          switch (op._tag) {
            case "append": {
              yield* server.emitAll(items(appended + 1, op.count))
              appended += op.count
              break
            }
            case "take": {
              const n = Math.min(op.count, appended - received.length)
              for (let i = 0; i < n; i++) yield* takeOne
              break
            }
            case "ack": {
              const last = received[received.length - 1]
              if (last !== undefined) {
                yield* client.ack(last.seq)
                ackedCount = received.length
              }
              break
            }
            case "disconnect": {
              yield* client.disconnect
              break
            }
            case "restartServer": {
              yield* Scope.close(serverScope, Exit.void)
              serverScope = yield* Scope.make()
              server = yield* startServer
              break
            }
            case "restartClient": {
              yield* Scope.close(clientScope, Exit.void)
              clientScope = yield* Scope.make()
              received = received.slice(0, ackedCount)
              client = yield* startClient
              break
            }
          }
        }
        while (received.length < appended) yield* takeOne
        assert.deepStrictEqual(received.map((r) => r.item), Array.from({ length: appended }, (_, i) => i + 1))
        assert.deepStrictEqual(received.map((r) => r.seq), Array.from({ length: appended }, (_, i) => i + 1))
      }).pipe(Effect.scoped),
    { timeout: 120_000, arbitrary: { runs: 40 } }
  )
})

describe("IpcServer durable stream, issue 11 and 13", () => {
  it.live("an ack above the highest seq sent is refused for that connection, and later acks still count", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({ socketPath, queue: yield* queueFromOne })
      yield* server.emitAll(items(1, 5))
      const peer = yield* rawPeer(socketPath)
      yield* peer.write(`{"type":"durableResume","ackedThrough":0}\n`)
      const seqs: Array<number> = []
      while (seqs.length < 5) seqs.push((yield* peer.nextReply).seq)
      yield* peer.write(`{"type":"durableAck","throughSeq":999}\n`)
      const refused = yield* peer.nextReply
      assert.include(refused, { type: "error", kind: "AckAboveSent" })
      assert.strictEqual(yield* server.queue.ackedSeq, 0)
      // The refused ack is forgotten: a lower, valid ack still compacts.
      yield* peer.write(`{"type":"durableAck","throughSeq":3}\n`)
      yield* server.awaitAcked(3)
      assert.deepStrictEqual((yield* server.queue.frameRange(0)).map((e) => e.seq), [4, 5])
      yield* peer.write(`{"type":"durableAck","throughSeq":5}\n`)
      yield* server.awaitAcked(5)
    }))

  it.live("a second durableResume takes the stream over: the first connection gets bye and is closed, and its acks compact nothing", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({ socketPath, queue: yield* queueFromOne })
      yield* server.emitAll(items(1, 6))
      const first = yield* rawPeer(socketPath)
      yield* first.write(`{"type":"durableResume","ackedThrough":0}\n`)
      for (let i = 0; i < 6; i++) yield* first.nextReply
      const second = yield* rawPeer(socketPath)
      yield* second.write(`{"type":"durableResume","ackedThrough":2}\n`)
      const replayed: Array<number> = []
      while (replayed.length < 4) replayed.push((yield* second.nextReply).seq)
      assert.deepStrictEqual(replayed, [3, 4, 5, 6])
      assert.deepStrictEqual(yield* first.nextReply, { type: "bye", reason: "taken over by another durableResume" })
      assert.strictEqual(yield* Effect.flip(first.next), "closed")
      // A late ack of the first connection cannot compact what the second still needs.
      yield* Effect.exit(first.write(`{"type":"durableAck","throughSeq":6}\n`))
      assert.strictEqual(yield* server.queue.ackedSeq, 2)
      yield* second.write(`{"type":"durableAck","throughSeq":6}\n`)
      yield* server.awaitAcked(6)
    }))

  it.live("an IpcClient whose stream another client took over delivers the bye and ends, without reconnecting to take it back", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({ socketPath, queue: yield* queueFromOne })
      yield* server.emitAll(items(1, 2))
      const first = yield* IpcClient.connect({ socketPath, reconnect: fastReconnect })
      assert.deepStrictEqual([itemOf(yield* first.take), itemOf(yield* first.take)], [1, 2])
      const second = yield* IpcClient.connect({ socketPath, reconnect: fastReconnect })
      assert.deepStrictEqual([itemOf(yield* second.take), itemOf(yield* second.take)], [1, 2])
      assert.deepStrictEqual((yield* first.take).frame, { type: "bye", reason: "taken over by another durableResume" })
      const ended = yield* Effect.flip(first.take)
      assert.strictEqual(ended.reason._tag, "SocketClosed")
      // Long enough for several reconnects of the first client, had it tried: the second
      // keeps the stream, and frames published now reach it alone.
      yield* Effect.sleep("50 millis")
      yield* server.emitAll(items(3, 2))
      assert.deepStrictEqual([itemOf(yield* second.take), itemOf(yield* second.take)], [3, 4])
      yield* second.ack(4)
      yield* server.awaitAcked(4)
    }))

  it.live("an unreadable record: earlier frames are delivered, an error frame names the key, the log warns, the producer hears of it, and later frames still flow", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const storage = yield* makeMemory
      const queue = yield* makeQueue(storage, { socketId: "bad", cachedFrames: 0 })
      const warnings: Array<string> = []
      const logger = Logger.make<unknown, void>((options) => {
        if (options.logLevel === "Warn") warnings.push(String(options.message))
      })
      const server = yield* IpcServer.make({ socketPath, queue }).pipe(
        Effect.provideService(Logger.CurrentLoggers, new Set([logger]))
      )
      yield* server.emitAll(items(1, 2))
      yield* server.emitAll(items(3, 2))
      yield* server.emitAll(items(5, 2))
      const damaged = batchKey("bad", 3, 4)
      yield* storage.set(damaged, "torn")
      const peer = yield* rawPeer(socketPath)
      yield* peer.write(`{"type":"durableResume","ackedThrough":0}\n`)
      const got: Array<any> = []
      while (got.length < 5) got.push(yield* peer.nextReply)
      assert.deepStrictEqual(got.map((f) => f.seq ?? f.type), [1, 2, "error", 5, 6])
      assert.strictEqual(got[2].kind, "Corrupt")
      assert.include(got[2].message, damaged)
      assert.deepStrictEqual(got[2].error, { kind: "Corrupt", message: got[2].message })
      // The producer learns of it: the next emit fails with the Corrupt error, once.
      const error = yield* Effect.flip(server.emit({ type: "item", item: 7 }))
      assert.strictEqual(error._tag, "StorageError")
      if (error._tag === "StorageError") assert.strictEqual(error.reason._tag === "Corrupt" && error.reason.key, damaged)
      const seq = yield* server.emit({ type: "item", item: 7 })
      assert.strictEqual((yield* peer.nextReply).seq, seq)
      assert.isTrue(warnings.some((warning) => warning.includes(damaged)), warnings.join("\n"))
    }))

  it.live("publish is pipelined: frames go on the wire once durable, in seq order, and flush reports completion", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({ socketPath, queue: yield* queueFromOne })
      const client = yield* IpcClient.connect({ socketPath })
      const seqs = yield* Effect.forEach(items(1, 3000), server.publish)
      assert.deepStrictEqual(seqs, Array.from({ length: 3000 }, (_, i) => i + 1))
      yield* server.flush
      assert.strictEqual(yield* server.queue.headSeq, 3000)
      const got = yield* client.frames.pipe(Stream.take(3000), Stream.runCollect)
      assert.deepStrictEqual(got.map((d) => d.seq), seqs)
      assert.deepStrictEqual(got.map(itemOf), seqs)
    }))

  it.live("a client that never reads and a producer that never stops: the producer is held at the window, so the server's memory stays bounded", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const window = { frames: 2_000, bytes: 1024 * 1024 }
      const server = yield* IpcServer.make({ socketPath, window })
      const payload = "p".repeat(200)
      let produced = 0
      yield* Effect.forkChild(Effect.forever(Effect.suspend(() => {
        produced++
        return server.publish({ type: "item", item: { n: produced, payload } })
      })))
      // A raw socket that subscribes durably and then never reads.
      const stalled = NodeNet.connect(socketPath)
      stalled.write(`{"type":"durableResume","ackedThrough":0}\n`)
      stalled.pause()
      yield* Effect.addFinalizer(() => Effect.sync(() => stalled.destroy()))
      while ((yield* server.queue.windowUsage).frames < window.frames) yield* Effect.sleep("5 millis")
      const held = produced
      yield* Effect.sleep("300 millis")
      // Nothing more was admitted: the producer waits, and what the server holds is the window.
      assert.isAtMost(produced, held + 1)
      const usage = yield* server.queue.windowUsage
      assert.isAtMost(usage.frames, window.frames)
      assert.isAtMost(usage.bytes, window.bytes)
    }))
})

describe("IpcServer and an unmodified noetic peer", () => {
  it.live("hello carries taskId, role, runnerId and threadId; errors and ask-user prompts carry noetic's nested forms", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({
        socketPath,
        hello: { taskId: "t1", role: "worker", runnerId: "r1", threadId: "th1" }
      })
      const peer = yield* rawPeer(socketPath)
      assert.include(yield* peer.next, { type: "hello", protocolVersion: 2, taskId: "t1", role: "worker", runnerId: "r1", threadId: "th1" })
      yield* peer.write(`{"type":"subscribe"}\n{"type":"teleport"}\n`)
      const error = yield* peer.nextReply
      assert.deepStrictEqual(error.error, { kind: "UnknownFrameType", message: error.message })
      yield* server.emit({ type: "askUserRequest", id: "q1", input: { question: "why?" }, createdAt: 1 })
      assert.deepStrictEqual((yield* peer.nextReply).request, { id: "q1", input: { question: "why?" }, createdAt: 1 })
    }))

  it.live("frames in noetic's form from a noetic server are understood by the client", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const noeticServer = NodeNet.createServer((socket) => {
        socket.write(`{"type":"hello","protocolVersion":2,"taskId":"t","role":"r","runnerId":"x","threadId":"y"}\n`)
        socket.write(`{"type":"error","error":{"kind":"handler_error","message":"boom"}}\n`)
        socket.write(`{"type":"durable","seq":1,"frame":{"type":"askUserRequest","request":{"id":"a","input":{"q":1},"createdAt":5}}}\n`)
      })
      yield* Effect.callback<void>((resume) => void noeticServer.listen(socketPath, () => resume(Effect.void)))
      yield* Effect.addFinalizer(() => Effect.sync(() => noeticServer.close()))
      const client = yield* IpcClient.connect({ socketPath })
      assert.include(yield* client.connected, { taskId: "t", role: "r" })
      assert.include((yield* client.take).frame, { type: "error", kind: "handler_error", message: "boom" })
      const prompt = yield* client.take
      assert.strictEqual(prompt.seq, 1)
      assert.include(prompt.frame, { type: "askUserRequest", id: "a", createdAt: 5 })
    }))
})

describe("IpcServer pipelined durability", () => {
  it.live("a published frame reaches the wire only once its batch is durable; a failed batch reaches the producer and its seqs are never reissued", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const memory = yield* makeMemory
      // A storage whose batch writes wait, once armed, until released, or fail.
      let gate: Deferred.Deferred<void> | undefined
      let failNext = false
      const storage: StorageAdapterShape = {
        ...memory,
        set: (key, value) =>
          Effect.suspend(() => {
            if (!key.includes(":batch:")) return memory.set(key, value)
            if (failNext) {
              failNext = false
              return Effect.fail(new StorageError({ operation: "set", reason: new Io({ key, message: "disk full", cause: undefined }) }))
            }
            const held = gate
            return held === undefined ? memory.set(key, value) : Effect.andThen(Deferred.await(held), memory.set(key, value))
          })
      }
      const queue = yield* makeQueue(storage, { socketId: "gated" })
      const server = yield* IpcServer.make({ socketPath, queue })
      const peer = yield* rawPeer(socketPath)
      yield* peer.write(`{"type":"durableResume","ackedThrough":0}\n`)
      yield* peer.write(`{"type":"getStatus"}\n`)
      gate = yield* Deferred.make<void>()
      const seqs = yield* server.publishAll(items(1, 3))
      assert.deepStrictEqual(seqs, [1, 2, 3])
      // Not durable, so not sent: the only thing a round trip brings back is the error for the ack.
      yield* peer.write(`{"type":"durableAck","throughSeq":1}\n`)
      assert.include(yield* peer.nextReply, { type: "error", kind: "AckAboveSent" })
      assert.strictEqual(yield* server.queue.headSeq, 0)
      yield* Deferred.succeed(gate, undefined)
      gate = undefined
      yield* server.flush
      assert.deepStrictEqual([(yield* peer.nextReply).seq, (yield* peer.nextReply).seq, (yield* peer.nextReply).seq], [1, 2, 3])

      failNext = true
      const burnt = yield* server.publish({ type: "item", item: 4 })
      const failure = yield* Effect.flip(server.flush)
      assert.strictEqual(failure.reason._tag, "Io")
      const next = yield* server.emit({ type: "item", item: 5 })
      assert.isAbove(next, burnt)
      const after = yield* peer.nextReply
      assert.deepStrictEqual([after.seq, after.frame.item], [next, 5])
    }))
})

describe("IpcServer retain untilSent", () => {
  it.live("frames go once sent (at once with nobody streaming), so a producer without a durable consumer is never held at the window", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const server = yield* IpcServer.make({
        socketPath,
        retain: "untilSent",
        window: { frames: 10 },
        onClientFrame: (frame, connection) =>
          frame.type === "getStatus" ? Effect.ignore(connection.send({ type: "status", status: "ok" })) : Effect.void
      })
      // Nobody connected: 100 frames through a 10-frame window.
      yield* Effect.forEach(items(1, 100), server.emit, { discard: true })
      assert.isAtMost(yield* server.queue.size, 10)
      const peer = yield* rawPeer(socketPath)
      // Frames are handled in order, so the status reply means the subscription is live.
      yield* peer.write(`{"type":"subscribe"}\n{"type":"getStatus"}\n`)
      assert.deepStrictEqual(yield* peer.nextReply, { type: "status", status: "ok" })
      yield* Effect.forEach(items(101, 50), server.emit, { discard: true })
      const got: Array<number> = []
      while (got.length < 50) got.push((yield* peer.nextReply).item)
      assert.deepStrictEqual(got, Array.from({ length: 50 }, (_, i) => 101 + i))
    }))
})
