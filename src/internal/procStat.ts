/**
 * Process identity on Linux: a pid plus its start time from `/proc/<pid>/stat`, so a
 * pid the kernel recycled for another process is never mistaken for the child.
 * Without `/proc` (macOS) the start time is unknown and liveness falls back to
 * `kill(pid, 0)`, which cannot tell a recycled pid apart.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { fsPromises } from "./builtins.ts"

/** What `/proc/<pid>/stat` says about a process. */
export interface ProcStat {
  /** The state letter (R, S, D, Z, ...). */
  readonly state: string
  /** Field 22: clock ticks after boot at which the process started. */
  readonly startTime: number
}

/** Parses a `/proc/<pid>/stat` line. Field 2 is `(comm)`, which may hold spaces and parens, so fields are read after the last `)`. */
export const parseStat = (text: string): ProcStat | undefined => {
  const close = text.lastIndexOf(")")
  if (close < 0) return undefined
  // After ") " come fields 3, 4, ...: field n sits at index n - 3.
  const fields = text.slice(close + 2).trim().split(/\s+/)
  const startTime = Number(fields[22 - 3])
  const state = fields[0]
  return state === undefined || !Number.isSafeInteger(startTime) ? undefined : { state, startTime }
}

/** Whether this machine has `/proc` stat files. */
export const hasProc: Effect.Effect<boolean> = Effect.promise(() =>
  fsPromises().access("/proc/self/stat").then(() => true, () => false)
)

/** The stat of `pid`, or undefined when there is no such process (or no `/proc`). */
export const readStat = (pid: number): Effect.Effect<ProcStat | undefined> =>
  Effect.promise(() => fsPromises().readFile(`/proc/${pid}/stat`, "utf8").then(parseStat, () => undefined))

const signalZero = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (cause) {
    return typeof cause === "object" && cause !== null && "code" in cause && cause.code === "EPERM"
  }
}

/**
 * Whether the process `pid` that started at `startTime` still runs. A different start
 * time means the pid was recycled: that process is not ours. A zombie counts as gone.
 * Where `/proc` exists, a pid recorded without its start time (the process was gone
 * before it could be read) cannot be told from a recycled one, so it counts as gone.
 */
export const isAlive = (pid: number, startTime: number | null): Effect.Effect<boolean> =>
  Effect.flatMap(hasProc, (proc) => {
    if (!proc) return Effect.sync(() => signalZero(pid))
    if (startTime === null) return Effect.succeed(false)
    return Effect.map(readStat(pid), (stat) =>
      stat !== undefined && stat.state !== "Z" && stat.state !== "X" && stat.startTime === startTime)
  })
