/**
 * What the local subprocess adapter (`layers/LocalSubprocessAdapter.ts`) keeps of a
 * child and the helpers around it: its defaults, signalling a child's process group,
 * the run directory's checks (this user's alone, see `privateDir.ts`) and the child's
 * log file beside its socket.
 *
 * @since 0.1.0
 */
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as NodePath from "node:path"
import type * as IpcClient from "../layers/IpcClient.ts"
import type { SubprocessManifest } from "../schema/SubprocessManifest.ts"
import {
  ChildExited,
  type HandleStatus,
  SpawnFailed,
  stopped,
  SubprocessError,
  type SubprocessHandle,
  UnsafeDirectory
} from "../services/SubprocessAdapter.ts"
import { SubprocessOutcome } from "../services/SubprocessRecords.ts"
import { nodeFs as Fs } from "./builtins.ts"
import { directoryProblem, type DirectoryRule, ensureDirectory } from "./privateDir.ts"

export const DEFAULT_STOP_GRACE_MS = 5_000
export const DEFAULT_LINGER_MS = 60_000
export const DEFAULT_POLL_MS = 200
/** Leaves room under the ~104-byte `sun_path` limit (the IPC server adds a private dir beside it). */
export const MAX_SOCKET_PATH_BYTES = 90

export interface Child {
  readonly manifest: SubprocessManifest
  readonly handle: SubprocessHandle
  readonly result: Deferred.Deferred<unknown, SubprocessError>
  /** Signalled by the `exit` event of a process this host spawned: checks liveness at once. */
  readonly exited: Deferred.Deferred<void>
  /** Signalled when a child this host spawned says (on its result pipe) that its result is persisted. */
  readonly persisted: Deferred.Deferred<void>
  readonly scope: Scope.Closeable
  status: HandleStatus
  stopping: boolean
  /**
   * The reason given to the `stop` that stopped it (noetic's `stopReason`), or read from
   * its `Stopped` result when another host or an operator stopped it.
   */
  stopReason: string | undefined
  /** Started by this host (so its exit event is seen), not reattached. */
  spawnedHere: boolean
  /** Suspended by `pause` (SIGSTOP) until `resume`. */
  paused: boolean
  client: IpcClient.IpcClientShape | undefined
  /** Another host's client took the child's stream (`bye`): its result goes there. */
  takenOver: boolean
}

/**
 * How a child that ended without recording a result settles: stopped (with the reason
 * given) when this host stopped it, else exited, naming the host that took its result
 * when another one took its stream over.
 */
export const exitedWithoutResult = (child: Child): SubprocessOutcome => {
  const handleId = child.manifest.handleId
  if (child.stopping) return { _tag: "Failure", error: stopped(handleId, child.stopReason).reason }
  return {
    _tag: "Failure",
    error: new ChildExited({
      handleId,
      message: child.takenOver
        // Its result went to the host that took the stream over, which settled and cleared it.
        ? `child ${handleId} (pid ${child.manifest.pid}) was reattached by another host, which took its result`
        : `child ${handleId} (pid ${child.manifest.pid}) ended without a result`
    })
  }
}

export const spawnFailed = (handleId: string, message: string, cause: unknown) =>
  new SubprocessError({ reason: new SpawnFailed({ handleId, message, cause }) })

export const causeMessage = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

export const signalChild = (manifest: SubprocessManifest, signal: NodeJS.Signals) => {
  try {
    // A step child leads its own group (spawned detached), so -pid reaches it and
    // everything it started; so does a process child spawned detached. Any other
    // process child shares the host's group and gets the signal alone.
    process.kill(manifest.process === undefined || manifest.process.detached ? -manifest.pid! : manifest.pid!, signal)
  } catch {
    // Already gone.
  }
}

export const decodeOutcome = Schema.decodeUnknownEffect(SubprocessOutcome)

/**
 * Creates `dir` 0700 when missing and fails `UnsafeDirectory` unless it is this user's
 * alone (see `directoryProblem`): sockets, logs and compile caches never go in a
 * directory someone else made or can write.
 */
export const ensureRunDirectory = (dir: string, rule: DirectoryRule, preferred?: string) =>
  Effect.suspend(() => {
    const problem = ensureDirectory(dir, rule)
    return problem === undefined ? Effect.void : Effect.fail(unsafeDirectory("run directory", dir, problem, preferred))
  })

export const unsafeDirectory = (what: string, dir: string, problem: string, preferred?: string) =>
  new SubprocessError({
    reason: new UnsafeDirectory({
      path: dir,
      message: `the ${what} ${dir} ${problem}: another user could replace its sockets, logs or cached code, so ` +
        `it is not used. Remove it if nothing in it is yours (rm -rf ${dir}), or ` +
        (preferred === undefined || preferred === dir
          ? "make it yours alone (chown to this user, chmod 700)"
          : `pass runDir (or a shorter NOETIC_HOME) so the run directory ${preferred} fits a socket path`)
    })
  })

/** Fails `UnsafeDirectory` unless the directory of a recorded socket is this user's alone: a reattaching host connects to no socket another user could have put there. */
export const checkSocketDirectory = (socketPath: string) =>
  Effect.suspend(() => {
    const dir = NodePath.dirname(socketPath)
    const problem = directoryProblem(dir, "shared")
    return problem === undefined ? Effect.void : Effect.fail(unsafeDirectory("socket directory", dir, problem))
  })

/** A child's stdout and stderr go to a log file beside its socket. */
export const logPathOf = (socketPath: string) => socketPath.replace(/\.sock$/, ".log")

/** Opens a child's log for appending, 0600, never through a symbolic link. */
export const openLog = (path: string) =>
  Fs.openSync(path, Fs.constants.O_WRONLY | Fs.constants.O_APPEND | Fs.constants.O_CREAT | Fs.constants.O_NOFOLLOW, 0o600)
