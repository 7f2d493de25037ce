/**
 * Runs LangGraph's SqliteSaver for the benchmark in a process of its own, on a Node
 * whose ABI the installed better-sqlite3 addon was built for. Reads one JSON request
 * per line on stdin, answers one JSON line on stdout; every figure is timed here, so
 * the pipe between the processes is not in it.
 *
 * Usage: node sqliteSaverChild.mjs <database file>
 */
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite"
import * as Readline from "node:readline"
import { fillThread, loadLatest, runSteps, saveItems } from "./langgraphOps.mjs"

const saver = SqliteSaver.fromConnString(process.argv[2])
saver.setup()
// The same durability as the file storage's fsync per write: WAL synced on each commit.
saver.db.pragma("synchronous = FULL")
const parents = new Map()

const handlers = {
  info: async () => ({
    node: process.version,
    sqlite: saver.db.prepare("select sqlite_version() as v").get().v,
    synchronous: saver.db.pragma("synchronous", { simple: true }),
    journalMode: saver.db.pragma("journal_mode", { simple: true })
  }),
  runSteps: ({ threadId, steps }) => runSteps(saver, threadId, steps),
  fillThread: ({ threadId, steps }) => fillThread(saver, threadId, steps),
  loadLatest: ({ threadId }) => loadLatest(saver, threadId),
  saveItems: async ({ threadId, seq, items }) => {
    const { ms, config } = await saveItems(saver, threadId, seq, items, parents.get(threadId))
    parents.set(threadId, config)
    return ms
  }
}

const lines = Readline.createInterface({ input: process.stdin })
for await (const line of lines) {
  const request = JSON.parse(line)
  try {
    const result = await handlers[request.op](request)
    process.stdout.write(JSON.stringify({ id: request.id, ok: true, result }) + "\n")
  } catch (error) {
    process.stdout.write(JSON.stringify({ id: request.id, ok: false, error: String(error?.stack ?? error) }) + "\n")
  }
}
saver.db.close()
