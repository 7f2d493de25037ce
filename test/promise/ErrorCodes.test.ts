/**
 * Runtime errors carry their `code` on the error itself, and the facade rejects with
 * that code: a run-time error becomes a `NoeticError` of the engine error's own code,
 * an error with a tagged reason composes its reason's (`STORAGE_IO`), and every error
 * class of the engine declares one (the source check below).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Io, StorageError } from "../../src/Errors.ts"
import { SpawnTimeout, StepCancelled, UnknownTool } from "../../src/harness/HarnessError.ts"
import { FrameTooLarge, IpcError } from "../../src/IpcError.ts"
import { toFacadeError } from "../../src/promise/errors.ts"
import { ExecutionLeaseHeld } from "../../src/services/ExecutionLease.ts"
import { SubprocessError, UnknownHandle } from "../../src/services/SubprocessAdapter.ts"

const src = fileURLToPath(new URL("../../src", import.meta.url))

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(path) : entry.name.endsWith(".ts") ? [path] : []
  })

/** The `Schema.TaggedError` classes of a module's text, each with whether its body or fields declare `code`. */
const errorClasses = (text: string): Array<{ readonly name: string; readonly coded: boolean }> => {
  const found: Array<{ readonly name: string; readonly coded: boolean }> = []
  const start = /export class (\w+) extends Schema\.TaggedError</g
  for (const match of text.matchAll(start)) {
    const from = match.index + match[0].length
    const next = text.indexOf("\nexport ", from)
    const declaration = text.slice(from, next === -1 ? undefined : next)
    found.push({ name: match[1]!, coded: /\bget code\(\)|\bcode: Schema\./.test(declaration) })
  }
  return found
}

describe("error codes", () => {
  it("a run-time error rejects with the code it carries", () => {
    const cases: ReadonlyArray<readonly [{ readonly code: string }, string]> = [
      [new UnknownTool({ stepId: "s", tool: "t", known: [] }), "UNKNOWN_TOOL"],
      [new SpawnTimeout({ stepId: "s", timeoutMs: 5 }), "SPAWN_TIMEOUT"],
      [new ExecutionLeaseHeld({ executionId: "e", owner: "o", expiresAt: 0 }), "EXECUTION_LEASE_HELD"],
      [new StepCancelled({ executionId: "e" }), "STEP_CANCELLED"]
    ]
    for (const [error, code] of cases) {
      assert.strictEqual(error.code, code)
      assert.strictEqual((toFacadeError(error) as Error & { readonly code: string }).code, code)
    }
  })

  it("an error with a tagged reason composes the reason's code", () => {
    const storage = new StorageError({ operation: "get", reason: new Io({ key: "k", message: "disk", cause: null }) })
    assert.strictEqual(storage.code, "STORAGE_IO")
    assert.strictEqual((toFacadeError(storage) as Error & { readonly code: string }).code, "STORAGE_IO")
    const ipc = new IpcError({ socketPath: "/s", reason: new FrameTooLarge({ bytes: 10, limit: 5, message: "big" }) })
    assert.strictEqual(ipc.code, "IPC_FRAME_TOO_LARGE")
    const child = new SubprocessError({ reason: new UnknownHandle({ handleId: "h", message: "gone" }) })
    assert.strictEqual(child.code, "SUBPROCESS_UNKNOWN_HANDLE")
    assert.strictEqual((toFacadeError(child) as Error & { readonly code: string }).code, "SUBPROCESS_UNKNOWN_HANDLE")
  })

  it("a tagged error of no code of its own (not this library's) still gets one from its tag", () => {
    const foreign = { _tag: "RateLimitError", reason: { _tag: "TooManyRequests" } }
    assert.strictEqual((toFacadeError(foreign) as Error & { readonly code: string }).code, "RATE_LIMIT_TOO_MANY_REQUESTS")
  })

  it("every error class of the engine declares its code", () => {
    const missing = sourceFiles(src).flatMap((file) => {
      const relative = Path.relative(src, file).split(Path.sep).join("/")
      if (relative.startsWith("promise/")) return []
      return errorClasses(Fs.readFileSync(file, "utf8")).filter((c) => !c.coded).map((c) => `${relative}: ${c.name}`)
    })
    assert.deepStrictEqual(missing, [])
    // The check sees a class without one.
    assert.deepStrictEqual(
      errorClasses(`export class A extends Schema.TaggedError<A>("a")("A", {}) {}\nexport const x = 1`),
      [{ name: "A", coded: false }]
    )
  })
})
