import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import { isAlive, readStat } from "../../src/internal/procStat.ts"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import * as InMemorySubprocessAdapter from "../../src/layers/InMemorySubprocessAdapter.ts"
import * as LocalSubprocessAdapter from "../../src/layers/LocalSubprocessAdapter.ts"
import * as ScriptedModel from "../../src/layers/ScriptedModel.ts"
import {
  loadManifest,
  MANIFEST_PREFIX,
  saveManifest,
  saveResult,
  type SubprocessManifest
} from "../../src/services/SubprocessRecords.ts"
import * as StorageAdapter from "../../src/services/StorageAdapter.ts"
import { reattachLiveChildren } from "../../src/harness/Reattach.ts"
import type { SubprocessError } from "../../src/services/SubprocessAdapter.ts"
import type { V1ServerFrame } from "../../src/schema/IpcFrame.ts"
import { askThenModel } from "../fixtures/subprocessModelSteps.ts"
import { double, failing, listAndDate, napping, waitForRelease } from "../fixtures/subprocessSteps.ts"
import { QUIET_START_MS } from "../../src/layers/subprocessChildMain.ts"

const tempBase = Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsl-")))

/** A live process that is not any child of the adapter; SIGKILLed when the scope closes. */
const bystanderWith = (options: { readonly detached: boolean }) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess>((resume) => {
      const proc = ChildProcess.spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], {
        stdio: "ignore",
        detached: options.detached
      })
      proc.once("spawn", () => resume(Effect.succeed(proc)))
    }),
    (proc) => Effect.sync(() => proc.kill("SIGKILL"))
  )
const bystander = bystanderWith({ detached: false })

const failureOf = <A>(exit: Exit.Exit<A, SubprocessError>) => {
  assert.isTrue(Exit.isFailure(exit))
  const reason = (exit as Exit.Failure<A, SubprocessError>).cause.reasons[0]!
  assert.strictEqual(reason._tag, "Fail")
  return (reason as { readonly error: SubprocessError }).error.reason
}

describe("LocalSubprocessAdapter (real processes)", () => {
  it.live("a recorded pid whose start time differs is not reattached, and stop never signals it", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const other = yield* bystander
      const stat = yield* readStat(other.pid!)
      assert.isDefined(stat)
      const storage = yield* FileStorage.make({ root })
      yield* saveManifest(storage, {
        version: 1,
        adapter: "local",
        handleId: "recycled",
        stepId: "waitForRelease",
        module: null,
        entry: null,
        serializedInput: "null",
        executionId: "exec-recycled",
        parentExecutionId: null,
        threadId: null,
        resourceId: null,
        cwdInit: null,
        pid: other.pid!,
        // The pid is live, but it started at another time: the kernel gave it to someone else.
        pidStarttime: stat!.startTime + 1,
        socketPath: Path.join(base, "x.sock"),
        checkpointRoot: null,
        lingerMs: 0,
        metadata: {},
        createdAt: 0
      })
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20 })
      assert.isTrue(Option.isNone(yield* adapter.reattach("recycled")))
      assert.deepStrictEqual(yield* adapter.listLive, [])
      // Pruned: the manifest is gone, and stop knows no such child.
      assert.isTrue(Option.isNone(yield* loadManifest(storage, "recycled")))
      const stopped = yield* Effect.exit(adapter.stop("recycled"))
      assert.strictEqual(failureOf(stopped)._tag, "UnknownHandle")
      assert.isTrue(yield* isAlive(other.pid!, stat!.startTime), "the bystander was never signalled")
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a recorded pid without a start time (on a machine with /proc) is not adopted, and stop never signals its group", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      // A group leader, so a signal to -pid would reach it.
      const other = yield* bystanderWith({ detached: true })
      const stat = yield* readStat(other.pid!)
      assert.isDefined(stat, "this test needs /proc")
      const storage = yield* FileStorage.make({ root })
      yield* saveManifest(storage, {
        version: 1,
        adapter: "local",
        handleId: "unverified",
        stepId: "waitForRelease",
        module: null,
        entry: null,
        serializedInput: "null",
        executionId: "exec-unverified",
        parentExecutionId: null,
        threadId: null,
        resourceId: null,
        cwdInit: null,
        pid: other.pid!,
        // What a spawn records when its child was already gone before /proc could be read.
        pidStarttime: null,
        socketPath: Path.join(base, "x.sock"),
        checkpointRoot: null,
        lingerMs: 0,
        metadata: {},
        createdAt: 0
      })
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, stopGraceMs: 100 })
      assert.deepStrictEqual(yield* adapter.listLive, [])
      const stopped = yield* Effect.exit(adapter.stop("unverified"))
      assert.strictEqual(failureOf(stopped)._tag, "UnknownHandle")
      assert.isTrue(yield* isAlive(other.pid!, stat!.startTime), "the bystander was never signalled")
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a child whose host died before recording its pid records it itself and is reattached", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const storage = yield* FileStorage.make({ root })
      const fixture = Path.join(import.meta.dirname, "..", "fixtures", "subprocessSteps.ts")
      // What a host writes before it starts the child, and nothing after: it died.
      yield* saveManifest(storage, {
        version: 1,
        adapter: "local",
        handleId: "orphan",
        stepId: "double",
        module: pathToFileURL(fixture).href,
        entry: null,
        serializedInput: "21",
        executionId: "exec-orphan",
        parentExecutionId: null,
        threadId: null,
        resourceId: null,
        cwdInit: null,
        pid: null,
        pidStarttime: null,
        socketPath: Path.join(base, "o.sock"),
        checkpointRoot: Path.join(base, "checkpoints"),
        lingerMs: 10_000,
        metadata: {},
        createdAt: Date.now()
      })
      const bootstrap = Path.join(import.meta.dirname, "..", "..", "src", "layers", "subprocessChild.ts")
      yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn(process.execPath, ["--import", "tsx", bootstrap, "--noetic-subprocess-child", "--root", root, "--handle", "orphan"], {
            detached: true,
            stdio: "ignore"
          })
        ),
        (proc) => Effect.sync(() => proc.exitCode === null && proc.kill("SIGKILL"))
      )
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20 })
      const handle = Option.getOrThrow(yield* adapter.reattach("orphan"))
      assert.strictEqual(yield* handle.await, 42)
    }).pipe(Effect.scoped), { timeout: 30_000 })

  it.live("stop of a child that persisted its result just before the signal settles with that result", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const storage = yield* FileStorage.make({ root })
      // A live process in a group of its own stands in for a child that has just
      // persisted its result and not yet sent it.
      const child = yield* bystanderWith({ detached: true })
      const stat = yield* readStat(child.pid!)
      yield* saveManifest(storage, {
        version: 1,
        adapter: "local",
        handleId: "finished",
        stepId: "double",
        module: null,
        entry: null,
        serializedInput: "21",
        executionId: "exec-finished",
        parentExecutionId: null,
        threadId: null,
        resourceId: null,
        cwdInit: null,
        pid: child.pid!,
        pidStarttime: stat!.startTime,
        socketPath: Path.join(base, "f.sock"),
        checkpointRoot: null,
        lingerMs: 0,
        metadata: {},
        createdAt: Date.now()
      })
      yield* saveResult(storage, "finished", { _tag: "Success", value: 42 })
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, stopGraceMs: 2_000 })
      yield* adapter.stop("finished")
      const handle = Option.getOrThrow(yield* adapter.get("finished"))
      assert.strictEqual(yield* handle.await, 42)
      assert.strictEqual(yield* handle.status, "succeeded")
    }).pipe(Effect.scoped), { timeout: 30_000 })

  it.live("a failing child settles the handle failed with its typed error", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const adapter = yield* LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), pollMs: 20 })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const parent = yield* harness.createContext()
      const handle = yield* harness.detachedSpawn(failing, { job: "j7" }, parent)
      const reason = failureOf(yield* Effect.exit(handle.await))
      assert.strictEqual(reason._tag, "ChildFailed")
      if (reason._tag !== "ChildFailed") return
      assert.strictEqual(reason.message, "job j7 failed")
      assert.deepInclude(reason.error as object, { _tag: "JobFailed", job: "j7" })
      assert.strictEqual(yield* handle.status, "failed")
      assert.deepStrictEqual(yield* adapter.listLive, [])
      // A settled child takes no more answers: a typed failure, not a wait for a connection that never comes.
      const late = yield* Effect.flip(adapter.answerAskUser(handle.handleId, "q1", "yes"))
      assert.strictEqual(late.reason._tag, "SocketClosed")
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a child's output reaches the parent in its JSON form: an array stays an array, a date becomes its string", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const adapter = yield* LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), pollMs: 20 })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const handle = yield* harness.detachedSpawn(listAndDate, "ab", yield* harness.createContext())
      assert.deepStrictEqual(yield* handle.await, ["ab", 2, new Date(0).toISOString()])
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a child whose step ends with nothing streamed exits with its result persisted, no socket: the host reads the record", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const frames: Array<V1ServerFrame> = []
      const adapter = yield* LocalSubprocessAdapter.make({
        root: Path.join(base, "subprocess"),
        onFrame: (_handle, frame) => Effect.sync(() => frames.push(frame))
      })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const parent = yield* harness.createContext()
      assert.strictEqual(yield* (yield* harness.detachedSpawn(double, 21, parent)).await, 42)
      // A failure takes the same path: the typed error comes from the record.
      const reason = failureOf(yield* Effect.exit((yield* harness.detachedSpawn(failing, { job: "q" }, parent)).await))
      assert.strictEqual(reason._tag, "ChildFailed")
      // Its queue never came up: not even the `started` event was sent.
      assert.deepStrictEqual(frames, [])
      assert.deepStrictEqual(yield* adapter.listLive, [])
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a child whose step runs past the quiet start brings its queue up and sends its started event", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const frames: Array<V1ServerFrame> = []
      const adapter = yield* LocalSubprocessAdapter.make({
        root: Path.join(base, "subprocess"),
        pollMs: 20,
        onFrame: (_handle, frame) => Effect.sync(() => frames.push(frame))
      })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const ms = QUIET_START_MS * 5
      const handle = yield* harness.detachedSpawn(napping, ms, yield* harness.createContext())
      assert.strictEqual(yield* handle.await, ms)
      assert.deepInclude(frames[0], { type: "event" })
      assert.deepInclude((frames[0] as { readonly event: object }).event, { kind: "started", handleId: handle.handleId })
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a child asks the user through the parent, and calls a model its module provides", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const frames: Array<V1ServerFrame> = []
      let answer: (handleId: string, promptId: string) => Effect.Effect<void, unknown> = () => Effect.void
      const adapter = yield* LocalSubprocessAdapter.make({
        root: Path.join(base, "subprocess"),
        pollMs: 20,
        onFrame: (handle, frame) =>
          Effect.suspend(() => {
            frames.push(frame)
            return frame.type === "askUserRequest" ? Effect.ignore(answer(handle.handleId, frame.id)) : Effect.void
          })
      })
      answer = (handleId, promptId) => adapter.answerAskUser(handleId, promptId, "approved")
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      // The type asks the caller for the step's services (an in-process adapter would use
      // them); this parent's script is empty, so the answer can only come from the child's.
      const handle = yield* harness.detachedSpawn(askThenModel, "bandits", yield* harness.createContext()).pipe(
        Effect.provide(ScriptedModel.layer([]))
      )
      assert.deepStrictEqual(yield* handle.await, { approval: "approved", text: "answer from the child's model" })
      const asked = frames.find((frame) => frame.type === "askUserRequest")
      assert.deepStrictEqual(asked?.type === "askUserRequest" ? asked.input : undefined, { question: "research bandits?" })
      assert.isTrue(frames.some((frame) => frame.type === "askUserCleared"))
      // The model's turn streamed to the parent as items.
      const texts = frames.flatMap((frame) => frame.type === "item" ? [(frame.item as { content?: unknown }).content] : [])
      assert.include(texts, "answer from the child's model")
    }).pipe(Effect.scoped), { timeout: 30_000 })

  it.live("a step neither its module nor the entry exports fails with StepUnavailable naming both", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const fixture = Path.join(import.meta.dirname, "..", "fixtures", "subprocessSteps.ts")
      const adapter = yield* LocalSubprocessAdapter.make({ root: Path.join(base, "subprocess"), entry: fixture, pollMs: 20 })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const ghost = runCode("ghost", () => Effect.succeed(1))
      const handle = yield* harness.detachedSpawn(ghost, null, yield* harness.createContext())
      const reason = failureOf(yield* Effect.exit(handle.await))
      assert.strictEqual(reason._tag, "StepUnavailable")
      if (reason._tag !== "StepUnavailable") return
      assert.include(reason.message, "subprocessSteps.ts")
      assert.include(reason.message, "LocalSubprocessAdapter.test.ts")
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("stop ends a running child (its whole process group) and settles the handle stopped", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, stopGraceMs: 2_000 })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const handle = yield* harness.detachedSpawn(waitForRelease, { release: Path.join(base, "never"), value: "v" }, yield* harness.createContext())
      const manifest = Option.getOrThrow(yield* loadManifest(yield* FileStorage.make({ root }), handle.handleId))
      assert.isTrue(yield* isAlive(manifest.pid!, manifest.pidStarttime))
      yield* adapter.stop(handle.handleId)
      assert.strictEqual(yield* handle.status, "stopped")
      assert.strictEqual(failureOf(yield* Effect.exit(handle.await))._tag, "Stopped")
      assert.isFalse(yield* isAlive(manifest.pid!, manifest.pidStarttime))
      assert.deepStrictEqual(yield* (yield* FileStorage.make({ root })).list(MANIFEST_PREFIX), [])
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a child not spawned to outlive its host ends with the adapter's scope", () =>
    Effect.gen(function*() {
      const base = yield* tempBase
      const root = Path.join(base, "subprocess")
      const manifest = yield* Effect.scoped(Effect.gen(function*() {
        const adapter = yield* LocalSubprocessAdapter.make({ root, pollMs: 20, stopGraceMs: 2_000 })
        const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
        const handle = yield* harness.detachedSpawn(waitForRelease, { release: Path.join(base, "never"), value: "v" }, yield* harness.createContext())
        return Option.getOrThrow(yield* loadManifest(yield* FileStorage.make({ root }), handle.handleId))
      }))
      assert.isFalse(yield* isAlive(manifest.pid!, manifest.pidStarttime))
    }), { timeout: 20_000 })
})

describe("InMemorySubprocessAdapter", () => {
  it.effect("without storage listLive is empty and reattach is none", () =>
    Effect.gen(function*() {
      const adapter = yield* InMemorySubprocessAdapter.make()
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const handle = yield* harness.detachedSpawn(double, 4, yield* harness.createContext())
      assert.strictEqual(yield* handle.await, 8)
      assert.deepStrictEqual(yield* adapter.listLive, [])
      assert.isTrue(Option.isNone(yield* adapter.reattach(handle.handleId)))
    }))

  it.live("with storage a spawn writes a manifest, cleared when it settles; reattach re-runs the step from its input", () =>
    Effect.gen(function*() {
      const storage = yield* StorageAdapter.makeMemory
      const base = yield* tempBase
      const release = Path.join(base, "release")
      const first = yield* InMemorySubprocessAdapter.make({ storage })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: first })
      const parent = yield* harness.createContext()
      const running = yield* harness.detachedSpawn(waitForRelease, { release, value: "again" }, parent)
      const manifest = Option.getOrThrow(yield* loadManifest(storage, running.handleId))
      assert.strictEqual(manifest.parentExecutionId, parent.id)
      assert.deepStrictEqual(JSON.parse(manifest.serializedInput), { release, value: "again" })

      // A second adapter on the same storage (a restarted host) re-runs the recorded child.
      const second = yield* InMemorySubprocessAdapter.make({ storage })
      const { contexts, handles } = yield* reattachLiveChildren({ subprocess: second, restore: harness.restore, adopt: harness.adopt })
      assert.deepStrictEqual(handles.map((h) => h.handleId), [running.handleId])
      assert.strictEqual(contexts.size, 0, "a harness without a checkpoint store restores nothing")
      Fs.writeFileSync(release, "go")
      assert.deepInclude((yield* handles[0]!.await) as object, { echoed: "again" })
      yield* running.await
      assert.deepStrictEqual(yield* storage.list(MANIFEST_PREFIX), [])
    }).pipe(Effect.scoped), { timeout: 20_000 })

  /**
   * A host that spawned a waiting child through the in-memory adapter with manifests,
   * and a second manifest made from the child's by `edit` (one that cannot come back).
   */
  const recordedBeside = (edit: (manifest: SubprocessManifest) => SubprocessManifest) =>
    Effect.gen(function*() {
      const storage = yield* StorageAdapter.makeMemory
      const first = yield* InMemorySubprocessAdapter.make({ storage })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: first })
      const running = yield* harness.detachedSpawn(waitForRelease, { release: "/nonexistent/never", value: "v" }, yield* harness.createContext())
      yield* saveManifest(storage, edit(Option.getOrThrow(yield* loadManifest(storage, running.handleId))))
      return { storage, running }
    })

  it.effect("a manifest whose input is not JSON is skipped by listLive and a typed Corrupt failure of reattach", () =>
    Effect.gen(function*() {
      const { running, storage } = yield* recordedBeside((manifest) => ({
        ...manifest,
        handleId: "garbled",
        serializedInput: "{not json"
      }))
      const second = yield* InMemorySubprocessAdapter.make({ storage })
      assert.deepStrictEqual((yield* second.listLive).map((h) => h.handleId), [running.handleId])
      const error = yield* Effect.flip(second.reattach("garbled"))
      assert.strictEqual(error._tag, "StorageError")
      if (error._tag === "StorageError") assert.strictEqual(error.reason._tag, "Corrupt")
    }))

  it.effect("a manifest whose step this build no longer exports is skipped by listLive; the others come back", () =>
    Effect.gen(function*() {
      const { running, storage } = yield* recordedBeside((manifest) => ({
        ...manifest,
        handleId: "renamed",
        stepId: "aStepThatWasRenamed"
      }))
      const second = yield* InMemorySubprocessAdapter.make({ storage })
      assert.deepStrictEqual((yield* second.listLive).map((h) => h.handleId), [running.handleId])
      // The skipped manifest stays, for a build that exports the step again.
      assert.isTrue(Option.isSome(yield* loadManifest(storage, "renamed")))
      const error = yield* Effect.flip(second.reattach("renamed"))
      assert.strictEqual(error._tag === "SubprocessError" ? error.reason._tag : error._tag, "StepUnavailable")
    }))

  it.effect("stop clears the manifest", () =>
    Effect.gen(function*() {
      const storage = yield* StorageAdapter.makeMemory
      const adapter = yield* InMemorySubprocessAdapter.make({ storage })
      const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter })
      const handle = yield* harness.detachedSpawn(waitForRelease, { release: "/nonexistent/never", value: "v" }, yield* harness.createContext())
      yield* adapter.stop(handle.handleId)
      assert.strictEqual(yield* handle.status, "stopped")
      yield* Effect.yieldNow
      assert.deepStrictEqual(yield* storage.list(MANIFEST_PREFIX), [])
    }))
})
