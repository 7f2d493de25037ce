/**
 * The kill -9 soak: a real host process runs a durable workflow on file storage and
 * is SIGKILLed at a random moment; a restarted host (a fresh harness and storage in
 * the test process) resumes it. Every cycle must reach
 * the crash-free output, leave every record readable, and re-run no step more than
 * once (a step recorded before the kill never runs again; only those in flight may).
 * Prints `kill -9 soak: <cycles> cycles, <mid-run> killed mid-run, <same> same output`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { journal, SOAK_ID, soakGraph } from "../fixtures/soakSteps.ts"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import * as FileStorage from "../../src/layers/FileStorage.ts"

const hostScript = Path.join(import.meta.dirname, "..", "fixtures", "soakHost.ts")
const CYCLES = Number(process.env.NOETIC_SOAK_CYCLES ?? 30)

interface Host {
  readonly proc: ChildProcess.ChildProcess
  readonly lines: Array<Record<string, unknown>>
  readonly exited: Promise<void>
  readonly nextLine: () => Promise<Record<string, unknown> | undefined>
}

const startHost = (root: string, journal: string): Host => {
  const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", hostScript, root, journal], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  const lines: Array<Record<string, unknown>> = []
  const iterator = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()))
  return {
    proc,
    lines,
    exited,
    nextLine: async () => {
      const next = await iterator.next()
      if (next.done) return undefined
      const parsed = JSON.parse(next.value) as Record<string, unknown>
      lines.push(parsed)
      return parsed
    }
  }
}

/** Fails a stage of a cycle that hangs, instead of the whole soak waiting for its timeout. */
const bounded = (what: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutOrElse(effect, { duration: "60 seconds", orElse: () => Effect.die(new Error(what)) })

/** How many step bodies have run so far, by the journal. */
const journaled = (path: string): number => {
  try {
    return Fs.readFileSync(path, "utf8").split("\n").length - 1
  } catch {
    return 0
  }
}

/** Runs a host to completion and returns its output line. */
const runToEnd = async (root: string, journal: string) => {
  const host = startHost(root, journal)
  try {
    for (;;) {
      const line = await host.nextLine()
      if (line === undefined) throw new Error("the host exited without an output")
      if ("output" in line) return line.output
    }
  } finally {
    await host.exited
  }
}

/** Resumes (or, killed before its first snapshot, starts) the soak run on `root` in this process. */
const resumeHere = (root: string, journalPath: string) =>
  Effect.gen(function*() {
    journal.path = journalPath
    const storage = yield* FileStorage.make({ root })
    const store = yield* CheckpointStore.makeWith(storage)
    const harness = yield* AgentHarness.make({ name: "soak", agentGraph: soakGraph }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
    const resumed = yield* harness.resume(SOAK_ID)
    return Option.isSome(resumed) ? resumed.value.output : (yield* harness.execute(1, { executionId: SOAK_ID })).output
  }).pipe(Effect.scoped, Effect.ensuring(Effect.sync(() => void (journal.path = ""))))

describe("kill -9 soak (real host processes on file storage)", () => {
  it.live(`${CYCLES} cycles of SIGKILL at a random moment, then resume`, () =>
    Effect.gen(function*() {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-soak-"))
      // The crash-free output, from a host that is not killed.
      const expected = yield* Effect.promise(() => runToEnd(Path.join(base, "reference"), Path.join(base, "reference.log")))
      let midRun = 0
      let same = 0
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        const root = Path.join(base, `cycle-${cycle}`)
        const journal = Path.join(base, `cycle-${cycle}.log`)
        const host = startHost(root, journal)
        // Whatever happens to this cycle, its host does not outlive it.
        yield* Effect.addFinalizer(() => Effect.sync(() => host.proc.exitCode === null && host.proc.kill("SIGKILL")))
        const started = yield* Effect.promise(() => host.nextLine()).pipe(bounded(`cycle ${cycle}: the host never started`))
        assert.deepStrictEqual(started, { started: true })
        // A random moment of the run, by progress rather than by time: once the host's
        // bodies have journaled a random number of steps (of the run's 36).
        const target = Math.floor(Math.random() * 36)
        while (journaled(journal) < target && host.proc.exitCode === null) yield* Effect.sleep("1 millis")
        const finishedBeforeKill = host.proc.exitCode !== null
        host.proc.kill("SIGKILL")
        yield* Effect.promise(() => host.exited)
        if (!finishedBeforeKill && host.proc.signalCode === "SIGKILL") midRun++

        // The resume: a fresh harness over a fresh storage handle on the same root (the
        // test process plays the restarted host, which saves a process start per cycle).
        const output = yield* resumeHere(root, journal).pipe(bounded(`cycle ${cycle}: the resume never finished`))
        assert.deepStrictEqual(output, expected, `cycle ${cycle}`)
        same++

        // Every record is readable, and no step ran more than twice (killed in flight, then again).
        const storage = yield* FileStorage.make({ root })
        for (const key of yield* storage.list("")) yield* storage.get(key)
        const ran = Fs.readFileSync(journal, "utf8").split("\n").filter((line) => line !== "")
        const counts = new Map<string, number>()
        for (const path of ran) counts.set(path, (counts.get(path) ?? 0) + 1)
        for (const [path, n] of counts) assert.isAtMost(n, 2, `cycle ${cycle}: ${path} ran ${n} times`)
        const reran = [...counts.values()].filter((n) => n === 2).length
        // At most the two parallel branches of one round, or one combine step, were in flight.
        assert.isAtMost(reran, 2, `cycle ${cycle}: ${reran} steps ran twice`)
      }
      console.log(`kill -9 soak: ${CYCLES} cycles, ${midRun} killed mid-run, ${same} same output`)
      assert.isAtLeast(midRun, Math.floor(CYCLES / 2), "most kills should land mid-run")
    }).pipe(Effect.scoped), { timeout: 600_000 })
})
