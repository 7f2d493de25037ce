/**
 * The life of a local-adapter child process, imported by the bootstrap
 * (`subprocessChild.ts`) once it has set up module resolution.
 *
 * It reads its manifest from the subprocess storage at `root`, loads the step (the
 * adapter's `entry` module, else the module that defined the step), serves its unix
 * socket over a `DurableOutboundQueue` in that storage (once the step has a frame to
 * send, or has run for `QUIET_START_MS`: frames wait in the queue until the server
 * listens), and runs the step under a durable harness
 * keyed by the manifest's execution id, with checkpoints under the manifest's
 * checkpoint root, with the services the module exports as `subprocessLayer`. Items
 * and ask-user prompts stream as durable frames as they are
 * checkpointed; the outcome is persisted under the result key and then sent as a
 * final `status` frame. The process exits once the parent acknowledges that frame,
 * or after the manifest's linger period (the result stays persisted for `reattach`).
 * A step that ends before its queue came up (the quiet path) has its outcome persisted
 * and its process exits at once, with no queue, socket or frame: the host reads the
 * result record when it sees the process gone.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as NodeModule from "node:module"
import type { AgentHarness } from "../harness/AgentHarness.ts"
import { make as makeHarness } from "../harness/AgentHarness.ts"
import type { StorageError } from "../Errors.ts"
import { type LoadedStep, loadStep, runManifestStep } from "../harness/StepLoader.ts"
import { readStat } from "../internal/procStat.ts"
import { DURABLE_ENVELOPE_BYTES, encodeFrameText, MaxFrameBytes, toWireForm, type V1ServerFrame } from "../schema/IpcFrame.ts"
import { queueSocketId, type SubprocessManifest } from "../schema/SubprocessManifest.ts"
import { CheckpointStore, type CheckpointStoreShape, makeWith as makeCheckpointStore } from "../services/CheckpointStore.ts"
import { JSON_FRAMES, keyPrefix, makeWith as makeQueue } from "../services/DurableOutboundQueue.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { childFailed, childFailedOf, SubprocessError, Stopped } from "../services/SubprocessAdapter.ts"
import { loadManifest, saveManifest, saveResult, SubprocessOutcome } from "../services/SubprocessRecords.ts"
import { makeStorageAt } from "./HomeStorage.ts"
import { IpcError } from "../IpcError.ts"
import type { IpcServerShape } from "./IpcServer.ts"
import { logError, logWarning } from "../internal/diagnostics.ts"
import { nodeFs } from "../internal/builtins.ts"
import { RESULT_FD_FLAG, SPARE_FLAG } from "../internal/childFlag.ts"

/**
 * A checkpoint store that also streams what each checkpoint adds: new items as `item`
 * frames, new ask-user prompts as `askUserRequest`, settled ones as `askUserCleared`.
 * The harness checkpoints after every append and every enqueued prompt, so this sees
 * each change without hooks in the harness.
 */
const streamingStore = (
  base: CheckpointStoreShape,
  emitAll: (frames: ReadonlyArray<V1ServerFrame>) => Effect.Effect<unknown, unknown>
): CheckpointStoreShape => {
  let sentItems = 0
  const sentPrompts = new Set<string>()
  return CheckpointStore.of({
    ...base,
    save: (snapshot, options) =>
      Effect.suspend(() => {
        const frames: Array<V1ServerFrame> = []
        for (const item of snapshot.itemLog.items.slice(sentItems)) frames.push({ type: "item", item })
        sentItems = Math.max(sentItems, snapshot.itemLog.items.length)
        const pending = new Set<string>()
        for (const prompt of snapshot.askUser) {
          pending.add(prompt.id)
          if (sentPrompts.has(prompt.id)) continue
          sentPrompts.add(prompt.id)
          frames.push({ type: "askUserRequest", id: prompt.id, input: prompt.input, createdAt: prompt.createdAt })
        }
        for (const id of sentPrompts) {
          if (pending.has(id)) continue
          sentPrompts.delete(id)
          frames.push({ type: "askUserCleared", id })
        }
        const stream = frames.length === 0
          ? Effect.void
          : Effect.catchCause(emitAll(frames), (cause) => logWarning("subprocess child: a frame was not sent", cause))
        return Effect.andThen(stream, base.save(snapshot, options))
      })
  })
}

/** Turns how the step ended into the outcome recorded and sent to the parent. */
const toOutcome = (handleId: string, exit: Exit.Exit<unknown, unknown>): SubprocessOutcome => {
  if (Exit.isSuccess(exit)) {
    // The parent gets the output's JSON form, as `JSON.stringify` gives it (an array stays an array).
    try {
      const text = JSON.stringify(exit.value)
      return { _tag: "Success", value: text === undefined ? null : JSON.parse(text) }
    } catch (cause) {
      return { _tag: "Failure", error: childFailed(handleId, new Error(`the output has no JSON form: ${String(cause)}`)).reason }
    }
  }
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  if (failure !== undefined) {
    const error = failure.error
    return { _tag: "Failure", error: error instanceof SubprocessError ? error.reason : childFailed(handleId, error).reason }
  }
  if (Cause.hasInterruptsOnly(exit.cause)) {
    return { _tag: "Failure", error: new Stopped({ handleId, message: `child ${handleId} was interrupted` }) }
  }
  return { _tag: "Failure", error: childFailedOf(handleId, exit.cause).reason }
}

/**
 * How long a step runs, with nothing to stream, before its child brings the durable
 * queue and the socket up anyway (and sends its `started` event). A step that ends
 * sooner never loads the socket stack: its child persists the result and exits, and the
 * host settles it from that record once the process is gone (docs/subprocesses.md).
 */
export const QUIET_START_MS = 100

/**
 * Runs the step of `manifest` (`loading`: its module being imported) under a durable
 * harness with checkpoints in `checkpointStorage` (being opened); `onHarness` receives
 * the harness once built, just before the step starts, and `onDispatch` is called once
 * the step is dispatched, just before its body starts.
 */
const runStep = (
  manifest: SubprocessManifest,
  loading: Effect.Effect<LoadedStep, SubprocessError>,
  checkpointStorage: Effect.Effect<StorageAdapterShape, StorageError>,
  emitAll: (frames: ReadonlyArray<V1ServerFrame>) => Effect.Effect<unknown, unknown>,
  onHarness: (harness: AgentHarness<any>) => void,
  onDispatch: () => void
) =>
  Effect.gen(function*() {
    const { layer, step } = yield* loading
    const input: unknown = JSON.parse(manifest.serializedInput)
    const store = streamingStore(yield* makeCheckpointStore(yield* checkpointStorage), emitAll)
    const harness = yield* makeHarness({ name: `subprocess:${manifest.stepId}`, agentGraph: step }).pipe(
      Effect.provideService(CheckpointStore, store)
    )
    onHarness(harness)
    return yield* runManifestStep(harness, manifest, input, layer, onDispatch)
  })

/** Removes the child's IPC queue once its last frame is acknowledged. */
const dropQueue = (storage: StorageAdapterShape, handleId: string) =>
  Effect.flatMap(storage.list(keyPrefix(queueSocketId(handleId))), (keys) =>
    Effect.forEach(keys, (key) => storage.delete(key), { concurrency: 16, discard: true }))

/**
 * The whole life of a child process. `onLoaded` is called once everything a child
 * loads at its start (the library, the step module, the socket stack) is loaded.
 */
export const runChild = Effect.fnUntraced(function*(
  root: string,
  handleId: string,
  onLoaded: () => void = () => {},
  opened?: StorageAdapterShape
) {
  const storage = opened !== undefined ? opened : yield* makeStorageAt(root)
  const found = yield* loadManifest(storage, handleId)
  if (Option.isNone(found)) return yield* logError(`subprocess child: no manifest for handle ${handleId} under ${root}`)
  const manifest = found.value
  // The step module is imported, and the checkpoint storage opened, while the rest is
  // set up: their file reads go beside each other's.
  const loading = yield* Effect.forkScoped(loadStep(handleId, manifest.stepId, manifest.module, manifest.entry))
  // A new SQLite log is not grown up front here (only the first opener of a database
  // does it): the ~10 ms would sit on the step's path, where its few writes gain less.
  const checkpointStorage = yield* Effect.forkScoped(makeStorageAt(manifest.checkpointRoot ?? ".", undefined, { reserveLog: false }))
  // The child records its own pid too: a host killed between starting this process and
  // recording the pid would otherwise leave a manifest that looks dead, and the child
  // would run on with no host able to reattach it. Recorded beside the step's start,
  // not ahead of it; a failure to record it fails the child once the step's result is saved.
  const pidRecorded = yield* Effect.forkScoped(
    manifest.pid === process.pid ? Effect.void : Effect.flatMap(readStat(process.pid), (stat) =>
      saveManifest(storage, { ...manifest, pid: process.pid, pidStarttime: stat?.startTime ?? null }))
  )
  let harness: AgentHarness<any> | undefined
  const maxFrameBytes = yield* MaxFrameBytes
  // The IPC side (the durable queue, then the socket server) comes up once the step's
  // body has started, not ahead of it: the body's start waits neither for the queue's
  // reads and first writes nor for the socket stack's modules and the bind. It comes
  // up earlier when a frame comes first (a restored context's items), and at the
  // latest once the step has ended. A parent connecting before the server listens
  // retries; frames are durable in the queue from the first one, the `started` event,
  // and the server delivers them from there.
  const begin = Deferred.makeUnsafe<void>()
  // A frame is waiting to be sent: the queue comes up now, not after the quiet start.
  const wanted = Deferred.makeUnsafe<void>()
  // Whether the queue is coming up; until it is, a step that ends takes the quiet path.
  let serveStarted = false
  const socketPath = manifest.socketPath ?? `${root}/${handleId}.sock`
  const queueing = yield* Effect.forkScoped(Effect.gen(function*() {
    yield* Deferred.await(begin)
    yield* Effect.raceFirst(Effect.sleep(Duration.millis(QUIET_START_MS)), Deferred.await(wanted))
    serveStarted = true
    const queue = yield* Effect.acquireRelease(makeQueue(storage, { socketId: queueSocketId(handleId) }), (q) => q.close)
    const started = encodeFrameText(
      { type: "event", event: { kind: "started", handleId, pid: process.pid } },
      maxFrameBytes - DURABLE_ENVELOPE_BYTES
    )
    // Numbered before any other frame, written without waiting.
    if (typeof started === "string") yield* queue.offerAll([started], JSON_FRAMES)
    return queue
  }))
  let server: IpcServerShape | undefined
  const serving = yield* Effect.forkScoped(Effect.gen(function*() {
    const queue = yield* Fiber.join(queueing)
    const IpcServer = yield* Effect.promise(() => import("./IpcServer.ts"))
    server = yield* IpcServer.make({
      socketPath,
      queue,
      onClientFrame: (frame) => {
        if (harness === undefined) return Effect.void
        const live = harness.liveContext(manifest.executionId)
        switch (frame.type) {
          case "askUserResolve":
            return Effect.ignore(harness.answerAskUser(manifest.executionId, frame.id, frame.output))
          case "askUserCancel":
            return Option.isNone(live) ? Effect.void : Effect.ignore(live.value.cancelAskUser(frame.id, frame.reason))
          default:
            return Effect.void
        }
      }
    })
    // The library, the step module and the socket stack are loaded: Node's compile
    // cache (NODE_COMPILE_CACHE, set by the adapter) is written now, not at exit, so
    // the next child starts from it even while this one runs for long.
    NodeModule.flushCompileCache?.()
    onLoaded()
    return server
  }))
  // Until the server listens, frames go to the queue as the server would put them there.
  const emitAll = (frames: ReadonlyArray<V1ServerFrame>): Effect.Effect<unknown, unknown> =>
    Effect.suspend((): Effect.Effect<unknown, unknown> => {
      if (server !== undefined) return server.emitAll(frames)
      const texts: Array<string> = []
      for (const frame of frames) {
        const text = encodeFrameText(toWireForm(frame), maxFrameBytes - DURABLE_ENVELOPE_BYTES)
        if (typeof text !== "string") return Effect.fail(new IpcError({ socketPath, reason: text }))
        texts.push(text)
      }
      Deferred.doneUnsafe(begin, Exit.void)
      Deferred.doneUnsafe(wanted, Exit.void)
      return Effect.flatMap(Fiber.join(queueing), (queue) => queue.appendAll(texts, JSON_FRAMES))
    })
  const exit = yield* Effect.exit(runStep(
    manifest,
    Fiber.join(loading),
    Fiber.join(checkpointStorage),
    emitAll,
    (built) => {
      harness = built
    },
    () => Deferred.doneUnsafe(begin, Exit.void)
  ))
  // The quiet path: the step ended with nothing streamed before its queue came up. The
  // queue and the socket are never made; the result is persisted and the process exits,
  // which is what tells the host (it then reads the record, as a restarted host does).
  const quiet = !serveStarted
  if (quiet) yield* Fiber.interrupt(queueing)
  Deferred.doneUnsafe(begin, Exit.void)
  const outcome = toOutcome(handleId, exit)
  // Persisted before it is sent: a parent that misses the frame reads the record. A
  // server that could not listen fails the child after this, its result kept.
  yield* saveResult(storage, handleId, outcome)
  yield* Fiber.join(pidRecorded)
  if (quiet) return tellHostPersisted()
  const ready = yield* Fiber.join(serving)
  const queue = yield* Fiber.join(queueing)
  const encoded = yield* Schema.encodeUnknownEffect(SubprocessOutcome)(outcome)
  const seq = yield* ready.emit({ type: "status", status: { kind: "result", outcome: encoded } })
  const acked = yield* queue.awaitAcked(seq).pipe(Effect.timeoutOption(Duration.millis(manifest.lingerMs)))
  if (Option.isSome(acked)) yield* dropQueue(storage, handleId)
})

const argValue = (name: string): string | undefined => {
  const index = process.argv.indexOf(name)
  return index < 0 ? undefined : process.argv[index + 1]
}

/**
 * Writes the one byte of the result pipe the spawning host gave (`--result-fd`): the
 * result is persisted. Without that pipe, or with its host gone, nothing happens: the
 * host (or a later one) finds the record when the process has exited.
 */
const tellHostPersisted = (byte = "r"): void => {
  const fd = Number(argValue(RESULT_FD_FLAG))
  if (!Number.isInteger(fd) || fd < 3) return
  try {
    nodeFs.writeSync(fd, byte)
  } catch {
    // The host is gone (EPIPE): the record is where a restarted host reads it.
  }
}

/**
 * A spare's assignment: one line on stdin, `{ handleId, cwd }`. The process exits when
 * stdin ends first (its host died or let it go): an unassigned spare never outlives it.
 */
const assignment = Effect.callback<{ readonly handleId: string; readonly cwd: string }>((resume) => {
  const stdin = process.stdin
  let text = ""
  stdin.setEncoding("utf8")
  stdin.on("data", (chunk: string) => {
    text += chunk
    const end = text.indexOf("\n")
    if (end < 0) return
    stdin.removeAllListeners()
    stdin.destroy()
    try {
      const { handleId, cwd } = JSON.parse(text.slice(0, end)) as { handleId: unknown; cwd: unknown }
      if (typeof handleId !== "string" || typeof cwd !== "string") throw new Error("not { handleId, cwd }")
      resume(Effect.succeed({ handleId, cwd }))
    } catch (cause) {
      process.stderr.write(`subprocess spare: a bad assignment: ${String(cause)}\n`)
      process.exit(2)
    }
  })
  stdin.once("end", () => process.exit(0))
  stdin.once("error", () => process.exit(0))
})

/**
 * A prewarmed spare (docs/subprocesses.md#prewarmed-spare-child): its modules are loaded;
 * it opens the subprocess storage, tells the host it is ready (`w` on the result pipe)
 * and, once assigned, is the child of that handle in that working directory.
 */
const runSpare = Effect.fnUntraced(function*(root: string, onLoaded: () => void) {
  const storage = yield* makeStorageAt(root)
  tellHostPersisted("w")
  const { handleId, cwd } = yield* assignment
  if (cwd !== process.cwd()) process.chdir(cwd)
  return yield* runChild(root, handleId, onLoaded, storage)
})

/** Runs this process as the child named by its `--root` and `--handle` arguments (or as a spare, `--noetic-spare`). */
export const main = (onLoaded: () => void): void => {
  const root = argValue("--root")
  if (root !== undefined && process.argv.includes(SPARE_FLAG)) {
    NodeRuntime.runMain(Effect.scoped(runSpare(root, onLoaded)))
    return
  }
  const handleId = argValue("--handle")
  if (root === undefined || handleId === undefined) {
    process.stderr.write("subprocess child: --root and --handle are required\n")
    process.exit(2)
  }
  NodeRuntime.runMain(Effect.scoped(runChild(root, handleId, onLoaded)))
}
