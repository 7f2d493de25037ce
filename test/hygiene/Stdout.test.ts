/**
 * A library prints nothing on stdout: a host that triggers the library's warnings
 * (test/fixtures/stdoutHost.ts), through both APIs with no logger of its own, finds
 * only its own line on stdout; the warnings are on stderr. And no module of the
 * library (the CLI aside, whose output is its job) logs except through
 * src/internal/diagnostics.ts, or writes to the console.
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const fixture = fileURLToPath(new URL("../fixtures/stdoutHost.ts", import.meta.url))
const src = fileURLToPath(new URL("../../src", import.meta.url))

const runHost = (): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-stdout-"))
    const child = spawn(process.execPath, ["--import", "tsx", fixture, dir], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
      resolve({ code, stdout, stderr })
    })
  })

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(path) : entry.name.endsWith(".ts") ? [path] : []
  })

describe("stdout hygiene", () => {
  it("a host triggering the library's warnings has only its own line on stdout; the warnings go to stderr", async () => {
    const run = await runHost()
    assert.strictEqual(run.code, 0, run.stderr)
    assert.strictEqual(run.stdout, "HOST-LINE\n", `stdout held more than the host's line:\n${run.stdout}`)
    for (const warning of ["maxEntries", "maxEntryBytes", "no JSON form", "replay diverged", "the record at", "checkpoint save failed", "init failed"]) {
      assert.include(run.stderr, warning)
    }
    assert.include(run.stderr, "\"engine\"")
  }, 120_000)

  it("no library module logs but through src/internal/diagnostics.ts, or writes to the console", () => {
    const offenders = sourceFiles(src)
      .filter((file) => !file.includes(`${Path.sep}cli${Path.sep}`) && !file.endsWith("diagnostics.ts"))
      .flatMap((file) =>
        Fs.readFileSync(file, "utf8").split("\n").flatMap((line, i) =>
          /\bEffect\.log(?:Warning|Error|Info|Debug|Trace|Fatal|WithLevel)?\(|\bconsole\.(?:log|info|warn|error|debug)\(|process\.stdout\.write|Console\.log/
              .test(line)
            ? [`${Path.relative(src, file)}:${i + 1}: ${line.trim()}`]
            : []
        )
      )
    assert.deepStrictEqual(offenders, [])
  })
})
