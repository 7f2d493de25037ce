/**
 * Memoised module resolution for a child process's start.
 *
 * A child imports some 180 modules before its step body starts (the library, Effect's
 * Schema graph, the step module), and Node resolves every `import` statement on its
 * own: an import of `effect/Effect` found in eleven chunks is looked up eleven times
 * (node_modules walk, package exports, stat, realpath, package type), and Effect's own
 * modules import `./Function.js` from one directory dozens of times. Resolution then
 * costs more than evaluating the modules.
 *
 * What an ESM `import` resolves to depends only on the specifier, the importing
 * module's directory, the conditions and the import attributes (and on the file
 * system, which does not change while a child starts). So the first resolution of each
 * such key (with the importer's extension, for a loader such as tsx that maps `./x.js`
 * to `./x.ts` by importer) is Node's own, through any hooks registered before, and
 * later imports of the same key from the same directory reuse it. It serves only
 * imports made by installed packages (a module under a `node_modules` directory) and by
 * the library's own modules (under the directory given): the step module and the
 * user's other files resolve through Node and their own loaders every time, whatever
 * those loaders key on. A resolution that fails is not kept; `require()` (its `paths`
 * option makes a lookup depend on more than the directory), parents or results with a
 * query or fragment, and `node:` built-ins always go to Node.
 *
 * Given a directory (`persistIn`: the adapter's compile cache directory, which only its
 * user can write), the memo is also kept across children: a child starts from the file
 * the last one wrote there (one file per node version, execArgv, NODE_OPTIONS and bootstrap) and
 * writes what it added once loaded, or at exit. The file holds stamps (modification
 * time and size) of what its answers depend on: the bootstrap file (a rebuilt library
 * has new chunks), each package's `package.json` (its exports and type) and each
 * `node_modules` directory (a package added or removed) its answers lead into; a child
 * that finds one changed, or the file unreadable, starts from an empty memo and writes a
 * new file. Only answers into those (the library's own directory and installed
 * packages) are kept; a resolution that fails is still not kept.
 *
 * @internal
 */

import type { ResolveFnOutput, ResolveHookContext } from "node:module"

/** The persisted memo's format; a file of another version is ignored. */
const PERSISTED_VERSION = 1

/** What `installResolveMemo` returns: `end` stops memoising (later imports resolve as Node would alone). */
export interface ResolveMemo {
  /** Resolutions served from the memo so far. */
  readonly hits: () => number
  /** Stops memoising and forgets what was kept. */
  readonly end: () => void
}

/** The memo key of an import made by a module under `ownDirectory` or `node_modules`, or undefined when it must go to Node. */
const keyOf = (specifier: string, context: ResolveHookContext, ownDirectory: string): string | undefined => {
  const parent = context.parentURL
  if (parent === undefined || !parent.startsWith("file:") || parent.includes("?") || parent.includes("#")) return undefined
  if (!parent.startsWith(ownDirectory) && !parent.includes("/node_modules/")) return undefined
  if (specifier.startsWith("node:") || !context.conditions.includes("import")) return undefined
  const attributes = Object.keys(context.importAttributes)
  const attributeText = attributes.length === 0
    ? ""
    : JSON.stringify(attributes.sort().map((name) => [name, context.importAttributes[name]]))
  // Node's answer depends on the directory alone; the importer's extension is in the key
  // too, for hooks before this one (a TypeScript loader) that map `./x.js` by importer.
  const directoryEnd = parent.lastIndexOf("/") + 1
  const dot = parent.lastIndexOf(".")
  const extension = dot >= directoryEnd ? parent.slice(dot) : ""
  return `${parent.slice(0, directoryEnd)}\0${extension}\0${specifier}\0${context.conditions.join(",")}\0${attributeText}`
}

/** FNV-1a of `text`, as 8 hex digits: names the persisted memo file without loading node:crypto. */
const fnv1a = (text: string): string => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  return (hash >>> 0).toString(16).padStart(8, "0")
}

/** A file's stamp: modification time and size, or null when it is missing. */
type Stamp = readonly [path: string, mtimeMs: number, size: number] | readonly [path: string, missing: null]

/** The paths whose stamps the answer `url` depends on: the package.json and node_modules directory of its package. */
const stampPathsOf = (url: string): ReadonlyArray<string> => {
  const at = url.lastIndexOf("/node_modules/")
  if (at < 0) return []
  const rest = url.slice(at + "/node_modules/".length).split("/")
  const name = rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!
  const { fileURLToPath } = process.getBuiltinModule("node:url")
  const modules = fileURLToPath(url.slice(0, at + "/node_modules".length))
  return [modules, fileURLToPath(`${url.slice(0, at)}/node_modules/${name}/package.json`)]
}

/** The stamp of `path` now. */
const stampOf = (fs: typeof import("node:fs"), path: string): Stamp => {
  const stat = fs.statSync(path, { throwIfNoEntry: false })
  return stat === undefined ? [path, null] : [path, stat.mtimeMs, stat.size]
}

/** The memo entries a persisted file holds, or undefined when it is missing, malformed or stale. */
const readPersisted = (
  fs: typeof import("node:fs"),
  file: string
): Map<string, ResolveFnOutput> | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(fs.readFileSync(file, "utf8"))
  } catch {
    return undefined
  }
  const { entries, stamps, version } = parsed as { version?: unknown; stamps?: unknown; entries?: unknown }
  if (version !== PERSISTED_VERSION || !Array.isArray(stamps) || !Array.isArray(entries)) return undefined
  for (const stamp of stamps as ReadonlyArray<Stamp>) {
    if (!Array.isArray(stamp) || typeof stamp[0] !== "string") return undefined
    const now = stampOf(fs, stamp[0])
    if (now[1] !== stamp[1] || now[2] !== stamp[2]) return undefined
  }
  const memo = new Map<string, ResolveFnOutput>()
  for (const entry of entries as ReadonlyArray<unknown>) {
    if (!Array.isArray(entry)) return undefined
    const [key, url, format, importAttributes] = entry as [unknown, unknown, unknown, unknown]
    if (typeof key !== "string" || typeof url !== "string" || !url.startsWith("file:")) return undefined
    if (format !== null && typeof format !== "string") return undefined
    if (importAttributes !== null && (typeof importAttributes !== "object" || Array.isArray(importAttributes))) return undefined
    memo.set(key, {
      url,
      ...(format === null ? {} : { format }),
      ...(importAttributes === null ? {} : { importAttributes: importAttributes as Record<string, string> })
    })
  }
  return memo
}

/**
 * Installs the memo for this process (Node's `module.registerHooks`; where Node lacks
 * it, nothing is installed and `end` does nothing), serving imports made by modules
 * under `node_modules` and under `ownDirectory` (a `file:` URL ending in `/`). Modules
 * imported statically by the caller are already resolved: install it first, then
 * `import()` the rest. With `persist` (`bootstrap`: the path of the running child
 * bootstrap; `directory`: where the memo file lives), it starts from the memo the last
 * child wrote and writes what it added (see the module doc).
 */
export const installResolveMemo = (
  ownDirectory: string,
  persist?: { readonly directory: string; readonly bootstrap: string }
): ResolveMemo => {
  const Module = process.getBuiltinModule("node:module")
  let hits = 0
  if (typeof Module.registerHooks !== "function") return { hits: () => hits, end: () => {} }
  const fs = persist === undefined ? undefined : process.getBuiltinModule("node:fs")
  const file = persist === undefined
    ? undefined
    : `${persist.directory}/resolve-memo-${
      fnv1a([process.version, persist.bootstrap, process.env.NODE_OPTIONS ?? "", ...process.execArgv].join("\0"))
    }.json`
  let memo: Map<string, ResolveFnOutput> | undefined = (fs !== undefined && file !== undefined ? readPersisted(fs, file) : undefined) ??
    new Map()
  // Kept across children only when its stamps cover it: an answer into the library or an installed package.
  const kept = (url: string) => url.startsWith(ownDirectory) || url.includes("/node_modules/")
  // Answers to keep found since the memo was read: the file is rewritten once, if any.
  let added = 0
  /** Writes the memo (a new file renamed over the old one); a failure only loses the cache. */
  const save = () => {
    if (fs === undefined || file === undefined || memo === undefined || added === 0) return
    added = 0
    try {
      const stampPaths = new Set<string>([persist!.bootstrap])
      const entries: Array<ReadonlyArray<unknown>> = []
      for (const [key, answer] of memo) {
        if (!kept(answer.url)) continue
        for (const path of stampPathsOf(answer.url)) stampPaths.add(path)
        entries.push([key, answer.url, answer.format ?? null, answer.importAttributes ?? null])
      }
      const stamps = [...stampPaths].map((path) => stampOf(fs, path))
      const temp = `${file}.${process.pid}.tmp`
      fs.writeFileSync(temp, JSON.stringify({ version: PERSISTED_VERSION, stamps, entries }), { mode: 0o600 })
      fs.renameSync(temp, file)
    } catch {
      // A cache: the next child resolves as Node does.
    }
  }
  if (file !== undefined) process.once("exit", save)
  Module.registerHooks({
    resolve: (specifier, context, next) => {
      const key = memo === undefined ? undefined : keyOf(specifier, context, ownDirectory)
      if (key === undefined) return next(specifier, context)
      const known = memo!.get(key)
      if (known !== undefined) {
        hits++
        return { ...known, shortCircuit: true }
      }
      const resolved = next(specifier, context)
      if (resolved.url.startsWith("file:") && !resolved.url.includes("?") && !resolved.url.includes("#")) {
        memo!.set(key, { url: resolved.url, format: resolved.format, importAttributes: resolved.importAttributes })
        if (kept(resolved.url)) added++
      }
      return resolved
    }
  })
  return {
    hits: () => hits,
    end: () => {
      save()
      memo = undefined
    }
  }
}
