/**
 * `mkdir -p` that always ends. Node's own `mkdir(path, { recursive: true })` never
 * returns for a path under a directory that refuses new entries with ENOENT, such as
 * `/proc/x`: it retries the parent forever. These walk up one level at a time instead
 * and fail with the error of the deepest directory that could not be made.
 *
 * @internal
 */
import * as NodePath from "node:path"
import { fsPromises, nodeFs as Fs } from "./builtins.ts"

const codeOf = (cause: unknown): unknown => (cause as { code?: unknown } | null)?.code

const parentOf = (path: string): string | undefined => {
  const parent = NodePath.dirname(path)
  return parent === path ? undefined : parent
}

/** Creates `path` and its missing parents with `mode`; an existing directory is fine. */
export const makeDirectorySync = (path: string, mode: number): void => {
  try {
    Fs.mkdirSync(path, { mode })
    return
  } catch (cause) {
    const code = codeOf(cause)
    if (code === "EEXIST" && Fs.statSync(path).isDirectory()) return
    const parent = parentOf(path)
    if (code !== "ENOENT" || parent === undefined) throw cause
  }
  makeDirectorySync(parentOf(path)!, mode)
  try {
    Fs.mkdirSync(path, { mode })
  } catch (cause) {
    if (!(codeOf(cause) === "EEXIST" && Fs.statSync(path).isDirectory())) throw cause
  }
}

/** {@link makeDirectorySync} without blocking the thread. */
export const makeDirectory = async (path: string, mode: number): Promise<void> => {
  const fs = fsPromises()
  const isDirectory = async () => (await fs.stat(path)).isDirectory()
  try {
    await fs.mkdir(path, { mode })
    return
  } catch (cause) {
    const code = codeOf(cause)
    if (code === "EEXIST" && await isDirectory()) return
    const parent = parentOf(path)
    if (code !== "ENOENT" || parent === undefined) throw cause
  }
  await makeDirectory(parentOf(path)!, mode)
  try {
    await fs.mkdir(path, { mode })
  } catch (cause) {
    if (!(codeOf(cause) === "EEXIST" && await isDirectory())) throw cause
  }
}
