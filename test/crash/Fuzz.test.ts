/**
 * Bad-input fuzzing (fast-check): mutated snapshots, ledger rows, manifests, queue
 * records and IPC lines. Each must get a typed error or a warned skip (never a
 * defect), the host keeps running, and another execution's data stays readable.
 * Prints `fuzz cases: <n>` with the count per kind.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Logger, Option } from "effect"
import fc from "fast-check"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as InMemorySubprocessAdapter from "../../src/layers/InMemorySubprocessAdapter.ts"
import * as IpcClient from "../../src/layers/IpcClient.ts"
import * as IpcServer from "../../src/layers/IpcServer.ts"
import { encodeKey } from "../../src/internal/fileKey.ts"
import { snapshotKey } from "../../src/schema/CheckpointSnapshot.ts"
import { decodeClientFrame } from "../../src/schema/IpcFrame.ts"
import { ledgerKey } from "../../src/schema/LedgerEntry.ts"
import { loadManifest, manifestKey, type SubprocessManifest } from "../../src/services/SubprocessRecords.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import * as DurableOutboundQueue from "../../src/services/DurableOutboundQueue.ts"
import * as StepLedger from "../../src/services/StepLedger.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"
import { sampleSnapshot } from "../CheckpointStoreSuite.ts"

const counts = new Map<string, number>()

/** Warnings logged (each skipped record is one); kept off the console. */
let warnings = 0
const quietLogs = Logger.layer([
  Logger.make(({ logLevel }) => {
    if (logLevel === "Warn") warnings++
  })
])
const counted = (kind: string, n: number) => counts.set(kind, (counts.get(kind) ?? 0) + n)

// ---------------------------------------------------------------------------
// Mutations of JSON records
// ---------------------------------------------------------------------------

/** Every path (list of keys/indexes) inside a JSON value, the root included. */
const pathsOf = (value: unknown, prefix: ReadonlyArray<string | number> = []): Array<ReadonlyArray<string | number>> => {
  const out: Array<ReadonlyArray<string | number>> = [prefix]
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...pathsOf(v, [...prefix, i])))
  else if (typeof value === "object" && value !== null) {
    for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...prefix, k]))
  }
  return out
}

/** One mutation: replace the value at a path, delete it, or add a stray field. */
const Mutation = fc.record({
  at: fc.nat(),
  op: fc.constantFrom("replace", "delete", "add", "retype"),
  value: fc.oneof(
    fc.jsonValue({ maxDepth: 2 }),
    fc.constantFrom(-1, 0, 1.5, 2 ** 31 - 1, 1e9, 2 ** 53, "", "\u0000", "x".repeat(300), [], {}, null, true)
  ),
  key: fc.string({ maxLength: 8 })
})

const applyMutations = (record: unknown, mutations: ReadonlyArray<typeof Mutation extends fc.Arbitrary<infer M> ? M : never>): unknown => {
  let root: unknown = structuredClone(record)
  for (const mutation of mutations) {
    // Each mutation gets its own copy of the value: a value shared by two mutations
    // could end up inside itself.
    const m = { ...mutation, value: structuredClone(mutation.value) }
    const paths = pathsOf(root)
    const path = paths[m.at % paths.length]!
    if (path.length === 0) {
      root = m.op === "delete" ? null : m.value
      continue
    }
    let parent: any = root
    for (const step of path.slice(0, -1)) parent = parent[step]
    const last = path[path.length - 1]!
    switch (m.op) {
      case "replace":
        parent[last] = m.value
        break
      case "delete":
        if (Array.isArray(parent)) parent.splice(Number(last), 1)
        else delete parent[last]
        break
      case "add":
        if (typeof parent[last] === "object" && parent[last] !== null && !Array.isArray(parent[last])) parent[last][m.key] = m.value
        else parent[last] = m.value
        break
      case "retype":
        parent[last] = typeof parent[last] === "string" ? 7 : typeof parent[last] === "number" ? String(parent[last]) : [parent[last]]
        break
    }
  }
  return root
}

const Mutations = fc.array(Mutation, { minLength: 1, maxLength: 3 })

/** Runs `effect`; a defect (anything but a typed failure) fails the property. */
const typedOrOk = <A, E>(label: string, effect: Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.exit(effect), (exit) => {
    if (Exit.isFailure(exit) && Cause.hasDies(exit.cause)) {
      return Effect.die(new Error(`${label}: a defect instead of a typed error: ${Cause.pretty(exit.cause)}`))
    }
    if (Exit.isFailure(exit)) {
      const error = Cause.squash(exit.cause) as { _tag?: unknown }
      if (typeof error?._tag !== "string") return Effect.die(new Error(`${label}: an untyped failure ${String(error)}`))
    }
    return Effect.succeed(exit)
  })

/** Runs a fast-check property whose predicate is an Effect, `runs` times. */
const property = <T>(arb: fc.Arbitrary<T>, runs: number, predicate: (value: T) => Effect.Effect<void, unknown>) =>
  Effect.flatMap(Effect.context<never>(), (context) =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(arb, (value) => Effect.runPromise(Effect.provideContext(predicate(value), context))),
        { numRuns: runs }
      )
    ))

// ---------------------------------------------------------------------------

const RUNS = { snapshots: 2500, ledger: 2500, manifests: 2000, queue: 1500, ipc: 2000, torn: 200 }

describe("bad-input fuzzing", () => {
  it.effect(`${RUNS.snapshots} mutated snapshots: typed error or a valid snapshot; the other execution still loads`, () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const store = yield* CheckpointStore.makeWith(storage)
      yield* store.save(sampleSnapshot("other"))
      const valid = sampleSnapshot("victim", 4)
      yield* property(Mutations, RUNS.snapshots, (mutations) =>
        Effect.gen(function*() {
          yield* storage.set(snapshotKey("victim"), applyMutations(valid, mutations))
          yield* typedOrOk("load", store.load("victim"))
          yield* typedOrOk("list", store.list)
          assert.isTrue(Option.isSome(yield* store.load("other")))
        }))
      counted("snapshots", RUNS.snapshots)
    }), { timeout: 300_000 })

  it.effect(`${RUNS.ledger} mutated ledger rows: skipped with a warning; the rest of the ledger and another execution replay`, () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const store = yield* CheckpointStore.makeWith(storage)
      const ledgers = yield* StepLedger.makeWith(store)
      const identity = { stepId: "s", kind: "runCode" }
      const seed = yield* ledgers.open("victim")
      for (const path of ["/a#0", "/b#0", "/c#0"]) yield* seed.record(path, identity, { path, n: 1 })
      const other = yield* ledgers.open("other")
      yield* other.record("/x#0", identity, "kept")
      const row = Option.getOrThrow(yield* storage.get(ledgerKey("victim", 1)))
      yield* property(Mutations, RUNS.ledger, (mutations) =>
        Effect.gen(function*() {
          yield* storage.set(ledgerKey("victim", 1), applyMutations(row, mutations))
          const exit = yield* typedOrOk("open", ledgers.open("victim"))
          assert.isTrue(Exit.isSuccess(exit), "a bad row is skipped, not a failed open")
          if (Exit.isSuccess(exit)) {
            // The rows around the bad one still replay.
            assert.deepStrictEqual(yield* exit.value.lookup("/a#0", identity), Option.some({ path: "/a#0", n: 1 }))
            assert.deepStrictEqual(yield* exit.value.lookup("/c#0", identity), Option.some({ path: "/c#0", n: 1 }))
          }
          const otherLedger = yield* ledgers.open("other")
          assert.deepStrictEqual(yield* otherLedger.lookup("/x#0", identity), Option.some("kept"))
        }))
      assert.isAbove(warnings, 0, "skipped rows are warned about")
      counted("ledger rows", RUNS.ledger)
    }).pipe(Effect.provide(quietLogs)), { timeout: 300_000 })

  it.effect(`${RUNS.manifests} mutated manifests: Corrupt or decoded; listLive skips the bad one and keeps the host running`, () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      const adapter = yield* InMemorySubprocessAdapter.make({ storage })
      const valid: SubprocessManifest = {
        version: 1, adapter: "memory", handleId: "victim", stepId: "nowhere", module: null, entry: null,
        serializedInput: "{\"n\":1}", executionId: "exec-victim", parentExecutionId: null, threadId: null,
        resourceId: null, cwdInit: null, pid: null, pidStarttime: null, socketPath: null, checkpointRoot: null,
        lingerMs: 0, metadata: { a: 1 }, createdAt: 1_700_000_000_000
      }
      yield* property(Mutations, RUNS.manifests, (mutations) =>
        Effect.gen(function*() {
          yield* storage.set(manifestKey("victim"), applyMutations(valid, mutations))
          yield* typedOrOk("loadManifest", loadManifest(storage, "victim"))
          // A manifest that cannot come back is skipped with a warning: listLive succeeds.
          const live = yield* typedOrOk("listLive", adapter.listLive)
          assert.isTrue(Exit.isSuccess(live), `listLive failed: ${Exit.isFailure(live) ? Cause.pretty(live.cause) : ""}`)
        }))
      counted("manifests", RUNS.manifests)
    }).pipe(Effect.scoped, Effect.provide(quietLogs)), { timeout: 300_000 })

  it.effect(`${RUNS.queue} mutated queue records: reopening and reading give typed errors; another queue stays readable`, () =>
    Effect.gen(function*() {
      const storage = yield* makeMemory
      // Whatever layout the queue uses, its records live under its key prefix.
      const first = yield* DurableOutboundQueue.makeWith(storage, { socketId: "victim" })
      yield* first.appendAll(["{\"type\":\"item\",\"item\":1}", "{\"type\":\"item\",\"item\":2}", "{\"type\":\"item\",\"item\":3}"])
      yield* first.ackUpTo(1)
      yield* first.close
      const other = yield* DurableOutboundQueue.makeWith(storage, { socketId: "other" })
      yield* other.append("{\"type\":\"item\",\"item\":\"kept\"}")
      const keys = yield* storage.list(DurableOutboundQueue.keyPrefix("victim"))
      const records = new Map<string, unknown>()
      for (const key of keys) records.set(key, Option.getOrThrow(yield* storage.get(key)))
      yield* property(fc.tuple(fc.nat(), Mutations), RUNS.queue, ([which, mutations]) =>
        Effect.gen(function*() {
          const key = keys[which % keys.length]!
          for (const [k, v] of records) yield* storage.set(k, v)
          yield* storage.set(key, applyMutations(records.get(key), mutations))
          const reopened = yield* typedOrOk("open", DurableOutboundQueue.makeWith(storage, { socketId: "victim" }))
          if (Exit.isSuccess(reopened)) {
            yield* typedOrOk("frameRange", reopened.value.frameRange(0))
            yield* reopened.value.close
          }
          const otherAgain = yield* DurableOutboundQueue.makeWith(storage, { socketId: "other" })
          assert.deepStrictEqual((yield* otherAgain.frameRange(0)).map((e) => e.frame), ["{\"type\":\"item\",\"item\":\"kept\"}"])
          yield* otherAgain.close
        }))
      counted("queue records", RUNS.queue)
    }).pipe(Effect.provide(quietLogs)), { timeout: 300_000 })

  it.effect(`${RUNS.torn} torn files on file storage: Corrupt naming the key, other keys readable`, () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-fuzz-"))
      const storage = yield* FileStorage.make({ root })
      const store = yield* CheckpointStore.makeWith(storage)
      yield* store.save(sampleSnapshot("other"))
      yield* store.save(sampleSnapshot("victim", 10))
      const file = Path.join(root, encodeKey(snapshotKey("victim")))
      const text = Fs.readFileSync(file)
      yield* property(fc.tuple(fc.nat({ max: text.length - 1 }), fc.uint8Array({ maxLength: 8 })), RUNS.torn, ([cut, junk]) =>
        Effect.gen(function*() {
          Fs.writeFileSync(file, Buffer.concat([text.subarray(0, cut), junk]))
          const exit = yield* typedOrOk("load", store.load("victim"))
          if (Exit.isFailure(exit)) {
            const error = Cause.squash(exit.cause) as { _tag: string }
            assert.include(["StorageError", "CheckpointSchemaMismatch"], error._tag)
          }
          assert.isTrue(Option.isSome(yield* store.load("other")))
        }))
      counted("torn files", RUNS.torn)
    }), { timeout: 300_000 })

  it.live(`${RUNS.ipc} mutated IPC lines: each decodes or gets a typed error; a live server answers and keeps serving`, () =>
    Effect.gen(function*() {
      const valid = [
        { type: "send", messageId: "m1", text: "hi" },
        { type: "durableResume", ackedThrough: 3 },
        { type: "durableAck", throughSeq: 2 },
        { type: "askUserResolve", id: "p", output: { ok: true } },
        { type: "abort", reason: "x" }
      ]
      const lines: Array<string> = []
      yield* property(fc.tuple(fc.nat(), Mutations, fc.nat({ max: 40 })), RUNS.ipc, ([which, mutations, cut]) =>
        Effect.gen(function*() {
          const mutated = JSON.stringify(applyMutations(valid[which % valid.length], mutations)) ?? "null"
          // Some lines are cut short too: not JSON at all.
          const line = cut % 5 === 0 ? mutated.slice(0, cut) : mutated
          yield* typedOrOk("decodeClientFrame", decodeClientFrame(line))
          if (!line.includes("\n")) lines.push(line)
        }))
      counted("IPC lines", RUNS.ipc)

      // The same lines at a live server, on one raw connection; then a real client still streams.
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nf-"))
      const socketPath = Path.join(dir, "f.sock")
      const server = yield* IpcServer.make({ socketPath })
      const replies = yield* Effect.promise(() =>
        new Promise<number>((resolve, reject) => {
          const socket = Net.connect({ path: socketPath })
          let received = 0
          let buffered = ""
          socket.on("data", (chunk) => {
            buffered += chunk.toString("utf8")
            received += buffered.split("\n").length - 1
            buffered = buffered.slice(buffered.lastIndexOf("\n") + 1)
          })
          socket.on("error", reject)
          socket.on("connect", () => {
            socket.write(lines.filter((l) => !l.includes("durableAck") && !l.includes("durableResume")).join("\n") + "\n")
            setTimeout(() => {
              socket.destroy()
              resolve(received)
            }, 1_000)
          })
        })
      )
      assert.isAbove(replies, 0, "the server answered the bad lines")
      const client = yield* IpcClient.connect({ socketPath })
      const seq = yield* server.emit({ type: "item", item: "still serving" })
      const delivery = yield* client.take
      assert.strictEqual(delivery.seq, seq)
      assert.deepStrictEqual(delivery.frame, { type: "item", item: "still serving" })

      const total = [...counts.values()].reduce((a, b) => a + b, 0)
      console.log(`fuzz cases: ${total} (${[...counts].map(([k, n]) => `${n} ${k}`).join(", ")}), ${warnings} warned skips`)
    }).pipe(Effect.scoped, Effect.provide(quietLogs)), { timeout: 300_000 })
})
