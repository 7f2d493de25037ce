import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"

const freshRoot = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-file-cas-"))
const lockFile = (root: string, key: string) =>
  Path.join(root, `.lock-${createHash("sha256").update(key).digest("hex")}`)

const runChild = (root: string, times: number) =>
  Effect.callback<void, Error>((resume) => {
    execFile(
      process.execPath,
      ["--import", "tsx", Path.join(import.meta.dirname, "fixtures", "casIncrement.ts"), root, String(times)],
      { cwd: Path.join(import.meta.dirname, "..") },
      (error, _stdout, stderr) => resume(error === null ? Effect.void : Effect.fail(new Error(`${error.message}\n${stderr}`)))
    )
  })

describe("FileStorage compareAndSet", () => {
  it.effect("processes sharing a root lose no increment", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      yield* Effect.forEach(Array.from({ length: 4 }), () => runChild(root, 25), {
        concurrency: "unbounded",
        discard: true
      })
      const storage = yield* FileStorage.make({ root })
      assert.deepStrictEqual(yield* storage.get("counter"), Option.some(100))
      assert.deepStrictEqual(yield* storage.list(""), ["counter"])
      assert.isFalse(Fs.existsSync(lockFile(root, "counter")))
    }), { timeout: 120_000 })

  it.effect("a lock left by a dead process is broken", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      // pid 2^22+1 is above Linux's pid_max, so no live process owns it.
      Fs.writeFileSync(lockFile(root, "lease"), `${2 ** 22 + 1} abc`)
      assert.isTrue(yield* storage.compareAndSet!("lease", Option.none(), 1))
      assert.deepStrictEqual(yield* storage.get("lease"), Option.some(1))
      assert.isFalse(Fs.existsSync(lockFile(root, "lease")))
    }))

  it.effect("a lock of a live process is waited for, and broken once it is stale", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      const lock = lockFile(root, "lease")
      Fs.writeFileSync(lock, `${process.ppid} held`)
      // The TestClock would never fire the release; this test waits in real time.
      yield* Effect.sync(() => setTimeout(() => Fs.rmSync(lock, { force: true }), 100))
      const started = Date.now()
      assert.isTrue(yield* storage.compareAndSet!("lease", Option.none(), 1))
      assert.isAtLeast(Date.now() - started, 90)

      Fs.writeFileSync(lock, `${process.ppid} held`)
      const old = new Date(Date.now() - 60_000)
      Fs.utimesSync(lock, old, old)
      assert.isTrue(yield* storage.compareAndSet!("lease", Option.some(1), 2))
      assert.deepStrictEqual(yield* storage.get("lease"), Option.some(2))
    }))
})
