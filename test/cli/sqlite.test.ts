import { describe, it, assert } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as SqliteStorage from "../../src/layers/SqliteStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import { cli, freshHome, suite } from "./suite.ts"

describe("noetic-effect CLI on the default SQLite storage", () => {
  // The home's default databases: checkpoints/checkpoints.db and subprocess/subprocess.db.
  suite(Effect.gen(function*() {
    const home = yield* freshHome
    const r = roots(home)
    return {
      args: ["--home", home],
      checkpoints: yield* SqliteStorage.make({ path: r.checkpointsDatabase }),
      subprocess: yield* SqliteStorage.make({ path: r.subprocessDatabase })
    }
  }))

  it.live("reading a home whose databases do not exist yet creates none", () =>
    Effect.gen(function*() {
      const home = yield* freshHome
      Fs.mkdirSync(roots(home).checkpoints)
      const listed = yield* cli("--home", home, "executions", "list")
      assert.strictEqual(listed.code, 0, listed.err)
      assert.include(listed.out, "no recorded executions")
      assert.isFalse(Fs.existsSync(roots(home).checkpointsDatabase))
    }).pipe(Effect.scoped))
})
