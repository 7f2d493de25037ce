/**
 * The local subprocess adapter for Node: every child step runs in its own `node`
 * process, leading its own process group, so it keeps running when the host is
 * killed (even with SIGKILL) and a restarted host reattaches it.
 *
 * Layout (docs/architecture.md#on-disk-roots): `root` holds manifests, results, watermarks and the children's
 * IPC queues, shared by host and children; children checkpoint in `checkpointRoot`;
 * sockets and child logs go in `runDir`. By default they are the home's
 * (`$NOETIC_HOME`, else `~/.noetic`): `subprocess/subprocess.db`,
 * `checkpoints/checkpoints.db` (SQLite, see `NoeticHome`) and `run/`. A `root` given as
 * a directory is a file storage, with `checkpoints/` and `run/` beside it by default; one
 * given as a database file (`.db`) is SQLite. Directories are 0700, files 0600. An
 * adapter given neither `root` nor `manifestStorage` is not durable (`durable`): its
 * children use the home's layout, but `listLive` is empty and `reattach` finds nothing.
 *
 * A spawn writes the manifest, starts `node [execArgv] subprocessChild.js` detached,
 * then records its pid and start time (`/proc/<pid>/stat` field 22). The child finds
 * its step by importing the adapter's `entry` module, else the module the step was
 * built in, and streams items, ask-user prompts and its result over a durable unix
 * socket; the parent acks each frame once handled. A child whose step ends before it
 * has anything to stream persists its result and exits without a socket: its exit
 * wakes the host, which reads the result record. Liveness is pid plus start time,
 * so a recycled pid is neither adopted nor signalled.
 *
 * `spawnProcess` runs an OS command (noetic's process request) the same way: manifest,
 * pid and start time, its own log; its exit status settles it. `pause`/`resume` send
 * SIGSTOP/SIGCONT to a child's group. With `manifestStorage` the host keeps its
 * manifests in any storage while children keep their records under `root`.
 *
 * Lifetimes: with `outliveHost: false` (the default) the adapter's scope owns its
 * children, spawned or reattached, and closing it stops them. With `outliveHost: true`
 * closing the scope only disconnects: the children run on and a later host reattaches
 * them. A host killed outright never runs finalizers, so its children outlive it
 * either way; that is the point of this adapter.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import type * as NodeChildProcess from "node:child_process"
import type * as NodeNet from "node:net"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as NodePath from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { StorageError } from "../Errors.ts"
import { childProcess, sha256Hex, nodeFs as Fs } from "../internal/builtins.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { CHILD_FLAG, importingStepModule, RESOLVE_MEMO_FLAG, RESULT_FD_FLAG } from "../internal/childFlag.ts"
import { awaitPath } from "../internal/awaitPath.ts"
import { awaitRecordedPid, listLiveFrom, manifestOf, sharedReattach } from "../internal/manifests.ts"
import { siblingModuleUrl, toModuleUrl } from "../internal/moduleUrl.ts"
import { ensureDirectory } from "../internal/privateDir.ts"
import { settledRetention } from "../internal/settledHandles.ts"
import { isAlive, readStat } from "../internal/procStat.ts"
import { randomId } from "../internal/randomId.ts"
import { IpcError, SocketClosed } from "../IpcError.ts"
import {
  CHECKPOINTS_DATABASE,
  homeOfSubprocessDatabase,
  roots,
  storageLocation,
  SUBPROCESS_DATABASE
} from "../internal/homePaths.ts"
import { makeStorageAt } from "./HomeStorage.ts"
import { makeSpares } from "./spareChild.ts"
import type { V1ServerFrame } from "../schema/IpcFrame.ts"
import { manifestKey, type SubprocessManifest, watermarkKey } from "../schema/SubprocessManifest.ts"
import {
  childFailed,
  type ProcessRequest,
  processStepId,
  type SpawnRequest,
  StepUnavailable,
  SubprocessAdapter,
  type SubprocessAdapterShape,
  SubprocessError,
  type SubprocessHandle,
  unknownHandle
} from "../services/SubprocessAdapter.ts"
import {
  clearChild,
  loadManifest,
  loadResult,
  saveManifest,
  saveResult,
  SubprocessOutcome
} from "../services/SubprocessRecords.ts"
import { causeMessage, checkSocketDirectory, type Child, decodeOutcome, DEFAULT_LINGER_MS, DEFAULT_POLL_MS, DEFAULT_STOP_GRACE_MS, ensureRunDirectory, exitedWithoutResult, logPathOf, MAX_SOCKET_PATH_BYTES, openLog, signalChild, spawnFailed, unsafeDirectory } from "../internal/localChildren.ts"
import { logWarning } from "../internal/diagnostics.ts"
import { makeDirectory } from "../internal/makeDirectory.ts"

/**
 * The IPC client, loaded when the first child is watched: a module graph that only
 * defines steps (a child process importing its step module, a host that never spawns)
 * does not pay for the socket stack.
 */
const loadIpcClient = Effect.promise(() => import("./IpcClient.ts"))

/** How the local adapter is built. */
export interface LocalSubprocessAdapterOptions {
  /**
   * The subprocess storage: manifests, results and IPC queues; a directory (file
   * storage) or a SQLite database file (see `storageLocation` in `internal/homePaths.ts`). Default
   * `$NOETIC_HOME/subprocess/subprocess.db` (else under `~/.noetic`).
   */
  readonly root?: string | undefined
  /** Where children keep their checkpoints and step ledgers, a directory or a database file. Default `checkpoints/` beside `root`, or the home's `checkpoints/checkpoints.db`. */
  readonly checkpointRoot?: string | undefined
  /** Where sockets and child logs go. Default `run/` beside `root` (a short temp path when that is too long for a socket). */
  readonly runDir?: string | undefined
  /** A module (path or URL) to load every step from; it wins over the module the step was built in. */
  readonly entry?: string | undefined
  /** The `node` binary. Default: this process's (`process.execPath`). */
  readonly node?: string | undefined
  /** Node flags of the child. Default: the tsx loader when the bootstrap or step module is TypeScript, else none. */
  readonly execArgv?: ReadonlyArray<string> | undefined
  /** The child's environment. Default: this process's. */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** How long `stop` waits after SIGTERM before SIGKILL. Default 5 s. */
  readonly stopGraceMs?: number | undefined
  /** How long a finished child waits for its result to be acknowledged before it exits. Default 60 s. */
  readonly lingerMs?: number | undefined
  /** How often a child's liveness is checked (and a lost socket reconnected). Default 200 ms. */
  readonly pollMs?: number | undefined
  /**
   * Where the host keeps its manifests, when not in the subprocess root: any storage
   * (Postgres, memory, a host's own). `listLive` and `reattach` read it; each child
   * still reads its own copy, and writes its result and IPC queue, under `root`.
   */
  readonly manifestStorage?: StorageAdapterShape | undefined
  /** Whether children outlive the adapter's scope (see the module doc). Default false. */
  readonly outliveHost?: boolean | undefined
  /**
   * Whether `listLive` and `reattach` (and `stop`, `pause`, `resume` of a handle this
   * adapter did not spawn) find children from the records in storage. Default: true
   * when `root` or `manifestStorage` is given. Without either, the adapter has no
   * storage of its own choosing (docs/architecture.md#subprocess-manifests): its children still keep their records in
   * the home's subprocess database, but it lists nothing and reattaches nothing, a
   * fresh start after every restart, as a storage-less noetic adapter.
   */
  readonly durable?: boolean | undefined
  /** Keeps one spare child started ahead, handed the next spawn (docs/subprocesses.md#prewarmed-spare-child). Default false. */
  readonly prewarm?: boolean | undefined
  /** Sees every frame a child streams before the result (items, events, ask-user prompts); it is acked after. */
  readonly onFrame?: ((handle: SubprocessHandle, frame: V1ServerFrame) => Effect.Effect<void>) | undefined
}

/** The local adapter: the service's operations, plus answers to a child's ask-user prompts. */
export interface LocalSubprocessAdapterShape extends SubprocessAdapterShape {
  /** The subprocess root the adapter and its children share. */
  readonly root: string
  /** Answers a child's pending ask-user prompt. */
  readonly answerAskUser: (handleId: string, promptId: string, output: unknown) => Effect.Effect<void, SubprocessError | IpcError>
}

/** Builds the local adapter in the current scope (see the module doc for what the scope owns). */
export const make = Effect.fnUntraced(function*(options: LocalSubprocessAdapterOptions = {}) {
  // Without a root, the home's layout: its SQLite databases (or the file storages an
  // older setup left there) and its run/ directory.
  const defaultHome = roots()
  const homeRoot = NodePath.resolve(storageLocation(defaultHome.subprocess, SUBPROCESS_DATABASE).path)
  const root = options.root === undefined ? homeRoot : NodePath.resolve(options.root)
  // A home's own subprocess storage (the default home's, or any home's
  // `subprocess/subprocess.db`, $NOETIC_HOME set or not) keeps the home's layout around it.
  const home = root === homeRoot ? defaultHome : homeOfSubprocessDatabase(root)
  const beside = home !== undefined ? home.home : NodePath.dirname(root)
  const checkpointRoot = NodePath.resolve(
    options.checkpointRoot ?? (home !== undefined
      ? storageLocation(home.checkpoints, CHECKPOINTS_DATABASE).path
      : NodePath.join(beside, "checkpoints"))
  )
  const preferredRunDir = NodePath.resolve(options.runDir ?? NodePath.join(beside, "run"))
  const fallback = Buffer.byteLength(NodePath.join(preferredRunDir, "0123456789abcdef.sock")) > MAX_SOCKET_PATH_BYTES
  // Too long for a socket path: a short one in the temp directory, named after the run
  // directory (so the same host finds it again). Anyone can create that name first, so
  // it is used only when it is this user's alone (see ensureRunDirectory).
  const runDir = fallback
    ? NodePath.join(Os.tmpdir(), `noetic-run-${sha256Hex(preferredRunDir).slice(0, 12)}`)
    : preferredRunDir
  const stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS
  const lingerMs = options.lingerMs ?? DEFAULT_LINGER_MS
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS
  const ownsLifetimes = options.outliveHost !== true
  const entry = options.entry === undefined ? null : toModuleUrl(options.entry)
  const node = options.node ?? process.execPath
  const bootstrap = fileURLToPath(siblingModuleUrl("subprocessChild", "layers"))

  const storage = yield* makeStorageAt(root)
  // Node's compile cache for children: a dot directory in a directory root (storage
  // never lists it), else in the run directory beside the sockets (a database file holds
  // no directory, and the home's `subprocess/` holds the database alone); made 0700
  // before a child writes into it.
  const compileCache = storageLocation(root).kind === "sqlite"
    ? NodePath.join(runDir, ".compile-cache")
    : NodePath.join(root, ".compile-cache")
  let compileCacheMade = false
  const manifests = options.manifestStorage ?? storage
  const mirrored = options.manifestStorage !== undefined
  /** Records a manifest where the child reads it (the root) and, when separate, where the host lists it. */
  const recordManifest = (manifest: SubprocessManifest) =>
    mirrored ? Effect.andThen(saveManifest(storage, manifest), saveManifest(manifests, manifest)) : saveManifest(storage, manifest)
  /** Removes every record of a child, the host's manifest copy included. */
  const forget = (handleId: string) =>
    mirrored ? Effect.andThen(clearChild(storage, handleId), manifests.delete(manifestKey(handleId))) : clearChild(storage, handleId)
  yield* ensureRunDirectory(runDir, fallback ? "private" : "shared", preferredRunDir)
  const adapterScope = yield* Effect.scope
  const children = new Map<string, Child>()
  const forgetSettled = settledRetention(children)

  const socketPathFor = (handleId: string) =>
    NodePath.join(runDir, `${sha256Hex(handleId).slice(0, 16)}.sock`)

  const execArgvFor = (handleId: string, module: string | null): Effect.Effect<ReadonlyArray<string>, SubprocessError> =>
    Effect.suspend(() => {
      if (options.execArgv !== undefined) return Effect.succeed(options.execArgv)
      const typescript = /\.[cm]?tsx?$/
      const needsTsx = typescript.test(bootstrap) || typescript.test(entry ?? module ?? "")
      if (!needsTsx) return Effect.succeed([])
      try {
        // Resolved here, not by the child: the child's cwd is its cwdInit, where tsx may not resolve.
        const tsx = pathToFileURL(createRequire(bootstrap).resolve("tsx")).href
        return Effect.succeed(["--import", tsx])
      } catch (cause) {
        return Effect.fail(spawnFailed(handleId, "a TypeScript step module needs tsx, which cannot be resolved; pass execArgv", cause))
      }
    })

  // ---------------------------------------------------------------------------
  // Settling and watching
  // ---------------------------------------------------------------------------

  const settle = (child: Child, outcome: SubprocessOutcome): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (child.status !== "running") return Effect.void
      const handleId = child.manifest.handleId
      forgetSettled(handleId)
      const succeeded = outcome._tag === "Success"
      child.status = succeeded ? "succeeded" : outcome.error._tag === "Stopped" ? "stopped" : "failed"
      // A `Stopped` result another host or an operator recorded carries the reason given.
      if (!succeeded && outcome.error._tag === "Stopped") child.stopReason ??= outcome.error.stopReason
      // A failed child's log is kept for whoever investigates; a successful one's is not.
      if (succeeded && child.manifest.socketPath !== null) {
        Fs.rm(logPathOf(child.manifest.socketPath), { force: true }, () => {})
      }
      // The records go before the handle settles, so whoever sees the result sees a
      // clean slate (no restart hands the same result out again).
      return forget(handleId).pipe(
        Effect.catchCause((cause) => logWarning(`subprocess ${handleId}: its records were not cleared`, cause)),
        Effect.andThen(Effect.sync(() =>
          Deferred.doneUnsafe(
            child.result,
            outcome._tag === "Success"
              ? Exit.succeed(outcome.value)
              : Exit.fail(new SubprocessError({ reason: outcome.error }))
          )
        )),
        Effect.uninterruptible
      )
    })

  const alive = (manifest: SubprocessManifest) =>
    manifest.pid === null ? Effect.succeed(false) : isAlive(manifest.pid, manifest.pidStarttime)

  /** Delivers the child's frames until its result, racing a liveness poll that reads the persisted result when it dies. */
  const watch = (child: Child) =>
    Effect.gen(function*() {
      const { handleId, socketPath } = child.manifest
      const frames = Effect.gen(function*() {
        // The recorded socket may be in a directory this host did not make (another
        // host's fallback run directory): no frames from one another user could write
        // in; the liveness poll still settles the child from its recorded result.
        yield* checkSocketDirectory(socketPath!)
        const IpcClient = yield* loadIpcClient
        // The child binds its socket once its step body has started: waiting for the
        // file to appear, rather than retrying the connection every pollMs, lets a short
        // child's result reach the host as soon as it is sent.
        yield* awaitPath(socketPath!, pollMs)
        const client = yield* IpcClient.connect({
          socketPath: socketPath!,
          watermark: IpcClient.storageWatermark(storage, watermarkKey(handleId)),
          // Quick retries first: the socket file exists an instant before it listens.
          reconnect: Schedule.min([Schedule.exponential(Duration.millis(2)), Schedule.spaced(Duration.millis(pollMs))])
        }).pipe(Scope.provide(child.scope))
        child.client = client
        while (true) {
          const delivery = yield* client.take
          const frame = delivery.frame
          if (frame.type === "bye") child.takenOver = true
          if (frame.type === "status" && typeof frame.status === "object" && frame.status !== null &&
            "kind" in frame.status && frame.status.kind === "result" && "outcome" in frame.status) {
            const outcome = yield* decodeOutcome(frame.status.outcome)
            // Acked before it is settled: the child may then exit, but its result record
            // stays until settle clears it, so a crash in between still delivers it.
            if (delivery.seq !== undefined) yield* Effect.ignore(client.ack(delivery.seq))
            yield* settle(child, outcome)
            return
          }
          if (options.onFrame !== undefined) {
            yield* options.onFrame(child.handle, frame).pipe(
              Effect.catchCause((cause) => logWarning(`subprocess ${handleId}: onFrame failed`, cause))
            )
          }
          if (delivery.seq !== undefined) yield* Effect.ignore(client.ack(delivery.seq))
        }
      }).pipe(
        // A broken stream leaves the liveness poll to settle the handle.
        Effect.catchCause((cause) => Effect.andThen(logWarning(`subprocess ${handleId}: IPC stream ended`, cause), Effect.never))
      )
      const liveness = Effect.gen(function*() {
        // A command this host started records its exit status before `exited` fires:
        // waiting for that, not the pid, keeps the status from losing the race.
        // Polled rather than only awaited: the timer keeps a host whose only work is this
        // child alive (the unreferenced process alone does not).
        if (child.manifest.process !== undefined && child.spawnedHere) {
          while (!(yield* Deferred.isDone(child.exited))) {
            yield* Effect.raceFirst(Effect.sleep(Duration.millis(pollMs)), Deferred.await(child.exited))
          }
        }
        let noticed = false
        while (yield* alive(child.manifest)) {
          const exited = Deferred.await(child.exited)
          yield* Effect.raceFirst(
            Effect.sleep(Duration.millis(pollMs)),
            noticed ? exited : Effect.raceFirst(exited, Deferred.await(child.persisted))
          )
          // A child on its quiet path has persisted its result and is exiting: settled
          // from the record now, not once its process is gone (read once per notice).
          if (!noticed && (yield* Deferred.isDone(child.persisted))) {
            noticed = true
            const persisted = yield* Effect.orElseSucceed(loadResult(storage, handleId), () => Option.none<SubprocessOutcome>())
            if (Option.isSome(persisted)) return yield* settle(child, persisted.value)
          }
        }
        const stored = yield* Effect.orElseSucceed(loadResult(storage, handleId), () => Option.none<SubprocessOutcome>())
        yield* settle(child, Option.getOrElse(stored, () => exitedWithoutResult(child)))
      })
      // An OS command speaks no IPC: its liveness and recorded exit status settle it.
      yield* (child.manifest.process === undefined ? Effect.raceFirst(frames, liveness) : liveness)
    }).pipe(
      Effect.ensuring(Scope.close(child.scope, Exit.void)),
      Effect.forkIn(adapterScope)
    )

  const newChild = (manifest: SubprocessManifest) =>
    Effect.gen(function*() {
      const result = yield* Deferred.make<unknown, SubprocessError>()
      const child: Child = {
        manifest,
        result,
        exited: Deferred.makeUnsafe<void>(),
        persisted: Deferred.makeUnsafe<void>(),
        scope: yield* Scope.fork(adapterScope),
        status: "running",
        stopping: false,
        stopReason: undefined,
        spawnedHere: false,
        paused: false,
        client: undefined,
        takenOver: false,
        handle: {
          handleId: manifest.handleId,
          stepId: manifest.stepId,
          executionId: manifest.executionId,
          parentExecutionId: manifest.parentExecutionId ?? undefined,
          // noetic's intrinsic keys of a local handle beside the caller's.
          metadata: { ...manifest.metadata, runtime: "local", pid: manifest.pid, pidStarttime: manifest.pidStarttime },
          startedAt: manifest.createdAt,
          status: Effect.sync(() => child.status),
          stopReason: Effect.sync(() => child.stopReason),
          paused: Effect.sync(() => child.paused && child.status === "running"),
          await: Deferred.await(result)
        }
      }
      children.set(manifest.handleId, child)
      return child
    })

  // ---------------------------------------------------------------------------
  // Spawn
  // ---------------------------------------------------------------------------

  /** Cached code a child loads: only from a directory nobody else can write (made once). */
  const prepareCompileCache = () => {
    const problem = compileCacheMade ? undefined : ensureDirectory(compileCache, "shared")
    compileCacheMade = problem === undefined
    return problem
  }
  // Node's compile cache (see `compileCache`), so repeated child starts reuse compiled code (a host's own setting
  // wins), and there a built child's module resolution memo (internal/resolveMemo.ts).
  const childEnv = () => ({ NODE_COMPILE_CACHE: compileCache, ...(options.env ?? process.env) })
  const childArgs = bootstrap.endsWith(".ts") ? [] : [RESOLVE_MEMO_FLAG, compileCache]
  const spares = options.prewarm !== true ? undefined : yield* makeSpares({
    node, bootstrap, childArgs, root, runDir, env: childEnv, prepare: () => prepareCompileCache() === undefined,
    execArgv: yield* Effect.option(execArgvFor("spare", entry)).pipe(Effect.map(Option.getOrUndefined))
  })

  const startProcess = (manifest: SubprocessManifest, execArgv: ReadonlyArray<string>) =>
    Effect.callback<NodeChildProcess.ChildProcess, SubprocessError>((resume) => {
      const { handleId } = manifest
      let log: number | undefined
      try {
        const problem = prepareCompileCache()
        if (problem !== undefined) return resume(Effect.fail(unsafeDirectory("compile cache directory", compileCache, problem)))
        log = openLog(logPathOf(manifest.socketPath!))
        // The deliberate exception to "the scope owns lifetimes": a detached child in its
        // own process group, unreferenced, its output in a file, so the host's death (even
        // SIGKILL) neither kills it nor breaks its output. Its one pipe to the host (fd 3) carries a single
        // byte, written once its result is persisted on its quiet path (a write that fails, the host gone, is ignored).
        const proc = childProcess().spawn(node, [...execArgv, bootstrap, CHILD_FLAG, "--root", root, "--handle", handleId, RESULT_FD_FLAG, "3", ...childArgs], {
          detached: true,
          stdio: ["ignore", log, log, "pipe"],
          ...(manifest.cwdInit === null ? {} : { cwd: manifest.cwdInit }),
          env: childEnv()
        })
        proc.once("spawn", () => resume(Effect.succeed(proc)))
        proc.once("error", (cause) => resume(Effect.fail(spawnFailed(handleId, `cannot start ${node}: ${cause.message}`, cause))))
      } catch (cause) {
        resume(Effect.fail(spawnFailed(handleId, `cannot start ${node}: ${causeMessage(cause)}`, cause)))
      } finally {
        if (log !== undefined) Fs.closeSync(log)
      }
    })

  const spawn = Effect.fn("LocalSubprocessAdapter.spawn")(function*(request: SpawnRequest) {
    const handleId = request.handleId !== undefined ? request.handleId : yield* randomId
    if (children.has(handleId)) return yield* spawnFailed(handleId, `handle id ${handleId} is in use`, null)
    if (importingStepModule()) {
      // Each child would import the module again and start another: refused, not repeated.
      return yield* spawnFailed(
        handleId,
        `a child process importing its step module was asked to start child ${request.stepId}: the module has ` +
          "top-level side effects. Steps that run out of process must live in modules that only define them.",
        null
      )
    }
    const module = request.module ?? null
    if (module === null && entry === null) {
      return yield* new SubprocessError({
        reason: new StepUnavailable({
          handleId,
          stepId: request.stepId,
          module,
          entry,
          message: `step ${request.stepId} recorded no module and the adapter has no entry (noetic: registryEntry): ` +
            "a child process cannot load it"
        })
      })
    }
    let serializedInput: string
    try {
      serializedInput = JSON.stringify(request.input) ?? "null"
    } catch (cause) {
      return yield* spawnFailed(handleId, `the input of step ${request.stepId} has no JSON form: ${causeMessage(cause)}`, cause)
    }
    const execArgv = yield* execArgvFor(handleId, module)
    if (request.cwdInit !== undefined) {
      yield* Effect.tryPromise({
        try: () => makeDirectory(request.cwdInit!, 0o700),
        catch: (cause) => spawnFailed(handleId, `cannot create cwdInit ${request.cwdInit}`, cause)
      })
    }
    const starting = yield* manifestOf(request, handleId, serializedInput, {
      adapter: "local",
      module,
      entry,
      socketPath: socketPathFor(handleId),
      checkpointRoot,
      lingerMs
    })
    const recordFailed = (cause: StorageError) => spawnFailed(handleId, `cannot record the manifest: ${cause.message}`, cause)
    // Written before the process starts (the child reads its input from it). A host that
    // dies before the pid lands leaves a pid-less manifest; the child then records its
    // own pid when it boots (see withPid).
    yield* Effect.mapError(recordManifest(starting), recordFailed)
    // A waiting spare that fits takes it (see spareChild.ts), else a new process.
    const assigned = spares === undefined ? undefined : yield* spares.assign(starting, execArgv)
    const proc = assigned !== undefined ? assigned : yield* startProcess(starting, execArgv).pipe(Effect.tapError(() => Effect.ignore(forget(handleId))))
    proc.unref()
    const pid = proc.pid!
    const stat = yield* readStat(pid)
    const manifest: SubprocessManifest = { ...starting, pid, pidStarttime: stat?.startTime ?? null }
    yield* Effect.mapError(recordManifest(manifest), recordFailed)
    const child = yield* newChild(manifest)
    // A child that has nothing to stream exits as soon as its result is persisted
    // (its quiet path), which may be before this listener is added.
    if (proc.exitCode !== null || proc.signalCode !== null) Deferred.doneUnsafe(child.exited, Exit.void)
    else proc.once("exit", () => Deferred.doneUnsafe(child.exited, Exit.void))
    const notice = proc.stdio[3] as NodeNet.Socket | null | undefined
    if (notice) {
      // Read (it never keeps the host alive) until the child's byte or its end.
      notice.unref()
      notice.on("error", () => notice.destroy())
      // A spare's `w` (it is ready) may come first.
      notice.on("data", (chunk: Buffer) => {
        if (!chunk.includes(0x72 /* r */)) return
        Deferred.doneUnsafe(child.persisted, Exit.void)
        notice.destroy()
      })
      notice.resume()
    }
    yield* watch(child)
    return child.handle
  })

  /**
   * noetic's process request: an OS command run as a durable child. It gets a manifest
   * (so `listLive`, `reattach` and `stop` find it after a host restart) and a log file
   * for its output beside the sockets; its exit status settles the handle: `{ exitCode:
   * 0 }` succeeds, anything else fails. One that ends while no host watches it settles
   * `ChildExited` on reattach, since nobody saw its status.
   */
  const spawnProcess = Effect.fn("LocalSubprocessAdapter.spawnProcess")(function*(request: ProcessRequest) {
    const handleId = request.handleId !== undefined ? request.handleId : yield* randomId
    if (children.has(handleId)) return yield* spawnFailed(handleId, `handle id ${handleId} is in use`, null)
    const logPath = logPathOf(socketPathFor(handleId))
    // Listened for from the start: a quick command may exit before its manifest is written.
    const exitStatus = Deferred.makeUnsafe<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>()
    const proc = yield* Effect.callback<NodeChildProcess.ChildProcess, SubprocessError>((resume) => {
      let log: number | undefined
      try {
        log = openLog(logPath)
        const started = childProcess().spawn(request.command, [...request.args], {
          detached: request.detached,
          stdio: [request.stdin === undefined ? "ignore" : "pipe", log, log],
          ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
          env: { ...(options.env ?? process.env), ...request.env }
        })
        started.once("exit", (code, signal) => Deferred.doneUnsafe(exitStatus, Exit.succeed({ code, signal })))
        started.once("spawn", () => {
          if (request.stdin !== undefined) started.stdin!.end(request.stdin)
          resume(Effect.succeed(started))
        })
        started.once("error", (cause) =>
          resume(Effect.fail(spawnFailed(handleId, `cannot start ${request.command}: ${cause.message}`, cause))))
      } catch (cause) {
        resume(Effect.fail(spawnFailed(handleId, `cannot start ${request.command}: ${causeMessage(cause)}`, cause)))
      } finally {
        if (log !== undefined) Fs.closeSync(log)
      }
    })
    proc.unref()
    const pid = proc.pid!
    const stat = yield* readStat(pid)
    const manifest: SubprocessManifest = {
      version: 1,
      adapter: "local",
      handleId,
      stepId: processStepId(request.command),
      module: null,
      entry: null,
      serializedInput: "null",
      executionId: handleId,
      parentExecutionId: null,
      threadId: null,
      resourceId: null,
      cwdInit: null,
      pid,
      pidStarttime: stat?.startTime ?? null,
      socketPath: null,
      checkpointRoot: null,
      lingerMs,
      metadata: {
        ...request.metadata,
        runtime: "local",
        pid,
        command: request.command,
        args: request.args,
        cwd: request.cwd,
        detached: request.detached
      },
      createdAt: yield* Clock.currentTimeMillis,
      process: { command: request.command, args: request.args, cwd: request.cwd ?? null, detached: request.detached }
    }
    yield* recordManifest(manifest).pipe(
      Effect.mapError((cause) => spawnFailed(handleId, `cannot record the manifest: ${cause.message}`, cause)),
      Effect.tapError(() => Effect.sync(() => signalChild(manifest, "SIGKILL")))
    )
    const child = yield* newChild(manifest)
    child.spawnedHere = true
    // Records the exit status, then tells the watcher. Forked in the child's scope: a
    // host that let go of the child (its scope closed, outliveHost) records nothing
    // more, since whoever reattached it owns its outcome now.
    yield* Deferred.await(exitStatus).pipe(
      Effect.flatMap(({ code, signal }) => {
        const outcome: SubprocessOutcome = code === 0
          ? { _tag: "Success", value: { exitCode: 0 } }
          : {
            _tag: "Failure",
            error: childFailed(handleId, {
              name: "ProcessExited",
              message: `${request.command} exited with ${code === null ? `signal ${signal}` : `code ${code}`}`,
              exitCode: code,
              signal
            }).reason
          }
        // A command stopped on purpose settles as stopped, whatever its status.
        return child.stopping ? Effect.void : Effect.ignore(saveResult(storage, handleId, outcome))
      }),
      Effect.andThen(Deferred.done(child.exited, Exit.void)),
      Effect.forkIn(child.scope)
    )
    yield* watch(child)
    return child.handle
  })

  // ---------------------------------------------------------------------------
  // Reattach, listLive, stop
  // ---------------------------------------------------------------------------

  const adopt = (handleId: string): Effect.Effect<Option.Option<SubprocessHandle>, StorageError | SubprocessError> =>
    Effect.gen(function*() {
      const existing = children.get(handleId)
      if (existing !== undefined) return Option.some(existing.handle)
      const recorded = yield* loadManifest(manifests, handleId)
      if (Option.isNone(recorded) || recorded.value.adapter !== "local") return Option.none()
      const manifest = yield* withPid(recorded.value)
      // A child that persisted its result while no host ran has finished, even if it is
      // still lingering for a parent to acknowledge that result: it is settled with it.
      const stored = yield* loadResult(storage, handleId)
      if (Option.isNone(stored) && (yield* alive(manifest))) {
        const child = yield* newChild(manifest)
        yield* watch(child)
        return Option.some(child.handle)
      }
      if (Option.isNone(stored)) {
        // Dead without a result: nothing will ever settle it. Never signalled: the pid may be someone else's now.
        yield* forget(handleId)
        return Option.none()
      }
      const child = yield* newChild(manifest)
      // Still lingering for an acknowledgement no host will send, it would hold its
      // queue's records until its linger ends: it is told to go (its pid and start time
      // match), and its records are cleared once it has.
      if (yield* alive(manifest)) {
        signalChild(manifest, "SIGTERM")
        if (!(yield* waitUntilDead(manifest, child, stopGraceMs)) && (yield* alive(manifest))) {
          signalChild(manifest, "SIGKILL")
          yield* waitUntilDead(manifest, child, 2_000)
        }
      }
      yield* settle(child, stored.value)
      return Option.some(child.handle)
    })

  /** Waits (bounded) for a pid-less manifest's child to record its pid: see awaitRecordedPid. */
  const withPid = (manifest: SubprocessManifest): Effect.Effect<SubprocessManifest, StorageError> =>
    awaitRecordedPid(manifest, (handleId) => loadManifest(storage, handleId), { pollMs })

  const durable = options.durable ?? (options.root !== undefined || options.manifestStorage !== undefined)

  const reattach = durable
    ? sharedReattach((handleId) => adopt(handleId).pipe(Effect.withSpan("LocalSubprocessAdapter.reattach")))
    : (_handleId: string) => Effect.succeed(Option.none<SubprocessHandle>())

  const listLive = durable
    ? listLiveFrom(manifests, reattach).pipe(Effect.withSpan("LocalSubprocessAdapter.listLive"))
    : Effect.succeed<ReadonlyArray<SubprocessHandle>>([])

  const waitUntilDead = (manifest: SubprocessManifest, child: Child, ms: number) =>
    Effect.gen(function*() {
      const deadline = (yield* Clock.currentTimeMillis) + ms
      while ((yield* Clock.currentTimeMillis) < deadline) {
        if (!(yield* alive(manifest))) return true
        yield* Effect.raceFirst(Effect.sleep(Duration.millis(Math.min(pollMs, 25))), Deferred.await(child.exited))
      }
      return !(yield* alive(manifest))
    })

  const terminate = (child: Child, reason?: string): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (child.status !== "running") return
      if (!child.stopping) child.stopReason = reason
      child.stopping = true
      const { manifest } = child
      // Signals go only to a process whose pid and start time both match the manifest.
      if (manifest.pid !== null && (yield* alive(manifest))) {
        signalChild(manifest, "SIGTERM")
        // A paused child acts on SIGTERM only once it runs again.
        if (child.paused) signalChild(manifest, "SIGCONT")
        if (!(yield* waitUntilDead(manifest, child, stopGraceMs)) && (yield* alive(manifest))) {
          signalChild(manifest, "SIGKILL")
          yield* waitUntilDead(manifest, child, 2_000)
        }
      }
      // A child that persisted its result just before the signal finished: that result
      // is what it produced, and it wins over "stopped".
      const stored = yield* loadResult(storage, manifest.handleId).pipe(
        Effect.catchCause(() => Effect.succeed(Option.none<SubprocessOutcome>()))
      )
      yield* settle(child, Option.isSome(stored) ? stored.value : exitedWithoutResult(child))
    })

  /** The child of `handleId`, reattached from its records when this adapter does not hold it yet. */
  const knownChild = (handleId: string): Effect.Effect<Child, SubprocessError> =>
    Effect.gen(function*() {
      if (!children.has(handleId)) {
        yield* reattach(handleId).pipe(
          Effect.mapError((error) => error._tag === "SubprocessError" ? error : unknownHandle(handleId))
        )
      }
      const child = children.get(handleId)
      if (child === undefined) return yield* unknownHandle(handleId)
      return child
    })

  const stop = (handleId: string, reason?: string): Effect.Effect<void, SubprocessError> =>
    Effect.gen(function*() {
      const child = yield* knownChild(handleId)
      yield* terminate(child, reason)
    }).pipe(Effect.withSpan("LocalSubprocessAdapter.stop"))

  /** SIGSTOP / SIGCONT to a running child (its group), found like `stop` finds one. */
  const control = (handleId: string, paused: boolean): Effect.Effect<boolean, SubprocessError> =>
    Effect.gen(function*() {
      const child = yield* knownChild(handleId)
      if (child.status !== "running" || child.manifest.pid === null || !(yield* alive(child.manifest))) return false
      signalChild(child.manifest, paused ? "SIGSTOP" : "SIGCONT")
      child.paused = paused
      return true
    }).pipe(Effect.withSpan(paused ? "LocalSubprocessAdapter.pause" : "LocalSubprocessAdapter.resume"))

  yield* Effect.addFinalizer(() =>
    ownsLifetimes
      ? Effect.forEach(children.values(), (child) => terminate(child), { concurrency: "unbounded", discard: true })
      : Effect.void
  )

  const answerAskUser = (handleId: string, promptId: string, output: unknown) =>
    Effect.suspend((): Effect.Effect<void, SubprocessError | IpcError> => {
      const child = children.get(handleId)
      if (child === undefined) return Effect.fail(unknownHandle(handleId))
      if (child.client === undefined || child.status !== "running") {
        return Effect.fail(
          new IpcError({
            socketPath: child.manifest.socketPath ?? "",
            reason: new SocketClosed({
              message: child.status !== "running" ? `child ${handleId} has settled` : "not connected to the child yet",
              cause: undefined
            })
          })
        )
      }
      return child.client.send({ type: "askUserResolve", id: promptId, output })
    })

  return {
    root,
    spawn,
    spawnProcess,
    pause: (handleId: string) => control(handleId, true),
    resume: (handleId: string) => control(handleId, false),
    get: (handleId: string) => Effect.sync(() => Option.map(Option.fromUndefinedOr(children.get(handleId)), (c) => c.handle)),
    stop,
    listLive,
    reattach,
    answerAskUser,
    // As the harness default it leaves nested steps in the host's process: only a
    // detached spawn, or a step given this adapter as its own, starts a child.
    nestedInProcess: true
  } satisfies LocalSubprocessAdapterShape
})

/** The local adapter with what only it has (`answerAskUser`, `root`), provided by {@link layer}. */
export class LocalSubprocessAdapter extends Context.Service<LocalSubprocessAdapter, LocalSubprocessAdapterShape>()(
  "noetic-effect/LocalSubprocessAdapter"
) {}

/**
 * The local adapter for the life of the layer: as the `SubprocessAdapter` service, and
 * as `LocalSubprocessAdapter` (the same adapter) so the host can answer its children's
 * ask-user prompts.
 */
export const layer = (
  options: LocalSubprocessAdapterOptions = {}
): Layer.Layer<SubprocessAdapter | LocalSubprocessAdapter, StorageError | SubprocessError> =>
  Layer.effectContext(
    Effect.map(make(options), (adapter) =>
      Context.make(SubprocessAdapter, adapter).pipe(Context.add(LocalSubprocessAdapter, adapter)))
  )
