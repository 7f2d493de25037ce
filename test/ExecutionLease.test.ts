import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { StorageError } from "../src/Errors.ts"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import * as FileStorage from "../src/layers/FileStorage.ts"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as ExecutionLease from "../src/services/ExecutionLease.ts"
import { makeMemory, type StorageAdapterShape } from "../src/services/StorageAdapter.ts"

const pgUrl = process.env.NOETIC_PG_URL

/** The backends that hold leases; each builds a fresh, empty storage. */
const backends: ReadonlyArray<{
  readonly name: string
  readonly make: Effect.Effect<StorageAdapterShape, StorageError, Scope.Scope>
}> = [
  { name: "memory", make: makeMemory },
  {
    name: "file",
    make: Effect.suspend(() => FileStorage.make({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-lease-")) }))
  },
  {
    name: "sqlite",
    make: Effect.suspend(() =>
      SqliteStorage.make({ path: Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-lease-")), "leases.db") })
    )
  },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    make: Effect.gen(function*() {
      const client = yield* Layer.build(Layer.orDie(PgClient.layer({ url: Redacted.make(pgUrl) })))
      return yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const table = `noetic_lease_${randomUUID().replaceAll("-", "")}`
        yield* Effect.addFinalizer(() => Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(table)}`))
        return yield* PostgresStorage.make({ table })
      }).pipe(Effect.provideContext(client))
    })
  }])
]

const fencingOf = (storage: StorageAdapterShape) => {
  assert.isTrue(ExecutionLease.supportsLeases(storage))
  return storage as ExecutionLease.FencingStorage
}

/** A durable harness over `storage`, as one host would build it. */
const host = <const G extends AgentHarness.AgentHarnessOptions["agentGraph"]>(
  storage: StorageAdapterShape,
  options: Omit<AgentHarness.AgentHarnessOptions<G>, "name">
) =>
  Effect.gen(function*() {
    const store = yield* CheckpointStore.makeWith(storage)
    return yield* AgentHarness.make<G>({ name: "host", ...options }).pipe(
      Effect.provideService(CheckpointStore.CheckpointStore, store)
    )
  })

/** Every stored value, as JSON text, to show what did (not) land. */
const everything = (storage: StorageAdapterShape) =>
  Effect.gen(function*() {
    const texts: Array<string> = []
    for (const key of yield* storage.list("")) {
      const value = yield* storage.get(key)
      texts.push(`${key}=${JSON.stringify(Option.getOrUndefined(value))}`)
    }
    return texts.join("\n")
  })

/** Polls `read` until `done` holds; the wait is real time, since storage I/O is, under a TestClock. */
const eventually = <A, E>(read: Effect.Effect<A, E>, done: (a: A) => boolean): Effect.Effect<A, E> =>
  Effect.flatMap(read, (a) =>
    done(a)
      ? Effect.succeed(a)
      : Effect.andThen(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 2))), eventually(read, done)))

/** A two-step graph whose second step waits for `gate` after telling `started`. */
const gatedGraph = (started: Deferred.Deferred<void>, gate: Deferred.Deferred<void>) =>
  runCode("root", (n: number, ctx) =>
    Effect.gen(function*() {
      const first = yield* ctx.run(runCode("first", (x: number) => Effect.succeed(x + 1)), n)
      return yield* ctx.run(
        runCode("second", (x: number, inner) =>
          Effect.gen(function*() {
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(gate)
            yield* inner.append([{ type: "note", text: "second ran" }])
            return x * 10
          })),
        first
      )
    }))

for (const backend of backends) {
  describe(`ExecutionLease on ${backend.name}`, () => {
    it.effect("a live lease is held against other owners; once it expires the next owner takes it with a higher token", () =>
      Effect.gen(function*() {
        const storage = fencingOf(yield* backend.make)
        const leases = yield* ExecutionLease.makeWith(storage)
        const a = yield* leases.acquire("e1", { owner: "host-a", ttl: "10 seconds" })
        assert.strictEqual(a.token, 1)
        assert.strictEqual(a.expiresAt, 10_000)

        const held = yield* Effect.flip(leases.acquire("e1", { owner: "host-b", ttl: "10 seconds" }))
        assert.strictEqual(held._tag, "ExecutionLeaseHeld")
        if (held._tag === "ExecutionLeaseHeld") {
          assert.strictEqual(held.owner, "host-a")
          assert.strictEqual(held.expiresAt, 10_000)
        }

        yield* TestClock.adjust("5 seconds")
        const renewed = yield* leases.renew(a, "10 seconds")
        assert.strictEqual(renewed.token, 1)
        assert.strictEqual(renewed.expiresAt, 15_000)
        yield* TestClock.adjust("11 seconds")

        const b = yield* leases.acquire("e1", { owner: "host-b", ttl: "10 seconds" })
        assert.strictEqual(b.token, 2)
        assert.strictEqual((yield* Effect.flip(leases.renew(a, "10 seconds")))._tag, "ExecutionLeaseLost")
        assert.strictEqual((yield* Effect.flip(leases.release(a)))._tag, "ExecutionLeaseLost")

        // The paused holder's writes are refused; the new holder's land.
        const stale = yield* Effect.flip(ExecutionLease.fencedStorage(storage, a).set("execution:e1:snapshot", "a"))
        assert.strictEqual(stale.reason._tag, "Conflict")
        yield* ExecutionLease.fencedStorage(storage, b).set("execution:e1:snapshot", "b")
        assert.deepStrictEqual(yield* storage.get("execution:e1:snapshot"), Option.some("b"))
      }))

    it.effect("release lets the next owner in at once, and the token only grows", () =>
      Effect.gen(function*() {
        const storage = yield* backend.make
        const leases = yield* ExecutionLease.makeWith(storage)
        const tokens: Array<number> = []
        for (const owner of ["a", "b", "b", "c"]) {
          const lease = yield* leases.acquire("e2", { owner, ttl: "1 hour" })
          tokens.push(lease.token)
          yield* leases.release(lease)
        }
        assert.deepStrictEqual(tokens, [1, 2, 3, 4])
        // The same owner may take over its own live lease (a restarted host), fencing its old self.
        const first = yield* leases.acquire("e2", { owner: "d", ttl: "1 hour" })
        const again = yield* leases.acquire("e2", { owner: "d", ttl: "1 hour" })
        assert.strictEqual(again.token, first.token + 1)
        assert.strictEqual((yield* Effect.flip(leases.renew(first, "1 hour")))._tag, "ExecutionLeaseLost")
      }))

    it.effect("concurrent acquires of one execution: exactly one wins", () =>
      Effect.gen(function*() {
        const storage = yield* backend.make
        const leases = yield* ExecutionLease.makeWith(storage)
        const outcomes = yield* Effect.forEach(
          Array.from({ length: 8 }, (_, i) => `host-${i}`),
          (owner) => Effect.exit(leases.acquire("e3", { owner, ttl: "1 minute" })),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(outcomes.filter(Exit.isSuccess).length, 1)
        const current = yield* leases.current("e3")
        assert.strictEqual(Option.getOrThrow(current).token, 1)
      }))

    it.effect("two hosts resuming one execution: one proceeds, the other fails ExecutionLeaseHeld", () =>
      Effect.gen(function*() {
        const storage = yield* backend.make
        // A crashed first host left a snapshot with the root in flight.
        const crashStarted = yield* Deferred.make<void>()
        const never = yield* Deferred.make<void>()
        const first = yield* host(storage, { agentGraph: gatedGraph(crashStarted, never), lease: { owner: "host-0" } })
        const crashed = yield* Effect.forkChild(first.execute(1, { executionId: "e4" }))
        yield* Deferred.await(crashStarted)
        yield* Fiber.interrupt(crashed)

        const started = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const hostA = yield* host(storage, { agentGraph: gatedGraph(started, gate), lease: { owner: "host-a" } })
        const hostB = yield* host(storage, { agentGraph: gatedGraph(started, gate), lease: { owner: "host-b" } })
        const runs = yield* Effect.forEach([hostA, hostB], (h) => Effect.forkChild(Effect.exit(h.resume("e4"))))
        // The gate opens only once one host has given up, so the two really overlapped.
        yield* Deferred.await(started)
        yield* Effect.raceFirst(Fiber.await(runs[0]!), Fiber.await(runs[1]!))
        yield* Deferred.succeed(gate, undefined)
        const exits = yield* Effect.forEach(runs, Fiber.join)

        const won = exits.filter(Exit.isSuccess)
        assert.strictEqual(won.length, 1)
        assert.deepStrictEqual(won[0]!.value, Option.some({ executionId: "e4", output: 20 }))
        const lost = exits.find(Exit.isFailure)!
        const error = Exit.isFailure(lost) ? lost.cause.reasons[0] : undefined
        assert.isDefined(error)
        assert.strictEqual(error!._tag, "Fail")
        if (error!._tag === "Fail") assert.strictEqual((error!.error as { _tag: string })._tag, "ExecutionLeaseHeld")

        // The winner released its lease: the other host resumes at once (the root replays).
        const loser = exits[0] === lost ? hostA : hostB
        assert.deepStrictEqual(yield* loser.resume("e4"), Option.some({ executionId: "e4", output: 20 }))
        const record = Option.getOrThrow(yield* (yield* ExecutionLease.makeWith(storage)).current("e4"))
        // host-0, the winner, the loser's second try: the refused acquire bumped nothing.
        assert.strictEqual(record.token, 3)
        assert.strictEqual(record.expiresAt, 0)
      }))

    it.effect("a host whose lease was taken over stops with ExecutionLeaseLost and its stale write is not stored", () =>
      Effect.gen(function*() {
        const storage = fencingOf(yield* backend.make)
        const started = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const hostA = yield* host(storage, { agentGraph: gatedGraph(started, gate), lease: { owner: "host-a" } })
        const run = yield* Effect.forkChild(hostA.execute(1, { executionId: "e5" }))
        yield* Deferred.await(started)

        // Another host saw the lease as expired (its clock, a long pause of host A) and took it.
        const leases = yield* ExecutionLease.makeWith(storage)
        const held = Option.getOrThrow(yield* leases.current("e5"))
        assert.isTrue(
          yield* storage.compareAndSet(ExecutionLease.leaseKey("e5"), Option.some(held), {
            ...held,
            owner: "host-b",
            token: held.token + 1,
            expiresAt: Number.MAX_SAFE_INTEGER
          })
        )
        yield* Deferred.succeed(gate, undefined)
        const exit = yield* Fiber.await(run)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const reason = exit.cause.reasons[0]!
          assert.strictEqual(reason._tag, "Fail")
          if (reason._tag === "Fail") {
            const error = reason.error as ExecutionLease.ExecutionLeaseLost
            assert.strictEqual(error._tag, "ExecutionLeaseLost")
            assert.strictEqual(error.token, held.token)
          }
        }
        const stored = yield* everything(storage)
        assert.notInclude(stored, "second ran")
        assert.include(stored, "\"owner\":\"host-b\"")
      }))

    it.effect("a renewal that finds the lease taken over stops a run that is not writing", () =>
      Effect.gen(function*() {
        const storage = fencingOf(yield* backend.make)
        const started = yield* Deferred.make<void>()
        const never = yield* Deferred.make<void>()
        const hostA = yield* host(storage, {
          agentGraph: gatedGraph(started, never),
          lease: { owner: "host-a", ttl: "9 seconds" }
        })
        const run = yield* Effect.forkChild(hostA.execute(1, { executionId: "e6" }))
        yield* Deferred.await(started)
        // The first renewal (at 3 s) keeps the lease.
        yield* TestClock.adjust("3 seconds")
        const leases = yield* ExecutionLease.makeWith(storage)
        const renewed = yield* eventually(
          Effect.map(leases.current("e6"), Option.getOrThrow),
          (record) => record.expiresAt === 12_000
        )
        yield* storage.compareAndSet(ExecutionLease.leaseKey("e6"), Option.some(renewed), {
          ...renewed,
          owner: "host-b",
          token: renewed.token + 1
        })
        yield* TestClock.adjust("3 seconds")
        const error = yield* Effect.flip(Fiber.join(run))
        assert.strictEqual(error._tag, "ExecutionLeaseLost")
      }))
  })
}

describe("AgentHarness lease option", () => {
  it.effect("without `lease` no lease record is written", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const harness = yield* host(storage, { agentGraph: runCode("root", (n: number) => Effect.succeed(n + 1)) })
      yield* harness.execute(1, { executionId: "plain" })
      assert.isFalse((yield* storage.list("")).some((key) => key.endsWith(":lease")))
    }))

  it.effect("a storage without compare-and-set fails with ExecutionLeaseUnsupported, writing nothing", () =>
    Effect.gen(function*() {
      const { compareAndSet: _cas, setFenced: _set, deleteFenced: _delete, ...plain } = yield* makeMemory
      const harness = yield* host(plain, {
        agentGraph: runCode("root", (n: number) => Effect.succeed(n + 1)),
        lease: { owner: "host-a" }
      })
      const error = yield* Effect.flip(harness.execute(1, { executionId: "no-cas" }))
      assert.strictEqual(error._tag, "ExecutionLeaseUnsupported")
      assert.deepStrictEqual(yield* plain.list(""), [])
    }))

  it.effect("harness.run on a context of an execution another host holds is refused and writes no ledger entry", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const started = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const hostA = yield* host(storage, { agentGraph: gatedGraph(started, gate), lease: { owner: "host-a" } })
      const hostB = yield* host(storage, { lease: { owner: "host-b" } })
      const run = yield* Effect.forkChild(hostA.execute(1, { executionId: "held" }))
      yield* Deferred.await(started)
      const ledgerBefore = yield* storage.list("execution:held:ledger:")

      const ctx = yield* hostB.createContext({ id: "held" })
      const exit = yield* Effect.exit(hostB.run(runCode("stray", (n: number) => Effect.succeed(n)), 7, ctx))
      assert.deepStrictEqual(yield* storage.list("execution:held:ledger:"), ledgerBefore)
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const reason = exit.cause.reasons[0]!
        assert.strictEqual(reason._tag, "Fail")
        if (reason._tag === "Fail") assert.strictEqual((reason.error as { _tag: string })._tag, "ExecutionLeaseHeld")
      }
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual(yield* Fiber.join(run), { executionId: "held", output: 20 })
    }))

  it.effect("one harness running an execution refuses a second concurrent run of it", () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const started = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const harness = yield* host(storage, { agentGraph: gatedGraph(started, gate), lease: { owner: "host-a" } })
      const run = yield* Effect.forkChild(harness.execute(1, { executionId: "twice" }))
      yield* Deferred.await(started)
      const error = yield* Effect.flip(harness.execute(1, { executionId: "twice" }))
      assert.strictEqual(error._tag, "ExecutionLeaseHeld")
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual(yield* Fiber.join(run), { executionId: "twice", output: 20 })
    }))
})

describe("AgentHarness lease option, concurrent starts", () => {
  it.effect("two runs of one execution started together on one harness: one runs, the other fails ExecutionLeaseHeld", () =>
    Effect.gen(function*() {
      const memory = yield* makeMemory
      // Reads yield, as any real storage's I/O does, so both runs are taking the lease at once.
      const storage: StorageAdapterShape = { ...memory, get: (key) => Effect.andThen(Effect.yieldNow, memory.get(key)) }
      const started = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const harness = yield* host(storage, { agentGraph: gatedGraph(started, gate), lease: { owner: "host-a" } })
      const first = yield* Effect.forkChild(Effect.exit(harness.execute(1, { executionId: "together" })))
      const second = yield* Effect.forkChild(Effect.exit(harness.execute(1, { executionId: "together" })))
      yield* Deferred.await(started)
      yield* Effect.sleep(0)
      yield* Deferred.succeed(gate, undefined)
      const exits = [yield* Fiber.join(first), yield* Fiber.join(second)]
      const outputs = exits.flatMap((exit) => Exit.isSuccess(exit) ? [exit.value.output] : [])
      const errors = exits.flatMap((exit) =>
        Exit.isFailure(exit) ? [exit.cause.reasons.map((reason) => reason._tag === "Fail" ? reason.error._tag : reason._tag).join()] : []
      )
      assert.deepStrictEqual({ outputs, errors }, { outputs: [20], errors: ["ExecutionLeaseHeld"] })
    }))
})
