/**
 * noetic's portable adapters, for `environment.fs` / `environment.shell`:
 * `createInMemoryFsAdapter(seed?)`, a process-local POSIX-like filesystem (absolute
 * paths, `.`/`..` resolved, parent directories made on write, errors worded as Node's
 * `ENOENT` / `EISDIR` / `ENOTDIR` / `ENOTEMPTY`), and `createInMemoryShellAdapter()`,
 * which runs nothing and answers exit code 127. As in noetic, a harness given no
 * `environment.fs` / `shell` uses a fresh one of each (docs/runtime.md#tools).
 *
 * @since 0.2.0
 */
import type { FsAdapter, FsStats, ShellAdapter } from "./ipc.ts"

type Entry = { readonly kind: "file"; readonly bytes: Uint8Array } | { readonly kind: "dir" }

/** `path` made absolute, `.` and `..` resolved, no trailing slash. */
const normalize = (path: string): string => {
  const parts: Array<string> = []
  for (const part of path.trim().split("/")) {
    if (part === "" || part === ".") continue
    if (part === "..") parts.pop()
    else parts.push(part)
  }
  return `/${parts.join("/")}`
}

const parentOf = (path: string): string => {
  const at = path.lastIndexOf("/")
  return at <= 0 ? "/" : path.slice(0, at)
}

const fsError = (code: string, what: string, operation: string, path: string): Error =>
  Object.assign(new Error(`${code}: ${what}, ${operation} '${path}'`), { code })

const statsOf = (entry: Entry): FsStats => ({
  size: entry.kind === "file" ? entry.bytes.byteLength : 0,
  isDirectory: () => entry.kind === "dir",
  isSymbolicLink: () => false,
  isFile: () => entry.kind === "file"
})

/** noetic's `createInMemoryFsAdapter(seed?)`: `seed` maps paths to file contents (text or bytes). */
export const createInMemoryFsAdapter = (seed: Readonly<Record<string, string | Uint8Array>> = {}): FsAdapter => {
  const entries = new Map<string, Entry>([["/", { kind: "dir" }]])
  const makeDir = (path: string): void => {
    const existing = entries.get(path)
    if (existing !== undefined) {
      if (existing.kind !== "dir") throw fsError("ENOTDIR", "not a directory", "mkdir", path)
      return
    }
    makeDir(parentOf(path))
    entries.set(path, { kind: "dir" })
  }
  const write = (path: string, bytes: Uint8Array): void => {
    const at = normalize(path)
    if (entries.get(at)?.kind === "dir") throw fsError("EISDIR", "illegal operation on a directory", "write", at)
    makeDir(parentOf(at))
    entries.set(at, { kind: "file", bytes: bytes.slice() })
  }
  const entryAt = (path: string, operation: string): Entry => {
    const at = normalize(path)
    const entry = entries.get(at)
    if (entry === undefined) throw fsError("ENOENT", "no such file or directory", operation, at)
    return entry
  }
  const fileAt = (path: string, operation: string): Uint8Array => {
    const entry = entryAt(path, operation)
    if (entry.kind !== "file") throw fsError("EISDIR", "illegal operation on a directory", operation, normalize(path))
    return entry.bytes
  }
  const below = (dir: string): Array<string> =>
    [...entries.keys()].filter((key) => key !== dir && key.startsWith(dir === "/" ? "/" : `${dir}/`))
  for (const [path, content] of Object.entries(seed)) {
    write(path, typeof content === "string" ? new TextEncoder().encode(content) : content)
  }
  const run = async <A>(f: () => A): Promise<A> => f()
  return {
    readFile: (path) => run(() => Buffer.from(fileAt(path, "open"))),
    readFileText: (path) => run(() => new TextDecoder().decode(fileAt(path, "open"))),
    writeFile: (path, content) => run(() => write(path, new TextEncoder().encode(content))),
    writeFileBytes: (path, content) => run(() => write(path, new Uint8Array(content))),
    appendFile: (path, content) =>
      run(() => {
        const at = normalize(path)
        const current = entries.has(at) ? fileAt(at, "open") : new Uint8Array()
        const added = new TextEncoder().encode(content)
        const joined = new Uint8Array(current.byteLength + added.byteLength)
        joined.set(current)
        joined.set(added, current.byteLength)
        write(at, joined)
      }),
    mkdir: (dir) => run(() => makeDir(normalize(dir))),
    rename: (oldPath, newPath) =>
      run(() => {
        const from = normalize(oldPath)
        const to = normalize(newPath)
        entryAt(from, "rename")
        makeDir(parentOf(to))
        const moved = [from, ...below(from)].map((key) => [key, entries.get(key)!] as const)
        for (const [key] of moved) entries.delete(key)
        for (const [key, value] of moved) entries.set(`${to}${key.slice(from.length)}`, value)
      }),
    rm: (path, options) =>
      run(() => {
        const at = normalize(path)
        const entry = entries.get(at)
        if (entry === undefined) {
          if (options?.force === true) return
          throw fsError("ENOENT", "no such file or directory", "rm", at)
        }
        const children = below(at)
        if (entry.kind === "dir" && children.length > 0 && options?.recursive !== true) {
          throw fsError("ENOTEMPTY", "directory not empty", "rm", at)
        }
        for (const key of children) entries.delete(key)
        if (at !== "/") entries.delete(at)
      }),
    access: (path) => run(() => void entryAt(path, "access")),
    stat: (path) => run(() => statsOf(entryAt(path, "stat"))),
    lstat: (path) => run(() => statsOf(entryAt(path, "lstat"))),
    readdir: (path) =>
      run(() => {
        const at = normalize(path)
        if (entryAt(at, "scandir").kind !== "dir") throw fsError("ENOTDIR", "not a directory", "scandir", at)
        return below(at).filter((key) => parentOf(key) === at).map((key) => key.slice(key.lastIndexOf("/") + 1)).sort()
      })
  }
}

/** noetic's `createInMemoryShellAdapter()`: runs no process; every command answers exit code 127. */
export const createInMemoryShellAdapter = (): ShellAdapter => ({
  exec: async (command) => ({
    stdout: "",
    stderr: `Shell execution is not available in the default in-memory adapter: ${command}`,
    exitCode: 127
  })
})
