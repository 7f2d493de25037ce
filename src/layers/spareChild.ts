/**
 * The local adapter's prewarmed spare child (`prewarm: true`, docs/subprocesses.md#prewarmed-spare-child):
 * one `node` process started ahead of time exactly as a child is (same node, execArgv,
 * environment and root, detached in its own process group, its output in a log under
 * the run directory, a result pipe on fd 3), run as
 * `node [execArgv] subprocessChild.js --noetic-subprocess-child --noetic-spare --root <root> --result-fd 3`.
 * It loads the child's module graph, opens the subprocess storage, writes `w` on fd 3
 * and waits on its stdin for one line: `{ handleId, cwd }`. From there it is the child
 * of that handle, as if spawned with `--handle`: it reads its manifest, imports its step
 * module, runs, persists and signals its result.
 *
 * A spare is handed a spawn only when its execArgv and environment are the ones the
 * spawn would start a child with; otherwise (or when it has died) it is killed and the
 * spawn starts a child the ordinary way. Its log file is renamed to the handle's log
 * path at assignment (the open descriptor follows the file). The host keeps no other
 * tie to an assigned spare than to a spawned child.
 *
 * An unassigned spare never outlives its host: its stdin is a pipe from the host, and
 * it exits when that pipe ends (the host died, even by SIGKILL, or the adapter closed).
 * Closing the adapter's scope also kills it (SIGKILL to its group) and waits for it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as NodeChildProcess from "node:child_process"
import type * as NodeNet from "node:net"
import * as NodePath from "node:path"
import { childProcess, nodeCrypto, nodeFs as Fs } from "../internal/builtins.ts"
import { CHILD_FLAG, RESULT_FD_FLAG, SPARE_FLAG } from "../internal/childFlag.ts"
import { logPathOf, openLog } from "../internal/localChildren.ts"
import type { SubprocessManifest } from "../schema/SubprocessManifest.ts"

/** What a spare is started with: what the adapter starts its children with. */
export interface SpareOptions {
  readonly node: string
  /** The child bootstrap (`subprocessChild.js`). */
  readonly bootstrap: string
  /** Arguments every child gets after its own (the resolution memo's directory). */
  readonly childArgs: ReadonlyArray<string>
  /** The subprocess root. */
  readonly root: string
  /** Where the spare's log goes until it is assigned. */
  readonly runDir: string
  /** The environment a child started now gets (compile cache included). */
  readonly env: () => Readonly<Record<string, string | undefined>>
  /** Readies what a child start needs (the compile cache directory); false when a child cannot be started. */
  readonly prepare: () => boolean
  /** The execArgv of the first spare; undefined: none until a spawn shows which. */
  readonly execArgv: ReadonlyArray<string> | undefined
}

/** The adapter's spare. */
export interface Spares {
  /**
   * Hands the child of `manifest` (recorded, pid not yet) to the spare when one waits
   * and fits `execArgv` and the current environment, and returns its process; else
   * undefined (the caller starts a child itself). Either way a new spare is started.
   */
  readonly assign: (manifest: SubprocessManifest, execArgv: ReadonlyArray<string>) => Effect.Effect<NodeChildProcess.ChildProcess | undefined>
}

interface Spare {
  readonly proc: NodeChildProcess.ChildProcess
  readonly execArgv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string | undefined>>
  readonly log: string
  ready: boolean
  exited: boolean
  /** Removes the pool's listeners (at assignment: the process is the adapter's child then). */
  release: () => void
}

/** How long after an assignment the next spare starts, unless the assigned child exits sooner: its start does not compete with the child's. */
const REPLACE_AFTER_MS = 250

/** Spares that die unassigned, in a row, before the adapter stops replacing them until its next spawn. */
const MAX_DEATHS = 3

const sameArgv = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => a.length === b.length && a.every((x, i) => x === b[i])

const sameEnv = (a: Readonly<Record<string, string | undefined>>, b: Readonly<Record<string, string | undefined>>) => {
  const keys = Object.keys(a).filter((key) => a[key] !== undefined)
  return keys.length === Object.keys(b).filter((key) => b[key] !== undefined).length && keys.every((key) => a[key] === b[key])
}

const isRunning = (proc: NodeChildProcess.ChildProcess) => proc.exitCode === null && proc.signalCode === null

/** Kills an unassigned spare's group (it leads one) and removes its log. */
const discard = (spare: Spare) => {
  spare.proc.stdin?.destroy()
  ;(spare.proc.stdio[3] as NodeNet.Socket | null | undefined)?.destroy()
  if (!spare.exited && isRunning(spare.proc) && spare.proc.pid !== undefined) {
    try {
      process.kill(-spare.proc.pid, "SIGKILL")
    } catch {
      // Already gone.
    }
  }
  Fs.rm(spare.log, { force: true }, () => {})
}

/** The spare of an adapter, for the life of the current scope (see the module doc). */
export const makeSpares = (options: SpareOptions): Effect.Effect<Spares, never, Scope.Scope> =>
  Effect.gen(function*() {
    let current: Spare | undefined
    let closed = false
    let deaths = 0
    let lastExecArgv = options.execArgv
    const timers = new Set<ReturnType<typeof setTimeout>>()

    const start = (): void => {
      if (closed || current !== undefined || lastExecArgv === undefined || deaths >= MAX_DEATHS || !options.prepare()) return
      const execArgv = lastExecArgv
      const env = { ...options.env() }
      const log = NodePath.join(options.runDir, `spare-${nodeCrypto().randomBytes(8).toString("hex")}.log`)
      let fd: number | undefined
      let proc: NodeChildProcess.ChildProcess
      try {
        fd = openLog(log)
        proc = childProcess().spawn(
          options.node,
          [...execArgv, options.bootstrap, CHILD_FLAG, SPARE_FLAG, "--root", options.root, RESULT_FD_FLAG, "3", ...options.childArgs],
          { detached: true, stdio: ["pipe", fd, fd, "pipe"], env }
        )
      } catch {
        deaths++
        Fs.rm(log, { force: true }, () => {})
        return
      } finally {
        if (fd !== undefined) Fs.closeSync(fd)
      }
      const spare: Spare = { proc, execArgv, env, log, ready: false, exited: false, release: () => {} }
      current = spare
      // Neither the process nor its pipes keep the host alive.
      proc.unref()
      const stdin = proc.stdin as NodeNet.Socket | null
      stdin?.unref()
      stdin?.on("error", () => {})
      const notice = proc.stdio[3] as NodeNet.Socket | null | undefined
      notice?.unref()
      notice?.on("error", () => {})
      const onReady = (chunk: Buffer) => {
        if (chunk.includes(0x77 /* w */)) spare.ready = true
      }
      notice?.on("data", onReady)
      const onExit = () => {
        spare.exited = true
        if (current !== spare) return
        current = undefined
        discard(spare)
        // One that got ready and then died (killed by someone) is replaced; one that
        // never got ready (it cannot start) counts toward MAX_DEATHS.
        deaths = spare.ready ? 0 : deaths + 1
        start()
      }
      proc.once("error", onExit)
      proc.once("exit", onExit)
      spare.release = () => {
        // Held until the adapter reads it: a result byte is not dropped meanwhile.
        notice?.off("data", onReady)
        notice?.pause()
        proc.off("error", onExit)
        proc.off("exit", onExit)
        proc.on("error", () => {})
      }
    }

    /** Starts the next spare once the assigned child has exited, or REPLACE_AFTER_MS later. */
    const replaceAfter = (assigned: NodeChildProcess.ChildProcess | undefined) => {
      if (assigned === undefined) return start()
      const timer = setTimeout(go, REPLACE_AFTER_MS)
      timer.unref()
      timers.add(timer)
      function go() {
        clearTimeout(timer)
        timers.delete(timer)
        assigned!.off("exit", go)
        start()
      }
      if (isRunning(assigned)) assigned.once("exit", go)
      else go()
    }

    yield* Effect.addFinalizer(() =>
      Effect.promise(() => {
        closed = true
        for (const timer of timers) clearTimeout(timer)
        timers.clear()
        const spare = current
        current = undefined
        if (spare === undefined) return Promise.resolve()
        const gone = spare.exited || !isRunning(spare.proc)
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 2_000)
            spare.proc.once("exit", () => {
              clearTimeout(timer)
              resolve()
            })
          })
        discard(spare)
        return gone
      })
    )

    start()

    const assign = (manifest: SubprocessManifest, execArgv: ReadonlyArray<string>) =>
      Effect.sync((): NodeChildProcess.ChildProcess | undefined => {
        deaths = 0
        lastExecArgv = execArgv
        const spare = current
        current = undefined
        if (spare === undefined) {
          start()
          return undefined
        }
        spare.release()
        const stdin = spare.proc.stdin
        const fits = !spare.exited && isRunning(spare.proc) && stdin !== null && stdin.writable &&
          sameArgv(spare.execArgv, execArgv) && sameEnv(spare.env, options.env())
        if (fits) {
          try {
            // The log becomes the handle's: the spare's descriptor follows the file.
            Fs.renameSync(spare.log, logPathOf(manifest.socketPath!))
            stdin.end(JSON.stringify({ handleId: manifest.handleId, cwd: manifest.cwdInit ?? process.cwd() }) + "\n")
            replaceAfter(spare.proc)
            return spare.proc
          } catch {
            // Not handed over: it goes, and the caller starts a child itself.
          }
        }
        discard(spare)
        replaceAfter(undefined)
        return undefined
      })

    return { assign } satisfies Spares
  })
