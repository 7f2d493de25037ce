import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { TestConsole } from "effect/testing"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cli from "../src/cli/Cli.ts"
import * as AgentHarnessEngine from "../src/harness/AgentHarness.ts"
import { runCode as engineRunCode } from "../src/harness/Step.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as NoeticHome from "../src/NoeticHome.ts"
import { createHomeStorage, createSqliteStorage } from "../src/promise/index.ts"
import { toEngineStorage } from "../src/promise/storage.ts"
import { facadeStorageSuite } from "./FacadeStorageSuite.ts"

const freshDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sqlite-facade-"))

facadeStorageSuite("createSqliteStorage", async () => {
  const dir = freshDir()
  const path = Path.join(dir, "data.db")
  return {
    open: () => createSqliteStorage({ path }),
    cleanup: async () => Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
  }
})

describe("createSqliteStorage", () => {
  it("a storage that was never used creates nothing, and close() succeeds", async () => {
    const path = Path.join(freshDir(), "never", "data.db")
    await createSqliteStorage({ path }).close()
    assert.isFalse(Fs.existsSync(Path.dirname(path)))
  })

  it("createHomeStorage keeps the home layout: checkpoints/checkpoints.db and subprocess/subprocess.db", async () => {
    const home = freshDir()
    const checkpoints = createHomeStorage("checkpoints", { home })
    const subprocess = createHomeStorage("subprocess", { home })
    try {
      await checkpoints.set("execution:x:snapshot", { v: 1 })
      await subprocess.set("manifest:h", { v: 2 })
      assert.isTrue(Fs.statSync(Path.join(home, "checkpoints", "checkpoints.db")).isFile())
      assert.isTrue(Fs.statSync(Path.join(home, "subprocess", "subprocess.db")).isFile())
      assert.deepStrictEqual(await checkpoints.list(""), ["execution:x:snapshot"])
      assert.deepStrictEqual(await subprocess.list(""), ["manifest:h"])
    } finally {
      await checkpoints.close()
      await subprocess.close()
    }
  })

  it("the engine sees every capability of the SQLite storage: writeAll and takesJsonText (a queue's records as JSON, acks in one commit)", async () => {
    const storage = createSqliteStorage({ path: Path.join(freshDir(), "data.db") })
    try {
      const engine = await Effect.runPromise(toEngineStorage(storage))
      assert.isTrue(engine.takesJsonText)
      assert.isDefined(engine.writeAll)
      await Effect.runPromise(engine.writeAll!([{ op: "set", key: "a", value: 1 }, { op: "set", key: "b", value: 2 }]))
      await Effect.runPromise(engine.writeAll!([{ op: "delete", key: "a" }]))
      assert.deepStrictEqual(await storage.list(""), ["b"])
      await storage.close()
      const closed = await Effect.runPromise(Effect.flip(engine.writeAll!([{ op: "set", key: "c", value: 3 }])))
      assert.strictEqual(closed.reason._tag, "Io")
    } finally {
      await storage.close()
    }
  })
})

describe("NoeticHome default storages", () => {
  it.effect("use SQLite under $NOETIC_HOME, and read a file storage an older setup left there", () =>
    Effect.gen(function*() {
      const home = freshDir()
      const saved = process.env.NOETIC_HOME
      process.env.NOETIC_HOME = home
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => (saved === undefined ? delete process.env.NOETIC_HOME : (process.env.NOETIC_HOME = saved)))
      )
      const r = NoeticHome.roots()
      assert.strictEqual(r.checkpointsDatabase, Path.join(home, "checkpoints", "checkpoints.db"))
      assert.strictEqual(r.subprocessDatabase, Path.join(home, "subprocess", "subprocess.db"))
      assert.strictEqual(r.run, Path.join(home, "run"))

      const checkpoints = yield* NoeticHome.makeCheckpointStorage()
      yield* checkpoints.set("k", 1)
      assert.isTrue(Fs.existsSync(r.checkpointsDatabase))
      assert.deepStrictEqual(NoeticHome.storageLocation(r.checkpoints, NoeticHome.CHECKPOINTS_DATABASE), {
        kind: "sqlite",
        path: r.checkpointsDatabase
      })

      // A subprocess root written by createFileStorage is read as file storage.
      const legacy = yield* FileStorage.make({ root: r.subprocess })
      yield* legacy.set("manifest:old", { from: "files" })
      assert.strictEqual(NoeticHome.storageLocation(r.subprocess, NoeticHome.SUBPROCESS_DATABASE).kind, "file")
      const subprocess = yield* NoeticHome.makeSubprocessStorage()
      assert.deepStrictEqual(yield* subprocess.get("manifest:old"), Option.some({ from: "files" }))
      assert.isFalse(Fs.existsSync(r.subprocessDatabase))

      // A location that names a database file opens it; a directory without one, files.
      const db = yield* NoeticHome.makeStorageAt(r.checkpointsDatabase)
      assert.deepStrictEqual(yield* db.get("k"), Option.some(1))
      assert.strictEqual(NoeticHome.storageLocation(Path.join(home, "other")).kind, "file")
      assert.strictEqual(NoeticHome.storageLocation(Path.join(home, "other.db")).kind, "sqlite")
    }))
})

describe("the CLI on the default SQLite storage", () => {
  it.live("lists, shows and clears executions a harness recorded in checkpoints/checkpoints.db", () =>
    Effect.gen(function*() {
      const home = freshDir()
      const store = yield* CheckpointStore.makeWith(yield* NoeticHome.makeCheckpointStorage(home))
      const harness = yield* AgentHarnessEngine.make({
        name: "cli",
        agentGraph: engineRunCode("root", (_: void, ctx) => Effect.as(ctx.append([{ type: "note", text: "hello" }]), "done"))
      }).pipe(Effect.provideService(CheckpointStore.CheckpointStore, store))
      yield* harness.execute(undefined, { executionId: "exec-sqlite" })
      assert.isTrue(Fs.existsSync(NoeticHome.roots(home).checkpointsDatabase))

      const cli = (...args: Array<string>) =>
        Effect.gen(function*() {
          const exit = yield* Effect.exit(Cli.run(["--home", home, ...args]))
          const out = (yield* TestConsole.logLines).map(String).join("\n")
          return { exit, out }
        }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))
      const listed = yield* cli("executions", "list", "--json")
      assert.isTrue(Exit.isSuccess(listed.exit))
      assert.deepStrictEqual(JSON.parse(listed.out).executions.map((row: { executionId: string }) => row.executionId), ["exec-sqlite"])
      assert.include((yield* cli("executions", "show", "exec-sqlite")).out, "items      1")
      yield* cli("executions", "clear", "exec-sqlite", "--yes")
      assert.deepStrictEqual(JSON.parse((yield* cli("executions", "list", "--json")).out).executions, [])
      assert.deepStrictEqual(yield* store.list, [])
    }).pipe(Effect.scoped))
})
