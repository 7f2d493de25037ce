/**
 * The argv flag that marks a process as a subprocess child, in a module of its own so
 * that the adapter can name it without importing the child bootstrap: a bootstrap
 * imported by the library would run its main block in every module graph holding the
 * library, and a child importing a second copy of the library (a step module that
 * imports the built package while the bootstrap runs from source) would start a
 * second IPC server on its socket.
 *
 * @internal
 */

/** The argv flag that marks a process as a subprocess child. */
export const CHILD_FLAG = "--noetic-subprocess-child"

/**
 * The argv flag naming the file descriptor (a pipe to the host that spawned the child)
 * on which a child on its quiet path writes one byte once its result is persisted: the
 * host reads the record then, rather than when the process is gone.
 */
export const RESULT_FD_FLAG = "--result-fd"

/**
 * The argv flag of a prewarmed spare child (`prewarm`, see `layers/spareChild.ts`): it
 * has no `--handle`; it loads the child's modules, then reads its handle from stdin.
 */
export const SPARE_FLAG = "--noetic-spare"

/**
 * The argv flag naming the directory (the adapter's compile cache, only its user can
 * write it) where a child keeps its module resolution memo across children (see
 * `internal/resolveMemo.ts`). Given only to a built bootstrap: from source, a loader
 * such as tsx answers from files a developer edits.
 */
export const RESOLVE_MEMO_FLAG = "--resolve-memo"

const started = Symbol.for("noetic-effect/subprocessChild/started")

/**
 * Claims this process's one child run: true the first time it is called in a
 * process, false after, however many copies of the library the process loaded.
 */
export const claimChildRun = (): boolean => {
  const registry = globalThis as { [started]?: boolean }
  if (registry[started] === true) return false
  registry[started] = true
  return true
}

const importing = Symbol.for("noetic-effect/subprocessChild/importingStepModule")

/**
 * Runs `load` (an import of a step module) marked, in a child process, as its import
 * of its step module, for every copy of the library in the process: a module that
 * starts a child while it is imported (top-level side effects) would otherwise start
 * one in every child, without end. A host's imports are not marked: its other work
 * goes on meanwhile.
 */
export const whileImportingStepModule = <A>(load: () => Promise<A>): Promise<A> => {
  if (!process.argv.includes(CHILD_FLAG)) return load()
  const registry = globalThis as { [importing]?: number }
  registry[importing] = (registry[importing] ?? 0) + 1
  return load().finally(() => {
    registry[importing] = (registry[importing] ?? 1) - 1
  })
}

/** Whether this process is a child importing its step module now. */
export const importingStepModule = (): boolean => ((globalThis as { [importing]?: number })[importing] ?? 0) > 0
