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
