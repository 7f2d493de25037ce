/**
 * A pid-less manifest whose `createdAt` lies in the future (the wall clock stepped
 * back) must not hold up `listLive` / `reattach` forever: the wait for its pid is
 * bounded from now. Driven by the TestClock, with no timing assertions.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { awaitRecordedPid, START_GRACE_MS } from "../../src/internal/manifests.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as LocalSubprocessAdapter from "../../src/layers/LocalSubprocessAdapter.ts"
import { loadManifest, saveManifest, type SubprocessManifest } from "../../src/services/SubprocessRecords.ts"

const pidless = (handleId: string, createdAt: number): SubprocessManifest => ({
  version: 1,
  adapter: "local",
  handleId,
  stepId: "step",
  module: null,
  entry: null,
  serializedInput: "null",
  executionId: `exec-${handleId}`,
  parentExecutionId: null,
  threadId: null,
  resourceId: null,
  cwdInit: null,
  pid: null,
  pidStarttime: null,
  socketPath: null,
  checkpointRoot: null,
  lingerMs: 0,
  metadata: {},
  createdAt
})

/**
 * Advances the TestClock a second at a time (letting real I/O run) until `fiber` is
 * done, at most `steps` times. The cap is far past the 30 s grace, so a loaded machine
 * (whose I/O misses some of the steps) still finishes; an unbounded wait never does.
 */
const driveUntilDone = <A, E>(fiber: Fiber.Fiber<A, E>, steps: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < steps; i++) {
      if (fiber.pollUnsafe() !== undefined) return true
      yield* TestClock.adjust("1 second")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return fiber.pollUnsafe() !== undefined
  })

describe("the wait for a pid-less manifest is bounded", () => {
  it.effect("awaitRecordedPid returns within the grace when createdAt is far in the future", () =>
    Effect.gen(function*() {
      let reloads = 0
      const manifest = pidless("future", Number.MAX_SAFE_INTEGER / 2)
      const fiber = yield* awaitRecordedPid(
        manifest,
        () => Effect.sync(() => (reloads++, Option.some(manifest))),
        { pollMs: 1_000 }
      ).pipe(Effect.forkChild)
      const done = yield* driveUntilDone(fiber, 400)
      if (!done) yield* Fiber.interrupt(fiber)
      assert.isTrue(done, "the wait ended within the grace period")
      assert.strictEqual((yield* Fiber.join(fiber)).pid, null)
      assert.isAtMost(reloads, START_GRACE_MS / 1_000 + 1)
    }))

  it.effect("a manifest that gets its pid during the wait is returned with it", () =>
    Effect.gen(function*() {
      const manifest = pidless("booting", 0)
      let reloads = 0
      const fiber = yield* awaitRecordedPid(
        manifest,
        () => Effect.sync(() => Option.some(++reloads >= 3 ? { ...manifest, pid: 4242 } : manifest)),
        { pollMs: 1_000 }
      ).pipe(Effect.forkChild)
      assert.isTrue(yield* driveUntilDone(fiber, 200))
      assert.strictEqual((yield* Fiber.join(fiber)).pid, 4242)
    }))

  it.effect("listLive of the local adapter returns, and reattaches the healthy children, despite a future createdAt", () =>
    Effect.gen(function*() {
      const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-grace-"))
      const root = Path.join(base, "subprocess")
      const storage = yield* FileStorage.make({ root })
      // The wall clock stepped back: the manifest was written "in the future".
      yield* saveManifest(storage, pidless("stepped-back", Date.now() + 3_600_000))
      const adapter = yield* LocalSubprocessAdapter.make({ root, runDir: Path.join(base, "run"), pollMs: 500 })
      const fiber = yield* Effect.forkChild(adapter.listLive)
      const done = yield* driveUntilDone(fiber, 600)
      if (!done) yield* Fiber.interrupt(fiber)
      assert.isTrue(done, "listLive returned")
      // Never booted, so judged dead without a result: nothing to reattach, manifest cleared.
      assert.deepStrictEqual(yield* Fiber.join(fiber), [])
      assert.isTrue(Option.isNone(yield* loadManifest(storage, "stepped-back")))
    }).pipe(Effect.scoped))
})
