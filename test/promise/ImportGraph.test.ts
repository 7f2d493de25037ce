/**
 * What importing the facade loads: a step module imports it in every child process,
 * so the socket stack, `effect/ai` and `effect/sql` must wait until they are used. And
 * what an IPC server loads: every child makes one just after its step body starts.
 */
import * as NodeChildProcess from "node:child_process"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "../..")

/**
 * What a fresh `node` loads to evaluate `code` after importing `module`: the URLs its
 * load hook sees, and Node's own record of the built-in modules it loaded.
 */
const loadedBy = (module: string, code = "") =>
  new Promise<{ readonly urls: Array<string>; readonly builtins: Array<string> }>((resolve, reject) => {
    const script = `
import { registerHooks } from "node:module"
import { runTurn } from "./turns.ts"
const urls = []
registerHooks({ load(url, context, next) { urls.push(url); return next(url, context) } })
const loaded = await import(${JSON.stringify(pathToFileURL(module).href)})
${code}
process.stdout.write(JSON.stringify({ urls, builtins: process.moduleLoadList }))
process.exit(0)
`
    NodeChildProcess.execFile(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { cwd: repo, timeout: 60_000 },
      (error, stdout, stderr) => (error === null ? resolve(JSON.parse(stdout)) : reject(new Error(`${error.message}\n${stderr}`)))
    )
  })

const heavy = /\/node_modules\/(ws|@effect\/platform-node(-shared)?)\/|\/effect\/dist\/(ai|sql|socket|Stream\.js)/

describe("the facade's import graph", () => {
  it("importing it loads no socket stack, effect/ai or effect/sql", async () => {
    const { urls } = await loadedBy(Path.join(repo, "src/promise/index.ts"))
    expect(urls.some((url) => url.includes("/effect/dist/Schema.js"))).toBe(true)
    expect(urls.filter((url) => heavy.test(url))).toEqual([])
  }, 90_000)

  it("they load when used: a server made, a harness built", async () => {
    const { urls } = await loadedBy(
      Path.join(repo, "src/promise/index.ts"),
      `const harness = new loaded.AgentHarness({ name: "h", agentGraph: loaded.runCode("s", (x) => x) })
await runTurn(harness, 1)
const dir = (await import("node:fs")).mkdtempSync((await import("node:path")).join((await import("node:os")).tmpdir(), "ng-"))
const server = new loaded.AgentIpcServer({ fs: loaded.createLocalFsAdapter(), socketPath: dir + "/s.sock", taskId: "t", role: "r", runnerId: "1", threadId: "main", harness: {} })
await server.listen()`
    )
    expect(urls.some((url) => /\/node_modules\/@effect\/platform-node(-shared)?\//.test(url))).toBe(true)
    expect(urls.some((url) => url.includes("/effect/dist/ai/LanguageModel.js"))).toBe(true)
  }, 90_000)

  it("a running IPC server has loaded no WebSocket or HTTP stack", async () => {
    // A unix socket server needs `node:net`; `NodeSocketServer` would bring `ws`,
    // `node:http` and `node:https` too, for its WebSocket server.
    const { builtins, urls } = await loadedBy(
      Path.join(repo, "src/layers/IpcServer.ts"),
      `const Effect = await import("effect/Effect")
const dir = (await import("node:fs")).mkdtempSync((await import("node:path")).join((await import("node:os")).tmpdir(), "ng-"))
await Effect.runPromise(Effect.scoped(loaded.make({ socketPath: dir + "/s.sock" })))`
    )
    expect(builtins).toContain("NativeModule net")
    expect(urls.some((url) => url.includes("/effect/dist/socket/Socket.js"))).toBe(true)
    expect(urls.filter((url) => /\/node_modules\/ws\/|NodeSocketServer|NodeWS/.test(url))).toEqual([])
    expect(builtins.filter((name) => /^NativeModule (https?|_http_\w+)$/.test(name))).toEqual([])
  }, 90_000)
})
