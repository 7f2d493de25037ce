/**
 * Local children start and finish whatever runs the host: vitest (this file), tsx,
 * plain Node ESM and CommonJS. The hosts of the built package need `npm run build`
 * first (CI builds before it tests); without dist/ those cases are skipped.
 */
import * as NodeChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { AgentHarness, createLocalSubprocessAdapter } from "../../src/promise/index.ts"
import { triple } from "./fixtures/siblingSteps.mjs"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const built = Fs.existsSync(Path.join(repo, "dist", "promise.js")) && Fs.existsSync(Path.join(repo, "dist", "promise.cjs"))
const fixtures = Path.join(import.meta.dirname, "fixtures")

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
})
const tempDir = () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nrun-"))
  dirs.push(dir)
  return dir
}

/** Runs a host script with this process's node and returns what it printed. */
const runHost = (args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) => {
    NodeChildProcess.execFile(process.execPath, [...args], { cwd: repo, timeout: 90_000 }, (error, stdout, stderr) =>
      error === null ? resolve(stdout.trim()) : reject(new Error(`${error.message}\n${stderr}`)))
  })

/** Spawns a child from inside this vitest test, under default adapter options ($NOETIC_HOME). */
const spawnFromVitest = async (step: typeof triple) => {
  const before = process.env.NOETIC_HOME
  process.env.NOETIC_HOME = tempDir()
  const adapter = createLocalSubprocessAdapter()
  const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
  try {
    return await harness.detachedSpawn(step, 7, await harness.createContext()).await()
  } finally {
    await harness.close()
    await adapter.close()
    if (before === undefined) delete process.env.NOETIC_HOME
    else process.env.NOETIC_HOME = before
  }
}

describe("local children under every host runner", () => {
  it("vitest: a step of a sibling .mjs module, default adapter options", async () => {
    expect(await spawnFromVitest(triple)).toBe(21)
  }, 90_000)

  it.skipIf(!built)("vitest: a sibling .mjs module that imports the built package (no second IPC server in the child)", async () => {
    const { triple: builtTriple } = await import("./fixtures/builtSteps.mjs")
    expect(await spawnFromVitest(builtTriple)).toBe(21)
  }, 90_000)

  it("tsx", async () => {
    expect(await runHost(["--import", "tsx", Path.join(fixtures, "runnerHost.ts"), tempDir()])).toBe("42")
  }, 90_000)

  it("tsx: a host whose only work is awaiting an OS command child stays alive until it exits", async () => {
    expect(await runHost(["--import", "tsx", Path.join(fixtures, "processHost.ts"), tempDir()])).toBe(JSON.stringify({ exitCode: 0 }))
  }, 90_000)

  it.skipIf(!built)("plain Node ESM", async () => {
    expect(await runHost([Path.join(fixtures, "runnerHost.mjs"), tempDir()])).toBe("42")
  }, 90_000)

  it.skipIf(!built)("CommonJS", async () => {
    expect(await runHost([Path.join(repo, "test", "fixtures", "cjs", "spawnHost.cjs")])).toBe("42")
  }, 90_000)
})
