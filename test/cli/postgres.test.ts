import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { pgTable, pgUrl } from "./backends.ts"
import { assertOneLineFailure, cli, suite } from "./suite.ts"

describe.skipIf(pgUrl === undefined)("noetic-effect CLI on PostgreSQL", () => {
  suite(pgTable("noetic_cli_"))

  it.live("a bad URL, an unreachable server and a missing table are one line and a non-zero exit", () =>
    Effect.gen(function*() {
      assertOneLineFailure(yield* cli("--pg", "not a url", "executions", "list"), "bad --pg URL")
      assertOneLineFailure(yield* cli("--pg", "mysql://localhost/x", "executions", "list"), "bad --pg URL")
      assertOneLineFailure(yield* cli("--pg", "postgres://postgres:secret@127.0.0.1:1/test", "children", "list"), "cannot connect to PostgreSQL")
      const hidden = yield* cli("--pg", "postgres://postgres:secret@127.0.0.1:1/test", "queues", "list")
      if (hidden.err.includes("secret")) throw new Error(`the password leaked: ${hidden.err}`)
      const table = `noetic_cli_missing_${randomUUID().replaceAll("-", "")}`
      assertOneLineFailure(yield* cli("--pg", pgUrl!, "--table", table, "executions", "list"), `no table ${table}`)
    }), { timeout: 60_000 })
})
