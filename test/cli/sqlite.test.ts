import { describe, it, assert } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import { roots } from "../../src/NoeticHome.ts"
import { freshHome, sqliteHome } from "./backends.ts"
import { cli, suite } from "./suite.ts"

describe("noetic-effect CLI on the default SQLite storage", () => {
  suite(sqliteHome)

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
