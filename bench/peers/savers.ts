/**
 * The LangGraph JS checkpoint savers as benchmark peers, behind one interface whether
 * the saver runs in this process or in a child process on another Node.
 *
 * SqliteSaver needs better-sqlite3, a native addon built for one Node ABI. `npm ci`
 * runs on the machine's Node while the project's scripts run on the Node from the
 * `node` devDependency, so the addon may not load here. Then the saver runs in a child
 * process on the first Node on the machine that loads it (`which -a node`, then
 * /usr/bin/node), and the report says which; when none can, the reason is reported.
 */
import { type BaseCheckpointSaver, MemorySaver } from "@langchain/langgraph-checkpoint"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import { fillThread, loadLatest, runSteps, saveItems, type SaverConfig } from "./langgraphOps.mjs"

/** One saver, as the benchmark drives it; every figure is milliseconds timed where the saver runs. */
export interface SaverPeer {
  readonly name: string
  /** Where the saver runs, for the report. */
  readonly where: string
  readonly runSteps: (threadId: string, steps: number) => Promise<number>
  readonly fillThread: (threadId: string, steps: number) => Promise<void>
  readonly loadLatest: (threadId: string) => Promise<{ readonly ms: number; readonly count: number }>
  /** Puts a checkpoint holding `items`, chained on the thread's last one. */
  readonly saveItems: (threadId: string, seq: number, items: ReadonlyArray<unknown>) => Promise<number>
  readonly close: () => Promise<void>
}

/** A peer over a saver in this process. */
export const inProcess = (
  name: string,
  saver: BaseCheckpointSaver,
  close: () => Promise<void> = async () => {}
): SaverPeer => {
  const parents = new Map<string, SaverConfig>()
  return {
    name,
    where: `in process (Node ${process.version})`,
    runSteps: (threadId, steps) => runSteps(saver, threadId, steps),
    fillThread: (threadId, steps) => fillThread(saver, threadId, steps),
    loadLatest: (threadId) => loadLatest(saver, threadId),
    saveItems: async (threadId, seq, items) => {
      const { ms, config } = await saveItems(saver, threadId, seq, items, parents.get(threadId))
      parents.set(threadId, config)
      return ms
    },
    close
  }
}

/** LangGraph's in-memory saver. */
export const memory = (): SaverPeer => inProcess("LangGraph MemorySaver", new MemorySaver())

const here = Path.dirname(fileURLToPath(import.meta.url))
const repoRoot = Path.resolve(here, "..", "..")

/** Whether better-sqlite3 opens a database in `node`; the error text when not. */
const probeNode = (node: string): string | undefined => {
  const result = ChildProcess.spawnSync(node, [
    "-e",
    "const D = require('better-sqlite3'); new D(':memory:').close(); process.stdout.write(process.version)"
  ], { cwd: repoRoot, encoding: "utf8", timeout: 30_000 })
  if (result.status === 0) return undefined
  return (result.stderr || result.error?.message || `exit ${result.status}`).split("\n").find((line) =>
    /Error|error/.test(line)
  ) ?? `exit ${result.status}`
}

/** The Nodes on this machine other than the one running, by real path. */
const otherNodes = (): Array<string> => {
  const found = ChildProcess.spawnSync("which", ["-a", "node"], { encoding: "utf8" }).stdout?.split("\n") ?? []
  const candidates = [...found, "/usr/bin/node", "/usr/local/bin/node"].filter((p) => p.length > 0 && Fs.existsSync(p))
  const self = Fs.realpathSync(process.execPath)
  const seen = new Set<string>([self])
  const nodes: Array<string> = []
  for (const candidate of candidates) {
    const real = Fs.realpathSync(candidate)
    if (seen.has(real)) continue
    seen.add(real)
    nodes.push(real)
  }
  return nodes
}

/** How SqliteSaver can run here, or why it cannot. */
export type SqliteSaverPlan =
  | { readonly _tag: "InProcess" }
  | { readonly _tag: "Child"; readonly node: string; readonly version: string; readonly inProcessError: string }
  | { readonly _tag: "Unavailable"; readonly reason: string }

let plan: SqliteSaverPlan | undefined

/** Finds where SqliteSaver can load: here, or a child on another Node (looked up once per process). */
export const planSqliteSaver = (): SqliteSaverPlan => (plan ??= findSqliteSaver())

const findSqliteSaver = (): SqliteSaverPlan => {
  let inProcessError: string
  try {
    const Database = createRequire(import.meta.url)("better-sqlite3") as new(path: string) => { close(): void }
    new Database(":memory:").close()
    return { _tag: "InProcess" }
  } catch (cause) {
    const message = cause instanceof Error ? cause.message : String(cause)
    const abis = [...message.matchAll(/NODE_MODULE_VERSION (\d+)/g)].map((match) => match[1])
    inProcessError = abis.length === 2
      ? `its addon was built for NODE_MODULE_VERSION ${abis[0]}, Node ${process.version} needs ${abis[1]}`
      : message.replace(/\s+/g, " ").slice(0, 300)
  }
  const tried: Array<string> = []
  for (const node of otherNodes()) {
    const error = probeNode(node)
    if (error === undefined) {
      const version = ChildProcess.spawnSync(node, ["-p", "process.version"], { encoding: "utf8" }).stdout.trim()
      return { _tag: "Child", node, version, inProcessError }
    }
    tried.push(`${node}: ${error}`)
  }
  return {
    _tag: "Unavailable",
    reason: `better-sqlite3 does not load on Node ${process.version} (${inProcessError}) and no other Node here loads it${
      tried.length > 0 ? ` (${tried.join("; ")})` : " (none found)"
    }`
  }
}

/** SqliteSaver (synchronous=FULL, WAL) on the database file `file`, where the plan says. */
export const sqlite = async (plan: SqliteSaverPlan, file: string): Promise<SaverPeer> => {
  if (plan._tag === "Unavailable") throw new Error(plan.reason)
  if (plan._tag === "InProcess") {
    const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite")
    const saver = SqliteSaver.fromConnString(file)
    // Protected in the typings; the child calls it the same way before its first use.
    ;(saver as unknown as { setup(): void }).setup()
    // The file storage fsyncs every write; FULL makes SQLite sync its WAL on every commit too.
    saver.db.pragma("synchronous = FULL")
    return inProcess("LangGraph SqliteSaver", saver, async () => saver.db.close())
  }
  const child = ChildProcess.spawn(plan.node, [Path.join(here, "sqliteSaverChild.mjs"), file], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "inherit"]
  })
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  let nextId = 0
  Readline.createInterface({ input: child.stdout }).on("line", (line) => {
    const reply = JSON.parse(line) as { id: number; ok: boolean; result?: unknown; error?: string }
    const waiter = pending.get(reply.id)
    pending.delete(reply.id)
    if (reply.ok) waiter?.resolve(reply.result)
    else waiter?.reject(new Error(reply.error))
  })
  child.on("exit", (code) => {
    for (const waiter of pending.values()) waiter.reject(new Error(`the SqliteSaver child exited (${code})`))
    pending.clear()
  })
  const call = <A>(op: string, args: Record<string, unknown> = {}): Promise<A> =>
    new Promise<A>((resolve, reject) => {
      const id = nextId++
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
      child.stdin.write(JSON.stringify({ id, op, ...args }) + "\n")
    })
  const info = await call<{ node: string; sqlite: string; synchronous: number; journalMode: string }>("info")
  return {
    name: "LangGraph SqliteSaver",
    where: `in a child process on Node ${info.node} (${plan.node}), because better-sqlite3 does not load on ${process.version}: ${plan.inProcessError}; timed inside the child; SQLite ${info.sqlite}, journal_mode=${info.journalMode}, synchronous=${info.synchronous === 2 ? "FULL" : info.synchronous}`,
    runSteps: (threadId, steps) => call("runSteps", { threadId, steps }),
    fillThread: (threadId, steps) => call("fillThread", { threadId, steps }),
    loadLatest: (threadId) => call("loadLatest", { threadId }),
    saveItems: (threadId, seq, items) => call("saveItems", { threadId, seq, items }),
    close: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve())
        child.stdin.end()
      })
  }
}
