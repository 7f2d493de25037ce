import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { decodeKey, encodeKey, encodeKeyPrefix } from "../src/internal/fileKey.ts"
import { suite } from "./StorageSuite.ts"

const freshRoot = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-file-storage-"))

suite("file", () => FileStorage.layer({ root: freshRoot() }))

describe("FileStorage", () => {
  it.effect("a root holding files in noetic's layout says so once at open, and still works as this storage", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      // What noetic's createFileStorage writes: encodeURIComponent(key) with % as __, then .json.
      Fs.writeFileSync(Path.join(root, "execution__3Aabc__3Asnapshot.json"), JSON.stringify({ version: 2 }))
      Fs.writeFileSync(Path.join(root, "execution__3Aabc__3Aledger__3A00000001.json"), "{}")
      // A host's own key, as noetic writes it.
      Fs.writeFileSync(Path.join(root, "plain.json"), "1")
      const warnings: Array<string> = []
      const storage = yield* FileStorage.make({ root }).pipe(
        Effect.provide(Logger.layer([
          Logger.make((options) => {
            if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
          })
        ]))
      )
      assert.strictEqual(warnings.length, 1)
      assert.include(warnings[0], "3 file(s) in noetic's layout")
      assert.include(warnings[0], "import-noetic")
      assert.deepStrictEqual(yield* storage.list(""), [])
      yield* storage.set("execution:abc:snapshot", { ours: true })
      assert.deepStrictEqual(yield* storage.get("execution:abc:snapshot"), Option.some({ ours: true }))
      // A root of this storage's own files only says nothing.
      const quiet: Array<string> = []
      yield* FileStorage.make({ root: freshRoot() }).pipe(
        Effect.provide(Logger.layer([
          Logger.make((options) => {
            if (options.logLevel === "Warn") quiet.push(String(options.message))
          })
        ]))
      )
      assert.deepStrictEqual(quiet, [])
    }))

  it.effect("a torn file is reported as corrupt, naming the key, and other keys are unaffected", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      yield* storage.set("torn", { text: "x".repeat(500) })
      yield* storage.set("intact", { ok: true })
      const file = Path.join(root, encodeKey("torn"))
      Fs.truncateSync(file, Fs.statSync(file).size / 2)

      const error = yield* Effect.flip(storage.get("torn"))
      assert.strictEqual(error.reason._tag, "Corrupt")
      assert.strictEqual(error.reason.key, "torn")
      const manyError = yield* Effect.flip(storage.getMany!(["intact", "torn"]))
      assert.strictEqual(manyError.reason._tag, "Corrupt")
      assert.deepStrictEqual(yield* storage.get("intact"), Option.some({ ok: true }))
      assert.deepStrictEqual(yield* storage.list(""), ["intact", "torn"])

      // Overwriting a corrupt key repairs it.
      yield* storage.set("torn", 1)
      assert.deepStrictEqual(yield* storage.get("torn"), Option.some(1))
    }))

  it.effect("a file holding another key's record is corrupt", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      yield* storage.set("a", 1)
      Fs.copyFileSync(Path.join(root, encodeKey("a")), Path.join(root, encodeKey("b")))
      const error = yield* Effect.flip(storage.get("b"))
      assert.strictEqual(error.reason._tag, "Corrupt")
    }))

  it.effect("an unreadable file is a Permission or Io failure, not a null", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      const storage = yield* FileStorage.make({ root })
      yield* storage.set("dir-in-the-way", 1)
      const file = Path.join(root, encodeKey("dir-in-the-way"))
      Fs.rmSync(file)
      Fs.mkdirSync(file)
      const error = yield* Effect.flip(storage.get("dir-in-the-way"))
      assert.include(["Io", "Permission"], error.reason._tag)
    }))

  it.effect("no key names a file outside the root, and every name is a plain file name", () =>
    Effect.gen(function*() {
      for (const key of ["../escape", "/abs/path", "a/../../b", "..", ".", "\u0000", "C:\\win", "x".repeat(5000)]) {
        const name = encodeKey(key)
        assert.notInclude(name, "/")
        assert.notInclude(name, "\\")
        assert.notInclude(name, "\u0000")
        assert.isFalse(name.startsWith("."))
        assert.isAtMost(Buffer.byteLength(name), 255)
      }
      assert.strictEqual(decodeKey(encodeKey("a:b/c")), "a:b/c")
      // The encoding is injective on the separators older encodings conflated.
      const names = new Set(["a:b", "a__b", "a_b", "a%3Ab", "a~3Ab", "a/b"].map(encodeKey))
      assert.strictEqual(names.size, 6)
      // ...and under case folding, so a case-insensitive file system keeps every key apart.
      const cased = ["a", "A", "ab", "aB", "Ab", "AB", "J", "~4a", "key:Z", "key:z", "~", "ü", "Ü"]
      const folded = new Set(cased.map((key) => encodeKey(key).toLowerCase()))
      assert.strictEqual(folded.size, cased.length)
      for (const key of cased) assert.strictEqual(decodeKey(encodeKey(key)), key)
    }))

  it.effect("a plain name starts with a prefix's encoding exactly when its key starts with the prefix; list skips on it", () =>
    Effect.gen(function*() {
      const keys = ["a", "ab", "a:b", "A", "aB", "ü", "üx", "u", "execution:x:ledger:/r#0", "execution:x:snapshot", "é:1"]
      const prefixes = ["", "a", "a:", "A", "ü", "u", "execution:x:", "execution:x:ledger:", "é", "\u00e9:1"]
      for (const key of keys) {
        for (const prefix of prefixes) {
          assert.strictEqual(encodeKey(key).startsWith(encodeKeyPrefix(prefix)), key.startsWith(prefix), `${key} / ${prefix}`)
        }
      }
      const storage = yield* FileStorage.make({ root: freshRoot() })
      yield* Effect.forEach(keys, (key) => storage.set(key, key), { discard: true })
      for (const prefix of prefixes) {
        assert.deepStrictEqual(yield* storage.list(prefix), keys.filter((key) => key.startsWith(prefix)).sort(), prefix)
      }
    }).pipe(Effect.scoped))

  it.effect("a prefix ending inside a surrogate pair still lists the keys that complete it", () =>
    Effect.gen(function*() {
      const storage = yield* FileStorage.make({ root: freshRoot() })
      yield* Effect.forEach(["x\u{1F600}", "x\u{1F601}", "x\u{1F900}", "y"], (key) => storage.set(key, key), { discard: true })
      // "\uD83D" is the high surrogate of U+1F600 and U+1F601, not of U+1F900.
      assert.deepStrictEqual(yield* storage.list("x\uD83D"), ["x\u{1F600}", "x\u{1F601}"])
      assert.deepStrictEqual(yield* storage.list("\uDE00"), [])
    }).pipe(Effect.scoped))

  it.effect("files are 0600 in a 0700 directory, and stray temp files of dead writers are removed on open", () =>
    Effect.gen(function*() {
      const root = Path.join(freshRoot(), "nested", "root")
      const storage = yield* FileStorage.make({ root })
      yield* storage.set("k", 1)
      assert.strictEqual(Fs.statSync(root).mode & 0o777, 0o700)
      assert.strictEqual(Fs.statSync(Path.join(root, encodeKey("k"))).mode & 0o777, 0o600)

      // pid 2^22+1 is above Linux's pid_max, so no live process owns it.
      const deadTemp = Path.join(root, `.tmp-${2 ** 22 + 1}-1-abc`)
      const liveTemp = Path.join(root, `.tmp-${process.ppid}-1-abc`)
      Fs.writeFileSync(deadTemp, "half")
      Fs.writeFileSync(liveTemp, "half")
      const reopened = yield* FileStorage.make({ root })
      assert.isFalse(Fs.existsSync(deadTemp))
      assert.isTrue(Fs.existsSync(liveTemp))
      assert.deepStrictEqual(yield* reopened.list(""), ["k"])
      assert.deepStrictEqual(yield* reopened.get("k"), Option.some(1))
    }))

  it.effect("opening a second storage over a root does not remove a temp file this process is writing", () =>
    Effect.gen(function*() {
      const root = freshRoot()
      yield* FileStorage.make({ root })
      const ownTemp = Path.join(root, `.tmp-${process.pid}-1-abc`)
      Fs.writeFileSync(ownTemp, "mid-write")
      yield* FileStorage.make({ root })
      assert.isTrue(Fs.existsSync(ownTemp))
    }))

  it.effect("a key that is not well-formed Unicode is refused", () =>
    Effect.gen(function*() {
      const storage = yield* FileStorage.make({ root: freshRoot() })
      const error = yield* Effect.flip(storage.set("lone \ud800 surrogate", 1))
      assert.strictEqual(error.reason._tag, "Unserializable")
    }))
})
