/**
 * SQLite storage shared by real processes: compare-and-set across processes, execution
 * leases between two host processes (one runs; a paused holder is fenced), and a
 * writer killed with SIGKILL in the middle of its transactions.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { DatabaseSync } from "node:sqlite"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"

const freshPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sqlite-proc-")), "shared.db")
const fixture = (name: string) => Path.join(import.meta.dirname, "fixtures", name)
const cwd = Path.join(import.meta.dirname, "..")

const runToEnd = (script: string, args: ReadonlyArray<string>) =>
  Effect.callback<string, Error>((resume) => {
    execFile(process.execPath, ["--import", "tsx", fixture(script), ...args], { cwd }, (error, stdout, stderr) =>
      resume(error === null ? Effect.succeed(stdout) : Effect.fail(new Error(`${error.message}\n${stderr}`))))
  })

/** A child whose stdout lines are collected; `waitFor` resolves once a line matches. */
const start = (script: string, args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, ["--import", "tsx", fixture(script), ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  const waiters: Array<() => void> = []
  let buffer = ""
  let stderr = ""
  child.stderr!.on("data", (chunk) => (stderr += String(chunk)))
  child.stdout!.on("data", (chunk) => {
    buffer += String(chunk)
    const parts = buffer.split("\n")
    buffer = parts.pop()!
    lines.push(...parts)
    for (const wake of waiters.splice(0)) wake()
  })
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const waitFor = (match: (line: string) => boolean): Promise<string> =>
    new Promise((resolve, reject) => {
      const check = () => {
        const line = lines.find(match)
        if (line !== undefined) return resolve(line)
        if (child.exitCode !== null || child.signalCode !== null) {
          return reject(new Error(`the child ended without the line; stdout: ${lines.join("\n")}\nstderr: ${stderr}`))
        }
        waiters.push(check)
      }
      check()
      void exited.then(() => waiters.push(check)).then(() => {
        for (const wake of waiters.splice(0)) wake()
      })
    })
  return { child, lines, waitFor, exited, stderr: () => stderr }
}

type Started = ReturnType<typeof start>

/** The events a host printed; its log lines (Effect's logger writes to stdout too) are skipped. */
const events = (host: Started) =>
  host.lines.filter((line) => line.startsWith("{")).map((line) =>
    JSON.parse(line) as { event: string; tag?: string; output?: unknown }
  )
const kill = (child: ChildProcess) => {
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
}

describe("SqliteStorage across processes", () => {
  it.effect("processes sharing one database lose no compareAndSet increment", () =>
    Effect.gen(function*() {
      const path = freshPath()
      yield* Effect.forEach(Array.from({ length: 4 }), () => runToEnd("sqliteWriter.ts", ["cas", path, "25"]), {
        concurrency: "unbounded",
        discard: true
      })
      const storage = yield* SqliteStorage.make({ path })
      assert.deepStrictEqual(yield* storage.get("counter"), Option.some(100))
    }), { timeout: 180_000 })

  it.effect("processes opening a new database at once grow its log to its steady size, and lose nothing", () =>
    Effect.gen(function*() {
      const path = freshPath()
      // The log at the checkpoint threshold: its header and 1,000 frames of a 4 KiB page.
      const reserved = 32 + 1000 * (4096 + 24)
      // Held open, so the log outlives the children.
      const watcher = yield* SqliteStorage.make({ path, reserveLog: false })
      assert.isBelow(Fs.statSync(`${path}-wal`).size, reserved)
      yield* Effect.forEach(Array.from({ length: 4 }), () => runToEnd("sqliteWriter.ts", ["cas", path, "10"]), {
        concurrency: "unbounded",
        discard: true
      })
      const log = Fs.statSync(`${path}-wal`).size
      assert.isAtLeast(log, reserved)
      assert.deepStrictEqual(yield* watcher.get("counter"), Option.some(40))
      const db = new DatabaseSync(path)
      try {
        assert.deepStrictEqual(db.prepare("PRAGMA integrity_check").get(), { integrity_check: "ok" })
        assert.deepStrictEqual(db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all(), [{ name: SqliteStorage.TABLE }])
        assert.deepStrictEqual(db.prepare("PRAGMA freelist_count").get(), { freelist_count: 0 })
      } finally {
        db.close()
      }
    }), { timeout: 180_000 })

  it.effect("two host processes on one execution: exactly one runs it, the other is refused", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const gate = `${path}.gate`
      const hosts = ["host-a", "host-b"].map((owner) => start("sqliteLeaseHost.ts", [path, owner, "shared", gate, "60000", "execute"]))
      yield* Effect.addFinalizer(() => Effect.sync(() => hosts.forEach((host) => kill(host.child))))
      // The refused host ends on its own; the gate opens only after that, so both overlapped.
      yield* Effect.promise(() =>
        Promise.race(hosts.map((host, i) => host.exited.then(() => i)))
      )
      Fs.writeFileSync(gate, "")
      const codes = yield* Effect.promise(() => Promise.all(hosts.map((host) => host.exited)))
      assert.deepStrictEqual(codes, [0, 0], hosts.map((host) => host.stderr()).join("\n"))
      const outcomes = hosts.map(events)
      const ran = outcomes.filter((lines) => lines.some((line) => line.event === "started"))
      assert.strictEqual(ran.length, 1, JSON.stringify(outcomes))
      assert.deepStrictEqual(ran[0]!.at(-1), { event: "done", output: 20 })
      const refused = outcomes.find((lines) => !lines.some((line) => line.event === "started"))!
      assert.deepStrictEqual(refused, [{ event: "failed", tag: "ExecutionLeaseHeld" }])
    }), { timeout: 180_000 })

  it.effect("a paused lease holder is fenced: another host takes over, and the holder's late write is refused", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const gate = `${path}.gate`
      const a = start("sqliteLeaseHost.ts", [path, "host-a", "paused", gate, "1500", "execute"])
      yield* Effect.addFinalizer(() => Effect.sync(() => kill(a.child)))
      yield* Effect.promise(() => a.waitFor((line) => line.includes("started")))
      a.child.kill("SIGSTOP")
      // Real time past the lease's ttl, as a stopped process cannot renew it.
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 2500)))
      Fs.writeFileSync(gate, "")
      const b = start("sqliteLeaseHost.ts", [path, "host-b", "paused", gate, "1500", "resume"])
      yield* Effect.addFinalizer(() => Effect.sync(() => kill(b.child)))
      assert.strictEqual(yield* Effect.promise(() => b.exited), 0, b.stderr())
      assert.deepStrictEqual(events(b).at(-1), { event: "done", output: 20 })

      a.child.kill("SIGCONT")
      assert.strictEqual(yield* Effect.promise(() => a.exited), 0, a.stderr())
      assert.deepStrictEqual(events(a).at(-1), { event: "failed", tag: "ExecutionLeaseLost" }, a.lines.join("\n"))

      const storage = yield* SqliteStorage.make({ path })
      const stored = JSON.stringify(yield* storage.scan!(""))
      assert.include(stored, "ran by host-b")
      assert.notInclude(stored, "ran by host-a")
    }), { timeout: 180_000 })

  it.effect("a writer killed with SIGKILL mid-transaction leaves the database consistent, with every acknowledged write", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const recordValue = (round: number, i: number) => ({ round, i, pad: `${round}:${i}:`.padEnd(64 * 1024, "x") })
      let nextRound = 0
      for (let kills = 0; kills < 3; kills++) {
        const writer = start("sqliteWriter.ts", ["write", path, String(nextRound)])
        yield* Effect.addFinalizer(() => Effect.sync(() => kill(writer.child)))
        yield* Effect.promise(() => writer.waitFor((line) => line === `acked ${nextRound + 2}`))
        // A round is 1 MiB in one transaction: the writer spends nearly all its time in one.
        writer.child.kill("SIGKILL")
        yield* Effect.promise(() => writer.exited)
        const acked = Math.max(...writer.lines.map((line) => Number(line.split(" ")[1])))

        const check = new DatabaseSync(path, { readOnly: true })
        check.exec("PRAGMA busy_timeout = 10000")
        const integrity = check.prepare("PRAGMA integrity_check").all()
        check.close()
        assert.deepStrictEqual(integrity, [{ integrity_check: "ok" }])

        const storage = yield* SqliteStorage.make({ path })
        const rows = yield* storage.scan!("r:")
        const byRound = new Map<number, number>()
        for (const [key, value] of rows) {
          const [, round, i] = key.split(":").map(Number)
          assert.deepStrictEqual(value, recordValue(round!, i!), key)
          byRound.set(round!, (byRound.get(round!) ?? 0) + 1)
        }
        for (let round = 0; round <= acked; round++) assert.strictEqual(byRound.get(round), 16, `round ${round}`)
        nextRound = Math.max(...byRound.keys()) + 1
      }
    }), { timeout: 180_000 })
})
