/**
 * The seed page's "survive a host crash" on the defaults: manifests, queues and
 * checkpoints in the SQLite databases under `$NOETIC_HOME`, real processes, SIGKILL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { isAlive } from "../src/internal/procStat.ts"
import * as NoeticHome from "../src/NoeticHome.ts"
import { loadManifest } from "../src/services/SubprocessRecords.ts"
import { crashDirectory, sigkill, startHost } from "./hostProcesses.ts"

const hostScript = Path.join(import.meta.dirname, "fixtures", "sqliteCrashHost.ts")

/** A host process under `home`; SIGKILLed when the scope closes. */
const hostUnder = (home: string, args: ReadonlyArray<string>) =>
  startHost(hostScript, args, { ...process.env, NOETIC_HOME: home })

/** A home whose recorded children are killed when the scope closes. */
const crashHome = crashDirectory("nsqc-", (home) => NoeticHome.makeSubprocessStorage(home))

describe("Survive a host crash on the default SQLite storage (real processes)", () => {
  it.live("a child keeps running through the host's SIGKILL; the next host reattaches it from subprocess.db", () =>
    Effect.gen(function*() {
      const home = yield* crashHome
      const release = Path.join(home, "release")
      const first = yield* hostUnder(home, ["spawn", release])
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

      const second = yield* hostUnder(home, ["reattach", release])
      const found = yield* second.nextLine
      assert.deepStrictEqual(found.handles, [{ handleId, stepId: "waitForRelease", parent: parentId }])
      assert.strictEqual(found.failures, 0)
      assert.strictEqual(found.contexts[0].id, parentId)
      assert.deepStrictEqual(found.contexts[0].items.map((item: { id: string }) => item.id), ["u1"])

      Fs.writeFileSync(release, "go")
      const { results } = yield* second.nextLine
      assert.deepStrictEqual(results, [{ handleId, output: { echoed: "job-1", pid }, status: "completed" }])
      const third = yield* hostUnder(home, ["reattach", release])
      assert.deepStrictEqual((yield* third.nextLine).handles, [])
    }), { timeout: 60_000 })
})
