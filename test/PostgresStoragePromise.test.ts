import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { AgentHarness, createCheckpointStore, createPostgresStorage, NoeticError, runCode } from "../src/promise/index.ts"
import { toEngineStorage } from "../src/promise/storage.ts"

const url = process.env.NOETIC_PG_URL

describe.skipIf(url === undefined)("createPostgresStorage", () => {
  it.effect("stores through Promises, shares its engine, and rejects after close()", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = `noetic_test_${randomUUID().replaceAll("-", "")}`
      yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
      const storage = createPostgresStorage({ url: url ?? "", table })

      yield* Effect.promise(() => storage.set("a:1", { n: 1 }))
      yield* Effect.promise(() => storage.set("a:2", 0))
      assert.deepStrictEqual(yield* Effect.promise(() => storage.get("a:1")), { n: 1 })
      assert.isNull(yield* Effect.promise(() => storage.get("missing")))
      assert.deepStrictEqual(yield* Effect.promise(() => storage.list("a:")), ["a:1", "a:2"])
      const found = yield* Effect.promise(() => storage.getMany!(["a:2", "missing"]))
      assert.deepStrictEqual([...found.entries()], [["a:2", 0]])

      const engine = yield* toEngineStorage(storage)
      assert.deepStrictEqual(yield* engine.get("a:1"), Option.some({ n: 1 }))

      yield* Effect.promise(() => storage.close())
      yield* Effect.promise(() => storage.close())
      const rejected = yield* Effect.promise(() => storage.get("a:1").then(() => undefined, (error: unknown) => error))
      assert.instanceOf(rejected, NoeticError)
      assert.strictEqual((rejected as NoeticError).code, "STORAGE_IO")
      const engineError = yield* Effect.flip(engine.get("a:1"))
      assert.strictEqual(engineError.reason._tag, "Io")
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url ?? "") })))))

  it.effect("backs a leased harness: executions run under a lease, and a second host is refused while it is held", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = `noetic_test_${randomUUID().replaceAll("-", "")}`
      yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
      const storage = createPostgresStorage({ url: url ?? "", table })
      yield* Effect.addFinalizer(() => Effect.promise(() => storage.close()))
      let open!: () => void
      const gate = new Promise<void>((resolve) => (open = resolve))
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const hostOf = (owner: string) =>
        new AgentHarness({
          name: owner,
          agentGraph: runCode("root", async (n: number) => {
            started()
            await gate
            return n + 1
          }),
          environment: {
            storage: { checkpointStore: createCheckpointStore({ storage }), lease: { owner, ttlMs: 60_000 } }
          }
        })
      const a = hostOf("host-a")
      const b = hostOf("host-b")
      yield* Effect.addFinalizer(() => Effect.promise(() => Promise.all([a.close(), b.close()])))
      const first = a.execute(1, { executionId: "pg-leased" })
      first.catch(() => {})
      yield* Effect.promise(() => Promise.race([running, first.then(() => undefined, () => undefined)]))
      const refused = yield* Effect.promise(() =>
        b.execute(1, { executionId: "pg-leased" }).then(() => undefined, (error: unknown) => error)
      )
      open()
      assert.deepStrictEqual(yield* Effect.promise(() => first), { executionId: "pg-leased", output: 2 })
      assert.instanceOf(refused, NoeticError)
      assert.strictEqual((refused as NoeticError).code, "EXECUTION_LEASE_HELD")
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(url ?? "") })))))

  it.effect("closing a storage that was never used does not connect", () =>
    Effect.promise(() => createPostgresStorage({ url: "postgres://postgres@127.0.0.1:1/nowhere" }).close()))
})
