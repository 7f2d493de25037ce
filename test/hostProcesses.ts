/**
 * Real host processes for the crash tests: a fixture host whose stdout lines are
 * read one by one, a SIGKILL that waits for the exit, and a temp directory whose
 * recorded children are killed (by verified process group) when the scope closes.
 */
import { Effect, Option } from "effect"
import type { Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { isAlive } from "../src/internal/procStat.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import type { StorageError } from "../src/Errors.ts"
import { loadManifest, MANIFEST_PREFIX } from "../src/services/SubprocessRecords.ts"

export interface HostProcess {
  readonly proc: ChildProcess.ChildProcess
  /** The next line the host printed, parsed as JSON; a defect when the host exited first. */
  readonly nextLine: Effect.Effect<any>
}

/** Starts `script` (run through tsx) with `args`; the scope SIGKILLs it if it is still alive. */
export const startHost = (
  script: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv = process.env
): Effect.Effect<HostProcess, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", script, ...args], {
        stdio: ["ignore", "pipe", "inherit"],
        env
      })
      const lines = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
      const nextLine = Effect.promise(() => lines.next()).pipe(
        Effect.flatMap((next) => next.done ? Effect.die(new Error("the host exited early")) : Effect.succeed(JSON.parse(next.value)))
      )
      return { proc, nextLine }
    }),
    ({ proc }) => Effect.sync(() => proc.exitCode === null && proc.signalCode === null && proc.kill("SIGKILL"))
  )

/** SIGKILLs `proc` and waits until it has exited. */
export const sigkill = (proc: ChildProcess.ChildProcess): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resume(Effect.void)
    proc.once("exit", () => resume(Effect.void))
    proc.kill("SIGKILL")
  })

/**
 * A fresh temp directory (named by `prefix`); when the scope closes, every child
 * recorded in the subprocess storage `storageOf(dir)` opens that is still alive is
 * killed with its process group.
 */
export const crashDirectory = (
  prefix: string,
  storageOf: (dir: string) => Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope>
): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) =>
      Effect.scoped(Effect.gen(function*() {
        const storage = yield* storageOf(dir)
        for (const key of yield* storage.list(MANIFEST_PREFIX)) {
          const manifest = yield* loadManifest(storage, key.slice(MANIFEST_PREFIX.length))
          if (Option.isNone(manifest) || manifest.value.pid === null) continue
          if (yield* isAlive(manifest.value.pid, manifest.value.pidStarttime)) process.kill(-manifest.value.pid, "SIGKILL")
        }
      })).pipe(Effect.ignore)
  )
