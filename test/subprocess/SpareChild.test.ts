/**
 * The local adapter's prewarmed spare child (`prewarm: true`), with real OS processes:
 * a spawn is handed to the waiting spare (the child's pid is the spare's), runs and
 * returns; the next spawn gets the next spare; an unassigned spare goes with its
 * adapter's scope and with its host (SIGKILL); a host killed after handing a spawn to a
 * spare leaves that child running, and a new host reattaches it and reads its result.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { isAlive, readStat } from "../../src/internal/procStat.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as LocalSubprocessAdapter from "../../src/layers/LocalSubprocessAdapter.ts"
import { loadManifest } from "../../src/services/SubprocessRecords.ts"
import { double, waitForRelease } from "../fixtures/subprocessSteps.ts"
import { sparePids } from "../fixtures/spares.ts"
import { crashDirectory, sigkill, startHost } from "../hostProcesses.ts"

const hostScript = Path.join(import.meta.dirname, "..", "fixtures", "subprocessHost.ts")

const tempBase = Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsp-")))

const waitUntil = <A>(probe: Effect.Effect<A | undefined>) =>
  Effect.gen(function*() {
    for (;;) {
      const found = yield* probe
      if (found !== undefined) return found
      yield* Effect.sleep("20 millis")
    }
  })

/**
 * The pid of the one spare waiting for `root`, once there is one. A child handed to a
 * spare keeps the spare's command line: `assigned` are those.
 */
const spareOf = (root: string, assigned: ReadonlyArray<number> = []) =>
  waitUntil(Effect.sync(() => {
    const pids = sparePids(root).filter((pid) => !assigned.includes(pid))
    assert.isAtMost(pids.length, 1, "one spare at a time")
    return pids[0]
  }))

const gone = (pid: number) => waitUntil(Effect.map(readStat(pid), (stat) => (stat === undefined || stat.state === "Z" ? true : undefined)))

describe("LocalSubprocessAdapter prewarm (real processes)", () => {
  for (const kind of ["file", "sqlite"] as const) {
    it.live(`spawns are handed to spares (${kind} root): each child is the spare that waited, and returns its result`, () =>
      Effect.gen(function*() {
        const base = yield* tempBase
        const root = Path.join(base, kind === "file" ? "subprocess" : "subprocess.db")
        const { assigned, next } = yield* Effect.scoped(Effect.gen(function*() {
          const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, prewarm: true })
          const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
          const parent = yield* harness.createContext()
          const assigned: Array<number> = []
          for (const n of [1, 2]) {
            const spare = yield* spareOf(root, assigned)
            const handle = yield* harness.detachedSpawn(double, n * 10, parent)
            assert.strictEqual(handle.metadata?.pid, spare, `spawn ${n} went to the waiting spare`)
            assert.strictEqual(yield* handle.await, n * 20)
            assigned.push(spare)
          }
          // The next spare waits; it goes with the adapter's scope.
          const next = yield* spareOf(root, assigned)
          assert.isTrue(yield* Effect.map(readStat(next), (stat) => stat !== undefined))
          return { assigned, next }
        }))
        // The spare went with the scope (the children went on their own, done).
        yield* gone(next)
        yield* Effect.forEach(assigned, gone)
        assert.deepStrictEqual(sparePids(root), [])
        // Its log went with it; the children's logs went with their success.
        assert.deepStrictEqual(Fs.readdirSync(Path.join(base, "run")).filter((name) => name.endsWith(".log")), [])
      }), { timeout: 60_000 })
  }

  it.live("an assigned spare is a child like any other: stopped by the adapter's scope, its records in place", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const manifest = yield* Effect.scoped(Effect.gen(function*() {
        const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, prewarm: true, stopGraceMs: 2_000 })
        const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
        const spare = yield* spareOf(root)
        const handle = yield* harness.detachedSpawn(waitForRelease, { release: Path.join(base, "never"), value: "v" }, yield* harness.createContext())
        const recorded = Option.getOrThrow(yield* loadManifest(yield* FileStorage.make({ root }), handle.handleId))
        assert.strictEqual(recorded.pid, spare)
        assert.strictEqual(recorded.pidStarttime, (yield* readStat(spare))!.startTime)
        assert.deepStrictEqual((yield* adapter.listLive).map((h) => h.handleId), [handle.handleId])
        return recorded
      }))
      assert.isFalse(yield* isAlive(manifest.pid!, manifest.pidStarttime))
      assert.deepStrictEqual(sparePids(root), [])
    }), { timeout: 60_000 })

  it.live("a spare that died is replaced, and a spawn meanwhile starts its own child", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, prewarm: true })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const parent = yield* harness.createContext()
      const killed = yield* spareOf(root)
      process.kill(killed, "SIGKILL")
      yield* gone(killed)
      // Whichever comes first, the replacement or a child of its own, the spawn runs.
      const handle = yield* harness.detachedSpawn(double, 21, parent)
      assert.notStrictEqual(handle.metadata?.pid, killed)
      assert.strictEqual(yield* handle.await, 42)
      const replacement = yield* spareOf(root, [handle.metadata?.pid as number])
      assert.notStrictEqual(replacement, killed)
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("a spare started with another environment than a spawn's is not handed it: the spawn starts its own child", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, prewarm: true })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const stale = yield* spareOf(root)
      // The host's environment changes after the spare started: a child started now gets the new one.
      yield* Effect.acquireRelease(
        Effect.sync(() => (process.env.NOETIC_SPARE_TEST = "changed")),
        () => Effect.sync(() => delete process.env.NOETIC_SPARE_TEST)
      )
      const handle = yield* harness.detachedSpawn(double, 5, yield* harness.createContext())
      assert.notStrictEqual(handle.metadata?.pid, stale)
      assert.strictEqual(yield* handle.await, 10)
      yield* gone(stale)
      // Its replacement has the new environment.
      const next = yield* spareOf(root, [handle.metadata?.pid as number])
      assert.include(Fs.readFileSync(`/proc/${next}/environ`, "utf8").split("\0"), "NOETIC_SPARE_TEST=changed")
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("a host killed with SIGKILL: its spare exits, the child it was handed runs on and a new host reattaches it", () =>
    Effect.gen(function*() {
      const base = yield* crashDirectory("nsp-", (dir) => FileStorage.make({ root: Path.join(dir, "subprocess") }))
      const root = Path.join(base, "subprocess")
      const release = Path.join(base, "release")
      const first = yield* startHost(hostScript, [base, "spawn-spare", release])
      const { handleId, sparePid, nextSpare } = yield* first.nextLine
      const storage = yield* FileStorage.make({ root })
      const manifest = Option.getOrThrow(yield* loadManifest(storage, handleId))
      assert.strictEqual(manifest.pid, sparePid, "the spawn went to the spare")
      assert.notStrictEqual(nextSpare, sparePid)

      yield* sigkill(first.proc)
      assert.isTrue(yield* isAlive(manifest.pid!, manifest.pidStarttime), "the child survives its host")
      // The next spare, never assigned, ends with its host.
      yield* gone(nextSpare)
      assert.deepStrictEqual(sparePids(root), [sparePid], "nothing but the assigned child")

      const second = yield* startHost(hostScript, [base, "reattach", release])
      assert.deepStrictEqual((yield* second.nextLine).handles.map((h: { handleId: string }) => h.handleId), [handleId])
      Fs.writeFileSync(release, "go")
      const { results } = yield* second.nextLine
      assert.deepStrictEqual(results, [{ handleId, output: { echoed: "job-1", pid: sparePid }, status: "completed" }])
      yield* gone(sparePid)
    }).pipe(Effect.scoped), { timeout: 120_000 })
})
