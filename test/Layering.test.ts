/**
 * Imports follow the layers: schema -> services -> harness -> layers -> promise / cli
 * (testing sits beside promise), and nothing imports from a layer above it.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"

const SRC = Path.resolve(import.meta.dirname, "../src")

/**
 * The rank of each part of `src`: a module may import modules of its own rank or
 * below. `Errors.ts`/`IpcError.ts` sit with the schemas at the bottom; `internal/`
 * helpers with the services (they serve every layer above); `NoeticHome.ts` (default
 * storages on disk) with the layers; `index.ts` re-exports everything.
 */
const rankOf = (file: string): number => {
  const relative = Path.relative(SRC, file).split(Path.sep)
  const top = relative.length === 1 ? relative[0]! : `${relative[0]}/`
  switch (top) {
    case "Errors.ts":
    case "IpcError.ts":
    case "schema/":
      return 0
    case "services/":
    case "internal/":
      return 1
    case "harness/":
      return 2
    case "layers/":
    case "NoeticHome.ts":
    case "NoeticImport.ts":
      return 3
    case "promise/":
    case "cli/":
    case "testing/":
      return 4
    case "index.ts":
      return 5
    default:
      throw new Error(`no layer assigned to src/${relative.join("/")}: add it to rankOf`)
  }
}

const LAYER_NAMES = ["schema", "services", "harness", "layers", "promise/cli/testing", "index"]

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
 * Upward imports of the subprocess code that issue 10 is reshaping right now; each
 * goes when that work lands (the adapters then receive a step's id and module, and
 * reattachLiveChildren moves to the harness). Nothing may be added here.
 */
const PENDING = new Set([
  "schema/SubprocessManifest.ts (schema) imports services/SubprocessAdapter.ts (services)",
  "schema/SubprocessManifest.ts (schema) imports services/DurableOutboundQueue.ts (services)",
  "schema/SubprocessManifest.ts (schema) imports services/StorageAdapter.ts (services)",
  "services/SubprocessAdapter.ts (services) imports harness/AgentContext.ts (harness)",
  "services/SubprocessAdapter.ts (services) imports harness/AgentHarness.ts (harness)",
  "services/SubprocessAdapter.ts (services) imports harness/Step.ts (harness)",
  "internal/manifests.ts (services) imports harness/AgentHarness.ts (harness)",
  "internal/stepLoader.ts (services) imports harness/Step.ts (harness)"
])

describe("layering", () => {
  it("no module of src imports from a layer above its own", () => {
    const files = sourceFiles(SRC).map((file) => [file, Fs.readFileSync(file, "utf8")] as const)
    const upward = upwardImports(files).filter((line) => !PENDING.has(line))
    expect(upward).toEqual([])
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

  it("every file of src has a layer", () => {
    for (const file of sourceFiles(SRC)) expect(() => rankOf(file)).not.toThrow()
  })
})
