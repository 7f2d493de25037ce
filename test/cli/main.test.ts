import { describe, it, assert } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import { assertOneLineFailure, cli, freshHome, suite } from "./suite.ts"

describe("noetic-effect CLI on file storage", () => {
  suite(Effect.gen(function*() {
    const home = yield* freshHome
    return {
      args: ["--home", home],
      checkpoints: yield* FileStorage.make({ root: roots(home).checkpoints }),
      subprocess: yield* FileStorage.make({ root: roots(home).subprocess })
    }
  }))

  it.live("a home that is missing or not a directory is one line and a non-zero exit", () =>
    Effect.gen(function*() {
      const home = yield* freshHome
      assertOneLineFailure(yield* cli("--home", Path.join(home, "nope"), "executions", "list"), "no noetic state at")
      const file = Path.join(home, "file")
      Fs.writeFileSync(file, "")
      assertOneLineFailure(yield* cli("--home", file, "children", "list"), "not a directory")
      assertOneLineFailure(yield* cli("--home", home, "--table", "t", "queues", "list"), "--table needs --pg")
      assertOneLineFailure(yield* cli("--home", home, "--pg", "postgres://localhost/x", "queues", "list"), "pass one of them")
      // A home with nothing recorded yet is empty, not an error, and reading it creates nothing.
      const empty = yield* cli("--home", home, "executions", "list")
      assert.strictEqual(empty.code, 0)
      assert.include(empty.out, "no recorded executions")
      assert.isFalse(Fs.existsSync(roots(home).checkpoints))
    }).pipe(Effect.scoped))

  it.live("a usage error is one line naming the help to read", () =>
    Effect.gen(function*() {
      const run = yield* cli("executions", "show")
      assert.strictEqual(run.code, 2)
      assert.strictEqual(run.err.split("\n").length, 1)
      assert.include(run.err, "Missing required argument: execution-id")
      assert.include(run.err, "noetic-effect executions show --help")
    }))

  it.live("paths prints the three roots under the home", () =>
    Effect.gen(function*() {
      const { out } = yield* cli("--home", "/tmp/some-home", "paths")
      assert.include(out, "checkpoints  /tmp/some-home/checkpoints")
      assert.include(out, "subprocess   /tmp/some-home/subprocess")
      assert.include(out, "run          /tmp/some-home/run")
      const json = JSON.parse((yield* cli("--home", "/tmp/some-home", "paths", "--json")).out)
      assert.strictEqual(json.checkpoints, "/tmp/some-home/checkpoints")
    }))
})
