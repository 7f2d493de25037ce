/**
 * Local children on SQLite: the default layout of the local adapter under
 * `$NOETIC_HOME`, and the facade's adapter given `createSqliteStorage` storages.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterEach, describe, expect, it } from "vitest"
import { Effect } from "effect"
import {
  AgentHarness,
  createHomeStorage,
  createLocalSubprocessAdapter,
  createSqliteStorage
} from "../src/promise/index.ts"
import { cliJson } from "./cli/suite.ts"
import type { V1ServerFrame } from "../src/schema/IpcFrame.ts"
import { askThenModel } from "./fixtures/subprocessModelSteps.ts"

const savedHome = process.env.NOETIC_HOME
afterEach(() => {
  if (savedHome === undefined) delete process.env.NOETIC_HOME
  else process.env.NOETIC_HOME = savedHome
})

const keysIn = (path: string) => {
  const db = new DatabaseSync(path, { readOnly: true })
  // Another process may be closing the database (its last connection checkpoints).
  db.exec("PRAGMA busy_timeout = 10000")
  try {
    return (db.prepare("SELECT key FROM noetic_storage").all() as Array<{ key: Uint8Array }>).map((row) =>
      Buffer.from(row.key).swap16().toString("utf16le")
    )
  } finally {
    db.close()
  }
}

/** Runs the ask-then-model child through `adapter` and checks its result. */
const runChild = async (adapter: ReturnType<typeof createLocalSubprocessAdapter>, frames: Array<V1ServerFrame>) => {
  const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
  try {
    const parent = await harness.createContext()
    const handle = harness.detachedSpawn(askThenModel, "bandits", parent)
    expect(await handle.await()).toEqual({ approval: "approved", text: "answer from the child's model" })
    expect(frames.some((frame) => frame.type === "askUserRequest")).toBe(true)
    return handle.handleId
  } finally {
    await harness.close()
    await adapter.close()
  }
}

describe("local children on SQLite", () => {
  it("by default the adapter keeps manifests and queues in subprocess/subprocess.db and sockets in run/ under $NOETIC_HOME", async () => {
    const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsq-"))
    process.env.NOETIC_HOME = home
    const database = Path.join(home, "subprocess", "subprocess.db")
    const frames: Array<V1ServerFrame> = []
    let whileRunning: Array<string> = []
    const adapter = createLocalSubprocessAdapter({
      pollMs: 20,
      onFrame: async (handle, frame) => {
        frames.push(frame)
        if (frame.type === "askUserRequest") {
          whileRunning = keysIn(database)
          await adapter.answerAskUser(handle.handleId, frame.id, "approved")
        }
      }
    })
    const handleId = await runChild(adapter, frames)
    // While the child ran, its manifest and its IPC queue were rows of the database.
    expect(whileRunning.filter((key) => key.includes(handleId)).length).toBeGreaterThan(1)
    expect(Fs.readdirSync(Path.join(home, "subprocess")).filter((name) => !name.startsWith("subprocess.db"))).toEqual([])
    expect(Fs.statSync(Path.join(home, "run")).isDirectory()).toBe(true)
    // The child checkpointed into the home's checkpoint database.
    expect(keysIn(Path.join(home, "checkpoints", "checkpoints.db")).length).toBeGreaterThan(0)
  }, 60_000)

  it("given createHomeStorage('subprocess', { home }) without $NOETIC_HOME, children keep the home's layout, so the CLI lists them", async () => {
    const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsq-"))
    delete process.env.NOETIC_HOME
    const storage = createHomeStorage("subprocess", { home })
    const frames: Array<V1ServerFrame> = []
    const adapter = createLocalSubprocessAdapter({
      storage,
      pollMs: 20,
      onFrame: async (handle, frame) => {
        frames.push(frame)
        if (frame.type === "askUserRequest") await adapter.answerAskUser(handle.handleId, frame.id, "approved")
      }
    })
    try {
      await runChild(adapter, frames)
    } finally {
      await storage.close()
    }
    // checkpoints/, subprocess/ and run/ of the home, nothing nested under subprocess/.
    expect(Fs.readdirSync(Path.join(home, "subprocess")).filter((name) => !name.startsWith("subprocess.db"))).toEqual([])
    expect(Fs.statSync(Path.join(home, "run")).isDirectory()).toBe(true)
    expect(keysIn(Path.join(home, "checkpoints", "checkpoints.db")).length).toBeGreaterThan(0)
    const listed = await Effect.runPromise(Effect.scoped(cliJson("--home", home, "executions", "list", "--json")))
    expect(listed.executions.length).toBeGreaterThan(0)
  }, 60_000)

  it("the facade's adapter takes createSqliteStorage storages for its records and its children's checkpoints", async () => {
    const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsq-"))
    const storage = createSqliteStorage({ path: Path.join(base, "sub.sqlite") })
    const checkpointStorage = createSqliteStorage({ path: Path.join(base, "ckpt.sqlite") })
    const frames: Array<V1ServerFrame> = []
    let whileRunning: ReadonlyArray<string> = []
    const adapter = createLocalSubprocessAdapter({
      storage,
      checkpointStorage,
      pollMs: 20,
      onFrame: async (handle, frame) => {
        frames.push(frame)
        if (frame.type === "askUserRequest") {
          whileRunning = await storage.list("")
          await adapter.answerAskUser(handle.handleId, frame.id, "approved")
        }
      }
    })
    try {
      const handleId = await runChild(adapter, frames)
      expect(whileRunning.filter((key) => key.includes(handleId)).length).toBeGreaterThan(1)
      // The child's checkpoint landed in the checkpoint database, readable as a store.
      const executions = await checkpointStorage.list("")
      expect(executions).not.toEqual([])
      const names = Fs.readdirSync(base).filter((name) => !/-(wal|shm)$/.test(name)).sort()
      expect(names).toEqual(["ckpt.sqlite", "run", "sub.sqlite"])
    } finally {
      await storage.close()
      await checkpointStorage.close()
    }
  }, 60_000)
})
