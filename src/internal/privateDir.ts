/**
 * Directories that hold sockets, child logs and compile caches: only ones this user
 * owns, that are not symbolic links, and that nobody else can write. Another user who
 * can write such a directory could replace a socket (and feed a host forged frames),
 * swap a log for a symlink, or plant cached code a child loads. See
 * docs/operations-failclosed.md ("The run directory").
 *
 * @internal
 */
import { nodeFs as Fs } from "./builtins.ts"
import { makeDirectorySync } from "./makeDirectory.ts"

/** What a directory must not allow: `shared` forbids writes by group and others; `private` any access by them (0700). */
export type DirectoryRule = "shared" | "private"

/**
 * Why `path` may not hold sockets, logs or caches, or undefined when it may: checked
 * with lstat, so a symbolic link is refused rather than followed.
 */
export const directoryProblem = (path: string, rule: DirectoryRule): string | undefined => {
  let stat: import("node:fs").Stats
  try {
    stat = Fs.lstatSync(path)
  } catch (cause) {
    return `cannot be read (${(cause as NodeJS.ErrnoException).code ?? "error"})`
  }
  if (stat.isSymbolicLink()) return "is a symbolic link"
  if (!stat.isDirectory()) return "is not a directory"
  const uid = process.getuid?.()
  if (uid !== undefined && stat.uid !== uid) return `is owned by uid ${stat.uid}, not by this process's uid ${uid}`
  const mode = stat.mode & 0o777
  const forbidden = rule === "private" ? 0o077 : 0o022
  if ((mode & forbidden) !== 0) {
    return `has mode 0${mode.toString(8)}, which lets ${rule === "private" ? "other users in" : "other users write in it"}`
  }
  return undefined
}

/**
 * Creates `path` (and its parents) 0700 when missing, then checks it with
 * {@link directoryProblem}: a directory someone else made first is refused, never
 * used. Returns the problem, or undefined when the directory is safe to use.
 */
export const ensureDirectory = (path: string, rule: DirectoryRule): string | undefined => {
  try {
    makeDirectorySync(path, 0o700)
  } catch (cause) {
    // EEXIST of a non-directory, or a parent that cannot be created: the check says which.
    if ((cause as NodeJS.ErrnoException).code !== "EEXIST") {
      return `cannot be created (${(cause as NodeJS.ErrnoException).code ?? "error"})`
    }
  }
  return directoryProblem(path, rule)
}
