/**
 * Security checks the reliability issue keeps tested, beside those in the backend and
 * IPC suites (keys never leave the file storage root: FileStorage.test; the socket is
 * 0600: IpcServer.test; `stop` never signals a process whose start time differs from
 * its manifest: LocalSubprocessAdapter.test). Here: the directories the subprocess
 * adapter creates are 0700, and an endless line cannot make a server buffer without bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
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
