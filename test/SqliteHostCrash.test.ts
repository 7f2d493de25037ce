/**
 * The seed page's "survive a host crash" on the defaults: manifests, queues and
 * checkpoints in the SQLite databases under `$NOETIC_HOME`, real processes, SIGKILL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { isAlive } from "../src/internal/procStat.ts"
import * as NoeticHome from "../src/NoeticHome.ts"
import { loadManifest, MANIFEST_PREFIX } from "../src/schema/SubprocessManifest.ts"

const hostScript = Path.join(import.meta.dirname, "fixtures", "sqliteCrashHost.ts")

/** A host process under `home`, whose stdout lines are read one by one; SIGKILLed when the scope closes. */
const startHost = (home: string, args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", hostScript, ...args], {
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, NOETIC_HOME: home }
      })
      const lines = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
      const nextLine = Effect.promise(() => lines.next()).pipe(
        Effect.flatMap((next) => next.done ? Effect.die(new Error("the host exited early")) : Effect.succeed(JSON.parse(next.value)))
      )
      return { proc, nextLine }
    }),
    ({ proc }) => Effect.sync(() => proc.exitCode === null && proc.signalCode === null && proc.kill("SIGKILL"))
  )

const sigkill = (proc: ChildProcess.ChildProcess) =>
  Effect.callback<void>((resume) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resume(Effect.void)
    proc.once("exit", () => resume(Effect.void))
    proc.kill("SIGKILL")
  })

/** A home whose recorded children are killed (by verified process group) when the scope closes. */
const crashHome = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsqc-"))),
  (home) =>
    Effect.scoped(Effect.gen(function*() {
      const storage = yield* NoeticHome.makeSubprocessStorage(home)
      for (const key of yield* storage.list(MANIFEST_PREFIX)) {
        const manifest = yield* loadManifest(storage, key.slice(MANIFEST_PREFIX.length))
        if (Option.isNone(manifest) || manifest.value.pid === null) continue
        if (yield* isAlive(manifest.value.pid, manifest.value.pidStarttime)) process.kill(-manifest.value.pid, "SIGKILL")
      }
    })).pipe(Effect.ignore)
)

describe("Survive a host crash on the default SQLite storage (real processes)", () => {
  it.live("a child keeps running through the host's SIGKILL; the next host reattaches it from subprocess.db", () =>
    Effect.gen(function*() {
      const home = yield* crashHome
      const release = Path.join(home, "release")
      const first = yield* startHost(home, ["spawn", release])
      const { handleId, parentId } = yield* first.nextLine
      const manifest = yield* Effect.scoped(Effect.flatMap(NoeticHome.makeSubprocessStorage(home), (storage) => loadManifest(storage, handleId)))
      const { pid, pidStarttime } = Option.getOrThrow(manifest)
      assert.isNotNull(pid)

      yield* sigkill(first.proc)
      assert.isTrue(yield* isAlive(pid!, pidStarttime), "the child survives its host")
      // Everything durable is in the home's two databases; sockets are in run/.
      const r = NoeticHome.roots(home)
      assert.isTrue(Fs.statSync(r.subprocessDatabase).isFile())
      assert.isTrue(Fs.statSync(r.checkpointsDatabase).isFile())
      assert.deepStrictEqual(Fs.readdirSync(r.subprocess).filter((name) => !name.startsWith("subprocess.db")), [])

      const second = yield* startHost(home, ["reattach", release])
      const found = yield* second.nextLine
      assert.deepStrictEqual(found.handles, [{ handleId, stepId: "waitForRelease", parent: parentId }])
      assert.strictEqual(found.failures, 0)
      assert.strictEqual(found.contexts[0].id, parentId)
      assert.deepStrictEqual(found.contexts[0].items.map((item: { id: string }) => item.id), ["u1"])

      Fs.writeFileSync(release, "go")
      const { results } = yield* second.nextLine
      assert.deepStrictEqual(results, [{ handleId, output: { echoed: "job-1", pid }, status: "completed" }])
      const third = yield* startHost(home, ["reattach", release])
      assert.deepStrictEqual((yield* third.nextLine).handles, [])
    }), { timeout: 60_000 })
})
