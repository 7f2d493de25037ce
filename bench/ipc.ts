/**
 * Durable IPC, on file storage and on SQLite storage, each against a baseline measured
 * in the same interleaved rounds:
 * - the pipelined durable stream (`publish`, then `flush`) of ~230-byte frames to an
 *   `IpcClient`, against raw newline-JSON over the same kind of unix socket (frames per
 *   second; the target: at least 0.5x);
 * - a producer that awaits each `append` before the next, against a raw loop of
 *   `write` + `fdatasync` of the same frame to one open file (at least 0.8x);
 * - the replay of 10,000 unacked frames from a cold queue to a reconnecting client,
 *   against reading the same bytes from one file and writing them to a socket the client
 *   drains (at most 5x);
 * - on Postgres storage, the pipelined stream against raw batched inserts of the same
 *   frames through the same driver (`@effect/sql-pg`).
 *
 * Every sample builds its storage, queue, server and client untimed, on a fresh
 * location, so no sample inherits the records of another.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodeNet from "node:net"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as IpcClient from "../src/layers/IpcClient.ts"
import * as IpcServer from "../src/layers/IpcServer.ts"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import { createDurableOutboundQueue, createSqliteStorage } from "../src/promise/index.ts"
import { makeWith as makeQueue } from "../src/services/DurableOutboundQueue.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { dropPostgres, rawPostgres } from "./backends.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  figureOf,
  fresh,
  interleave,
  now,
  openAppendLog,
  openAsyncAppendLog,
  present,
  ratioOf,
  tempRoot,
  withCaseScope
} from "./harness.ts"
import * as Pg from "./postgres.ts"

const payload = "x".repeat(200)
const frame = (n: number) => ({ type: "item" as const, item: { n, payload } })
const frameBytes = JSON.stringify(frame(1)).length
const rate = (count: number, ms: number) => (count / ms) * 1000

/** A short socket path (the `sun_path` limit is about 104 bytes). */
const socketPath = () => Path.join(tempRoot("ipc-sock"), "s.sock")

type StorageOpen = () => Effect.Effect<StorageAdapterShape, unknown, Scope.Scope>

/** The local backends of a queue, each on a fresh location per call of `fresh`. */
const LOCAL: ReadonlyArray<{ readonly id: "file" | "sqlite"; readonly label: string; readonly fresh: () => StorageOpen }> = [
  {
    id: "file",
    label: "file storage",
    fresh: () => {
      const root = tempRoot("ipc-file")
      return () => FileStorage.make({ root })
    }
  },
  {
    id: "sqlite",
    label: "SQLite storage",
    fresh: () => {
      const path = Path.join(tempRoot("ipc-sqlite"), "subprocess.db")
      return () => SqliteStorage.make({ path })
    }
  }
]

/**
 * Publishes `count` frames (pipelined), then flushes; times from the first publish until
 * the client has received them all. Frames per second.
 */
const pipelinedFps = (storage: StorageOpen, count: number): Promise<number> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* makeQueue(yield* storage(), { socketId: fresh("bench") })
    const path = socketPath()
    const server = yield* IpcServer.make({ socketPath: path, queue })
    const client = yield* IpcClient.connect({ socketPath: path })
    yield* client.connected
    const frames = Array.from({ length: count }, (_, i) => frame(i + 1))
    const start = now()
    const producer = Effect.forEach(frames, server.publish, { discard: true }).pipe(Effect.andThen(server.flush))
    const consumer = client.frames.pipe(
      Stream.take(count),
      Stream.runForEach((delivery) => (delivery.seq! % 1000 === 0 ? client.ack(delivery.seq!) : Effect.void))
    )
    yield* Effect.all([producer, consumer], { concurrency: 2, discard: true })
    return rate(count, now() - start)
  })).pipe(Effect.orDie))

/** A raw server writing `count` newline-JSON frames (no persistence); times until the client parsed them all. */
const rawSocketFps = (count: number): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const path = socketPath()
    const lines = Array.from({ length: count }, (_, i) => JSON.stringify(frame(i + 1)) + "\n")
    const server = NodeNet.createServer((socket) => {
      let i = 0
      const pump = () => {
        while (i < count) {
          if (!socket.write(lines[i++]!)) {
            socket.once("drain", pump)
            return
          }
        }
      }
      pump()
    })
    server.on("error", reject)
    server.listen(path, () => {
      const start = now()
      const client = NodeNet.connect(path)
      client.setEncoding("utf8")
      let buffer = ""
      let seen = 0
      client.on("data", (chunk: string) => {
        buffer += chunk
        const received = buffer.split("\n")
        buffer = received.pop()!
        for (const line of received) JSON.parse(line)
        seen += received.length
        if (seen === count) {
          const ms = now() - start
          client.destroy()
          server.close()
          resolve(rate(count, ms))
        }
      })
    })
  })

/** A producer awaiting each `append` before the next, on a fresh queue: appends per second. */
const awaitedAppends = (storage: StorageOpen, count: number): Promise<number> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* makeQueue(yield* storage(), { socketId: fresh("bench") })
    const text = JSON.stringify(frame(1))
    const start = now()
    for (let i = 0; i < count; i++) yield* queue.append(text)
    return rate(count, now() - start)
  })).pipe(Effect.orDie))

/** The same through the Promise API, as a user awaits each `append` on a SQLite storage. */
const facadeAwaitedAppends = async (count: number): Promise<number> => {
  const storage = createSqliteStorage({ path: Path.join(tempRoot("ipc-facade"), "subprocess.db") })
  const queue = await createDurableOutboundQueue({ storage, socketPath: fresh("bench") })
  try {
    const text = JSON.stringify(frame(1))
    const start = now()
    for (let i = 0; i < count; i++) await queue.append(text)
    return rate(count, now() - start)
  } finally {
    await queue.close()
    await storage.close()
  }
}

/** A queue of `count` unacked frames, closed: what a restarted server finds. */
const recordUnacked = (storage: StorageOpen, socketId: string, count: number): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* makeQueue(yield* storage(), { socketId })
    yield* queue.appendAll(Array.from({ length: count }, (_, i) => JSON.stringify(frame(i + 1))))
    yield* queue.close
  })).pipe(Effect.orDie))

/**
 * The replay of a restarted server: the queue opened cold over a storage already open,
 * the server started, a client connecting with nothing acked, until it has every frame.
 * Milliseconds, and the part from the client's connect.
 */
const coldReplay = (storage: StorageOpen, socketId: string, count: number): Promise<{ total: number; delivery: number }> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const opened = yield* storage()
    const path = socketPath()
    const start = now()
    const queue = yield* makeQueue(opened, { socketId })
    yield* IpcServer.make({ socketPath: path, queue })
    const connectAt = now()
    const client = yield* IpcClient.connect({ socketPath: path, ackedThrough: 0 })
    let first = 0
    let last = 0
    yield* client.frames.pipe(
      Stream.take(count),
      Stream.runForEach((delivery) =>
        Effect.sync(() => {
          if (first === 0) first = delivery.seq!
          last = delivery.seq!
        })
      )
    )
    const end = now()
    if (last - first + 1 !== count) throw new Error(`the replay delivered seqs ${first}..${last}, not ${count} frames`)
    return { total: end - start, delivery: end - connectAt }
  })).pipe(Effect.orDie))

/** The baseline of a replay: read the same bytes from one file and write them to a socket the client drains. */
const rawReplay = (file: string, count: number): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const path = socketPath()
    const server = NodeNet.createServer((socket) => {
      Fs.createReadStream(file).pipe(socket)
    })
    server.on("error", reject)
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
          resolve(ms)
        }
      })
    })
  })

const streamCase: BenchCase = {
  id: "ipc:stream",
  title: "Durable IPC: pipelined stream against raw newline-JSON over a unix socket (frames/s)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    const count = context.quick ? 2_000 : 20_000
    const rounds = context.quick ? 2 : 5
    const variants: Record<string, () => Promise<number>> = { raw: () => rawSocketFps(count) }
    for (const backend of LOCAL) variants[backend.id] = () => pipelinedFps(backend.fresh(), count)
    context.log(`ipc:stream: ${Object.keys(variants).length} variants x ${rounds} rounds of ${count} frames`)
    const samples = await interleave(variants, { rounds, warmup: 1 })
    const detail = { frames: count, frameBytes }
    const figures = [
      figureOf(samples, "raw", "raw newline-JSON over a unix socket, no persistence", "baseline", "frames/s", detail),
      ...LOCAL.map((b) => figureOf(samples, b.id, `pipelined durable stream (publish), ${b.label}`, "this", "frames/s", detail))
    ]
    return {
      id: "ipc:stream",
      title: streamCase.title,
      figures,
      ratios: present(LOCAL.map((b) =>
        ratioOf(figures, samples, `IPC pipelined stream, ${b.label} / raw socket (frames/s)`, b.id, "raw", { atLeast: 0.5 })
      )),
      skipped: [],
      notes: ["Each sample is a fresh queue on a fresh location; the client acks every 1,000th frame."]
    }
  }
}

const awaitedCase: BenchCase = {
  id: "ipc:awaited",
  title: "Durable IPC: a producer awaiting each append against raw write + fdatasync of the same frame (appends/s)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const count = context.quick ? 50 : 300
      const rounds = context.quick ? 2 : 7
      const log = openAppendLog(tempRoot("ipc-floor"))
      scope.onClose(async () => log.close())
      const asyncLog = openAsyncAppendLog(tempRoot("ipc-floor"))
      scope.onClose(async () => asyncLog.close())
      const line = JSON.stringify(frame(1)) + "\n"
      const variants: Record<string, () => Promise<number>> = {
        raw: async () => rate(count, log.append(line, count)),
        rawAsync: async () => rate(count, await asyncLog.append(line, count))
      }
      for (const backend of LOCAL) variants[backend.id] = () => awaitedAppends(backend.fresh(), count)
      variants["sqlite-facade"] = () => facadeAwaitedAppends(count)
      context.log(`ipc:awaited: ${Object.keys(variants).length} variants x ${rounds} rounds of ${count} appends`)
      const samples = await interleave(variants, { rounds, warmup: 1 })
      const detail = { appends: count, frameBytes }
      const figures = [
        figureOf(samples, "raw", "raw write + fdatasync of the frame to one open file", "baseline", "/s", detail),
        figureOf(samples, "rawAsync", "raw non-blocking write of the frame (thread pool, O_DSYNC file)", "baseline", "/s", detail),
        ...LOCAL.map((b) => figureOf(samples, b.id, `awaited queue.append, ${b.label}`, "this", "/s", detail)),
        figureOf(samples, "sqlite-facade", "awaited queue.append through the Promise API, SQLite storage", "this", "/s", detail)
      ]
      return {
        id: "ipc:awaited",
        title: awaitedCase.title,
        figures,
        ratios: present(LOCAL.map((b) =>
          ratioOf(figures, samples, `IPC awaited append, ${b.label} / raw write + fdatasync (appends/s)`, b.id, "raw", { atLeast: 0.8 })
        ).concat([
          // No target: how close to the physical limit a store can come without blocking the event loop.
          ratioOf(figures, samples, "IPC awaited append, Promise API / Effect API, SQLite storage (appends/s)", "sqlite-facade", "sqlite", { atLeast: 0.85 }),
          ratioOf(figures, samples, "raw non-blocking write / raw write + fdatasync (appends/s)", "rawAsync", "raw"),
          ratioOf(figures, samples, "IPC awaited append, file storage / raw non-blocking write (appends/s)", "file", "rawAsync")
        ])),
        skipped: scope.skipped,
        notes: scope.notes
      }
    })
}

const replayCase: BenchCase = {
  id: "ipc:replay",
  title: "Durable IPC: replay of 10,000 unacked frames from a cold queue against reading the same bytes from one file to a socket (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    const count = context.quick ? 1_000 : 10_000
    const rounds = context.quick ? 2 : 7
    const socketId = "bench-replay"
    // The replay acks nothing, so one recorded queue serves every round.
    const variants: Record<string, () => Promise<number>> = {}
    const delivery: Record<string, Array<number>> = {}
    for (const backend of LOCAL) {
      const storage = backend.fresh()
      await recordUnacked(storage, socketId, count)
      delivery[backend.id] = []
      variants[backend.id] = async () => {
        const { total, delivery: ms } = await coldReplay(storage, socketId, count)
        delivery[backend.id]!.push(ms)
        return total
      }
    }
    const file = Path.join(tempRoot("ipc-raw-replay"), "frames")
    Fs.writeFileSync(
      file,
      Array.from({ length: count }, (_, i) => `{"type":"durable","seq":${i + 1},"frame":${JSON.stringify(frame(i + 1))}}\n`).join("")
    )
    variants["raw"] = () => rawReplay(file, count)
    context.log(`ipc:replay: ${Object.keys(variants).length} variants x ${rounds} rounds of ${count} frames`)
    const warmup = 1
    const samples = await interleave(variants, { rounds, warmup })
    // The delivery-only samples of the warm-up round are dropped like the others.
    for (const backend of LOCAL) samples[`${backend.id}:delivery`] = delivery[backend.id]!.slice(warmup)
    const detail = { frames: count, bytes: Fs.statSync(file).size }
    const figures = [
      figureOf(samples, "raw", "raw read of the same bytes from one file, written to a socket the client drains", "baseline", "ms", detail),
      ...LOCAL.flatMap((b) => [
        figureOf(samples, b.id, `cold replay (queue open, server start, client connect, every frame), ${b.label}`, "this", "ms", detail),
        figureOf(samples, `${b.id}:delivery`, `replay from the client's connect, ${b.label}`, "this", "ms", detail)
      ])
    ]
    return {
      id: "ipc:replay",
      title: replayCase.title,
      figures,
      ratios: present(LOCAL.flatMap((b) => [
        ratioOf(figures, samples, `IPC replay of ${count} frames, ${b.label} / raw file to socket`, b.id, "raw", 5),
        ratioOf(figures, samples, `IPC replay from connect, ${b.label} / raw file to socket`, `${b.id}:delivery`, "raw")
      ])),
      skipped: [],
      notes: ["The cold replay times everything a restarted server does for the frames; the storage itself is opened untimed."]
    }
  }
}

const postgresCase: BenchCase = {
  id: "ipc:postgres",
  title: "Durable IPC on Postgres storage: pipelined stream against raw batched inserts of the same frames (frames/s)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const postgres = context.postgres
      if (postgres._tag === "Unavailable") {
        return {
          id: "ipc:postgres",
          title: postgresCase.title,
          figures: [],
          ratios: [],
          skipped: [{ label: "durable IPC on Postgres", reason: postgres.reason }],
          notes: []
        }
      }
      const count = context.quick ? 1_000 : 10_000
      const rounds = context.quick ? 2 : 5
      const batch = 500
      const tables: Array<string> = []
      scope.onClose(() => dropPostgres(postgres.url, { tables }))
      const raw = await rawPostgres(context, scope)
      if (raw === undefined) throw new Error("the raw Postgres client did not open")
      const variants: Record<string, () => Promise<number>> = {
        postgres: () => {
          const table = Pg.freshName("noetic_bench_ipc")
          tables.push(table)
          return pipelinedFps(() => PostgresStorage.makeFromUrl(postgres.url, { table, maxConnections: 4 }), count)
        },
        raw: async () => {
          const prefix = fresh("frame")
          const rows = Array.from({ length: count }, (_, i) => [`${prefix}:${i}`, JSON.stringify(frame(i + 1))] as const)
          const start = now()
          for (let b = 0; b < count; b += batch) await raw.insertBatch(rows.slice(b, b + batch))
          return rate(count, now() - start)
        }
      }
      context.log(`ipc:postgres: 2 variants x ${rounds} rounds of ${count} frames`)
      const samples = await interleave(variants, { rounds, warmup: 1 })
      const figures = [
        figureOf(samples, "raw", `raw batched INSERTs of the same frames, ${batch} rows each (@effect/sql-pg)`, "baseline", "frames/s", {
          frames: count,
          batch
        }),
        figureOf(samples, "postgres", "pipelined durable stream (publish), Postgres storage", "this", "frames/s", { frames: count })
      ]
      return {
        id: "ipc:postgres",
        title: postgresCase.title,
        figures,
        ratios: present([ratioOf(figures, samples, "IPC pipelined stream, Postgres / raw batched inserts (frames/s)", "postgres", "raw")]),
        skipped: scope.skipped,
        notes: [
          ...scope.notes,
          `The raw side inserts in batches of ${batch} rows; the queue batches what is pending at each commit (group commit).`
        ]
      }
    })
}

/** The durable IPC cases. */
export const cases: ReadonlyArray<BenchCase> = [streamCase, awaitedCase, replayCase, postgresCase]
