import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { isAlive } from "../../src/internal/procStat.ts"
import { loadManifest } from "../../src/services/SubprocessRecords.ts"
import { crashDirectory, sigkill, startHost } from "../hostProcesses.ts"

const hostScript = Path.join(import.meta.dirname, "..", "fixtures", "subprocessHost.ts")

/** A base directory whose recorded children are killed when the scope closes. */
const crashBase = crashDirectory("nsc-", (base) => FileStorage.make({ root: Path.join(base, "subprocess") }))

const childPid = (base: string, handleId: string) =>
  Effect.gen(function*() {
    const storage = yield* FileStorage.make({ root: Path.join(base, "subprocess") })
    const manifest = yield* loadManifest(storage, handleId)
    assert.isTrue(Option.isSome(manifest))
    const { pid, pidStarttime } = Option.getOrThrow(manifest)
    assert.isNotNull(pid)
    return { pid: pid!, pidStarttime }
  })

const waitUntil = (condition: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    while (!(yield* condition)) yield* Effect.sleep("20 millis")
  })

describe("Survive a host crash (real processes)", () => {
  it.live("a child keeps running through the host's SIGKILL; the next host reattaches it and gets its result once", () =>
    Effect.gen(function*() {
      const base = yield* crashBase
      const release = Path.join(base, "release")
      const first = yield* startHost(hostScript, [base, "spawn", release])
      const { handleId, parentId } = yield* first.nextLine
      const child = yield* childPid(base, handleId)

      yield* sigkill(first.proc)
      assert.isTrue(yield* isAlive(child.pid, child.pidStarttime), "the child survives its host")

      const second = yield* startHost(hostScript, [base, "reattach", release])
      const found = yield* second.nextLine
      assert.deepStrictEqual(found.handles, [{ handleId, stepId: "waitForRelease", parent: parentId }])
      assert.strictEqual(found.failures, 0)
      assert.strictEqual(found.contexts.length, 1)
      assert.strictEqual(found.contexts[0].id, parentId)
      assert.strictEqual(found.contexts[0].threadId, "thread-1")
      assert.deepStrictEqual(found.contexts[0].items.map((item: { id: string }) => item.id), ["u1"])

      Fs.writeFileSync(release, "go")
      const { parentsCheckpointedAfterSettle, results } = yield* second.nextLine
      assert.deepStrictEqual(results, [{ handleId, output: { echoed: "job-1", pid: child.pid }, status: "completed" }])
      assert.isTrue(parentsCheckpointedAfterSettle, "the restored parent checkpoints when its child settles")

      // Delivered once: a third host finds nothing left to reattach.
      const third = yield* startHost(hostScript, [base, "reattach", release])
      assert.deepStrictEqual((yield* third.nextLine).handles, [])
      yield* waitUntil(Effect.map(isAlive(child.pid, child.pidStarttime), (alive) => !alive))
    }), { timeout: 120_000 })

  it.live("a child that finished while the host was down comes back completed with its result", () =>
    Effect.gen(function*() {
      const base = yield* crashBase
      const release = Path.join(base, "release")
      // Linger 0: the child exits as soon as its result is persisted, so the result record is all that is left.
      const first = yield* startHost(hostScript, [base, "spawn", release, "0"])
      const { handleId } = yield* first.nextLine
      const child = yield* childPid(base, handleId)
      yield* sigkill(first.proc)

      Fs.writeFileSync(release, "go")
      yield* waitUntil(Effect.map(isAlive(child.pid, child.pidStarttime), (alive) => !alive))

      const second = yield* startHost(hostScript, [base, "reattach", release])
      assert.deepStrictEqual((yield* second.nextLine).handles.map((h: { handleId: string }) => h.handleId), [handleId])
      const { results } = yield* second.nextLine
      assert.deepStrictEqual(results, [{ handleId, output: { echoed: "job-1", pid: child.pid }, status: "completed" }])
    }), { timeout: 120_000 })

  it.live("a child that finished while the host was down and still lingers is told to exit; none of its records is left", () =>
    Effect.gen(function*() {
      const base = yield* crashBase
      const release = Path.join(base, "release")
      // The default linger: the child waits for a host to acknowledge its persisted result.
      const first = yield* startHost(hostScript, [base, "spawn", release])
      const { handleId } = yield* first.nextLine
      const child = yield* childPid(base, handleId)
      yield* sigkill(first.proc)
      Fs.writeFileSync(release, "go")
      const storage = yield* FileStorage.make({ root: Path.join(base, "subprocess") })
      yield* waitUntil(Effect.map(
        storage.list(""),
        (keys) => keys.some((key) => key.includes(handleId) && key.includes("result"))
      ).pipe(Effect.orDie))
      assert.isTrue(yield* isAlive(child.pid, child.pidStarttime), "the child lingers with its result persisted")

      const second = yield* startHost(hostScript, [base, "reattach", release])
      assert.deepStrictEqual((yield* second.nextLine).handles.map((h: { handleId: string }) => h.handleId), [handleId])
      const { results } = yield* second.nextLine
      assert.deepStrictEqual(results, [{ handleId, output: { echoed: "job-1", pid: child.pid }, status: "completed" }])
      assert.isFalse(yield* isAlive(child.pid, child.pidStarttime), "the lingering child was told to exit")
      assert.deepStrictEqual((yield* storage.list("")).filter((key) => key.includes(handleId)), [])
    }), { timeout: 120_000 })
})
