import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { encodeKey } from "../src/internal/fileKey.ts"
import { encodeRecord, Log, LOG_DIR_PREFIX } from "../src/internal/fileLog.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { appendOnlyLog, batchKey, keyPrefix, metaKey } from "../src/services/DurableOutboundQueue.ts"
import { suite } from "./StorageSuite.ts"

const freshRoot = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-file-log-"))
const logDir = (root: string, socketId: string) => Path.join(root, LOG_DIR_PREFIX + encodeKey(keyPrefix(socketId)))
const segments = (root: string, socketId: string) =>
  Fs.existsSync(logDir(root, socketId)) ? Fs.readdirSync(logDir(root, socketId)).filter((name) => name.endsWith(".seg")).sort() : []

// The whole conformance suite with every key in a log (one log per first character).
suite("file, every key in an append-only log", () =>
  FileStorage.layer({ root: freshRoot(), appendOnlyLog: (key) => Array.from(key)[0] }))

const runChild = (root: string, ...args: ReadonlyArray<string>) =>
  Effect.callback<string, Error>((resume) => {
    execFile(
      process.execPath,
      ["--import", "tsx", Path.join(import.meta.dirname, "fixtures", "logWriter.ts"), root, ...args],
      { cwd: Path.join(import.meta.dirname, "..") },
      (error, stdout, stderr) => resume(error === null ? Effect.succeed(stdout) : Effect.fail(new Error(`${error.message}\n${stderr}`)))
    )
  })

const runChildScan = (root: string, socketId: string) => runChild(root, "scan", socketId)

/**
 * Holds every thread of libuv's pool (each opening a FIFO under `root` that nobody
 * writes yet), so thread-pool work queued meanwhile waits; `release` lets it all go.
 */
const holdThreadPool = (root: string) =>
  Effect.gen(function*() {
    const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4)
    const fifos = Array.from({ length: threads }, (_, i) => Path.join(root, `.fifo-${i}`))
    yield* Effect.callback<void, Error>((resume) => {
      execFile("mkfifo", fifos, (error) => resume(error === null ? Effect.void : Effect.fail(error)))
    })
    const held = fifos.map((fifo) =>
      new Promise<void>((resolve) => Fs.open(fifo, "r", (error, fd) => (error ? resolve() : Fs.close(fd, () => resolve()))))
    )
    // Opened for reading and writing, a FIFO never blocks, and lets the readers' opens
    // (waiting, or not yet started) complete.
    const release = Effect.gen(function*() {
      const opened = fifos.map((fifo) => Fs.openSync(fifo, "r+"))
      yield* Effect.promise(() => Promise.all(held))
      for (const fd of opened) Fs.closeSync(fd)
    })
    return { release }
  })

/** A segment written by hand: the records of `entries` (a tombstone for an undefined value). */
const writeSegment = (root: string, socketId: string, number: number, entries: ReadonlyArray<readonly [string, unknown]>) => {
  Fs.mkdirSync(logDir(root, socketId), { recursive: true, mode: 0o700 })
  const bytes = Buffer.concat(entries.map(([key, value]) => encodeRecord(key, value === undefined ? undefined : JSON.stringify(value))))
  const path = Path.join(logDir(root, socketId), `${String(number).padStart(16, "0")}.seg`)
  Fs.writeFileSync(path, bytes, { mode: 0o600 })
  return { path, bytes }
}

describe("FileStorage append-only log", () => {
  it("the queue names a log for its batch records only", () => {
    assert.strictEqual(appendOnlyLog(batchKey("s", 1, 4)), keyPrefix("s"))
    assert.strictEqual(appendOnlyLog(batchKey("a:b/c", 1, 4)), keyPrefix("a:b/c"))
    assert.strictEqual(appendOnlyLog(batchKey("", 1, 1)), keyPrefix(""))
    assert.isUndefined(appendOnlyLog(metaKey("s")))
    assert.isUndefined(appendOnlyLog(`${keyPrefix("s")}batch:1-2`))
    assert.isUndefined(appendOnlyLog(`${batchKey("s", 1, 2)}x`))
    assert.isUndefined(appendOnlyLog("checkpoint:x"))
  })

  it.effect("batch keys live in the queue's log: set, get, list, scan, getMany and delete see them as keys", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const keys = [1, 2, 3].map((seq) => batchKey("s", seq, seq))
      yield* Effect.forEach(keys, (key, i) => storage.set(key, { frames: [i] }), { concurrency: "unbounded", discard: true })
      yield* storage.set(metaKey("s"), { acked: 0 })
      yield* storage.set("other", 1)

      // No file per batch key: one log directory with one segment.
      assert.deepStrictEqual(Fs.readdirSync(root).filter((name) => !name.startsWith(".")).sort(), [encodeKey("other"), encodeKey(metaKey("s"))].sort())
      assert.deepStrictEqual(segments(root, "s"), ["0000000000000001.seg"])
      assert.strictEqual(Fs.statSync(logDir(root, "s")).mode & 0o777, 0o700)
      assert.strictEqual(Fs.statSync(Path.join(logDir(root, "s"), "0000000000000001.seg")).mode & 0o777, 0o600)

      assert.deepStrictEqual(yield* storage.get(keys[1]!), Option.some({ frames: [1] }))
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), [...keys, metaKey("s")].sort())
      assert.deepStrictEqual(yield* storage.list(""), [...keys, metaKey("s"), "other"].sort())
      assert.deepStrictEqual(yield* storage.list("durable"), [...keys, metaKey("s")].sort())
      assert.deepStrictEqual(yield* storage.list(keys[2]!), [keys[2]!])
      assert.deepStrictEqual(yield* storage.list(`${keyPrefix("s")}batch:0000000000000002`), [keys[1]!])
      assert.deepStrictEqual(yield* storage.scan(`${keyPrefix("s")}batch:`), keys.map((key, i) => [key, { frames: [i] }]))
      const many = yield* storage.getMany([keys[0]!, "missing", keys[2]!])
      assert.deepStrictEqual([...many], [[keys[0]!, { frames: [0] }], [keys[2]!, { frames: [2] }]])

      yield* storage.delete(keys[0]!)
      yield* storage.delete(keys[0]!)
      assert.isTrue(Option.isNone(yield* storage.get(keys[0]!)))
      assert.deepStrictEqual(yield* storage.list(`${keyPrefix("s")}batch:`), keys.slice(1))
      // A second storage over the root in this process sees the same.
      const again = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* again.scan(`${keyPrefix("s")}batch:`), [[keys[1]!, { frames: [1] }], [keys[2]!, { frames: [2] }]])
    }))

  it.effect("a queue whose prefix is too long for a file name keeps its log under a hashed name", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const socketId = "s".repeat(300)
      const keys = [batchKey(socketId, 1, 1), batchKey(`${socketId}t`, 1, 1)]
      yield* storage.set(keys[0]!, 1)
      yield* storage.set(keys[1]!, 2)
      assert.deepStrictEqual(Fs.readdirSync(root).filter((name) => name.startsWith(LOG_DIR_PREFIX)).length, 2)
      assert.deepStrictEqual(yield* storage.list(keyPrefix(socketId)), [keys[0]!])
      assert.deepStrictEqual(yield* storage.list("durableOutboundQueue:"), [...keys].sort())
      const other = JSON.parse(yield* runChildScan(root, socketId)) as unknown
      assert.deepStrictEqual(other, [[keys[0]!, 1]])
    }), { timeout: 60_000 })

  it.effect("a lease left by a dead writer is broken; a live writer's is waited for", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      Fs.mkdirSync(logDir(root, "dead"), { mode: 0o700 })
      // pid 2^22+1 is above Linux's pid_max, so no live process owns it.
      Fs.writeFileSync(Path.join(logDir(root, "dead"), "lease"), `${2 ** 22 + 1} abc`)
      yield* storage.set(batchKey("dead", 1, 1), 1)
      assert.notInclude(Fs.readFileSync(Path.join(logDir(root, "dead"), "lease"), "utf8"), `${2 ** 22 + 1}`)

      Fs.mkdirSync(logDir(root, "live"), { mode: 0o700 })
      const lease = Path.join(logDir(root, "live"), "lease")
      Fs.writeFileSync(lease, `${process.ppid} held`)
      // The TestClock would never fire the release; this test waits in real time.
      yield* Effect.sync(() => setTimeout(() => Fs.rmSync(lease, { force: true }), 100))
      const started = Date.now()
      yield* storage.set(batchKey("live", 1, 1), 1)
      assert.isAtLeast(Date.now() - started, 90)
      assert.deepStrictEqual(yield* storage.get(batchKey("live", 1, 1)), Option.some(1))
    }))

  it.effect("compareAndSet works on a batch key", () =>
    Effect.gen(function*() {
      const storage = yield* FileStorage.make({ root: freshRoot() })
      const key = batchKey("s", 1, 1)
      assert.isTrue(yield* storage.compareAndSet!(key, Option.none(), 1))
      assert.isFalse(yield* storage.compareAndSet!(key, Option.none(), 2))
      assert.isTrue(yield* storage.compareAndSet!(key, Option.some(1), 2))
      assert.deepStrictEqual(yield* storage.get(key), Option.some(2))
    }))

  it.effect("a log written by another process is read from disk, and the next writer carries on after it", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      yield* runChild(root, "write", "1", "3")
      const storage = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* storage.scan(keyPrefix("q")), [1, 2, 3].map((seq) => [batchKey("q", seq, seq), seq]))
      // The child is gone: its lease is broken, and this process writes a segment of its own.
      yield* storage.delete(batchKey("q", 1, 1))
      yield* storage.set(batchKey("q", 4, 4), 4)
      assert.deepStrictEqual(segments(root, "q"), ["0000000000000001.seg", "0000000000000002.seg"])
      // Another process reads what this one wrote.
      const seen = JSON.parse(yield* runChild(root, "scan")) as unknown
      assert.deepStrictEqual(seen, [2, 3, 4].map((seq) => [batchKey("q", seq, seq), seq]))
    }), { timeout: 60_000 })

  it.effect("a reader in another process sees appends as they land", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      yield* runChild(root, "write", "1", "2")
      assert.deepStrictEqual(yield* storage.list(keyPrefix("q")), [batchKey("q", 1, 1), batchKey("q", 2, 2)])
      yield* runChild(root, "write", "3", "3")
      assert.deepStrictEqual(yield* storage.list(keyPrefix("q")), [1, 2, 3].map((seq) => batchKey("q", seq, seq)))
      assert.deepStrictEqual(yield* storage.get(batchKey("q", 3, 3)), Option.some(3))
    }), { timeout: 60_000 })

  it.live("a log's write is made from the thread pool: while the pool is held, the event loop goes on and the append waits", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      yield* storage.set(batchKey("s", 1, 1), "first")
      const pool = yield* holdThreadPool(root)
      const written = yield* Effect.forkChild(storage.set(batchKey("s", 2, 2), "second"))
      // Timers fire meanwhile: nothing on the event loop waits for the disk.
      yield* Effect.sleep(50)
      assert.isUndefined(written.pollUnsafe())
      yield* pool.release
      yield* Fiber.join(written)
      assert.deepStrictEqual(yield* storage.get(batchKey("s", 2, 2)), Option.some("second"))
    }), { timeout: 60_000 })

  it.live("a new segment's batch fails when the directory sync beside its write fails; the next write starts afresh", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const fs: typeof Fs = process.getBuiltinModule("node:fs")
      const fsync = fs.fsync
      let failed = 0
      fs.fsync = ((fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => {
        if (failed++ > 0) return fsync(fd, callback)
        const error: NodeJS.ErrnoException = new Error("EIO: i/o error, fsync")
        error.code = "EIO"
        setImmediate(() => callback(error))
      }) as typeof Fs.fsync
      const first = yield* storage.set(batchKey("s", 1, 1), "first").pipe(
        Effect.ensuring(Effect.sync(() => {
          fs.fsync = fsync
        })),
        Effect.flip
      )
      assert.strictEqual(first.reason._tag, "Io")
      assert.include(first.message, "EIO")
      yield* storage.set(batchKey("s", 2, 2), "second")
      assert.deepStrictEqual(yield* storage.get(batchKey("s", 2, 2)), Option.some("second"))
    }), { timeout: 60_000 })

  it.live("a lone append's write is issued before the event loop takes another turn; appends of one task share it", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      yield* storage.set(batchKey("s", 1, 1), "first")
      const fs: typeof Fs = process.getBuiltinModule("node:fs")
      const writev = fs.writev
      const events: Array<string> = []
      fs.writev = ((...args: Parameters<typeof Fs.writev>) => {
        events.push("writev")
        return writev(...args)
      }) as typeof Fs.writev
      try {
        // A turn of the event loop asked for before the append still comes after its write.
        setImmediate(() => events.push("next turn"))
        const lone = yield* Effect.forkChild(storage.set(batchKey("s", 2, 2), "lone"), { startImmediately: true })
        yield* Fiber.join(lone)
        assert.deepStrictEqual(events.slice(0, 2), ["writev", "next turn"])
        events.length = 0
        yield* Effect.forEach([3, 4, 5], (seq) => storage.set(batchKey("s", seq, seq), seq), {
          concurrency: "unbounded",
          discard: true
        })
        assert.deepStrictEqual(events, ["writev"])
      } finally {
        fs.writev = writev
      }
      assert.deepStrictEqual(yield* storage.scan(`${keyPrefix("s")}batch:`), [
        [batchKey("s", 1, 1), "first"],
        [batchKey("s", 2, 2), "lone"],
        [batchKey("s", 3, 3), 3],
        [batchKey("s", 4, 4), 4],
        [batchKey("s", 5, 5), 5]
      ])
    }), { timeout: 60_000 })

  it.live("logs of two queues writing large batches at once keep each other's records whole", () =>
    Effect.gen(function*() {
      // With the thread pool held, the first log's write waits in the pool while the
      // second log frames its own batch: that must not go into the bytes the first is
      // about to write.
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const pool = yield* holdThreadPool(root)
      const value = (socketId: string, seq: number) => `${socketId}:${seq}:` + `${socketId}${seq}`.repeat(40_000)
      const writes = ["a", "b"].flatMap((socketId) => [1, 2, 3, 4, 5, 6].map((seq) => ({ key: batchKey(socketId, seq, seq), text: value(socketId, seq) })))
      const written = yield* Effect.forkChild(
        Effect.all(writes.map(({ key, text }) => storage.set(key, text)), { concurrency: "unbounded", discard: true })
      )
      // Both logs have framed and queued their writes by now; then the pool is let go.
      yield* Effect.sleep(100)
      yield* pool.release
      yield* Fiber.join(written)
      for (const socketId of ["a", "b"]) assert.strictEqual(segments(root, socketId).length, 1)
      // Read back from the segments on disk, each record checked against its checksum.
      for (const { key, text } of writes) assert.deepStrictEqual(yield* storage.get(key), Option.some(text))
    }), { timeout: 60_000 })

  it.effect("a writer allocates its segment ahead in zeros; a reader sees the records written into them", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const keys = [1, 2, 3].map((seq) => batchKey("s", seq, seq))
      yield* storage.set(keys[0]!, 1)
      yield* storage.set(keys[1]!, 2)
      const path = Path.join(logDir(root, "s"), "0000000000000001.seg")
      const allocated = Fs.statSync(path).size
      const written = [keys[0]!, keys[1]!].reduce((sum, key, i) => sum + encodeRecord(key, String(i + 1)).length, 0)
      assert.isAbove(allocated, 64 * 1024)
      assert.isTrue(Fs.readFileSync(path).subarray(written).every((byte) => byte === 0))
      // A reader that does not hold the lease reads the segment from disk, as another process does.
      const reader = new Log(keyPrefix("s"), logDir(root, "s"), root, {
        segmentBytes: 8 * 1024 * 1024,
        reclaimBytes: 1024 * 1024,
        leaseWaitMs: 0,
        tempPath: () => Path.join(root, ".tmp-reader")
      })
      assert.deepStrictEqual(reader.keys(keyPrefix("s")), keys.slice(0, 2))
      // Written into the zeros: the file does not grow, and the reader still sees it.
      yield* storage.set(keys[2]!, 3)
      yield* storage.delete(keys[0]!)
      assert.strictEqual(Fs.statSync(path).size, allocated)
      assert.deepStrictEqual(reader.keys(keyPrefix("s")), keys.slice(1))
      assert.strictEqual(reader.read(keys[2]!), "3")
      assert.deepStrictEqual(reader.keys(keyPrefix("s")), keys.slice(1))
    }))

  it.effect("a reader sees the records written into a segment's zeros after it read it, once a newer segment seals it", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const dir = logDir(root, "s")
      const keys = [1, 2, 3].map((seq) => batchKey("s", seq, seq))
      const record = (key: string) => encodeRecord(key, "1")
      // Two records fill a segment: the third starts the next.
      const settings = (name: string) => ({
        segmentBytes: 2 * record(keys[0]!).length,
        reclaimBytes: 1024 * 1024,
        leaseWaitMs: 0,
        tempPath: () => Path.join(root, `.tmp-${name}-${Math.random().toString(36).slice(2)}`)
      })
      const writer = new Log(keyPrefix("s"), dir, root, settings("writer"))
      const reader = new Log(keyPrefix("s"), dir, root, settings("reader"))
      const append = (key: string) =>
        Effect.callback<void, unknown>((resume) => {
          writer.append(key, "1", (cause) => resume(cause === undefined ? Effect.void : Effect.fail(cause)))
        })
      yield* append(keys[0]!)
      assert.deepStrictEqual(reader.keys(keyPrefix("s")), keys.slice(0, 1))
      yield* append(keys[1]!)
      yield* append(keys[2]!)
      assert.deepStrictEqual(segments(root, "s"), ["0000000000000001.seg", "0000000000000002.seg"])
      assert.deepStrictEqual(reader.keys(keyPrefix("s")), keys)
      assert.strictEqual(reader.read(keys[1]!), "1")
    }))

  it.effect("a torn final record is a write that never completed: dropped, not Corrupt", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const keys = [1, 2, 3].map((seq) => batchKey("s", seq, seq))
      const { path, bytes } = writeSegment(root, "s", 1, keys.map((key) => [key, { text: "x".repeat(100) }] as const))
      Fs.truncateSync(path, bytes.length - 40)
      const storage = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), keys.slice(0, 2))
      assert.isTrue(Option.isNone(yield* storage.get(keys[2]!)))
      // Garbage at the end (a zero-filled tail) is torn too.
      Fs.appendFileSync(path, Buffer.alloc(64))
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), keys.slice(0, 2))
      // The next writer starts a new segment, so the torn tail never gets a record after it.
      yield* storage.set(keys[2]!, "again")
      assert.deepStrictEqual(segments(root, "s"), ["0000000000000001.seg", "0000000000000002.seg"])
      assert.deepStrictEqual(yield* storage.scan(keyPrefix("s")), [...keys.slice(0, 2).map((key) => [key, { text: "x".repeat(100) }] as const), [keys[2]!, "again"]])
    }))

  it.effect("a damaged value before an intact record is Corrupt, naming its key; the others stay readable", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const keys = [1, 2, 3].map((seq) => batchKey("s", seq, seq))
      const { path, bytes } = writeSegment(root, "s", 1, keys.map((key) => [key, { text: "x".repeat(100) }] as const))
      const second = encodeRecord(keys[0]!, JSON.stringify({ text: "x".repeat(100) })).length
      const at = second + 21 + Buffer.byteLength(keys[1]!) + 5
      bytes[at] = bytes[at]! ^ 0xff
      Fs.writeFileSync(path, bytes)
      const storage = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), keys)
      const error = yield* Effect.flip(storage.get(keys[1]!))
      assert.strictEqual(error.reason._tag, "Corrupt")
      assert.strictEqual(error.reason.key, keys[1])
      const scanError = yield* Effect.flip(storage.scan(keyPrefix("s")))
      assert.strictEqual(scanError.reason._tag, "Corrupt")
      assert.deepStrictEqual(yield* storage.get(keys[2]!), Option.some({ text: "x".repeat(100) }))
      // Deleting the damaged key hides it.
      yield* storage.delete(keys[1]!)
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), [keys[0]!, keys[2]!])
    }))

  it.effect("damage whose key cannot be read, before an intact record, is Corrupt naming the log", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const keys = [1, 2, 3].map((seq) => batchKey("s", seq, seq))
      const { path, bytes } = writeSegment(root, "s", 1, keys.map((key) => [key, seq(key)] as const))
      const second = encodeRecord(keys[0]!, JSON.stringify(seq(keys[0]!))).length
      bytes[second + 25] = bytes[second + 25]! ^ 0xff // inside the second record's key
      Fs.writeFileSync(path, bytes)
      const storage = yield* FileStorage.make({ root })
      const error = yield* Effect.flip(storage.list(keyPrefix("s")))
      assert.strictEqual(error.reason._tag, "Corrupt")
      assert.strictEqual(error.reason.key, keyPrefix("s"))
      assert.deepStrictEqual(yield* storage.get(keys[0]!), Option.some(seq(keys[0]!)))
      assert.deepStrictEqual(yield* storage.get(keys[2]!), Option.some(seq(keys[2]!)))
      // The damaged one may be any key the log does not show.
      const missing = yield* Effect.flip(storage.get(keys[1]!))
      assert.strictEqual(missing.reason._tag, "Corrupt")
      assert.strictEqual(missing.reason.key, keys[1])
      // Ordinary keys are unaffected.
      yield* storage.set("plain", 1)
      assert.deepStrictEqual(yield* storage.list("plain"), ["plain"])
    }))

  it.effect("a segment whose every record is deleted is removed, and an empty log leaves nothing behind", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const big = "x".repeat(1024 * 1024)
      const keys = Array.from({ length: 9 }, (_, i) => batchKey("s", i + 1, i + 1))
      for (const key of keys) yield* storage.set(key, big)
      // Past 8 MiB the segment is sealed and the next record starts another.
      assert.deepStrictEqual(segments(root, "s"), ["0000000000000001.seg", "0000000000000002.seg"])
      for (const key of keys.slice(0, 7)) yield* storage.delete(key)
      assert.deepStrictEqual(segments(root, "s"), ["0000000000000001.seg", "0000000000000002.seg"])
      yield* storage.delete(keys[7]!)
      assert.deepStrictEqual(segments(root, "s"), ["0000000000000002.seg"])
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), [keys[8]!])
      yield* storage.delete(keys[8]!)
      assert.isFalse(Fs.existsSync(logDir(root, "s")))
      assert.deepStrictEqual(yield* storage.list(""), [])
      // And the log starts again.
      yield* storage.set(keys[0]!, 1)
      assert.deepStrictEqual(yield* storage.get(keys[0]!), Option.some(1))
    }), { timeout: 60_000 })

  it.effect("a batch record an older version left as a file is read, listed and deleted", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const key = batchKey("s", 1, 1)
      Fs.writeFileSync(Path.join(root, encodeKey(key)), JSON.stringify({ version: 1, key, value: "old" }), { mode: 0o600 })
      const storage = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* storage.get(key), Option.some("old"))
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), [key])
      yield* storage.set(key, "new")
      assert.deepStrictEqual(yield* storage.get(key), Option.some("new"))
      assert.deepStrictEqual(yield* storage.list(keyPrefix("s")), [key])
      yield* storage.delete(key)
      assert.isTrue(Option.isNone(yield* storage.get(key)))
      assert.isFalse(Fs.existsSync(Path.join(root, encodeKey(key))))
    }))
})

const seq = (key: string) => Number(key.slice(-16))
