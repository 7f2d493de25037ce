/**
 * Durable IPC figures, each against a baseline measured in the same run:
 * - the pipelined durable stream (`publish`, file storage, ~243-byte frames) to an
 *   `IpcClient`, against raw newline-JSON over the same kind of unix socket;
 * - a producer that awaits each `append` before the next, against a raw loop of
 *   `write` + `fdatasync` of the same frame to one open file;
 * - the replay of 10,000 unacked frames to a reconnecting client from a cold queue,
 *   against reading the same bytes from one file and writing them to a socket;
 * - with `NOETIC_PG_URL` set, the pipelined stream on Postgres storage against raw
 *   batched inserts of the same frames through the same driver.
 *
 * Run: `npm exec -- node --import tsx bench/ipc.ts` (prints JSON).
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodeNet from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as IpcClient from "../src/layers/IpcClient.ts"
import * as IpcServer from "../src/layers/IpcServer.ts"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import { makeWith as makeQueue } from "../src/services/DurableOutboundQueue.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { now, round, tempRoot } from "./harness.ts"

const socketPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "nb-")), "s.sock")
const payload = "x".repeat(200)
const frame = (n: number) => ({ type: "item" as const, item: { n, payload } })
const rate = (count: number, ms: number) => Math.round((count / ms) * 1000)

/** Publishes `count` frames (pipelined) and times until the client has them all. */
const pipelinedFps = (storage: Effect.Effect<StorageAdapterShape, unknown, import("effect/Scope").Scope>, count: number) =>
  Effect.gen(function*() {
    const queue = yield* makeQueue(yield* storage, { socketId: `bench-${Date.now()}` })
    const path = socketPath()
    const server = yield* IpcServer.make({ socketPath: path, queue })
    const client = yield* IpcClient.connect({ socketPath: path })
    yield* client.connected
    const start = now()
    const producer = Effect.forEach(Array.from({ length: count }, (_, i) => frame(i + 1)), server.publish, { discard: true })
      .pipe(Effect.andThen(server.flush))
    const consumer = client.frames.pipe(
      Stream.take(count),
      Stream.runForEach((delivery) => (delivery.seq! % 1000 === 0 ? client.ack(delivery.seq!) : Effect.void))
    )
    yield* Effect.all([producer, consumer], { concurrency: 2, discard: true })
    const ms = now() - start
    return { frames: count, ms: round(ms), framesPerSecond: rate(count, ms) }
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
          if (!socket.write(JSON.stringify(frame(i)) + "\n")) {
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
          resolve({ frames: count, ms: round(ms), framesPerSecond: rate(count, ms) })
        }
      })
    })
  })

/** A producer awaiting each append on a file-backed queue. */
const sequentialAppends = (count: number) =>
  Effect.gen(function*() {
    const queue = yield* makeQueue(yield* FileStorage.make({ root: tempRoot("ipc-seq") }), { socketId: "bench" })
    const text = JSON.stringify(frame(1))
    const start = now()
    for (let i = 0; i < count; i++) yield* queue.append(text)
    const ms = now() - start
    return { appends: count, ms: round(ms), appendsPerSecond: rate(count, ms) }
  })

/** The physical limit: write + fdatasync of the same frame to one open file, `count` times. */
const rawFdatasync = (count: number) => {
  const file = Path.join(tempRoot("ipc-fsync"), "log")
  const fd = Fs.openSync(file, "a")
  const line = JSON.stringify(frame(1)) + "\n"
  const start = now()
  for (let i = 0; i < count; i++) {
    Fs.writeSync(fd, line)
    Fs.fdatasyncSync(fd)
  }
  const ms = now() - start
  Fs.closeSync(fd)
  return { writes: count, ms: round(ms), writesPerSecond: rate(count, ms) }
}

/** Appends `count` frames, restarts the server on a cold queue, and times a full replay to a new client. */
const replay = (count: number) =>
  Effect.gen(function*() {
    const root = tempRoot("ipc-replay")
    const path = socketPath()
    yield* Effect.scoped(Effect.gen(function*() {
      const queue = yield* makeQueue(yield* FileStorage.make({ root }), { socketId: "bench" })
      yield* queue.appendAll(Array.from({ length: count }, (_, i) => JSON.stringify(frame(i + 1))))
      yield* queue.close
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

/** The baseline of a replay: read the same bytes from one file and write them to a socket the client drains. */
const rawReplay = (count: number) =>
  new Promise<{ frames: number; ms: number }>((resolve) => {
    const file = Path.join(tempRoot("ipc-raw-replay"), "frames")
    Fs.writeFileSync(file, Array.from({ length: count }, (_, i) => `{"type":"durable","seq":${i + 1},"frame":${JSON.stringify(frame(i + 1))}}\n`).join(""))
    const path = socketPath()
    const server = NodeNet.createServer((socket) => {
      Fs.createReadStream(file).pipe(socket)
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
          resolve({ frames: count, ms: round(ms) })
        }
      })
    })
  })

/** Raw batched inserts of the frames through the same driver, in batches of `batch`. */
const rawPgInserts = (url: string, count: number, batch: number) =>
  Effect.gen(function*() {
    const { PgClient } = yield* Effect.promise(() => import("@effect/sql-pg"))
    const { Reactivity } = yield* Effect.promise(() => import("effect/reactivity"))
    const Redacted = yield* Effect.promise(() => import("effect/Redacted"))
    const sql = yield* PgClient.make({ url: Redacted.make(url) }).pipe(
      Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make)
    )
    const table = `bench_raw_${process.pid}_${Date.now()}`
    yield* sql.unsafe(`CREATE TABLE ${table} (key text PRIMARY KEY, value text NOT NULL)`)
    const start = now()
    for (let b = 0; b < count / batch; b++) {
      const rows = Array.from({ length: batch }, (_, i) => ({ key: `f${b * batch + i}`, value: JSON.stringify(frame(b * batch + i)) }))
      yield* sql`INSERT INTO ${sql(table)} ${sql.insert(rows as [typeof rows[number], ...Array<typeof rows[number]>])}`
    }
    const ms = now() - start
    yield* sql.unsafe(`DROP TABLE ${table}`)
    return { frames: count, batch, ms: round(ms), framesPerSecond: rate(count, ms) }
  }).pipe(Effect.scoped)

/** Runs the IPC benchmark and returns its figures. */
export const run = async () => {
  const raw = await rawFps(20_000)
  const pipelined = await Effect.runPromise(pipelinedFps(Effect.suspend(() => FileStorage.make({ root: tempRoot("ipc") })), 20_000))
  const rawAgain = await rawFps(20_000)
  const rawBest = raw.framesPerSecond > rawAgain.framesPerSecond ? raw : rawAgain
  const fsync = rawFdatasync(500)
  const sequential = await Effect.runPromise(sequentialAppends(500))
  const fsyncAgain = rawFdatasync(500)
  const fsyncBest = fsync.writesPerSecond > fsyncAgain.writesPerSecond ? fsync : fsyncAgain
  const replayed = await Effect.runPromise(replay(10_000))
  const rawReplayed = await rawReplay(10_000)
  const result: Record<string, unknown> = {
    benchmark: "durable IPC against raw baselines measured in the same run",
    frameBytes: JSON.stringify(frame(1)).length,
    rawSocket: rawBest,
    pipelinedFileStream: { ...pipelined, overRaw: round(pipelined.framesPerSecond / rawBest.framesPerSecond), target: ">= 0.5" },
    rawWriteFdatasync: fsyncBest,
    awaitedAppends: { ...sequential, overRaw: round(sequential.appendsPerSecond / fsyncBest.writesPerSecond), target: ">= 0.8" },
    replay: { ...replayed, rawFileToSocketMs: rawReplayed.ms, ratio: round(replayed.replayMs / rawReplayed.ms), target: "<= 5" }
  }
  const url = process.env.NOETIC_PG_URL
  if (url !== undefined && url !== "") {
    const table = `bench_q_${process.pid}_${Date.now()}`
    const pg = await Effect.runPromise(pipelinedFps(PostgresStorage.makeFromUrl(url, { table }), 20_000))
    const rawPg = await Effect.runPromise(rawPgInserts(url, 20_000, 500))
    result.postgres = { pipelinedStream: pg, rawBatchedInserts: rawPg, overRaw: round(pg.framesPerSecond / rawPg.framesPerSecond) }
  }
  return result
}

if (process.argv[1]?.endsWith("ipc.ts") === true) {
  run().then((result) => console.log(JSON.stringify(result, null, 2)), (error) => {
    console.error(error)
    process.exit(1)
  })
}
