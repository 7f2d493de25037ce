/**
 * No `yield` on the right of a `??` in the library's sources: the CommonJS build
 * (dist/*.cjs) moves that side into an arrow function, where a `yield*` is a syntax
 * error (it broke on `x ?? (cond ? a : yield* b)` once), so the sources write it with
 * an `if` or a conditional instead. The same holds for a `yield` in an optional
 * chain's arguments, which the build wraps the same way. Checked on the syntax tree
 * (TypeScript's parser), so a comment or a string mentioning it does not count.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import ts from "@typescript/typescript6"

const repo = fileURLToPath(new URL("../..", import.meta.url))

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(path) : entry.name.endsWith(".ts") ? [path] : []
  })

/** Whether `node` holds a `yield` of its own function (not of a function nested in it). */
const holdsYield = (node: ts.Node): boolean =>
  ts.isYieldExpression(node) ||
  (!ts.isFunctionLike(node) && !ts.isClassLike(node) && (ts.forEachChild(node, (child) => holdsYield(child) || undefined) ?? false))

/** The parts of an optional chain the build moves into arrow functions: what follows a `?.`. */
const afterOptional = (node: ts.Node): ReadonlyArray<ts.Node> => {
  if (!ts.isOptionalChain(node)) return []
  if (ts.isCallExpression(node)) return node.arguments
  if (ts.isElementAccessExpression(node)) return [node.argumentExpression]
  return []
}

/** Each `file:line` of a TypeScript `text` with a `yield` right of a `??` (or `??=`) or in an optional chain's arguments. */
const yieldsInWrappedOperands = (file: string, text: string): Array<string> => {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found: Array<string> = []
  const at = (node: ts.Node) =>
    `${Path.relative(repo, file)}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`
  const visit = (node: ts.Node): void => {
    const wrapped = ts.isBinaryExpression(node) &&
        (node.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken ||
          node.operatorToken.kind === ts.SyntaxKind.QuestionQuestionEqualsToken)
      ? [node.right]
      : afterOptional(node)
    if (wrapped.some(holdsYield)) found.push(at(node))
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

describe("no yield where the CommonJS build wraps an operand in a function", () => {
  it("the check finds a yield right of ?? or ??=, directly, in a conditional, across lines, or in an optional call", () => {
    const text = [
      "function* g(o: any, b: any) {",
      "  const a = o.x ?? (yield* b)",
      "  const c = o.x ??",
      "    (o.y ? 1 : yield* b)",
      "  o.z ??= yield b",
      "  o.f?.(yield* b)",
      "}"
    ].join("\n")
    assert.deepStrictEqual(yieldsInWrappedOperands(Path.join(repo, "a.ts"), text), ["a.ts:2", "a.ts:3", "a.ts:5", "a.ts:6"])
  })

  it("the check passes a yield left of ??, a ?? inside a yield, and a yield of a function nested on the right", () => {
    const text = [
      "function* g(o: any, b: any) {",
      "  const a = (yield* b) ?? o.x",
      "  const c = yield* (o.x ?? b)",
      "  const d = o.x ?? function*() { yield 1 }",
      "  // o.x ?? (yield* b)",
      "  const e = \"o.x ?? (yield* b)\"",
      "}"
    ].join("\n")
    assert.deepStrictEqual(yieldsInWrappedOperands(Path.join(repo, "a.ts"), text), [])
  })

  it("no module of src has one", () => {
    const files = sourceFiles(Path.join(repo, "src"))
    assert.isAbove(files.length, 100)
    assert.deepStrictEqual(files.flatMap((file) => yieldsInWrappedOperands(file, Fs.readFileSync(file, "utf8"))), [])
  })
})
