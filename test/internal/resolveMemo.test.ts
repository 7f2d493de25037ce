/**
 * The child's resolution memo answers exactly as Node does: keyed by the importing
 * module's directory (two directories with their own copy of a package each get
 * theirs) and extension (a TypeScript loader answers per importer), never keeping a failure (a module created after a failed import is found),
 * and stepping aside once ended.
 */
import * as NodeChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { afterEach, describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "../..")
const memoModule = pathToFileURL(Path.join(repo, "src/internal/resolveMemo.ts")).href

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

/** Writes `files` (path relative to a new temp dir, text) under an ES-module package.json; returns the dir. */
const tree = (files: Record<string, string>) => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "resolve-memo-"))
  dirs.push(root)
  for (const [path, text] of Object.entries({ "package.json": JSON.stringify({ type: "module" }), ...files })) {
    Fs.mkdirSync(Path.dirname(Path.join(root, path)), { recursive: true })
    Fs.writeFileSync(Path.join(root, path), text)
  }
  return root
}

/**
 * Runs `code` as an ES module in a fresh node with the memo installed as `memo`, its own
 * directory `own` under `root` (all of `root` by default); returns its JSON output.
 */
const runWithMemo = (root: string, code: string, own = "", persist?: { directory: string; bootstrap: string }) =>
  new Promise<unknown>((resolve, reject) => {
    const script = `
import { installResolveMemo } from ${JSON.stringify(memoModule)}
import * as Fs from "node:fs"
const root = ${JSON.stringify(root)}
const memo = installResolveMemo(${JSON.stringify(`${pathToFileURL(root).href}/${own}`)}, ${JSON.stringify(persist)})
${code}
`
    NodeChildProcess.execFile(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { cwd: repo, timeout: 60_000 },
      (error, stdout, stderr) => (error === null ? resolve(JSON.parse(stdout)) : reject(new Error(`${error.message}\n${stderr}`)))
    )
  })

/**
 * A tree where each directory of `copies` has its own copy of a package `pkg` (exporting
 * the given value) and the modules `importers` (paths) each import `pkg`.
 */
const packageTree = (copies: Record<string, string>, importers: ReadonlyArray<string>) =>
  tree(Object.fromEntries([
    ...Object.entries(copies).flatMap(([dir, value]) => [
      [`${dir}/node_modules/pkg/package.json`, JSON.stringify({ name: "pkg", type: "module", exports: "./index.js" })],
      [`${dir}/node_modules/pkg/index.js`, `export default ${JSON.stringify(value)}`]
    ]),
    ...importers.map((path) => [path, `import value from "pkg"\nexport default value\n`])
  ]))

describe("resolveMemo", () => {
  it("resolves as Node does, per importing directory, and serves repeats from the memo", async () => {
    const root = packageTree({ a: "copy a", b: "copy b" }, ["a/one.js", "a/two.js", "b/one.js"])
    const out = await runWithMemo(
      root,
      `const values = []
for (const file of ["a/one.js", "a/two.js", "b/one.js"]) values.push((await import(root + "/" + file)).default)
process.stdout.write(JSON.stringify({ values, hits: memo.hits() }))`
    )
    // b/ has its own copy of pkg: a memo keyed by specifier alone would hand it a's.
    expect(out).toEqual({ values: ["copy a", "copy a", "copy b"], hits: 1 })
  }, 90_000)

  it("keys by the importer's extension too: a TypeScript loader maps ./x.js to x.ts for a .ts importer only", async () => {
    const root = tree({
      "dir/x.ts": `export default "x.ts"\n`,
      "dir/x.js": `export default "x.js"\n`,
      "dir/plain.mjs": `import value from "./x.js"\nexport default value\n`,
      "dir/typed.ts": `import value from "./x.js"\nexport default value\n`
    })
    // tsx (loaded before the memo, as a child's execArgv loads it) answers per importer.
    const out = await runWithMemo(
      root,
      `const values = []
for (const file of ["dir/plain.mjs", "dir/typed.ts"]) values.push((await import(root + "/" + file)).default)
process.stdout.write(JSON.stringify(values))`
    )
    expect(out).toEqual(["x.js", "x.ts"])
  }, 90_000)

  it("serves only the library's own modules and installed packages: the user's files resolve through Node each time", async () => {
    const root = packageTree({ lib: "copy lib", app: "copy app" }, [
      "lib/one.js",
      "lib/two.js",
      "app/one.js",
      "app/two.js",
      "app/node_modules/dep/one.js",
      "app/node_modules/dep/two.js"
    ])
    const hitsAfter = `const hits = {}
for (const dir of ["app", "lib", "app/node_modules/dep"]) {
  for (const file of ["one.js", "two.js"]) await import(root + "/" + dir + "/" + file)
  hits[dir] = memo.hits()
}
process.stdout.write(JSON.stringify(hits))`
    expect(await runWithMemo(root, hitsAfter, "lib/")).toEqual({ app: 0, lib: 1, "app/node_modules/dep": 2 })
  }, 90_000)

  it("keeps no failure: a module created after an import of it failed is found", async () => {
    const root = tree({
      "dir/first.js": `import late from "./late.js"\nexport default late\n`,
      "dir/second.js": `import late from "./late.js"\nexport default late\n`
    })
    const out = await runWithMemo(
      root,
      `let failed = ""
try { await import(root + "/dir/first.js") } catch (error) { failed = error.code }
Fs.writeFileSync(root + "/dir/late.js", "export default 'late'")
const value = (await import(root + "/dir/second.js")).default
process.stdout.write(JSON.stringify({ failed, value }))`
    )
    expect(out).toEqual({ failed: "ERR_MODULE_NOT_FOUND", value: "late" })
  }, 90_000)

  it("once ended, every import goes to Node", async () => {
    const root = packageTree({ a: "copy a" }, ["a/one.js", "a/two.js", "a/three.js"])
    const out = await runWithMemo(
      root,
      `await import(root + "/a/one.js")
await import(root + "/a/two.js")
const before = memo.hits()
memo.end()
const value = (await import(root + "/a/three.js")).default
process.stdout.write(JSON.stringify({ before, after: memo.hits(), value }))`
    )
    expect(out).toEqual({ before: 1, after: 1, value: "copy a" })
  }, 90_000)

  describe("kept across children (persist)", () => {
    /** Imports a/one.js then a/two.js in a fresh process with the memo kept under `root`/cache; returns values and hits after the first. */
    const twoImports = (root: string) =>
      runWithMemo(
        root,
        `const first = (await import(root + "/a/one.js")).default
const hitsAfterFirst = memo.hits()
const second = (await import(root + "/a/two.js")).default
process.stdout.write(JSON.stringify({ values: [first, second], hitsAfterFirst }))`,
        "",
        { directory: Path.join(root, "cache"), bootstrap: Path.join(root, "package.json") }
      )

    it("a later process starts from the memo an earlier one wrote", async () => {
      const root = packageTree({ a: "copy a" }, ["a/one.js", "a/two.js"])
      Fs.mkdirSync(Path.join(root, "cache"))
      expect(await twoImports(root)).toEqual({ values: ["copy a", "copy a"], hitsAfterFirst: 0 })
      // The first import of pkg is served from the file now.
      expect(await twoImports(root)).toEqual({ values: ["copy a", "copy a"], hitsAfterFirst: 1 })
    }, 90_000)

    it("ignores a memo whose package changed since (its package.json stamp): the new exports are followed", async () => {
      const root = packageTree({ a: "copy a" }, ["a/one.js", "a/two.js"])
      Fs.mkdirSync(Path.join(root, "cache"))
      await twoImports(root)
      Fs.writeFileSync(Path.join(root, "a/node_modules/pkg/other.js"), `export default "other"`)
      Fs.writeFileSync(
        Path.join(root, "a/node_modules/pkg/package.json"),
        JSON.stringify({ name: "pkg", type: "module", exports: "./other.js" })
      )
      expect(await twoImports(root)).toEqual({ values: ["other", "other"], hitsAfterFirst: 0 })
    }, 90_000)

    it("ignores a malformed memo file", async () => {
      const root = packageTree({ a: "copy a" }, ["a/one.js", "a/two.js"])
      Fs.mkdirSync(Path.join(root, "cache"))
      await twoImports(root)
      const [file] = Fs.readdirSync(Path.join(root, "cache")).filter((name) => name.endsWith(".json"))
      Fs.writeFileSync(Path.join(root, "cache", file!), "{ not json")
      expect(await twoImports(root)).toEqual({ values: ["copy a", "copy a"], hitsAfterFirst: 0 })
    }, 90_000)
  })
})
