/**
 * Host processes of the agent-stream tests (test/fixtures/agentStreamHost.ts): a free
 * port they share across restarts, and a host whose stdout lines are read as JSON.
 */
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"

const host = fileURLToPath(new URL("./fixtures/agentStreamHost.ts", import.meta.url))

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

/** A host process and its stdout lines, parsed. */
export const startHost = (env: Record<string, string>) => {
  const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", host], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env }
  })
  const lines = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
  const exited = new Promise<string>((resolve) =>
    proc.once("exit", (code, signal) => resolve(signal ?? String(code)))
  )
  const until = async (test: (line: any) => boolean) => {
    for (;;) {
      const next = await lines.next()
      if (next.done) throw new Error("the host exited first")
      const line = JSON.parse(next.value)
      if (test(line)) return line
    }
  }
  return { proc, until, exited }
}

