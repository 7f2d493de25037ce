/**
 * Durable layer state and external channels across a real SIGKILL of the host
 * (docs/layers-and-channels.md#durable-layer-state, #channels): a thread's scratchpad
 * written in one turn (or acknowledged in a turn that never ends) is there for the
 * next turn after `kill -9`; a value sent by
 * another process while no host runs is received by the host that restores.
 * SQLite always; Postgres when `NOETIC_PG_URL` is set.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { sigkill, startHost } from "../hostProcesses.ts"

const hostScript = Path.join(import.meta.dirname, "..", "fixtures", "layerCrashHost.ts")
const pgUrl = process.env.NOETIC_PG_URL

/** One storage the host processes share: a fresh SQLite file, or a fresh Postgres table dropped afterwards. */
type Backend = { readonly name: string; readonly where: Effect.Effect<string, never, Scope.Scope> }

const sqlite: Backend = {
  name: "SQLite",
  where: Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "nlsc-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  ).pipe(Effect.map((dir) => `sqlite:${Path.join(dir, "noetic.db")}`))
}

const postgres: Backend = {
  name: "Postgres",
  where: Effect.acquireRelease(
    Effect.sync(() => `noetic_crash_${randomUUID().replaceAll("-", "")}`),
    (table) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
      }).pipe(Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(pgUrl ?? "") }))), Effect.ignore)
  ).pipe(Effect.map((table) => `pg:${table}`))
}

const host = (args: ReadonlyArray<string>) => startHost(hostScript, args)

const backends = pgUrl === undefined ? [sqlite] : [sqlite, postgres]

describe("durable layer state and channels across a host SIGKILL (real processes)", () => {
  for (const backend of backends) {
    it.live(`${backend.name}: a thread's scratchpad written in one turn is there for the next turn after kill -9`, () =>
      Effect.gen(function*() {
        const where = yield* backend.where
        const first = yield* host(["turn", where, "ship v2"])
        assert.deepStrictEqual((yield* first.nextLine).turn, { goal: "ship v2" })
        // The turn returned: the host dies with no close and no flush.
        yield* sigkill(first.proc)
        const second = yield* host(["read", where])
        assert.deepStrictEqual((yield* second.nextLine).snapshot, { goal: "ship v2" })
      }), { timeout: 60_000 })

    it.live(`${backend.name}: a scratchpad update acknowledged mid-turn survives kill -9 before the turn ends`, () =>
      Effect.gen(function*() {
        const where = yield* backend.where
        const first = yield* host(["midturn", where, "ship v3"])
        assert.deepStrictEqual((yield* first.nextLine).updated, { goal: "ship v3" })
        yield* sigkill(first.proc)
        const second = yield* host(["read", where])
        assert.deepStrictEqual((yield* second.nextLine).snapshot, { goal: "ship v3" })
      }), { timeout: 60_000 })

    for (const how of ["recv", "tryRecv"] as const) {
      it.live(`${backend.name}: a channel value sent by another process while the host is down is taken by ${how} after restore`, () =>
        Effect.gen(function*() {
          const where = yield* backend.where
          const first = yield* host(["park", where])
          assert.strictEqual((yield* first.nextLine).parked, "exec-1")
          yield* sigkill(first.proc)
          const sender = yield* host(["send", where, "approve", "second"])
          assert.deepStrictEqual((yield* sender.nextLine).sent, ["approve", "second"])
          const second = yield* host([how, where])
          assert.deepStrictEqual(yield* second.nextLine, { restored: "exec-1", got: "approve" })
          // What the restored host took left storage; what it did not take stayed there.
          const third = yield* host(["tryRecv", where, "later"])
          assert.deepStrictEqual(yield* third.nextLine, { restored: "exec-1", got: "second" })
        }), { timeout: 60_000 })
    }
  }
})
