/**
 * Durable IPC throughput and replay:
 * - frames per second from an `IpcServer` over a file-backed queue to an `IpcClient`
 *   (emitted one at a time, and in bursts), against raw newline-JSON over the same kind
 *   of unix socket with no persistence, in one run;
 * - the time to replay 10,000 unacked frames to a reconnecting client from a cold queue.
 */
import { Effect, Stream } from "effect"
import * as Fs from "node:fs"
import * as NodeNet from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as IpcClient from "../src/layers/IpcClient.ts"
import * as IpcServer from "../src/layers/IpcServer.ts"
import { makeWith as makeQueue } from "../src/services/DurableOutboundQueue.ts"
import { now, round, tempRoot } from "./harness.ts"

const socketPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "nb-")), "s.sock")
const payload = "x".repeat(200)
const frame = (n: number) => ({ type: "item" as const, item: { n, payload } })

/** Emits `count` frames (one at a time, or in bursts of `burst`) and times until the client has them all. */
const durableFps = (count: number, burst: number) =>
  Effect.gen(function*() {
    const storage = yield* FileStorage.make({ root: tempRoot("ipc") })
    const queue = yield* makeQueue(storage, { socketId: "bench" })
    const path = socketPath()
    const server = yield* IpcServer.make({ socketPath: path, queue })
    const client = yield* IpcClient.connect({ socketPath: path })
    yield* client.connected
    const start = now()
    const emitter = burst === 1
      ? Effect.forEach(Array.from({ length: count }, (_, i) => frame(i + 1)), server.emit, { discard: true })
      : Effect.forEach(
        Array.from({ length: count / burst }, (_, b) => Array.from({ length: burst }, (_, i) => frame(b * burst + i + 1))),
        server.emitAll,
        { discard: true }
      )
    const consumer = client.frames.pipe(
      Stream.take(count),
      Stream.runForEach((delivery) => (delivery.seq! % 100 === 0 ? client.ack(delivery.seq!) : Effect.void))
    )
    yield* Effect.all([emitter, consumer], { concurrency: 2, discard: true })
    const ms = now() - start
    return { frames: count, ms: round(ms), framesPerSecond: Math.round((count / ms) * 1000) }
  }).pipe(Effect.scoped)

/** Writes `count` newline-JSON frames over a unix socket, no persistence; times until the client parsed them all. */
const rawFps = (count: number) =>
  new Promise<{ frames: number; ms: number; framesPerSecond: number }>((resolve) => {
    const path = socketPath()
    const server = NodeNet.createServer((socket) => {
      let i = 0
      const pump = () => {
        while (i < count) {
          i++
          if (!socket.write(JSON.stringify({ type: "item", item: { n: i, payload } }) + "\n")) {
            socket.once("drain", pump)
            return
          }
        }
      }
      pump()
    })
    server.listen(path, () => {
      const start = now()
      const client = NodeNet.connect(path)
      client.setEncoding("utf8")
      let buffer = ""
      let seen = 0
      client.on("data", (chunk: string) => {
        buffer += chunk
        const lines = buffer.split("\n")
        buffer = lines.pop()!
        for (const line of lines) JSON.parse(line)
        seen += lines.length
        if (seen === count) {
          const ms = now() - start
          client.destroy()
          server.close()
          resolve({ frames: count, ms: round(ms), framesPerSecond: Math.round((count / ms) * 1000) })
        }
      })
    })
  })

/** Appends `count` frames, restarts the server on a cold queue, and times a full replay to a new client. */
const replay = (count: number) =>
  Effect.gen(function*() {
    const root = tempRoot("ipc-replay")
    const path = socketPath()
    yield* Effect.scoped(Effect.gen(function*() {
      const queue = yield* makeQueue(yield* FileStorage.make({ root }), { socketId: "bench" })
      yield* queue.appendAll(Array.from({ length: count }, (_, i) => JSON.stringify(frame(i + 1))))
    }))
    return yield* Effect.scoped(Effect.gen(function*() {
      const openStart = now()
      const queue = yield* makeQueue(yield* FileStorage.make({ root }), { socketId: "bench" })
      yield* IpcServer.make({ socketPath: path, queue })
      const openMs = now() - openStart
      const start = now()
      const client = yield* IpcClient.connect({ socketPath: path, ackedThrough: 0 })
      yield* client.frames.pipe(Stream.take(count), Stream.runDrain)
      return { frames: count, replayMs: round(now() - start), queueOpenMs: round(openMs) }
    }))
  })

/** Runs the IPC benchmark and returns its figures. */
export const run = async () => {
  const raw = await rawFps(20_000)
  const sequential = await Effect.runPromise(durableFps(500, 1))
  const burst = await Effect.runPromise(durableFps(5_000, 100))
  const rawAgain = await rawFps(20_000)
  const rawBest = raw.framesPerSecond > rawAgain.framesPerSecond ? raw : rawAgain
  const replayed = await Effect.runPromise(replay(10_000))
  return {
    benchmark: "durable IPC frames/s vs raw newline-JSON over a unix socket; replay of 10,000 unacked frames",
    frameBytes: JSON.stringify(frame(1)).length,
    raw: rawBest,
    durableOneAtATime: { ...sequential, rawOverDurable: round(rawBest.framesPerSecond / sequential.framesPerSecond) },
    durableBursts100: { ...burst, rawOverDurable: round(rawBest.framesPerSecond / burst.framesPerSecond) },
    replay: replayed
  }
}
