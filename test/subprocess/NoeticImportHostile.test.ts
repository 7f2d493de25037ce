/**
 * `import-noetic` on a crafted directory: only regular files inside it are read
 * (symbolic links and special files are listed, never opened), a file over the size
 * limit or a record nested too deep is reported while the others are imported, no
 * error quotes a file's content, and SIGTERM stops the CLI at once, leaving whole
 * records.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterEach, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { importNoeticDirectory, type NoeticImportLimits } from "../../src/NoeticImport.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"
import { cli } from "../cli/suite.ts"

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
})
const tempDir = (prefix: string) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

/** noetic's file name of `key` (see NoeticImport). */
const fileOf = (key: string) => `${encodeURIComponent(key).replace(/%/g, "__")}.json`
const ledgerFile = (seq: number) => fileOf(`execution:e1:ledger:${String(seq).padStart(8, "0")}`)
const ledgerEntry = (seq: number) =>
  JSON.stringify({ path: `/root#0/s#${seq}`, stepId: "s", kind: "runCode", output: seq, completedAt: "2026-11-30T10:00:00.000Z" })

const importInto = (directory: string, limits: NoeticImportLimits = {}) =>
  Effect.runPromise(Effect.gen(function*() {
    const storage = yield* makeMemory
    const report = yield* importNoeticDirectory(directory, { checkpoints: storage }, limits)
    return { report, keys: yield* storage.list("") }
  }))

describe("import-noetic on a crafted directory", () => {
  it("skips symbolic links (in or out of the directory), FIFOs and devices, lists them, and quotes no content", async () => {
    const outside = tempDir("noetic-outside-")
    Fs.writeFileSync(Path.join(outside, "secret.json"), ledgerEntry(7))
    Fs.writeFileSync(Path.join(outside, "secret.txt"), "SECRET-TOKEN-0123456789 not json")
    const dir = tempDir("noetic-crafted-")
    Fs.writeFileSync(Path.join(dir, ledgerFile(0)), ledgerEntry(0))
    Fs.symlinkSync(Path.join(outside, "secret.json"), Path.join(dir, ledgerFile(1)))
    Fs.symlinkSync(Path.join(outside, "secret.txt"), Path.join(dir, ledgerFile(2)))
    Fs.symlinkSync("/dev/zero", Path.join(dir, ledgerFile(3)))
    ChildProcess.execFileSync("mkfifo", [Path.join(dir, ledgerFile(4))])
    Fs.mkdirSync(Path.join(dir, ledgerFile(5)))
    // A regular file whose content is not JSON: reported without quoting it.
    Fs.writeFileSync(Path.join(dir, ledgerFile(6)), "SECRET-TOKEN-0123456789 not json")
    const { keys, report } = await importInto(dir)
    expect(report.ledgerEntries).toBe(1)
    expect(keys.filter((key) => key.includes("ledger"))).toHaveLength(1)
    expect(report.notRead).toEqual([
      { file: ledgerFile(1), type: "symbolic link" },
      { file: ledgerFile(2), type: "symbolic link" },
      { file: ledgerFile(3), type: "symbolic link" },
      { file: ledgerFile(4), type: "FIFO" },
      { file: ledgerFile(5), type: "directory" }
    ])
    expect(report.failures.map((failure) => failure.file)).toEqual([ledgerFile(6)])
    expect(report.failures[0]!.message).toContain("not valid JSON")
    expect(JSON.stringify(report)).not.toContain("SECRET")
  }, 20_000)

  it("a file over the size limit and a record nested too deep are reported; the records before and after are imported", async () => {
    const dir = tempDir("noetic-crafted-")
    Fs.writeFileSync(Path.join(dir, ledgerFile(0)), ledgerEntry(0))
    // 200,000 nested arrays as the step's output.
    const deep = `{"path":"/root#0/s#1","stepId":"s","kind":"runCode","output":${"[".repeat(200_000)}${"]".repeat(200_000)}}`
    Fs.writeFileSync(Path.join(dir, ledgerFile(1)), deep)
    Fs.writeFileSync(Path.join(dir, ledgerFile(2)), JSON.stringify({ ...JSON.parse(ledgerEntry(2)), output: "x".repeat(4096) }))
    Fs.writeFileSync(Path.join(dir, ledgerFile(3)), ledgerEntry(3))
    const { keys, report } = await importInto(dir)
    expect(report.ledgerEntries).toBe(3)
    expect(keys.filter((key) => key.includes("ledger"))).toHaveLength(3)
    expect(report.failures.map((failure) => [failure.file, failure.message])).toEqual([
      [ledgerFile(1), "unreadable: nested deeper than 512 levels (maxDepth)"]
    ])
    // A lower size limit: the 4 KiB record is reported too, not read.
    const limited = await importInto(dir, { maxFileBytes: 2048 })
    expect(limited.report.ledgerEntries).toBe(2)
    expect(limited.report.failures.find((failure) => failure.file === ledgerFile(2))?.message).toContain("over the limit of 2048")
  }, 20_000)

  it("the CLI lists what it did not read and takes the limits as flags", async () => {
    const dir = tempDir("noetic-crafted-")
    const home = tempDir("noetic-home-")
    Fs.writeFileSync(Path.join(dir, ledgerFile(0)), ledgerEntry(0))
    Fs.writeFileSync(Path.join(dir, ledgerFile(1)), `{"a":${"[".repeat(40)}${"]".repeat(40)}}`)
    ChildProcess.execFileSync("mkfifo", [Path.join(dir, ledgerFile(2))])
    const run = await Effect.runPromise(Effect.scoped(cli("--home", home, "import-noetic", dir, "--max-depth", "10")))
    expect(run.code).toBe(0)
    expect(run.out).toContain("1 ledger entries")
    expect(run.out).toContain(`not read: ${ledgerFile(2)} (FIFO`)
    expect(run.out).toContain("nested deeper than 10 levels")
  }, 20_000)

  it("SIGTERM stops the CLI at once; what it wrote is whole records", async () => {
    const dir = tempDir("noetic-crafted-")
    const home = tempDir("noetic-home-")
    const total = 5_000
    for (let seq = 0; seq < total; seq++) Fs.writeFileSync(Path.join(dir, ledgerFile(seq)), ledgerEntry(seq))
    const database = Path.join(home, "checkpoints", "checkpoints.db")
    const started = Date.now()
    const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "--home", home, "import-noetic", dir], {
      stdio: ["ignore", "ignore", "ignore"]
    })
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)))
    const rows = () => {
      if (!Fs.existsSync(database)) return 0
      const db = new DatabaseSync(database, { readOnly: true })
      db.exec("PRAGMA busy_timeout = 10000")
      try {
        return (db.prepare("SELECT count(*) AS n FROM noetic_storage").get() as { n: number }).n
      } catch {
        return 0
      } finally {
        db.close()
      }
    }
    // Once it is writing, it is told to stop.
    const deadline = Date.now() + 30_000
    while (rows() === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(rows()).toBeGreaterThan(0)
    const signalled = Date.now()
    console.log(`import-noetic: writing after ${signalled - started} ms`)
    proc.kill("SIGTERM")
    const code = await exited
    expect(Date.now() - signalled).toBeLessThan(3_000)
    expect(code).not.toBe(0)
    // Stopped part way, with every record it wrote whole.
    const db = new DatabaseSync(database, { readOnly: true })
    try {
      const values = (db.prepare("SELECT value FROM noetic_storage").all() as Array<{ value: unknown }>)
      expect(values.length).toBeLessThan(total)
      for (const { value } of values) {
        expect(() => JSON.parse(typeof value === "string" ? value : Buffer.from(value as Uint8Array).toString("utf8"))).not.toThrow()
      }
    } finally {
      db.close()
    }
  }, 120_000)
})
