import { describe } from "@effect/vitest"
import { Effect } from "effect"
import * as SqliteStorage from "../../src/layers/SqliteStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import { freshHome } from "../cli/suite.ts"
import { suite } from "./suite.ts"

describe("the inspector on the default SQLite storage", () => {
  suite(Effect.gen(function*() {
    const home = yield* freshHome
    const r = roots(home)
    return {
      args: ["--home", home],
      checkpoints: yield* SqliteStorage.make({ path: r.checkpointsDatabase }),
      subprocess: yield* SqliteStorage.make({ path: r.subprocessDatabase })
    }
  }))
})
