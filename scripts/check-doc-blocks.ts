/**
 * Checks the documentation: `npm run typecheck:docs`.
 *
 * 1. Every fenced block opened with ```` ```ts program ```` in README.md, docs/*.md and
 *    bench/README.md is a whole program: each is written to `.doc-blocks/` in the
 *    repository (so `noetic-effect` and `noetic-effect/promise` resolve to this
 *    package's source, under the `noetic-effect-source` condition, as in examples/) and
 *    type-checked with the repository's tsc settings. Plain ```` ```ts ```` blocks are
 *    fragments and are not checked.
 * 2. Every relative link in those files points at a file that exists and, with a
 *    `#fragment`, at a heading of that file (GitHub's anchors).
 * 3. Every `docs/<page>.md#<anchor>` cited in comments under src/, test/, bench/ and
 *    examples/ exists.
 *
 * Exits non-zero with one line per problem.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const outDir = Path.join(root, ".doc-blocks")

/** Pages other branches add; a link to one is a warning until it exists. */
const PENDING = new Set<string>([])

const markdownFiles = (): Array<string> => [
  "README.md",
  "bench/README.md",
  ...Fs.readdirSync(Path.join(root, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)
]

interface Block {
  readonly file: string
  readonly line: number
  readonly info: string
  readonly text: string
}

/** Fenced blocks with their info strings, and the lines outside any block. */
const parse = (file: string) => {
  const lines = Fs.readFileSync(Path.join(root, file), "utf8").split("\n")
  const blocks: Array<Block> = []
  const prose: Array<{ readonly line: number; readonly text: string }> = []
  let open: { line: number; info: string; fence: string; body: Array<string> } | undefined
  lines.forEach((text, index) => {
    const fence = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(text)
    if (open === undefined) {
      if (fence !== null) open = { line: index + 1, info: fence[3]!.trim(), fence: fence[2]!, body: [] }
      else prose.push({ line: index + 1, text })
    } else if (fence !== null && fence[2]!.startsWith(open.fence) && fence[3]!.trim() === "") {
      blocks.push({ file, line: open.line, info: open.info, text: open.body.join("\n") })
      open = undefined
    } else {
      open.body.push(text)
    }
  })
  return { blocks, prose, lines }
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/<[^>]*>/g, "")
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-")

const anchorsCache = new Map<string, Set<string>>()
const anchorsOf = (file: string): Set<string> => {
  const cached = anchorsCache.get(file)
  if (cached !== undefined) return cached
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const { text } of parse(file).prose) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)
    if (heading === null) continue
    const base = slug(heading[1]!)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  anchorsCache.set(file, anchors)
  return anchors
}

const problems: Array<string> = []
const warnings: Array<string> = []

/** Checks one link target written in `from` (a path relative to the repository); `where` names the place. */
const checkTarget = (from: string, where: string, target: string) => {
  if (/^[a-z]+:/i.test(target)) return
  const [pathPart = "", fragment] = target.split("#", 2)
  const resolved = pathPart === "" ? from : Path.posix.normalize(Path.posix.join(Path.posix.dirname(from), pathPart))
  if (!Fs.existsSync(Path.join(root, resolved))) {
    if (PENDING.has(resolved)) warnings.push(`${where}: ${target}: ${resolved} does not exist yet (added by another branch)`)
    else problems.push(`${where}: broken link ${target}: no file ${resolved}`)
    return
  }
  if (fragment !== undefined && fragment !== "" && resolved.endsWith(".md") && !anchorsOf(resolved).has(fragment)) {
    problems.push(`${where}: broken link ${target}: ${resolved} has no heading #${fragment}`)
  }
}

const checkLinks = (file: string) => {
  for (const { line, text } of parse(file).prose) {
    const withoutCode = text.replace(/`[^`]*`/g, "")
    for (const match of withoutCode.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) checkTarget(file, `${file}:${line}`, match[1]!)
  }
}

const sourceFiles = (dir: string): Array<string> =>
  Fs.existsSync(Path.join(root, dir))
    ? Fs.readdirSync(Path.join(root, dir), { recursive: true, encoding: "utf8" })
      .filter((f) => /\.(ts|cts|mts|js|cjs|mjs)$/.test(f) && !f.includes("node_modules"))
      .map((f) => `${dir}/${f.split(Path.sep).join("/")}`)
    : []

const checkCitations = () => {
  for (const file of ["src", "test", "bench", "examples"].flatMap(sourceFiles)) {
    const lines = Fs.readFileSync(Path.join(root, file), "utf8").split("\n")
    lines.forEach((text, index) => {
      for (const match of text.matchAll(/\bdocs\/([a-z0-9-]+\.md)(#[a-z0-9_-]+)?/g)) {
        checkTarget("README.md", `${file}:${index + 1}`, `docs/${match[1]}${match[2] ?? ""}`)
      }
    })
  }
}

const typecheckPrograms = (blocks: ReadonlyArray<Block>) => {
  Fs.rmSync(outDir, { recursive: true, force: true })
  Fs.mkdirSync(outDir, { recursive: true })
  const names = new Map<string, Block>()
  for (const block of blocks) {
    const name = `${block.file.replace(/[^a-zA-Z0-9]+/g, "_")}_L${block.line}.ts`
    names.set(name, block)
    Fs.writeFileSync(Path.join(outDir, name), `${block.text}\n`)
  }
  // `files`, not `include`: tsc's wildcards skip a directory whose name starts with a dot.
  Fs.writeFileSync(
    Path.join(outDir, "tsconfig.json"),
    JSON.stringify(
      {
        extends: "../tsconfig.json",
        compilerOptions: { customConditions: ["noetic-effect-source"] },
        include: [],
        files: [...names.keys()]
      },
      null,
      2
    ) + "\n"
  )
  if (blocks.length === 0) return
  const tsc = spawnSync(
    process.execPath,
    [Path.join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", Path.join(outDir, "tsconfig.json")],
    { cwd: root, encoding: "utf8" }
  )
  const output = `${tsc.stdout}${tsc.stderr}`
  if (tsc.status !== 0) {
    // Name each failing block by its page and line: .doc-blocks/docs_storage_md_L12.ts(3,5) is
    // line 12 + 3 of docs/storage.md.
    for (const text of output.split("\n").filter((l) => l.trim() !== "")) {
      const at = /\.doc-blocks\/([^(:]+)\((\d+),(\d+)\)(.*)$/.exec(text)
      const block = at === null ? undefined : names.get(at[1]!)
      problems.push(block === undefined || at === null ? text : `${block.file}:${block.line + Number(at[2])}:${at[3]}${at[4]}`)
    }
  }
}

const main = () => {
  const files = markdownFiles()
  const programs = files.flatMap((file) => parse(file).blocks.filter((b) => /^(ts|typescript)\s+program\b/.test(b.info)))
  for (const file of files) checkLinks(file)
  checkCitations()
  typecheckPrograms(programs)
  for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`)
  if (problems.length > 0) {
    for (const problem of problems) process.stderr.write(`${problem}\n`)
    process.stderr.write(`typecheck:docs: ${problems.length} problem(s); the programs are in .doc-blocks/\n`)
    process.exitCode = 1
    return
  }
  Fs.rmSync(outDir, { recursive: true, force: true })
  process.stdout.write(`typecheck:docs: ${programs.length} programs in ${files.length} pages type-check; links and cited anchors resolve\n`)
}

main()
