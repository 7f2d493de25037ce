import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Scope } from "effect"
import * as fc from "fast-check"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { DatabaseSync } from "node:sqlite"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import { suite } from "./StorageSuite.ts"

const freshPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sqlite-")), "storage.db")

suite("sqlite", () => SqliteStorage.layer({ path: freshPath() }))

/** The table as versions before the rowid layout created it: each row in its key's b-tree. */
const LEGACY_TABLE = `CREATE TABLE ${SqliteStorage.TABLE} (key BLOB PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`

/** A fresh database whose table an earlier version created `WITHOUT ROWID`. */
const legacyPath = () => {
  const path = freshPath()
  const db = new DatabaseSync(path)
  try {
    db.exec(LEGACY_TABLE)
  } finally {
    db.close()
  }
  return path
}

suite("sqlite, a database created WITHOUT ROWID", () => SqliteStorage.layer({ path: legacyPath() }))

/** A second connection to the file, as the sqlite3 shell or another tool would open it. */
const withRaw = <A>(path: string, f: (db: DatabaseSync) => A): A => {
  const db = new DatabaseSync(path)
  db.exec("PRAGMA busy_timeout = 10000")
  try {
    return f(db)
  } finally {
    db.close()
  }
}

const WAL_HEADER = 32
const WAL_FRAME = 4096 + 24
const walFrames = (path: string) => (Fs.statSync(`${path}-wal`).size - WAL_HEADER) / WAL_FRAME

describe("SqliteStorage", () => {
  it.effect("creates its directory (0700) and database (0600) in WAL mode, and the data outlives the storage", () =>
    Effect.gen(function*() {
      const dir = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sqlite-")), "nested", "deeper")
      const path = Path.join(dir, "data.db")
      const scope = yield* Scope.make()
      const storage = yield* Scope.provide(SqliteStorage.make({ path }), scope)
      yield* storage.set("kept", [1, 2])
      assert.strictEqual(Fs.statSync(dir).mode & 0o777, 0o700)
      assert.strictEqual(Fs.statSync(path).mode & 0o777, 0o600)
      assert.strictEqual(Fs.statSync(`${path}-wal`).mode & 0o777, 0o600)
      assert.deepStrictEqual(withRaw(path, (db) => db.prepare("PRAGMA journal_mode").get()), { journal_mode: "wal" })
      yield* Scope.close(scope, Exit.void)

      const error = yield* Effect.flip(storage.get("kept"))
      assert.strictEqual(error.reason._tag, "Io")
      const again = yield* SqliteStorage.make({ path })
      assert.deepStrictEqual(yield* again.get("kept"), Option.some([1, 2]))
    }))

  it.effect("list sorts by UTF-16 code unit, also with astral characters and a prefix that splits a pair", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      // By UTF-8 bytes (SQLite's BINARY collation of text) U+E000 and U+FFFD sort
      // before U+1F600; by UTF-16 code unit the surrogate 0xD83D sorts first.
      const keys = ["\uFFFD", "\u{1F601}", "\uE000", "a", "\u{1F600}", "\u{1F600}x", "\u{10000}"]
      yield* Effect.forEach(keys, (key) => storage.set(key, key), { discard: true })
      const sorted = ["a", "\u{10000}", "\u{1F600}", "\u{1F600}x", "\u{1F601}", "\uE000", "\uFFFD"]
      assert.deepStrictEqual(yield* storage.list(""), sorted)
      assert.deepStrictEqual([...keys].sort(), sorted)
      assert.deepStrictEqual((yield* storage.scan!("")).map(([key]) => key), sorted)
      assert.deepStrictEqual(yield* storage.list("\ud83d"), ["\u{1F600}", "\u{1F600}x", "\u{1F601}"])
      assert.deepStrictEqual(yield* storage.list("\u{1F600}"), ["\u{1F600}", "\u{1F600}x"])

      // Prefixes whose upper bound must carry: code units 0x..FF and 0xFFFF.
      const edges = ["\u00FF", "\u00FFx", "\u0100", "\uFFFF", "\uFFFF\uFFFF", "b\uFFFF", "b\uFFFFy", "c"]
      yield* Effect.forEach(edges, (key) => storage.set(key, key), { discard: true })
      assert.deepStrictEqual(yield* storage.list("\u00FF"), ["\u00FF", "\u00FFx"])
      assert.deepStrictEqual(yield* storage.list("\uFFFF"), ["\uFFFF", "\uFFFF\uFFFF"])
      assert.deepStrictEqual(yield* storage.list("b\uFFFF"), ["b\uFFFF", "b\uFFFFy"])
    }))

  // Characters around every boundary where UTF-8 byte order and UTF-16 code unit order
  // part, or where a range bound must carry.
  const edgeChar = fc.constantFrom(
    "a", "\u0000", "\u007F", "\u0080", "\u00FF", "\u0100", "\uD7FF", "\uE000", "\uFFFD", "\uFFFF",
    "\u{10000}", "\u{1F600}", "\u{1F601}", "\u{10FFFF}"
  )
  const edgeKey = fc.string({ unit: edgeChar, minLength: 1, maxLength: 4 })

  it("list and scan of any prefix agree with JavaScript's code-unit order", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(edgeKey, { maxLength: 25 }),
        fc.array(fc.string({ unit: edgeChar, maxLength: 3 }), { maxLength: 6 }),
        (keys, prefixes) =>
          Effect.runPromise(Effect.scoped(Effect.gen(function*() {
            const storage = yield* SqliteStorage.make({ path: freshPath() })
            yield* Effect.forEach(keys, (key) => storage.set(key, key), { concurrency: "unbounded", discard: true })
            // Prefixes that end inside a surrogate pair, too.
            const cut = keys.map((key) => key.slice(0, key.length - 1)).filter((prefix) => prefix.length > 0)
            for (const prefix of ["", ...prefixes, ...cut]) {
              const expected = keys.filter((key) => key.startsWith(prefix)).sort()
              assert.deepStrictEqual(yield* storage.list(prefix), expected, JSON.stringify(prefix))
              assert.deepStrictEqual((yield* storage.scan!(prefix)).map(([key]) => key), expected)
            }
          })))
      ),
      { numRuns: 60 }
    )
  }, 120_000)

  it.effect("no character of a prefix is special", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      const keys = ["100%", "100%x", "1000", "a_b", "a_b2", "aXb", "c\\d", "c\\d\\", "cXd", "e*f", "e?f", "ef", "n\u0000", "n\u00000", "n0"]
      yield* Effect.forEach(keys, (key) => storage.set(key, key), { discard: true })
      assert.deepStrictEqual(yield* storage.list("100%"), ["100%", "100%x"])
      assert.deepStrictEqual(yield* storage.list("a_"), ["a_b", "a_b2"])
      assert.deepStrictEqual(yield* storage.list("c\\"), ["c\\d", "c\\d\\"])
      assert.deepStrictEqual(yield* storage.list("e*"), ["e*f"])
      assert.deepStrictEqual(yield* storage.list("n\u0000"), ["n\u0000", "n\u00000"])
      assert.deepStrictEqual(yield* storage.list("%"), [])
      assert.deepStrictEqual(yield* storage.list("_"), [])
    }))

  it("a prefix is a range scan of the primary key, and getMany and scan are one query each", () => {
    const path = freshPath()
    Effect.runSync(Effect.scoped(Effect.asVoid(SqliteStorage.make({ path }))))
    withRaw(path, (db) => {
      const plan = (sql: string) =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((row) => row.detail).join("; ")
      // The primary key is the index SQLite made for it; a listing reads the index alone.
      const key = "INDEX sqlite_autoindex_noetic_storage_1"
      assert.strictEqual(plan(SqliteStorage.SQL.listRange), `SEARCH noetic_storage USING COVERING ${key} (key>? AND key<?)`)
      assert.strictEqual(plan(SqliteStorage.SQL.scanRange), `SEARCH noetic_storage USING ${key} (key>? AND key<?)`)
      assert.strictEqual(plan(SqliteStorage.SQL.listFrom), `SEARCH noetic_storage USING COVERING ${key} (key>?)`)
      assert.strictEqual(plan(SqliteStorage.SQL.scanFrom), `SEARCH noetic_storage USING ${key} (key>?)`)
      assert.include(plan(SqliteStorage.SQL.getMany), `SEARCH noetic_storage USING ${key} (key=?)`)
      assert.notMatch(plan(SqliteStorage.SQL.getMany), /SCAN noetic_storage/)
      assert.notMatch(plan(SqliteStorage.SQL.scanAll), /TEMP B-TREE/)
    })
  })

  it.effect("large values stay out of the key's b-tree, so a search by key reads no value", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path })
      const large = "v".repeat(100_000)
      yield* Effect.forEach(Array.from({ length: 8 }, (_, i) => `batch:${i}`), (key) => storage.set(key, large), { discard: true })
      yield* storage.delete("batch:3")
      assert.deepStrictEqual(yield* storage.list("batch:"), ["batch:0", "batch:1", "batch:2", "batch:4", "batch:5", "batch:6", "batch:7"])
      // Per b-tree (dbstat): the table holds the values, the primary key index only keys.
      const btrees = withRaw(path, (db) =>
        db.prepare(
          "SELECT name, sum(payload) AS payload, sum(pagetype = 'overflow') AS overflow FROM dbstat WHERE name LIKE 'sqlite_autoindex_noetic_storage%' OR name = ? GROUP BY name ORDER BY name"
        ).all(SqliteStorage.TABLE) as Array<{ name: string; payload: number; overflow: number }>)
      assert.deepStrictEqual(btrees.map((btree) => btree.name), [SqliteStorage.TABLE, "sqlite_autoindex_noetic_storage_1"])
      const [table, key] = btrees
      assert.isAbove(table!.payload, 7 * 100_000)
      assert.isBelow(key!.payload, 1_000)
      assert.strictEqual(key!.overflow, 0)
    }))

  it.effect("writeAll is one transaction: a statement failing in it rolls back the writes before it", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path })
      yield* storage.set("guarded", 1)
      // Another tool's trigger refuses the delete of "guarded" halfway through the group.
      withRaw(path, (db) =>
        db.exec(
          `CREATE TRIGGER refuse BEFORE DELETE ON ${SqliteStorage.TABLE} WHEN old.key = X'0067007500610072006400650064' BEGIN SELECT RAISE(ABORT, 'refused'); END`
        ))
      const error = yield* Effect.flip(storage.writeAll!([
        { op: "set", key: "first", value: 1 },
        { op: "delete", key: "guarded" },
        { op: "set", key: "last", value: 2 }
      ]))
      assert.strictEqual(error.reason._tag, "Io")
      assert.deepStrictEqual(yield* storage.scan(""), [["guarded", 1]])
      yield* storage.writeAll!([{ op: "set", key: "first", value: 1 }, { op: "set", key: "last", value: 2 }])
      assert.deepStrictEqual(yield* storage.list(""), ["first", "guarded", "last"])
    }))

  it.effect("a database created WITHOUT ROWID by an earlier version keeps its layout and its rows", () =>
    Effect.gen(function*() {
      const path = legacyPath()
      const first = yield* SqliteStorage.make({ path })
      yield* first.set("a", { n: 1 })
      yield* first.set("b", "x".repeat(50_000))
      yield* first.delete("b")
      assert.isTrue(yield* first.compareAndSet!("c", Option.none(), 3))
      const second = yield* SqliteStorage.make({ path })
      assert.deepStrictEqual(yield* second.scan(""), [["a", { n: 1 }], ["c", 3]])
      withRaw(path, (db) => {
        const { sql } = db.prepare("SELECT sql FROM sqlite_schema WHERE name = ?").get(SqliteStorage.TABLE) as { sql: string }
        assert.strictEqual(sql, LEGACY_TABLE)
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${SqliteStorage.SQL.scanRange}`).all() as Array<{ detail: string }>)
        assert.strictEqual(plan.map((row) => row.detail).join("; "), "SEARCH noetic_storage USING PRIMARY KEY (key>? AND key<?)")
      })
    }))

  it.effect("a step-ledger load reads what was recorded, through one scan of the rows' text", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      let scans = 0
      const counted = {
        ...storage,
        scan: (prefix: string) => Effect.suspend(() => (scans += 100, storage.scan(prefix))),
        scanText: (prefix: string) => Effect.suspend(() => (scans++, storage.scanText!(prefix)))
      }
      const ledger = yield* StepLedger.makeWith(yield* CheckpointStore.makeWith(counted))
      const writing = yield* ledger.open("exec")
      for (let i = 0; i < 25; i++) yield* writing.record(`/root#0/step#${i}`, { stepId: "step", kind: "runCode" }, i)
      scans = 0
      const loaded = yield* ledger.open("exec")
      assert.strictEqual(scans, 1)
      assert.strictEqual((yield* loaded.entries).length, 25)
    }))

  it.effect("values keep their exact JSON text: key order and number spelling survive", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path })
      const value = { z: 1, a: [1e21, 0.1, 5e-324, 12345678901234567890, -0], m: "nul \u0000 lone \ud800 \u{1F600}", b: null }
      yield* storage.set("v", value)
      const stored = yield* storage.get("v")
      assert.strictEqual(JSON.stringify(Option.getOrThrow(stored)), JSON.stringify(value))
      const raw = withRaw(path, (db) => db.prepare("SELECT value, typeof(value) AS type FROM noetic_storage").get())
      assert.deepStrictEqual(raw, { value: JSON.stringify(value), type: "text" })
    }))

  it.effect("a damaged row is Corrupt naming its key, and other keys are unaffected", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path })
      yield* storage.set("intact", { ok: true })
      yield* storage.set("torn", { half: "x" })
      yield* storage.set("blob", 1)
      withRaw(path, (db) => {
        db.prepare("UPDATE noetic_storage SET value = '{\"half\":' WHERE value LIKE '{\"half%'").run()
        db.prepare("UPDATE noetic_storage SET value = x'00ff' WHERE value = '1'").run()
      })
      for (const key of ["torn", "blob"]) {
        const error = yield* Effect.flip(storage.get(key))
        assert.strictEqual(error.reason._tag, "Corrupt")
        assert.strictEqual(error.reason.key, key)
      }
      const manyError = yield* Effect.flip(storage.getMany!(["intact", "torn"]))
      assert.strictEqual(manyError.reason._tag, "Corrupt")
      assert.strictEqual(manyError.reason.key, "torn")
      const scanError = yield* Effect.flip(storage.scan!(""))
      assert.strictEqual(scanError.reason._tag, "Corrupt")
      assert.deepStrictEqual(yield* storage.get("intact"), Option.some({ ok: true }))
      assert.deepStrictEqual(yield* storage.list(""), ["blob", "intact", "torn"])
      // A fence record that is damaged refuses the fenced write as Corrupt.
      const fenceError = yield* Effect.flip(storage.setFenced!("data", 1, { key: "torn", token: 1 }))
      assert.strictEqual(fenceError.reason._tag, "Corrupt")
      assert.strictEqual(fenceError.reason.key, "torn")

      // Overwriting repairs a key; a foreign row with a key that is not UTF-16 is Corrupt too.
      yield* storage.set("torn", 1)
      assert.deepStrictEqual(yield* storage.get("torn"), Option.some(1))
      withRaw(path, (db) => db.prepare("INSERT INTO noetic_storage (key, value) VALUES (x'006100', '1')").run())
      const listError = yield* Effect.flip(storage.list(""))
      assert.strictEqual(listError.reason._tag, "Corrupt")
      assert.strictEqual(listError.reason.key, "0x006100")
      // Under a prefix too (a range that reads each key past the prefix), whole or as text.
      for (const error of [
        yield* Effect.flip(storage.list("a")),
        yield* Effect.flip(storage.scan!("a")),
        yield* Effect.flip(storage.scanText!("a"))
      ]) {
        assert.strictEqual(error.reason._tag, "Corrupt")
        assert.strictEqual(error.reason.key, "0x006100")
      }
    }))

  it.effect("an empty key and a key that is not well-formed Unicode are refused, storing nothing", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      for (const key of ["", "lone \ud800 surrogate", "\udc00"]) {
        const error = yield* Effect.flip(storage.set(key, 1))
        assert.strictEqual(error.reason._tag, "Unserializable")
        assert.strictEqual((yield* Effect.flip(storage.get(key))).reason._tag, "Unserializable")
      }
      assert.deepStrictEqual(yield* storage.list(""), [])
    }))

  it.effect("concurrent writes share one transaction: a burst of 64 sets appends a few log pages, not 64 commits", () =>
    Effect.gen(function*() {
      const path = freshPath()
      // Pages are counted by the log's growth, which a reserved log does not show.
      const storage = yield* SqliteStorage.make({ path, reserveLog: false })
      const before = walFrames(path)
      yield* Effect.forEach(Array.from({ length: 64 }, (_, i) => `burst:${i}`), (key) => storage.set(key, key), {
        concurrency: "unbounded",
        discard: true
      })
      const grouped = walFrames(path) - before
      assert.isAtMost(grouped, 4)
      for (let i = 0; i < 8; i++) yield* storage.set(`one:${i}`, i)
      // One at a time, each write commits on its own (at least one page each).
      assert.isAtLeast(walFrames(path) - before - grouped, 8)
      assert.strictEqual((yield* storage.list("burst:")).length, 64)
    }))

  it.effect("the first opener grows the log once; the database gains nothing and keeps its data", () =>
    Effect.gen(function*() {
      const path = freshPath()
      // The log at the checkpoint threshold: its header and 1,000 frames of a 4 KiB page.
      const reserved = 32 + 1000 * (4096 + 24)
      const first = yield* Scope.make()
      const storage = yield* Scope.provide(SqliteStorage.make({ path }), first)
      yield* storage.set("kept", { n: 1 })
      // Grown by the open, and overwritten from its start afterwards rather than grown.
      const grown = Fs.statSync(`${path}-wal`).size
      assert.isAtLeast(grown, reserved)
      for (let i = 0; i < 50; i++) yield* storage.set(`more:${i}`, i)
      assert.strictEqual(Fs.statSync(`${path}-wal`).size, grown)
      // A second opener while the log is full-sized leaves it as it is.
      const second = yield* SqliteStorage.make({ path })
      assert.strictEqual(Fs.statSync(`${path}-wal`).size, grown)
      assert.deepStrictEqual(yield* second.get("kept"), Option.some({ n: 1 }))
      yield* Scope.close(first, Exit.void)

      // The reservation was rolled back: no table, no free pages, a database of a few pages.
      assert.deepStrictEqual(
        withRaw(path, (db) => ({
          integrity: db.prepare("PRAGMA integrity_check").get(),
          tables: db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all(),
          free: db.prepare("PRAGMA freelist_count").get()
        })),
        { integrity: { integrity_check: "ok" }, tables: [{ name: SqliteStorage.TABLE }], free: { freelist_count: 0 } }
      )
      assert.isBelow(Fs.statSync(path).size, 64 * 1024)
      assert.deepStrictEqual(yield* second.list("more:"), Array.from({ length: 50 }, (_, i) => `more:${i}`).sort())
    }))

  it.effect("with reserveLog false the log only grows by what is written", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path, reserveLog: false })
      yield* storage.set("one", 1)
      assert.isBelow(Fs.statSync(`${path}-wal`).size, 64 * 1024)
    }))

  it.effect("a write interrupted before its batch commits never happens; one in a batch with a refused write lands", () =>
    Effect.gen(function*() {
      const storage = yield* SqliteStorage.make({ path: freshPath() })
      yield* storage.set("lease", { token: 2 })
      const results = yield* Effect.forEach(
        [
          storage.setFenced!("stale", 1, { key: "lease", token: 1 }),
          storage.set("fine", 1),
          storage.setFenced!("held", 1, { key: "lease", token: 2 })
        ],
        Effect.exit,
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(results.map(Exit.isSuccess), [false, true, true])
      assert.deepStrictEqual(yield* storage.list(""), ["fine", "held", "lease"])

      yield* Effect.race(storage.set("raced", 1), Effect.void)
      assert.deepStrictEqual(yield* storage.list("raced"), [])
    }))

  it.effect("a write waits for another connection's write lock from a timer, so the event loop keeps running", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path })
      const other = new DatabaseSync(path)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      other.exec("BEGIN IMMEDIATE")
      other.exec("INSERT INTO noetic_storage (key, value) VALUES (x'0061', '\"from the other\"')")
      // Only a timer of this process ends the other transaction: were the storage
      // waiting on the event loop, it would never fire and the write would time out.
      setTimeout(() => other.exec("COMMIT"), 100)
      yield* storage.set("b", "from the storage")
      assert.deepStrictEqual(yield* storage.list(""), ["a", "b"])
    }))

  it.effect("a write lock held past lockTimeoutMs fails the write with Io, storing nothing", () =>
    Effect.gen(function*() {
      const path = freshPath()
      const storage = yield* SqliteStorage.make({ path, lockTimeoutMs: 200 })
      const other = new DatabaseSync(path)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      other.exec("BEGIN IMMEDIATE")
      const error = yield* Effect.flip(storage.set("k", 1))
      assert.strictEqual(error.reason._tag, "Io")
      assert.strictEqual(error.reason.key, "k")
      other.exec("ROLLBACK")
      assert.isTrue(Option.isNone(yield* storage.get("k")))
      // The storage is usable again once the lock is gone.
      yield* storage.set("k", 2)
      assert.deepStrictEqual(yield* storage.get("k"), Option.some(2))
    }))

  it.effect("a path that cannot be a database is a typed failure", () =>
    Effect.gen(function*() {
      const notADatabase = freshPath()
      Fs.writeFileSync(notADatabase, "this is not a database, but it is long enough to have a header".repeat(10))
      const error = yield* Effect.flip(SqliteStorage.make({ path: notADatabase }))
      assert.strictEqual(error.reason._tag, "Corrupt")
      const underAFile = Path.join(notADatabase, "inside.db")
      const ioError = yield* Effect.flip(SqliteStorage.make({ path: underAFile }))
      assert.strictEqual(ioError.operation, "open")
      // A database whose table of that name has other columns.
      const foreign = freshPath()
      withRaw(foreign, (db) => db.exec("CREATE TABLE noetic_storage (id INTEGER PRIMARY KEY, data TEXT)"))
      const foreignError = yield* Effect.flip(SqliteStorage.make({ path: foreign }))
      assert.strictEqual(foreignError.operation, "open")
      assert.strictEqual(foreignError.reason._tag, "Io")
    }))
})
