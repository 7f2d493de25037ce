/**
 * The read model the CLI and the inspector share: what each view shows of the
 * executions, children and queues recorded in one set of storages (a home's roots, or
 * one PostgreSQL table). The CLI prints these shapes as tables and JSON; the inspector
 * serves them to the browser (see docs/inspector.md). Nothing here writes.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { StorageError } from "../Errors.ts"
import { snapshotKey, type StoredSnapshotHead } from "../schema/CheckpointSnapshot.ts"
import * as Children from "./Children.ts"
import * as Executions from "./Executions.ts"
import * as Queues from "./Queues.ts"
import type { Progress } from "./Render.ts"
import type { CliFailure, CliStorages } from "./Storages.ts"

/** A progress sink that shows nothing. */
export const silent: Progress = { update: () => {} }

/** The children recorded in the subprocess storage, with their liveness. */
export const childRows = (
  storages: CliStorages,
  now: number,
  progress: Progress = silent
): Effect.Effect<ReadonlyArray<Children.ChildRow>, StorageError> =>
  Option.match(storages.subprocess, {
    onNone: () => Effect.succeed<ReadonlyArray<Children.ChildRow>>([]),
    onSome: (storage) => Children.listChildren(storage, progress, now)
  })

/** Every recorded execution (or only `only`), newest checkpoint first, with live children marking theirs running. */
export const executionRows = (
  storages: CliStorages,
  now: number,
  progress: Progress = silent,
  only?: string
): Effect.Effect<ReadonlyArray<Executions.ExecutionRow>, StorageError> =>
  Option.match(storages.checkpoints, {
    onNone: () => Effect.succeed<ReadonlyArray<Executions.ExecutionRow>>([]),
    onSome: (storage) =>
      Effect.gen(function*() {
        const rows = yield* Executions.listExecutions(storage, progress, now, only)
        return Executions.withLiveChildren(rows, yield* childRows(storages, now, progress))
      })
  })

/** The snapshot fields `executions show` and the inspector's detail page show. */
export interface SnapshotSummary {
  readonly capturedAt: string
  readonly threadId: string | null
  readonly resourceId: string | null
  readonly items: number
  readonly cwd: StoredSnapshotHead["cwd"]
  readonly layers: ReadonlyArray<string>
  readonly frontier: ReadonlyArray<{ readonly path: string; readonly stepId: string }>
  readonly askUser: ReadonlyArray<{ readonly id: string; readonly createdAt: string }>
}

/** The summary of a snapshot head; `frontier` holds the paths the execution's row read. */
export const snapshotSummary = (head: StoredSnapshotHead, frontier: ReadonlyArray<string>): SnapshotSummary => ({
  capturedAt: head.capturedAt,
  threadId: head.threadId ?? null,
  resourceId: head.resourceId ?? null,
  items: Executions.itemCount(head),
  cwd: head.cwd,
  layers: Object.keys(head.layers),
  frontier: head.frontier.map((entry, i) => ({ path: frontier[i] ?? entry.stepId, stepId: entry.stepId })),
  askUser: head.askUser.map((prompt) => ({ id: prompt.id, createdAt: new Date(prompt.createdAt).toISOString() }))
})

/** One execution as `executions show` and the inspector's detail page read it. */
export interface ExecutionDetail {
  readonly row: Executions.ExecutionRow | null
  readonly snapshot: SnapshotSummary | null
  /** Why the snapshot could not be read (then `snapshot` is null): its key and the one-line reason. */
  readonly snapshotProblem: {
    readonly key: string
    readonly message: string
    /** The failure itself, which the CLI reports as it would any other. */
    readonly error: CliFailure | StorageError
  } | null
  readonly ledger: Executions.LedgerView
  readonly outputs: ReadonlyMap<number, { readonly value: unknown; readonly undefined: boolean }>
  /** The detached children this execution spawned, as their manifests record them. */
  readonly children: ReadonlyArray<Children.ChildRow>
  /** The children rows, for the caller that needs them all (the parent link of a child's execution). */
  readonly allChildren: ReadonlyArray<Children.ChildRow>
}

/**
 * One execution read whole: its row, snapshot, ledger and children. None when
 * nothing of it is recorded; a snapshot that does not decode is reported in
 * `snapshotProblem` (the CLI fails with it; the inspector shows it beside the rest).
 */
export const executionDetail = (
  storages: CliStorages,
  executionId: string,
  now: number,
  progress: Progress = silent
): Effect.Effect<Option.Option<ExecutionDetail>, StorageError | CliFailure> =>
  Effect.gen(function*() {
    const storage = Option.getOrUndefined(storages.checkpoints)
    if (storage === undefined || !(yield* Executions.isRecorded(storage, executionId))) return Option.none()
    const allChildren = yield* childRows(storages, now, silent)
    const [listed] = yield* Option.match(storages.checkpoints, {
      onNone: () => Effect.succeed<ReadonlyArray<Executions.ExecutionRow>>([]),
      onSome: (checkpoints) => Executions.listExecutions(checkpoints, silent, now, executionId)
    })
    const [row] = listed === undefined ? [] : Executions.withLiveChildren([listed], allChildren)
    const head = yield* Effect.exit(Executions.loadHead(storage, executionId))
    progress.update("reading the ledger")
    const { outputs, view } = yield* Executions.readLedger(storage, executionId)
    let problem: ExecutionDetail["snapshotProblem"] = null
    if (Exit.isFailure(head)) {
      const reason = head.cause.reasons.find((r) => r._tag === "Fail")
      const error = reason?.error
      const readable = error !== undefined && (error._tag === "CliFailure" || error.reason._tag === "Corrupt")
      if (!readable) return yield* Effect.failCause(head.cause)
      problem = { key: snapshotKey(executionId), message: error.message, error }
    }
    const loaded = Exit.isSuccess(head) ? head.value : Option.none()
    return Option.some({
      row: row ?? null,
      snapshot: Option.match(loaded, { onNone: () => null, onSome: (h) => snapshotSummary(h, row?.frontier ?? []) }),
      snapshotProblem: problem,
      ledger: view,
      outputs,
      children: allChildren.filter((child) => child.parentExecutionId === executionId),
      allChildren
    })
  })

/** Every durable queue in the storages, with its state (pending frames left out). */
export const queueRows = (
  storages: CliStorages,
  progress: Progress = silent
): Effect.Effect<ReadonlyArray<Queues.QueueRow>, StorageError> =>
  Effect.gen(function*() {
    const rows: Array<Queues.QueueRow> = []
    for (const [name, storage] of Queues.queueStorages(storages)) {
      progress.update(`listing queues (${name})`)
      const ids = yield* Queues.listQueueIds(storage)
      for (const [i, id] of ids.entries()) {
        progress.update(`reading queues (${name})`, i, ids.length)
        const { frames: _, ...row } = yield* Queues.inspectQueue(storage, name, id)
        rows.push(row)
      }
    }
    return rows
  })

/** One queue with its pending frames, from the first storage that holds it. */
export const findQueue = (
  storages: CliStorages,
  queueId: string
): Effect.Effect<Option.Option<Queues.QueueDetail>, StorageError> =>
  Effect.gen(function*() {
    for (const [name, storage] of Queues.queueStorages(storages)) {
      if (yield* Queues.hasQueue(storage, queueId)) return Option.some(yield* Queues.inspectQueue(storage, name, queueId))
    }
    return Option.none()
  })

/** The first line of a message, for one-line reports. */
export const firstLineOf = (message: string): string => message.split("\n")[0] ?? message
