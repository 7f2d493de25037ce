/**
 * Durable streams over HTTP (issue 32's figures), each against a baseline measured in the
 * same interleaved rounds:
 * - an awaited append, one at a time, through the server on SQLite, against a raw loop of
 *   `write` + `fdatasync` of the same bytes to one open file (at least 0.8x);
 * - a catch-up read of 10,000 small chunks over HTTP, against a raw read of the same bytes
 *   from one file written to a TCP socket the client drains (at most 3x);
 * - SSE live delivery of 10,000 appends to one reader, against raw newline-JSON over a TCP
 *   socket (at least 0.3x);
 * - 100 concurrent SSE readers of one stream: memory per reader at two stream lengths
 *   (flat in stream length).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as NodeHttp from "node:http"
import * as NodeNet from "node:net"
import * as Path from "node:path"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { ServedUrl } from "../src/http/HttpServe.ts"
import * as StreamServer from "../src/http/StreamServer.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import * as DurableStreams from "../src/services/DurableStreams.ts"
import { makeMemory, StorageAdapter, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { readSse } from "../test/http/streamHelpers.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  figureOf,
  interleave,
  now,
  openAppendLog,
  present,
  ratioOf,
  tempRoot,
  withCaseScope
} from "./harness.ts"

const rate = (count: number, ms: number) => (count / ms) * 1000
const message = (n: number) => JSON.stringify({ n, text: "x".repeat(40) })

interface Running {
  readonly url: string
  readonly streams: DurableStreams.DurableStreams["Service"]
  readonly close: () => Promise<void>
}

/** A server on `storage` (opened in the server's scope), with its service for in-process appends. */
const startServer = async (storage: Effect.Effect<StorageAdapterShape, unknown, Scope.Scope>): Promise<Running> => {
  const scope = Effect.runSync(Scope.make())
  const opened = await Effect.runPromise(Effect.orDie(Scope.provide(storage, scope)))
  const layer = StreamServer.layerWithService({ sseMillis: 600_000 }).pipe(
    Layer.provide(Layer.succeed(StorageAdapter, opened))
  )
  const context = await Effect.runPromise(Effect.orDie(Layer.buildWithScope(layer, scope)))
  const url = (context.mapUnsafe.get(ServedUrl.key) as ServedUrl["Service"]).url
  const streams = context.mapUnsafe.get(DurableStreams.DurableStreams.key) as DurableStreams.DurableStreams["Service"]
  return { url, streams, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

const sqlite = () => SqliteStorage.make({ path: Path.join(tempRoot("streams-sqlite"), "streams.db") })

let unique = 0
const freshPath = () => `/bench/${process.pid}-${unique++}`

const put = async (url: string, contentType: string) => {
  const response = await fetch(url, { method: "PUT", headers: { "content-type": contentType } })
  if (response.status !== 201) throw new Error(`PUT ${url}: ${response.status}`)
}

/** `count` appends awaited one at a time over HTTP, on a fresh stream: appends per second. */
const awaitedHttp = async (server: Running, count: number): Promise<number> => {
  const url = `${server.url}${freshPath()}`
  await put(url, "application/json")
  const start = now()
  for (let i = 0; i < count; i++) {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: message(i) })
    if (response.status !== 204) throw new Error(`append: ${response.status}`)
  }
  return rate(count, now() - start)
}

/**
 * The floor of any server over HTTP: a bare `node:http` server whose POST handler writes
 * the body and `fdatasync`s it, then answers 204, driven by the same `fetch` loop. What
 * it misses of the raw loop is the HTTP round trip alone, which no stream server avoids.
 */
const startFloorServer = async (dir: string) => {
  const fd = Fs.openSync(Path.join(dir, `http-floor-${process.pid}.log`), "a", 0o600)
  const server = NodeHttp.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => {
      Fs.writeSync(fd, Buffer.concat(parts))
      Fs.fdatasyncSync(fd)
      response.writeHead(204, { "stream-next-offset": "0" })
      response.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const url = `http://127.0.0.1:${(server.address() as NodeNet.AddressInfo).port}/floor`
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
        Fs.closeSync(fd)
      })
  }
}

/** `count` POSTs of the bytes to the floor server, one at a time: appends per second. */
const awaitedFloor = async (url: string, count: number): Promise<number> => {
  const start = now()
  for (let i = 0; i < count; i++) {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: message(i) })
    if (response.status !== 204) throw new Error(`floor append: ${response.status}`)
  }
  return rate(count, now() - start)
}

const awaitedCase: BenchCase = {
  id: "streams:awaited",
  title: "Durable streams: an awaited HTTP append on SQLite against raw write + fdatasync of the same bytes (appends/s)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const count = context.quick ? 30 : 300
      const rounds = context.quick ? 2 : 7
      const server = await startServer(sqlite())
      scope.onClose(server.close)
      const log = openAppendLog(tempRoot("streams-floor"))
      scope.onClose(async () => log.close())
      const floor = await startFloorServer(tempRoot("streams-http-floor"))
      scope.onClose(floor.close)
      const variants: Record<string, () => Promise<number>> = {
        raw: async () => rate(count, log.append(message(1), count)),
        floor: () => awaitedFloor(floor.url, count),
        http: () => awaitedHttp(server, count)
      }
      context.log(`streams:awaited: ${rounds} rounds of ${count} appends`)
      const samples = await interleave(variants, { rounds, warmup: 1 })
      const detail = { appends: count, bytes: message(1).length }
      const figures = [
        figureOf(samples, "raw", "raw write + fdatasync of the bytes to one open file", "baseline", "/s", detail),
        figureOf(samples, "floor", "the HTTP floor: a bare node:http server that writes + fdatasyncs each POST body", "baseline", "/s", detail),
        figureOf(samples, "http", "awaited POST append through the server, SQLite storage", "this", "/s", detail)
      ]
      return {
        id: "streams:awaited",
        title: awaitedCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, "stream append over HTTP, SQLite / raw write + fdatasync (appends/s)", "http", "raw", { atLeast: 0.8 }),
          ratioOf(figures, samples, "the HTTP floor / raw write + fdatasync (appends/s): the most any server over HTTP reaches", "floor", "raw"),
          ratioOf(figures, samples, "stream append over HTTP, SQLite / the HTTP floor (appends/s)", "http", "floor")
        ]),
        skipped: [],
        notes: [
          "Each append is one compare-and-set commit of its chunk (WAL append + fsync) plus an HTTP round trip on loopback.",
          "The HTTP floor is the same fetch loop against a bare node:http server that only writes and fdatasyncs each body: its ratio to the raw loop is the most any server over HTTP can reach here."
        ]
      }
    })
}

/** Serves `bytes` from a file over TCP to a client that drains them: milliseconds. */
const rawFileToSocket = (file: string, size: number): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const server = NodeNet.createServer((socket) => Fs.createReadStream(file).pipe(socket))
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const start = now()
      const client = NodeNet.connect((server.address() as NodeNet.AddressInfo).port, "127.0.0.1")
      let seen = 0
      client.on("data", (chunk: Buffer) => {
        seen += chunk.byteLength
        if (seen >= size) {
          const ms = now() - start
          client.destroy()
          server.close()
          resolve(ms)
        }
      })
    })
  })

/** Reads a whole stream from the start over HTTP, page by page until up to date: milliseconds. */
const catchUpRead = async (url: string, expectedBytes: number): Promise<number> => {
  const start = now()
  let offset = "-1"
  let bytes = 0
  for (;;) {
    const response = await fetch(`${url}?offset=${offset}`)
    bytes += (await response.arrayBuffer()).byteLength
    offset = response.headers.get("stream-next-offset")!
    if (response.headers.get("stream-up-to-date") === "true") break
  }
  if (bytes < expectedBytes) throw new Error(`read ${bytes} bytes, expected ${expectedBytes}`)
  return now() - start
}

const catchUpCase: BenchCase = {
  id: "streams:catchup",
  title: "Durable streams: catch-up read of 10,000 small chunks over HTTP against a raw file read to a socket (ms)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const count = context.quick ? 1_000 : 10_000
      const rounds = context.quick ? 2 : 7
      const dbPath = Path.join(tempRoot("streams-sqlite"), "streams.db")
      const server = await startServer(SqliteStorage.make({ path: dbPath }))
      scope.onClose(server.close)
      const path = freshPath()
      const url = `${server.url}${path}`
      await put(url, "application/octet-stream")
      context.log(`streams:catchup: appending ${count} chunks (untimed)`)
      const lines = Array.from({ length: count }, (_, i) => message(i) + "\n")
      for (const line of lines) {
        await Effect.runPromise(Effect.orDie(server.streams.append({ path, contentType: "application/octet-stream", body: Buffer.from(line) })))
      }
      const file = Path.join(tempRoot("streams-catchup"), "same.bytes")
      Fs.writeFileSync(file, lines.join(""))
      const size = Fs.statSync(file).size
      const samples = await interleave({
        raw: () => rawFileToSocket(file, size),
        http: () => catchUpRead(url, size),
        // A server started (untimed) on the same database file: no chunk in its cache.
        cold: async () => {
          const fresh = await startServer(SqliteStorage.make({ path: dbPath }))
          try {
            return await catchUpRead(`${fresh.url}${path}`, size)
          } finally {
            await fresh.close()
          }
        }
      }, { rounds, warmup: 1 })
      const detail = { chunks: count, bytes: size }
      const figures = [
        figureOf(samples, "raw", "raw read of the same bytes from one file, written to a TCP socket", "baseline", "ms", detail),
        figureOf(samples, "http", "catch-up GET from -1 until up to date, SQLite storage, chunk cache warm", "this", "ms", detail),
        figureOf(samples, "cold", "the same read from a server just started on the same database (chunk cache cold)", "this", "ms", detail)
      ]
      return {
        id: "streams:catchup",
        title: catchUpCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, `stream catch-up of ${count} chunks / raw file to socket`, "http", "raw", 3),
          ratioOf(figures, samples, `stream catch-up of ${count} chunks, cold server / raw file to socket`, "cold", "raw")
        ]),
        skipped: [],
        notes: [
          "A read returns up to 1 MiB (here the whole stream in one response). Warm: the chunks are in the server's in-memory cache of committed chunks (filled by the untimed appends through the same service); each read still reads the stream's record and probes the next chunk key in SQLite.",
          "Cold: a fresh server (new SQLite connection, empty chunk cache) on the same database file, started untimed before each read; the OS page cache is warm. It reads the chunk records by one range read of their keys (StorageAdapter.scanBetween, batches sized by the stream's mean chunk length), decoding them into one buffer."
        ]
      }
    })
}

/** A raw server writing `count` newline-JSON lines over TCP; milliseconds until the client parsed them all. */
const rawSocketLines = (count: number): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const lines = Array.from({ length: count }, (_, i) => message(i) + "\n")
    const server = NodeNet.createServer((socket) => {
      let i = 0
      const pump = () => {
        while (i < count) {
          if (!socket.write(lines[i++]!)) return void socket.once("drain", pump)
        }
      }
      pump()
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const start = now()
      const client = NodeNet.connect((server.address() as NodeNet.AddressInfo).port, "127.0.0.1")
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
          resolve(ms)
        }
      })
    })
  })

/**
 * One SSE reader at the tail of a fresh JSON stream while `count` appends go in (16 in
 * flight, through the service); milliseconds from the first append until the reader
 * parsed every message.
 */
const sseDelivery = async (server: Running, count: number): Promise<number> => {
  const path = freshPath()
  await put(`${server.url}${path}`, "application/json")
  let seen = 0
  let ready!: () => void
  const connected = new Promise<void>((resolve) => (ready = resolve))
  let start = 0
  const reader = readSse(`${server.url}${path}?offset=now&live=sse`, undefined, (event) => {
    if (event.event === "control") ready()
    if (event.event === "data") seen += (JSON.parse(event.data) as Array<unknown>).length
    return seen >= count
  })
  await connected
  start = now()
  await Effect.runPromise(Effect.orDie(Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) => server.streams.append({ path, contentType: "application/json", body: Buffer.from(message(i)) }),
    { concurrency: 16, discard: true }
  )))
  await reader
  return now() - start
}

const sseCase: BenchCase = {
  id: "streams:sse",
  title: "Durable streams: SSE live delivery of 10,000 appends to one reader against raw newline-JSON over a socket (messages/s)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const count = context.quick ? 1_000 : 10_000
      const rounds = context.quick ? 2 : 7
      // A round takes a few hundred ms: the first rounds still run while the JIT and the
      // heap settle (per-round rates climb for about three rounds), so three are warm-up.
      const warmup = context.quick ? 1 : 3
      const server = await startServer(makeMemory)
      scope.onClose(server.close)
      const samples = await interleave({
        raw: async () => rate(count, await rawSocketLines(count)),
        sse: async () => rate(count, await sseDelivery(server, count))
      }, { rounds, warmup })
      const detail = { messages: count, bytes: message(1).length }
      const figures = [
        figureOf(samples, "raw", "raw newline-JSON over a TCP socket, no persistence", "baseline", "messages/s", detail),
        figureOf(samples, "sse", "SSE live delivery to one reader, memory storage", "this", "messages/s", detail)
      ]
      return {
        id: "streams:sse",
        title: sseCase.title,
        figures,
        ratios: present([ratioOf(figures, samples, "SSE live delivery / raw socket (messages/s)", "sse", "raw", { atLeast: 0.3 })]),
        skipped: [],
        notes: [
          "Memory storage, so the figure is the delivery path (wake-up, read, SSE framing, HTTP), not the disk; appends go through the service, 16 in flight.",
          "Steady state: seven measured rounds after three warm-up rounds of each variant, interleaved."
        ]
      }
    })
}

/** A forced full GC (the bench runs without --expose-gc). */
const collect = (): void => {
  V8.setFlagsFromString("--expose-gc")
  const gc = Vm.runInNewContext("gc") as () => void
  gc()
  gc()
}

/** Heap bytes per reader with `readers` SSE readers caught up at the tail of a stream of `length` appends. */
const memoryPerReader = async (server: Running, length: number, readers: number): Promise<number> => {
  const path = freshPath()
  await put(`${server.url}${path}`, "application/json")
  await Effect.runPromise(Effect.orDie(Effect.forEach(
    Array.from({ length }, (_, i) => i),
    (i) => server.streams.append({ path, contentType: "application/json", body: Buffer.from(message(i)) }),
    { concurrency: 16, discard: true }
  )))
  collect()
  const before = process.memoryUsage().heapUsed
  const stop = new AbortController()
  let upToDate = 0
  let allUp!: () => void
  const caughtUp = new Promise<void>((resolve) => (allUp = resolve))
  const open = Array.from({ length: readers }, () =>
    readSse(`${server.url}${path}?offset=-1&live=sse`, undefined, (event) => {
      if (event.event === "control" && event.data.includes("\"upToDate\":true")) {
        if (++upToDate === readers) allUp()
      }
      return false
    }, stop.signal))
  await caughtUp
  collect()
  const during = process.memoryUsage().heapUsed
  stop.abort()
  await Promise.all(open)
  return (during - before) / readers
}

const readersCase: BenchCase = {
  id: "streams:readers",
  title: "Durable streams: 100 concurrent SSE readers of one stream, heap per reader at two stream lengths (bytes)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const readers = context.quick ? 20 : 100
      const lengths = context.quick ? [200, 1_000] : [1_000, 10_000]
      const rounds = context.quick ? 1 : 3
      const server = await startServer(makeMemory)
      scope.onClose(server.close)
      const variants: Record<string, () => Promise<number>> = {}
      for (const length of lengths) variants[`len${length}`] = () => memoryPerReader(server, length, readers)
      const samples = await interleave(variants, { rounds, warmup: 0 })
      const figures = lengths.map((length) =>
        figureOf(samples, `len${length}`, `heap per caught-up SSE reader, stream of ${length} appends`, "this", "bytes", { readers })
      )
      return {
        id: "streams:readers",
        title: readersCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, `heap per reader, ${lengths[1]} / ${lengths[0]} appends (flat: about 1)`, `len${lengths[1]}`, `len${lengths[0]}`)
        ]),
        skipped: [],
        notes: [
          "Server and readers share one process, so a reader's figure includes its client side (fetch, parser); memory storage. The parser (test/http/streamHelpers.ts readSse) holds no earlier event while it waits: before, a slice of its first (catch-up) event kept that whole text alive, which made the figure grow with the stream.",
          "Each reader reads from -1 to the tail, then waits live; the heap is measured after a full GC once all are caught up."
        ]
      }
    })
}

/** The cases of this module. */
export const cases: ReadonlyArray<BenchCase> = [awaitedCase, catchUpCase, sseCase, readersCase]
