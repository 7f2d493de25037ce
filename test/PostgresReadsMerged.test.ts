/**
 * A Postgres storage on its own pool merges the reads started together into one
 * statement (PostgresStorage `coalesceReads`): the storage and step-ledger suites on
 * it, each read answered with its own rows, and a resume of a 1,000-entry ledger in one
 * round trip, counted on the wire by a proxy (`Query` and `Sync` messages,
 * as the benchmark counts them), with a damaged row reported as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { countingProxy } from "../bench/postgres.ts"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import { ledgerKey } from "../src/schema/LedgerEntry.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as StepLedger from "../src/services/StepLedger.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"
import { suite as stepLedgerSuite } from "./StepLedgerSuite.ts"
import { suite } from "./StorageSuite.ts"
import { clientLayer, dropOnClose, freshTableName, storageOnFreshTable } from "./postgresFixture.ts"

const url = process.env.NOETIC_PG_URL

/** A storage that merges reads, on a table of its own dropped when the layer is released. */
const mergedStorage = () => storageOnFreshTable({ coalesceReads: true })

/** Runs `f` on a storage with its own pool through a counting proxy; its table is dropped afterwards. */
const throughProxy = <A>(f: (storage: StorageAdapterShape, proxy: Awaited<ReturnType<typeof countingProxy>>, table: string) => Effect.Effect<A, unknown, Scope.Scope | SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const proxy = yield* Effect.acquireRelease(Effect.promise(() => countingProxy(url!)), (p) => Effect.promise(() => p.close()))
    const table = freshTableName()
    yield* dropOnClose(table)
    const storage = yield* Effect.orDie(PostgresStorage.makeFromUrl(proxy.url, { table }))
    return yield* f(storage, proxy, table)
  }).pipe(Effect.scoped, Effect.provide(clientLayer()))

class Refused {
  readonly _tag = "Refused"
}

let leafRuns = 0
const leaf = runCode("leaf", (i: number) =>
  Effect.sync(() => {
    leafRuns++
    return { step: i, value: i }
  }))
const last = runCode("last", (_: number) => Effect.fail(new Refused()))
const root = runCode("root", (steps: number, ctx) =>
  Effect.gen(function*() {
    let acc = 0
    for (let i = 0; i < steps; i++) acc += (yield* ctx.run(leaf, i)).value
    return yield* ctx.run(last, acc)
  }))

/** A harness over `storage` as a freshly started host builds it; its ledger keeps every entry. */
const hostOn = (storage: StorageAdapterShape) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    const ledger = yield* StepLedger.makeWith(store, { retention: { maxEntries: Infinity } })
    return yield* AgentHarness.make({ name: "merged", agentGraph: root }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store),
      Effect.provideService(StepLedger.StepLedger, ledger)
    )
  })

describe.skipIf(url === undefined)("PostgresStorage, reads merged", () => {
  suite("postgres, reads merged", mergedStorage)
  stepLedgerSuite("postgres, reads merged", mergedStorage)

  it.effect("reads started together are one round trip, each answered with its own rows", () =>
    throughProxy((storage, proxy) =>
      Effect.gen(function*() {
        yield* storage.set("a:1", 1)
        yield* storage.set("a:2", 2)
        yield* storage.set("b:1", "b")
        yield* storage.set("a😀", "astral")
        yield* storage.set("a\uffff", "bmp")
        proxy.reset()
        const [one, absent, under, astral, other, listed] = yield* Effect.all([
          storage.get("a:1"),
          storage.get("nope"),
          storage.scanText!("a:"),
          storage.scanText!("a\ud83d"),
          storage.get("b:1"),
          storage.list("a")
        ], { concurrency: "unbounded" })
        assert.strictEqual(proxy.roundTrips(), 1, proxy.statements().join("\n"))
        assert.deepStrictEqual(one, Option.some(1))
        assert.deepStrictEqual(absent, Option.none())
        assert.deepStrictEqual(under, [["a:1", "1"], ["a:2", "2"]])
        assert.deepStrictEqual(astral, [["a😀", "\"astral\""]])
        assert.deepStrictEqual(other, Option.some("b"))
        // In UTF-16 code unit order, as list promises.
        assert.deepStrictEqual(listed, ["a:1", "a:2", "a😀", "a\uffff"])
        // A read alone is its own statement, as before; a listing alone reads no values.
        proxy.reset()
        assert.deepStrictEqual(yield* storage.get("a:2"), Option.some(2))
        assert.deepStrictEqual(yield* storage.list("b"), ["b:1"])
        assert.strictEqual(proxy.roundTrips(), 2)
        assert.match(proxy.statements()[1]!, /^SELECT key FROM /)
      })
    ))

  it.effect("a torn row fails only the read that selects it", () =>
    throughProxy((storage, _proxy, table) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* storage.set("ok", true)
        yield* sql`INSERT INTO ${sql(table)} (key, value) VALUES ('torn', '{"half":')`
        const [torn, ok] = yield* Effect.all([Effect.flip(storage.get("torn")), storage.get("ok")], {
          concurrency: "unbounded"
        })
        assert.strictEqual(torn.reason._tag, "Corrupt")
        assert.deepStrictEqual(ok, Option.some(true))
      })
    ))

  it.effect("a resume of a 1,000-entry ledger is one round trip and replays every step", () =>
    throughProxy((storage, proxy) =>
      Effect.gen(function*() {
        const executionId = `exec-${randomUUID()}`
        const first = yield* hostOn(storage)
        assert.isTrue(Exit.isFailure(yield* Effect.exit(first.execute(1000, { executionId }))))
        const runs = leafRuns
        const host = yield* hostOn(storage)
        proxy.reset()
        const exit = yield* Effect.exit(host.resume(executionId))
        assert.isTrue(Exit.isFailure(exit))
        assert.strictEqual(leafRuns, runs, "every recorded step replays")
        // The run fails at its end, as the first one did, whose failure mark still says so
        // (docs/cli.md#execution-status): the resume writes nothing, and reads in one round trip.
        const writes = proxy.statements().filter((statement) => !statement.startsWith("SELECT"))
        assert.deepStrictEqual(writes, [])
        assert.strictEqual(proxy.roundTrips(), 1, proxy.statements().join("\n"))
        // The snapshot, the ledger, the failure mark and the list of the execution's streams
        // (to end them with the run) in one statement.
        assert.match(proxy.statements()[0]!, /^SELECT key, value FROM .* WHERE \(key = \$1 OR \(key COLLATE "C" >= \$2 [^]* OR key = \$/, proxy.statements().join("\n"))
      })
    ))

  it.effect("a resume over a damaged ledger row re-runs that step alone, as before", () =>
    throughProxy((storage, _proxy, table) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const executionId = `exec-${randomUUID()}`
        const first = yield* hostOn(storage)
        assert.isTrue(Exit.isFailure(yield* Effect.exit(first.execute(20, { executionId }))))
        yield* sql`UPDATE ${sql(table)} SET value = '{"_tag":"StepRec' WHERE key = ${ledgerKey(executionId, 5)}`
        const runs = leafRuns
        const host = yield* hostOn(storage)
        assert.isTrue(Exit.isFailure(yield* Effect.exit(host.resume(executionId))))
        assert.strictEqual(leafRuns - runs, 1)
      })
    ))
})
