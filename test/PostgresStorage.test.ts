import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, type Scope } from "effect"
import { SqlClient, Statement } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { getMany, StorageAdapter } from "../src/services/StorageAdapter.ts"
import { suite as stepLedgerSuite } from "./StepLedgerSuite.ts"
import { suite } from "./StorageSuite.ts"
import { clientLayer, dropOnClose, freshTableName, storageOnFreshTable } from "./postgresFixture.ts"

const url = process.env.NOETIC_PG_URL

// CI exports NOETIC_PG_URL; a CI run without it would silently skip every Postgres
// test below, so there it fails instead.
describe("PostgresStorage test setup", () => {
  it("has NOETIC_PG_URL whenever CI is set", () => {
    if (process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false") {
      assert.isDefined(url, "CI is set but NOETIC_PG_URL is not: the Postgres storage tests would not run")
    }
  })
})

/** A storage on a table of its own, dropped when the layer is released. */
const freshStorage = () => storageOnFreshTable()

/** Runs `f` with a SQL client and a fresh table name; the table is dropped afterwards. */
const withTable = <A, E>(
  f: (sql: SqlClient.SqlClient, table: string) => Effect.Effect<A, E, SqlClient.SqlClient | Scope.Scope>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = freshTableName()
    yield* dropOnClose(table)
    return yield* f(sql, table)
  }).pipe(Effect.scoped, Effect.provide(clientLayer()))

const useStorage = <A, E>(f: (storage: StorageAdapter["Service"]) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    return yield* f(yield* StorageAdapter)
  })

describe.skipIf(url === undefined)("PostgresStorage", () => {
  suite("postgres", freshStorage)
  // A ledger load reads the rows' text (scanText) on Postgres too.
  stepLedgerSuite("postgres", freshStorage)

  it.effect("a corrupt row is a typed Corrupt failure naming the key, and other keys are unaffected", () =>
    withTable((sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        yield* storage.set("intact", { ok: true })
        yield* sql`INSERT INTO ${sql(table)} (key, value) VALUES ('torn', '{"half":')`

        const error = yield* Effect.flip(storage.get("torn"))
        assert.strictEqual(error.reason._tag, "Corrupt")
        assert.strictEqual(error.reason.key, "torn")
        const manyError = yield* Effect.flip(storage.getMany!(["intact", "torn"]))
        assert.strictEqual(manyError.reason._tag, "Corrupt")
        assert.strictEqual(manyError.reason.key, "torn")
        assert.deepStrictEqual(yield* storage.get("intact"), Option.some({ ok: true }))
        assert.deepStrictEqual(yield* storage.list(""), ["intact", "torn"])

        yield* storage.set("torn", 1)
        assert.deepStrictEqual(yield* storage.get("torn"), Option.some(1))
      })
    ))

  it.effect("getMany of many keys is one statement", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        const keys = Array.from({ length: 20 }, (_, i) => `k:${i}`)
        yield* Effect.forEach(keys.slice(0, 15), (key) => storage.set(key, key), { discard: true })

        const statements: Array<string> = []
        const found = yield* getMany(storage, [...keys, "absent"]).pipe(
          Effect.provideService(Statement.CurrentTransformer, (statement) =>
            Effect.sync(() => {
              statements.push(statement.compile()[0])
              return statement
            }))
        )
        assert.strictEqual(found.size, 15)
        assert.isFalse(found.has("absent"))
        assert.strictEqual(statements.length, 1, statements.join("\n"))
        assert.match(statements[0]!, /^SELECT/)
      })
    ))

  it.effect("a step-ledger load is one statement", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        const ledger = yield* StepLedger.makeWith(yield* CheckpointStore.makeWith(storage))
        const writing = yield* ledger.open("exec")
        for (let i = 0; i < 25; i++) yield* writing.record(`/root#0/step#${i}`, { stepId: "step", kind: "runCode" }, i)
        yield* storage.set("execution:exec:ledger:not-a-seq", "foreign")

        const statements: Array<string> = []
        const loaded = yield* ledger.open("exec").pipe(
          Effect.provideService(Statement.CurrentTransformer, (statement) =>
            Effect.sync(() => {
              statements.push(statement.compile()[0])
              return statement
            }))
        )
        assert.strictEqual(statements.length, 1, statements.join("\n"))
        assert.strictEqual((yield* loaded.entries).length, 25)
        assert.deepStrictEqual(
          yield* loaded.lookup("/root#0/step#24", { stepId: "step", kind: "runCode" }),
          Option.some(24)
        )
      })
    ))

  it.effect("list treats %, _, \\ and ! in a prefix literally", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        const keys = ["100%", "100%x", "1000", "a_b", "a_b2", "aXb", "c\\d", "c\\d\\", "cXd", "e!f", "e!!f", "ef"]
        yield* Effect.forEach(keys, (key) => storage.set(key, key), { discard: true })
        assert.deepStrictEqual(yield* storage.list("100%"), ["100%", "100%x"])
        assert.deepStrictEqual(yield* storage.list("a_"), ["a_b", "a_b2"])
        assert.deepStrictEqual(yield* storage.list("c\\"), ["c\\d", "c\\d\\"])
        assert.deepStrictEqual(yield* storage.list("e!"), ["e!!f", "e!f"])
        assert.deepStrictEqual(yield* storage.list("%"), [])
        assert.deepStrictEqual(yield* storage.list("_"), [])
      })
    ))

  it.effect("list sorts by UTF-16 code unit, also with astral characters and a prefix that splits a pair", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        // By code point (the C collation) U+E000 and U+FFFD sort before U+1F600; by
        // UTF-16 code unit the surrogate 0xD83D sorts first.
        const keys = ["\uFFFD", "\u{1F601}", "\uE000", "a", "\u{1F600}", "\u{1F600}x", "\u{10000}"]
        yield* Effect.forEach(keys, (key) => storage.set(key, key), { discard: true })
        assert.deepStrictEqual(yield* storage.list(""), ["a", "\u{10000}", "\u{1F600}", "\u{1F600}x", "\u{1F601}", "\uE000", "\uFFFD"])
        assert.deepStrictEqual(yield* storage.list("\ud83d"), ["\u{1F600}", "\u{1F600}x", "\u{1F601}"])
        assert.deepStrictEqual(yield* storage.list("\u{1F600}"), ["\u{1F600}", "\u{1F600}x"])

        // Prefixes whose range bound must skip the surrogate block or carry past U+10FFFF.
        const edges = ["\uD7FF", "\uD7FFx", "b\u{10FFFF}", "b\u{10FFFF}y", "c", "\u{10FFFF}", "\u{10FFFF}\u{10FFFF}"]
        yield* Effect.forEach(edges, (key) => storage.set(key, key), { discard: true })
        assert.deepStrictEqual(yield* storage.list("\uD7FF"), ["\uD7FF", "\uD7FFx"])
        assert.deepStrictEqual(yield* storage.list("b\u{10FFFF}"), ["b\u{10FFFF}", "b\u{10FFFF}y"])
        assert.deepStrictEqual(yield* storage.list("\u{10FFFF}"), ["\u{10FFFF}", "\u{10FFFF}\u{10FFFF}"])
      })
    ))

  it.effect("keys with U+0000 and U+0001 are distinct, round-trip and list by prefix", () =>
    withTable((sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        const keys = ["a", "a\u0000", "a\u00000", "a\u0001", "a\u00010", "a0", "a1", "\u0001\u0000\u0001"]
        yield* Effect.forEach(keys, (key) => storage.set(key, key), { discard: true })
        for (const key of keys) assert.deepStrictEqual(yield* storage.get(key), Option.some(key))
        assert.deepStrictEqual(yield* storage.list(""), [...keys].sort())
        assert.deepStrictEqual(yield* storage.list("a\u0000"), ["a\u0000", "a\u00000"])
        assert.deepStrictEqual(yield* storage.list("a\u0001"), ["a\u0001", "a\u00010"])
        const found = yield* storage.getMany!(keys)
        assert.deepStrictEqual([...found.keys()].sort(), [...keys].sort())
        // Plain keys are stored as they are, readable from psql.
        const rows = yield* sql<{ key: string }>`SELECT key FROM ${sql(table)} WHERE key = 'a0'`
        assert.strictEqual(rows.length, 1)
      })
    ))

  it.effect("values keep their exact JSON text: key order and number spelling survive", () =>
    withTable((sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        const value = { z: 1, a: [1e21, 0.1, 5e-324, 12345678901234567890, -0], m: "nul \u0000 lone \ud800", b: null }
        yield* storage.set("v", value)
        const stored = yield* storage.get("v")
        assert.isTrue(Option.isSome(stored))
        if (Option.isSome(stored)) assert.strictEqual(JSON.stringify(stored.value), JSON.stringify(value))
        const rows = yield* sql<{ value: string }>`SELECT value FROM ${sql(table)} WHERE key = 'v'`
        assert.strictEqual(rows[0]?.value, JSON.stringify(value))
      })
    ))

  it.effect("a key that is not well-formed Unicode is refused", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const storage = yield* PostgresStorage.make({ table })
        const error = yield* Effect.flip(storage.set("lone \ud800 surrogate", 1))
        assert.strictEqual(error.reason._tag, "Unserializable")
        assert.deepStrictEqual(yield* storage.list(""), [])
      })
    ))

  it.effect("the table outlives the storage: a new storage on it reads what the old one wrote", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const first = yield* PostgresStorage.make({ table })
        yield* first.set("kept", [1, 2])
        const second = yield* PostgresStorage.make({ table })
        assert.deepStrictEqual(yield* second.get("kept"), Option.some([1, 2]))
      })
    ))

  it.effect("layerFromUrl owns its pool and serves the table", () =>
    withTable((_sql, table) =>
      Effect.gen(function*() {
        const storage = yield* StorageAdapter
        yield* storage.set("x", { from: "url" })
        assert.deepStrictEqual(yield* storage.get("x"), Option.some({ from: "url" }))
      }).pipe(Effect.provide(PostgresStorage.layerFromUrl(url ?? "", { table, maxConnections: 2 })))
    ))

  it.effect("an unreachable server is an Io failure", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.provide(useStorage(() => Effect.void), PostgresStorage.layerFromUrl("postgres://postgres@127.0.0.1:1/test"))
      )
      assert.strictEqual(error.reason._tag, "Io")
    }))

  /** Runs `f` with the URL of a fresh login role that is dropped afterwards. */
  const withRole = <A, E>(
    sql: SqlClient.SqlClient,
    f: (role: string, roleUrl: string) => Effect.Effect<A, E>
  ) =>
    Effect.gen(function*() {
      const role = `noetic_role_${randomUUID().slice(0, 8)}`
      yield* sql`CREATE ROLE ${sql(role)} LOGIN`
      yield* Effect.addFinalizer(() =>
        Effect.ignore(Effect.andThen(sql`DROP OWNED BY ${sql(role)}`, sql`DROP ROLE IF EXISTS ${sql(role)}`))
      )
      const roleUrl = new URL(url ?? "")
      roleUrl.username = role
      roleUrl.password = ""
      return yield* f(role, roleUrl.href)
    })

  it.effect("a role without grants on the table gets Permission failures", () =>
    withTable((sql, table) =>
      Effect.gen(function*() {
        yield* PostgresStorage.make({ table })
        yield* withRole(sql, (_role, roleUrl) =>
          Effect.gen(function*() {
            const error = yield* Effect.flip(
              useStorage((storage) => storage.get("k")).pipe(
                Effect.provide(PostgresStorage.layerFromUrl(roleUrl, { table }))
              )
            )
            assert.strictEqual(error.reason._tag, "Permission")
            assert.strictEqual(error.operation, "get")
          }))
      })
    ))

  it.effect("a role that may use the table but not create in the schema opens an existing table", () =>
    withTable((sql, table) =>
      Effect.gen(function*() {
        yield* PostgresStorage.make({ table })
        yield* withRole(sql, (role, roleUrl) =>
          Effect.gen(function*() {
            yield* sql`GRANT SELECT, INSERT, UPDATE, DELETE ON ${sql(table)} TO ${sql(role)}`
            yield* useStorage((storage) =>
              Effect.gen(function*() {
                yield* storage.set("k", { by: "app role" })
                assert.deepStrictEqual(yield* storage.get("k"), Option.some({ by: "app role" }))
              })
            ).pipe(Effect.provide(PostgresStorage.layerFromUrl(roleUrl, { table })))
          }))
      })
    ))
})
