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
 * @internal
 */

import type { ResolveFnOutput, ResolveHookContext } from "node:module"

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

/**
 * Installs the memo for this process (Node's `module.registerHooks`; where Node lacks
 * it, nothing is installed and `end` does nothing), serving imports made by modules
 * under `node_modules` and under `ownDirectory` (a `file:` URL ending in `/`). Modules
 * imported statically by the caller are already resolved: install it first, then
 * `import()` the rest.
 */
export const installResolveMemo = (ownDirectory: string): ResolveMemo => {
  const Module = process.getBuiltinModule("node:module")
  let hits = 0
  if (typeof Module.registerHooks !== "function") return { hits: () => hits, end: () => {} }
  let memo: Map<string, ResolveFnOutput> | undefined = new Map()
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
      }
      return resolved
    }
  })
  return {
    hits: () => hits,
    end: () => {
      memo = undefined
    }
  }
}
