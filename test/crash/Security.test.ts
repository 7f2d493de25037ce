/**
 * Security checks the reliability issue keeps tested, beside those in the backend and
 * IPC suites (keys never leave the file storage root: FileStorage.test; the socket is
 * 0600: IpcServer.test; `stop` never signals a process whose start time differs from
 * its manifest: LocalSubprocessAdapter.test). Here: the directories the subprocess
 * adapter creates are 0700, and an endless line cannot make a server buffer without bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as ChildProcess from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as IpcServer from "../../src/layers/IpcServer.ts"
import * as LocalSubprocessAdapter from "../../src/layers/LocalSubprocessAdapter.ts"
import fc from "fast-check"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { encodeKey } from "../../src/internal/fileKey.ts"
import { keyProblem } from "../../src/services/StorageAdapter.ts"
import { SubprocessError, type UnsafeDirectory } from "../../src/services/SubprocessAdapter.ts"
import { readStat } from "../../src/internal/procStat.ts"
import { saveManifest } from "../../src/services/SubprocessRecords.ts"
import { socketPathFor } from "../ipcHelpers.ts"

describe("security checks", () => {
  it("no generated key names a file outside the root, a hidden file, or a path with a separator", () => {
    const root = Path.resolve(Os.tmpdir(), "root")
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 300 }), fc.constantFrom("..", ".", "/", "../x", "a/../../b", "\\..\\x")), (key) => {
        // The empty key and lone surrogates never reach the encoding: every backend refuses them.
        if (keyProblem(key) !== undefined) return
        const name = encodeKey(key)
        assert.isAbove(name.length, 0)
        assert.notInclude(name, "/")
        assert.notInclude(name, "\\")
        assert.isFalse(name.startsWith("."), name)
        assert.isAtMost(Buffer.byteLength(name), 255)
        assert.strictEqual(Path.dirname(Path.join(root, name)), root)
      }),
      { numRuns: 5_000 }
    )
  })

  it.effect("keys written through a file storage stay inside its root (or are refused with a typed error)", () =>
    Effect.gen(function*() {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-keys-"))
      const root = Path.join(base, "root")
      const storage = yield* FileStorage.make({ root })
      const keys = fc.sample(fc.string({ unit: "binary", maxLength: 80 }), 300)
      for (const key of [...keys, "..", "../escape", "/etc/passwd", ""]) {
        const exit = yield* Effect.exit(storage.set(key, 1))
        if (keyProblem(key) !== undefined) assert.isTrue(exit._tag === "Failure", JSON.stringify(key))
      }
      // Nothing was written beside the root.
      assert.deepStrictEqual(Fs.readdirSync(base), ["root"])
    }))

  it.effect("the subprocess adapter's storage root and run directory are created 0700", () =>
    Effect.gen(function*() {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sec-"))
      const root = Path.join(base, "subprocess")
      const runDir = Path.join(base, "run")
      yield* LocalSubprocessAdapter.make({ root, runDir })
      for (const dir of [root, runDir]) {
        assert.strictEqual(Fs.statSync(dir).mode & 0o777, 0o700, dir)
      }
    }).pipe(Effect.scoped))

  describe("the fallback run directory (a run directory too long for a socket path)", () => {
    /** A run directory whose socket paths would pass 90 bytes, and the temp directory the adapter falls back to. */
    const longRunDir = () => {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sec-"))
      const runDir = Path.join(base, "r".repeat(100))
      const fallback = Path.join(Os.tmpdir(), `noetic-run-${createHash("sha256").update(runDir).digest("hex").slice(0, 12)}`)
      return { root: Path.join(base, "subprocess"), runDir, fallback }
    }
    const unsafeDirectoryOf = (exit: Exit.Exit<unknown, unknown>) => {
      assert.isTrue(Exit.isFailure(exit), "the adapter was built over a directory it does not own")
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(error, SubprocessError)
      const reason = (error as SubprocessError).reason
      assert.strictEqual(reason._tag, "UnsafeDirectory")
      return reason as UnsafeDirectory
    }

    it.effect("is created fresh, 0700 and this user's", () =>
      Effect.gen(function*() {
        const { fallback, root, runDir } = longRunDir()
        Fs.rmSync(fallback, { recursive: true, force: true })
        yield* LocalSubprocessAdapter.make({ root, runDir })
        const stat = Fs.lstatSync(fallback)
        assert.isTrue(stat.isDirectory())
        assert.strictEqual(stat.mode & 0o777, 0o700)
        assert.strictEqual(stat.uid, process.getuid!())
        Fs.rmSync(fallback, { recursive: true, force: true })
      }).pipe(Effect.scoped))

    it.effect.skipIf(process.getuid?.() !== 0)("made first by another user (0777) is refused with the path and the fix", () =>
      Effect.gen(function*() {
        const { fallback, root, runDir } = longRunDir()
        Fs.rmSync(fallback, { recursive: true, force: true })
        Fs.mkdirSync(fallback)
        Fs.chmodSync(fallback, 0o777)
        Fs.chownSync(fallback, 65534, 65534)
        const reason = unsafeDirectoryOf(yield* Effect.exit(Effect.scoped(LocalSubprocessAdapter.make({ root, runDir }))))
        assert.strictEqual(reason.path, fallback)
        assert.include(reason.message, "owned by uid 65534")
        assert.include(reason.message, `rm -rf ${fallback}`)
        assert.include(reason.message, "runDir")
        // Nothing of the adapter's went in there.
        assert.deepStrictEqual(Fs.readdirSync(fallback), [])
        Fs.rmSync(fallback, { recursive: true, force: true })
      }))

    it.effect("a symbolic link there, or a directory of this user's that others can enter, is refused", () =>
      Effect.gen(function*() {
        const { fallback, root, runDir } = longRunDir()
        const target = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sec-target-"))
        Fs.rmSync(fallback, { recursive: true, force: true })
        Fs.symlinkSync(target, fallback)
        const link = unsafeDirectoryOf(yield* Effect.exit(Effect.scoped(LocalSubprocessAdapter.make({ root, runDir }))))
        assert.include(link.message, "symbolic link")
        assert.deepStrictEqual(Fs.readdirSync(target), [])
        Fs.rmSync(fallback, { force: true })
        Fs.mkdirSync(fallback)
        Fs.chmodSync(fallback, 0o755)
        const open = unsafeDirectoryOf(yield* Effect.exit(Effect.scoped(LocalSubprocessAdapter.make({ root, runDir }))))
        assert.include(open.message, "mode 0755")
        Fs.rmSync(fallback, { recursive: true, force: true })
      }))
  })

  it.effect.skipIf(process.getuid?.() !== 0)("a run directory another user can write is refused, given or not", () =>
    Effect.gen(function*() {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sec-"))
      const runDir = Path.join(base, "run")
      Fs.mkdirSync(runDir)
      Fs.chmodSync(runDir, 0o777)
      const exit = yield* Effect.exit(Effect.scoped(LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), runDir })))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? Cause.squash(exit.cause) : ""), "UnsafeDirectory")
      Fs.chownSync(runDir, 65534, 65534)
      Fs.chmodSync(runDir, 0o700)
      const other = yield* Effect.exit(Effect.scoped(LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), runDir })))
      assert.isTrue(Exit.isFailure(other))
    }))

  it.live.skipIf(process.getuid?.() !== 0)("a reattaching host connects to no recorded socket in a directory another user owns", () =>
    Effect.gen(function*() {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sec-"))
      const root = Path.join(base, "subprocess")
      // Another user's directory, where "a child's socket" answers: it counts who connects.
      const foreign = Path.join(base, "foreign")
      Fs.mkdirSync(foreign, { mode: 0o777 })
      Fs.chmodSync(foreign, 0o777)
      Fs.chownSync(foreign, 65534, 65534)
      const socketPath = Path.join(foreign, "child.sock")
      let connections = 0
      const server = Net.createServer((socket) => {
        connections++
        socket.destroy()
      })
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => void server.listen(socketPath, () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      // A live process recorded as the child, its socket in that directory.
      const sleeper = ChildProcess.spawn("sleep", ["30"], { stdio: "ignore", detached: true })
      yield* Effect.addFinalizer(() => Effect.sync(() => sleeper.kill("SIGKILL")))
      const stat = yield* readStat(sleeper.pid!)
      const storage = yield* FileStorage.make({ root })
      yield* saveManifest(storage, {
        version: 1,
        adapter: "local",
        handleId: "planted",
        stepId: "step",
        module: null,
        entry: null,
        serializedInput: "null",
        executionId: "planted",
        parentExecutionId: null,
        threadId: null,
        resourceId: null,
        cwdInit: null,
        pid: sleeper.pid!,
        pidStarttime: stat?.startTime ?? null,
        socketPath,
        checkpointRoot: null,
        lingerMs: 0,
        metadata: {},
        createdAt: Date.now()
      })
      const adapter = yield* LocalSubprocessAdapter.make({ root, runDir: Path.join(base, "run"), pollMs: 20, stopGraceMs: 200 })
      const handle = yield* adapter.reattach("planted")
      assert.isTrue(handle._tag === "Some", "the live child was not reattached")
      // Long enough for a client to connect (it does, within a few polls, without the check).
      yield* Effect.sleep("1500 millis")
      assert.strictEqual(connections, 0)
    }).pipe(Effect.scoped), 20_000)

  it.live("a client streaming an endless line is cut off near the frame limit, and the server keeps serving", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const limit = 64 * 1024
      yield* IpcServer.make({ socketPath, maxFrameBytes: limit })
      // Up to 256 MiB without a newline: a server that buffered it all would hold it in memory.
      const chunk = Buffer.alloc(256 * 1024, 0x78)
      const maxBytes = 256 * 1024 * 1024
      const written = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const socket = Net.connect({ path: socketPath })
          let sent = 0
          let done = false
          const finish = () => {
            if (done) return
            done = true
            socket.destroy()
            resolve(sent)
          }
          const pump = () => {
            while (!done && sent < maxBytes) {
              sent += chunk.length
              if (!socket.write(chunk)) return void socket.once("drain", pump)
            }
            if (sent >= maxBytes) finish()
          }
          socket.on("close", finish)
          socket.on("error", finish)
          socket.on("connect", pump)
        })
      )
      // The server closed the connection long before the flood ended: what it read is
      // bounded by the limit plus what the kernel's socket buffers held.
      assert.isBelow(written, maxBytes, "the server cut the endless line off")
      const serving = yield* Effect.promise(() =>
        new Promise<boolean>((resolve) => {
          const socket = Net.connect({ path: socketPath })
          socket.once("data", () => {
            socket.destroy()
            resolve(true)
          })
          socket.once("error", () => resolve(false))
        })
      )
      assert.isTrue(serving, "a new connection still gets its hello")
    }).pipe(Effect.scoped), { timeout: 120_000 })

  it.live("many clients flooding oversized frames are each cut off; the server keeps serving", () =>
    Effect.gen(function*() {
      const socketPath = socketPathFor()
      const limit = 16 * 1024
      const server = yield* IpcServer.make({ socketPath, maxFrameBytes: limit })
      const frame = "y".repeat(4 * limit) + "\n"
      const closed = yield* Effect.promise(() =>
        Promise.all(Array.from({ length: 20 }, () =>
          new Promise<boolean>((resolve) => {
            const socket = Net.connect({ path: socketPath })
            let writes = 0
            const pump = () => {
              // Oversized frames, one after another, until the server hangs up (or 64 of them).
              while (writes < 64) {
                writes++
                if (!socket.write(frame)) return void socket.once("drain", pump)
              }
            }
            socket.on("connect", pump)
            socket.on("close", () => resolve(true))
            socket.on("error", () => undefined)
            setTimeout(() => {
              socket.destroy()
              resolve(false)
            }, 30_000)
          })))
      )
      assert.isTrue(closed.every(Boolean), "every flooding connection was closed by the server")
      // The server forgets each connection once its side has closed.
      while ((yield* server.connectionCount) > 0) yield* Effect.sleep("10 millis")
      const seq = yield* server.emit({ type: "item", item: "after the flood" })
      assert.isAbove(seq, 0)
    }).pipe(Effect.scoped), { timeout: 120_000 })
})
