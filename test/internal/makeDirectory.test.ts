import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { makeDirectory, makeDirectorySync } from "../../src/internal/makeDirectory.ts"

const scratch = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-mkdir-"))

describe("makeDirectory", () => {
  it("creates missing parents with the mode, and an existing directory is fine", async () => {
    const root = scratch()
    const deep = Path.join(root, "a", "b", "c")
    makeDirectorySync(deep, 0o700)
    expect(Fs.statSync(deep).isDirectory()).toBe(true)
    expect(Fs.statSync(Path.join(root, "a")).mode & 0o777).toBe(0o700)
    makeDirectorySync(deep, 0o700)
    const other = Path.join(root, "x", "y")
    await makeDirectory(other, 0o700)
    await makeDirectory(other, 0o700)
    expect(Fs.statSync(other).isDirectory()).toBe(true)
  })

  it("a file in the way is refused with EEXIST / ENOTDIR", async () => {
    const root = scratch()
    const file = Path.join(root, "file")
    Fs.writeFileSync(file, "")
    expect(() => makeDirectorySync(file, 0o700)).toThrow(expect.objectContaining({ code: "EEXIST" }))
    await expect(makeDirectory(file, 0o700)).rejects.toMatchObject({ code: "EEXIST" })
    expect(() => makeDirectorySync(Path.join(file, "sub"), 0o700)).toThrow(expect.objectContaining({ code: "ENOTDIR" }))
    await expect(makeDirectory(Path.join(file, "sub"), 0o700)).rejects.toMatchObject({ code: "ENOTDIR" })
  })

  // Node's own mkdir({ recursive: true }) never returns for these (it retries the parent forever).
  it.runIf(Fs.existsSync("/proc/self"))("a parent that refuses new entries fails instead of hanging", async () => {
    expect(() => makeDirectorySync("/proc/nope/deeper", 0o700)).toThrow(expect.objectContaining({ code: "ENOENT" }))
    await expect(makeDirectory("/proc/nope/deeper", 0o700)).rejects.toMatchObject({ code: "ENOENT" })
  })
})
