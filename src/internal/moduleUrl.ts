/**
 * Where code lives, read from stack traces: the module that built a step (so a child
 * process can import it) and this library's own files (so its frames are skipped).
 * Stack traces work the same under ESM, CJS, tsx and a bundle, where `import.meta.url`
 * does not (a CJS bundle has none).
 *
 * @internal
 */
import * as NodePath from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

// "at fn (file:///a/b.ts:1:2)", "at file:///a/b.ts:1:2", "at /a/b.js:1:2"
const FRAME_FILE = /(?:\(|at )((?:file:\/\/)?\/[^()]*?):\d+:\d+\)?\s*$/

/** The current stack, captured (V8 formats its text only when `.stack` is first read). */
const captureStack = (): Error => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 64
  const trace = new Error()
  Error.stackTraceLimit = limit
  return trace
}

/** The file URLs of the current stack's frames, innermost first (frames without a file are left out). */
export const stackFileUrls = (): Array<string> => fileUrlsOf(captureStack())

/** The file URLs of the frames of a captured stack, innermost first. */
const fileUrlsOf = (trace: { readonly stack?: string | undefined }): Array<string> => {
  const stack = trace.stack ?? ""
  const urls: Array<string> = []
  for (const line of stack.split("\n").slice(1)) {
    const match = FRAME_FILE.exec(line)
    if (match === null) continue
    const file = match[1]!
    // Loaders (tsx) may decorate a URL with a query; the module is the file.
    const url = file.startsWith("file://") ? file.replace(/[?#].*$/, "") : pathToFileURL(file).href
    urls.push(url)
  }
  return urls
}

/** The file URL of this module itself (in a bundle, the chunk it was bundled into). */
export const ownFileUrl: string = stackFileUrls()[0] ?? pathToFileURL(NodePath.resolve("unknown.js")).href

/** The directory every file of this library sits below: `src/` from source, `dist/` when built. */
const libraryDir: string = (() => {
  const dir = NodePath.dirname(fileURLToPath(ownFileUrl))
  return NodePath.basename(dir) === "internal" ? NodePath.dirname(dir) : dir
})()

const isLibraryOrDependency = (url: string): boolean => {
  const path = fileURLToPath(url)
  return path.startsWith(libraryDir + NodePath.sep) || path.includes(`${NodePath.sep}node_modules${NodePath.sep}`)
}

/**
 * The file URL of the first module on the stack outside this library and outside
 * `node_modules`: the module that called a step builder. Undefined when there is none.
 */
export const callerModuleUrl = (): string | undefined => stackFileUrls().find((url) => !isLibraryOrDependency(url))

/**
 * How many frames below a step builder its captured stack keeps: the builder's caller,
 * and room for a few frames of a helper package (in `node_modules`) before the first
 * module outside it. Each frame costs: ~1 us to capture, ~3 us right after the
 * thread slept in an fsync (a durable step that builds the next one inline pays that).
 */
const CALLER_FRAMES = 4

/**
 * The first module outside this library and `node_modules` among the callers of
 * `below` (a function on the stack now), worked out when the returned function is first
 * called: the frames are captured now, their text formatted (the costly part) only then.
 */
export const callerModuleUrlLater = (below: (...args: ReadonlyArray<never>) => unknown): () => string | undefined => {
  let trace: { stack?: string } | undefined = {}
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = CALLER_FRAMES
  Error.captureStackTrace(trace, below)
  Error.stackTraceLimit = limit
  let url: string | undefined
  return () => {
    if (trace !== undefined) {
      url = fileUrlsOf(trace).find((found) => !isLibraryOrDependency(found))
      trace = undefined
    }
    return url
  }
}

/** The file URL of a module next to this library's own files, with this file's extension (`.ts`, `.js`, `.cjs`). */
export const siblingModuleUrl = (name: string, subdir: string): string => {
  const ownPath = fileURLToPath(ownFileUrl)
  const ext = NodePath.extname(ownPath)
  // From source the sibling sits in its own src/ subdirectory; a bundle puts every entry in dist/.
  const dir = ext === ".ts" ? NodePath.join(libraryDir, subdir) : libraryDir
  return pathToFileURL(NodePath.join(dir, `${name}${ext}`)).href
}

/** A module given as a path or a URL, as a URL `import()` takes. */
export const toModuleUrl = (module: string): string =>
  /^[a-z][a-z0-9+.-]*:/i.test(module) && !/^[a-z]:[\\/]/i.test(module)
    ? module
    : pathToFileURL(NodePath.resolve(module)).href
