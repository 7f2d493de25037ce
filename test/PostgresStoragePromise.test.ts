import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { createPostgresStorage } from "../src/promise/index.ts"
import { facadeStorageSuite } from "./FacadeStorageSuite.ts"

const url = process.env.NOETIC_PG_URL

/** Drops a test table through a short-lived client of the same database. */
const dropTable = (table: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
    }).pipe(Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url ?? "") }))), Effect.ignore)
  )

describe.skipIf(url === undefined)("createPostgresStorage", () => {
  facadeStorageSuite("createPostgresStorage", async () => {
    const table = `noetic_test_${randomUUID().replaceAll("-", "")}`
    return { open: () => createPostgresStorage({ url: url ?? "", table }), cleanup: () => dropTable(table) }
  })

  it.effect("closing a storage that was never used does not connect", () =>
    Effect.promise(() => createPostgresStorage({ url: "postgres://postgres@127.0.0.1:1/nowhere" }).close()))
})

describe.skipIf(url === undefined)("createPostgresStorage's pool", () => {
  it("is let go once idle and opened again by the next operation; a failed open is tried again", async () => {
    const table = `noetic_test_${randomUUID().replaceAll("-", "")}`
    const storage = createPostgresStorage({ url: url ?? "", table, idleCloseMs: 20 })
    try {
      await storage.set("k", { n: 1 })
      await new Promise((resolve) => setTimeout(resolve, 200))
      // Idle: no connection is left (the process could exit here).
      if (process.getActiveResourcesInfo().includes("TCPSocketWrap")) {
        const sockets = process.getActiveResourcesInfo().filter((type) => type === "TCPSocketWrap").length
        throw new Error(`the idle pool still holds ${sockets} socket(s)`)
      }
      await storage.set("k", { n: 2 })
      expect(await storage.get("k")).toEqual({ n: 2 })
      expect(await storage.list("")).toEqual(["k"])
    } finally {
      await storage.close()
      await dropTable(table)
    }
    const nowhere = createPostgresStorage({ url: "postgres://postgres@127.0.0.1:1/nowhere", idleCloseMs: 20 })
    await expect(nowhere.get("k")).rejects.toMatchObject({ code: "STORAGE_IO" })
    await expect(nowhere.get("k")).rejects.toMatchObject({ code: "STORAGE_IO" })
    await nowhere.close()
  }, 60_000)
})
