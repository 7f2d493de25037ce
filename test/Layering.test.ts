/**
 * Imports follow the layers: client -> schema -> services -> harness -> layers -> http
 * -> promise / cli (testing and inspector sit beside them), nothing imports from a
 * layer above it, and no modules import each other in a cycle.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"

const SRC = Path.resolve(import.meta.dirname, "../src")

/**
 * The rank of each part of `src`: a module may import modules of its own rank or
 * below. `client/` (the browser client entry) is alone at the bottom: it imports
 * nothing of the rest of `src` (no Node built-ins reach a browser through it).
 * `Errors.ts`/`IpcError.ts` sit with the schemas; `internal/` helpers with the services
 * (they serve every layer above); `NoeticHome.ts` (default storages on disk) with the
 * layers; `http/` (the HTTP server and the Durable Streams routes) above the services
 * and layers it serves, below the facade and the CLI that start it; `inspector/` (the
 * web inspector, started by `noetic inspect`) beside the CLI whose read model it shows;
 * `index.ts` re-exports everything.
 */
const rankOf = (file: string): number => {
  const relative = Path.relative(SRC, file).split(Path.sep)
  const top = relative.length === 1 ? relative[0]! : `${relative[0]}/`
  switch (top) {
    case "client/":
      return 0
    case "Errors.ts":
    case "IpcError.ts":
    case "schema/":
      return 1
    case "services/":
    case "internal/":
      return 2
    case "harness/":
      return 3
    case "layers/":
    case "NoeticHome.ts":
    case "NoeticImport.ts":
      return 4
    case "http/":
      return 5
    case "promise/":
    case "cli/":
    case "inspector/":
    case "testing/":
      return 6
    case "index.ts":
      return 7
    default:
      throw new Error(`no layer assigned to src/${relative.join("/")}: add it to rankOf`)
  }
}

const LAYER_NAMES = ["client", "schema", "services", "harness", "layers", "http", "promise/cli/inspector/testing", "index"]

/** Every relative import (static, dynamic or type-only) of a source file's text, resolved. */
const importsOf = (file: string, text: string): ReadonlyArray<string> => {
  const found: Array<string> = []
  const pattern = /(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g
  for (const match of text.matchAll(pattern)) found.push(Path.resolve(Path.dirname(file), match[1]!))
  return found
}

const sourceFiles = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = Path.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(full)
    return entry.name.endsWith(".ts") ? [full] : []
  })

/** Every import of `files` (path and text) that reaches a layer above its importer. */
const upwardImports = (files: ReadonlyArray<readonly [string, string]>): ReadonlyArray<string> =>
  files.flatMap(([file, text]) =>
    importsOf(file, text).flatMap((target) => {
      if (!target.startsWith(SRC)) return []
      const from = rankOf(file)
      const to = rankOf(target)
      return to > from
        ? [`${Path.relative(SRC, file)} (${LAYER_NAMES[from]}) imports ${Path.relative(SRC, target)} (${LAYER_NAMES[to]})`]
        : []
    })
  )

/**
 * The import cycles among `files` (path and text), each as its modules relative to
 * `src`, sorted: the strongly connected components of more than one module, or of one
 * module that imports itself.
 */
const importCycles = (files: ReadonlyArray<readonly [string, string]>): ReadonlyArray<ReadonlyArray<string>> => {
  const graph = new Map(files.map(([file, text]) => [file, importsOf(file, text)] as const))
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const cycles: Array<ReadonlyArray<string>> = []
  const visit = (module: string): void => {
    index.set(module, index.size)
    low.set(module, index.get(module)!)
    stack.push(module)
    onStack.add(module)
    for (const target of graph.get(module) ?? []) {
      if (!graph.has(target)) continue
      if (!index.has(target)) {
        visit(target)
        low.set(module, Math.min(low.get(module)!, low.get(target)!))
      } else if (onStack.has(target)) {
        low.set(module, Math.min(low.get(module)!, index.get(target)!))
      }
    }
    if (low.get(module) !== index.get(module)) return
    const component: Array<string> = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== module)
    if (component.length > 1 || graph.get(module)!.includes(module)) {
      cycles.push(component.map((file) => Path.relative(SRC, file)).sort())
    }
  }
  for (const module of graph.keys()) if (!index.has(module)) visit(module)
  return cycles
}

describe("layering", () => {
  it("no module of src imports from a layer above its own", () => {
    const files = sourceFiles(SRC).map((file) => [file, Fs.readFileSync(file, "utf8")] as const)
    expect(upwardImports(files)).toEqual([])
  })

  it("the check catches an upward import, static, dynamic or type-only", () => {
    const bad = Path.join(SRC, "services", "Bad.ts")
    const text = [
      `import type { AgentHarness } from "../harness/AgentHarness.ts"`,
      `import { Step } from "../Errors.ts"`,
      `const lazy = () => import("../layers/FileStorage.ts")`
    ].join("\n")
    expect(upwardImports([[bad, text]])).toEqual([
      "services/Bad.ts (services) imports harness/AgentHarness.ts (harness)",
      "services/Bad.ts (services) imports layers/FileStorage.ts (layers)"
    ])
  })

  it("no module of src is part of an import cycle, type-only imports included", () => {
    const files = sourceFiles(SRC).map((file) => [file, Fs.readFileSync(file, "utf8")] as const)
    expect(importCycles(files)).toEqual([])
  })

  it("the cycle check catches a cycle through a type-only import", () => {
    const at = (path: string) => Path.join(SRC, path)
    expect(importCycles([
      [at("harness/A.ts"), `import type { B } from "./B.ts"`],
      [at("harness/B.ts"), `import { C } from "../services/C.ts"`],
      [at("services/C.ts"), `import type { A } from "../harness/A.ts"`],
      [at("services/D.ts"), `import { C } from "./C.ts"`]
    ])).toEqual([["harness/A.ts", "harness/B.ts", "services/C.ts"]])
  })

  it("every file of src has a layer", () => {
    for (const file of sourceFiles(SRC)) expect(() => rankOf(file)).not.toThrow()
  })
})
