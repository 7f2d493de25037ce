/**
 * A detached child's stop reason (noetic's `stopReason`) lives with the engine's
 * adapters: the handle reports it, the `Stopped` failure carries it, and on a durable
 * root it is kept with the child's persisted result, so a host that reattaches the child
 * after a restart reports the reason another process stopped it for.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { stopChild } from "../../src/cli/Children.ts"
import { makeStorageAt } from "../../src/layers/HomeStorage.ts"
import * as LocalSubprocessAdapter from "../../src/layers/LocalSubprocessAdapter.ts"
import { createLocalSubprocessAdapter } from "../../src/promise/index.ts"
import type { SubprocessError } from "../../src/services/SubprocessAdapter.ts"

const tempBase = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsr-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }))
)

/** A process child that runs until it is signalled. */
const longRunning = {
  command: process.execPath,
  args: ["-e", "setTimeout(() => {}, 60000)"],
  detached: true
} as const

const stoppedReason = (exit: Exit.Exit<unknown, SubprocessError>) => {
  assert.isTrue(Exit.isFailure(exit))
  const reason = (exit as Exit.Failure<unknown, SubprocessError>).cause.reasons[0]!
  assert.strictEqual(reason._tag, "Fail")
  const error = (reason as { readonly error: SubprocessError }).error.reason
  assert.strictEqual(error._tag, "Stopped")
  return (error as { readonly stopReason?: string | undefined }).stopReason
}

describe("stop reason on a durable root", () => {
  it.live("a host that spawned a child stops it with a reason: its handle and failure carry it", () =>
    Effect.gen(function*() {
      const root = Path.join(yield* tempBase, "subprocess")
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, stopGraceMs: 2_000 })
      const handle = yield* adapter.spawnProcess!(longRunning)
      yield* adapter.stop(handle.handleId, "no longer needed")
      assert.strictEqual(stoppedReason(yield* Effect.exit(handle.await)), "no longer needed")
      assert.strictEqual(yield* handle.status, "stopped")
      assert.strictEqual(yield* handle.stopReason!, "no longer needed")
      // A later stop of the settled child changes nothing.
      yield* adapter.stop(handle.handleId, "again")
      assert.strictEqual(yield* handle.stopReason!, "no longer needed")
    }).pipe(Effect.scoped), 30_000)

  it.live("a later host stops a child it reattached: the reason is reported by it", () =>
    Effect.gen(function*() {
      const root = Path.join(yield* tempBase, "subprocess")
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, outliveHost: true })
        return yield* adapter.spawnProcess!(longRunning)
      }))
      // The first host is gone (its scope closed, the child outlives it).
      const second = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, stopGraceMs: 2_000 })
      yield* second.stop(first.handleId, "superseded")
      const handle = Option.getOrThrow(yield* second.get(first.handleId))
      assert.strictEqual(yield* handle.status, "stopped")
      assert.strictEqual(yield* handle.stopReason!, "superseded")
      assert.strictEqual(stoppedReason(yield* Effect.exit(handle.await)), "superseded")
    }).pipe(Effect.scoped), 30_000)

  it.live("an operator stops a child while no host runs: the next host reattaches it stopped, with the reason", () =>
    Effect.gen(function*() {
      const root = Path.join(yield* tempBase, "subprocess")
      const spawned = yield* Effect.scoped(Effect.gen(function*() {
        const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, outliveHost: true })
        return yield* adapter.spawnProcess!(longRunning)
      }))
      // Another process (the CLI's `children stop`, the inspector) records the stop in storage.
      const outcome = yield* Effect.scoped(Effect.flatMap(
        makeStorageAt(root),
        (storage) => stopChild(storage, spawned.handleId, 2_000, "operator: runaway")
      ))
      assert.strictEqual(outcome.action, "stopped")

      // The Effect API's next host.
      const next = yield* LocalSubprocessAdapter.make({ root, pollMs: 20 })
      const again = Option.getOrThrow(yield* next.reattach(spawned.handleId))
      assert.strictEqual(stoppedReason(yield* Effect.exit(again.await)), "operator: runaway")
      assert.strictEqual(yield* again.status, "stopped")
      assert.strictEqual(yield* again.stopReason!, "operator: runaway")
    }).pipe(Effect.scoped), 30_000)

  it.live("the Promise API's next host reports it as noetic's metadata.stopReason", () =>
    Effect.gen(function*() {
      const root = Path.join(yield* tempBase, "subprocess")
      const spawned = yield* Effect.scoped(Effect.gen(function*() {
        const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, outliveHost: true })
        return yield* adapter.spawnProcess!(longRunning)
      }))
      yield* Effect.scoped(Effect.flatMap(
        makeStorageAt(root),
        (storage) => stopChild(storage, spawned.handleId, 2_000, "operator: runaway")
      ))
      const facade = createLocalSubprocessAdapter({ root, pollMs: 20 })
      yield* Effect.addFinalizer(() => Effect.promise(() => facade.close()))
      const handle = yield* Effect.promise(() => facade.reattach(spawned.handleId))
      assert.isNotNull(handle)
      assert.strictEqual(handle!.status, "stopped")
      assert.strictEqual(handle!.metadata.stopReason, "operator: runaway")
    }).pipe(Effect.scoped), 30_000)
})
