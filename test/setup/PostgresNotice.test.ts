import { spawnSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { postgresNotice } from "./postgresNotice.ts"

describe("npm test: the Postgres notice", () => {
  it("says the Postgres tests are skipped, and how to run them, when NOETIC_PG_URL is unset; nothing when set", () => {
    const notice = postgresNotice({})
    assert.include(notice, "Postgres tests SKIPPED")
    assert.include(notice, "NOETIC_PG_URL=postgres://")
    assert.strictEqual(postgresNotice({ NOETIC_PG_URL: "" }), notice)
    assert.isUndefined(postgresNotice({ NOETIC_PG_URL: "postgres://postgres@127.0.0.1:5432/test" }))
  })

  it("a vitest run without NOETIC_PG_URL prints it once, from its global setup (the URL set: see the test above)", () => {
    const env = { ...process.env }
    delete env.NOETIC_PG_URL
    const run = (extra: Record<string, string>) =>
      spawnSync("npx", ["vitest", "run", "test/setup/PostgresNotice.test.ts", "-t", "says the Postgres"], {
        env: { ...env, ...extra },
        encoding: "utf8",
        timeout: 120_000
      })
    const without = run({})
    assert.strictEqual(without.status, 0, without.stderr)
    assert.strictEqual((without.stdout + without.stderr).split("Postgres tests SKIPPED").length - 1, 1)
  }, 240_000)
})
