/**
 * Small helpers over Node's errors and processes shared by the file storage and its
 * logs, and the CLI.
 *
 * @internal
 */

/** The `code` of a Node system error (`ENOENT`, `EPERM`, ...), when it has one. */
export const errorCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/**
 * Whether a process with this pid exists: signal 0 checks without signalling; `EPERM`
 * means it exists and belongs to another user.
 */
export const isProcessAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (cause) {
    return errorCode(cause) === "EPERM"
  }
}
