/**
 * What the CLI reads of executions: one row per recorded execution (status, steps,
 * last checkpoint) and, for one execution, its snapshot and its ledger record by record.
 *
 * Status comes from what the engine records, never from guesses:
 * - `running`: its lease (harnesses built with `lease`) is held and not expired, or a
 *   live child process (pid and start time) runs it (see `withLiveChildren`).
 * - `finished`: the root step still in the snapshot's frontier has its output in the
 *   ledger (the root completed after the last snapshot; a resume would only replay
 *   it; the root's record is the last one its run writes), or nothing is in flight
 *   (the harness saves a last snapshot without the root whenever the ledger could not
 *   hold the root's output, or the run changed the context).
 * - `interrupted`: a step was in flight at the last snapshot and the root has no
 *   recorded output: a resume runs it on. Without a lease a run in progress reads the
 *   same, since nothing then records that a host is working on it.
 * - `failed`: what reads `interrupted`, but its last run ended in a failure: the
 *   harness left a failure mark (`runFailedKey`) no older than the snapshot's
 *   `capturedAt`; a resume runs it again.
 * - `idle`: a context with nothing in flight that never recorded a step (one built
 *   with `createContext`, say a parent of detached children).
 * - `empty`: the index lists it but no snapshot landed (a crash between the two writes
 *   of a first save); `unreadable`: its snapshot does not decode.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StorageError } from "../Errors.ts"
import { RunFailed, runFailedKey, snapshotKey, type StoredSnapshotHead } from "../schema/CheckpointSnapshot.ts"
import {
  isAtOrBelow,
  LEDGER_ENTRY_VERSION,
  LedgerEntry,
  ledgerPrefix,
  ledgerStatsKey,
  parseLedgerSeq,
  recordFailedOf
} from "../schema/LedgerEntry.ts"
import { decodeStoredSnapshot, INDEX_PREFIX, makeWith as makeCheckpointStore } from "../services/CheckpointStore.ts"
import { ExecutionLeaseRecord, leaseKey } from "../services/ExecutionLease.ts"
import { utf8Length } from "../services/StepLedger.ts"
import { getMany, scan, type StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { Progress } from "./Render.ts"
import { CliFailure } from "./Storages.ts"

/** The status of an execution; see the module doc. */
export type ExecutionStatus = "running" | "interrupted" | "failed" | "finished" | "idle" | "empty" | "unreadable"

/** The statuses `--status` accepts. */
export const EXECUTION_STATUSES: ReadonlyArray<ExecutionStatus> = [
  "running",
  "interrupted",
  "failed",
  "finished",
  "idle",
  "empty",
  "unreadable"
]

/** One recorded execution, as `executions list` prints it. */
export interface ExecutionRow {
  readonly executionId: string
  readonly status: ExecutionStatus
  /** Ledger records stored (completed steps; superseded records and tombstones count until they age out). */
  readonly stepsRecorded: number
  /** `capturedAt` of the last snapshot, ISO text; null without one. */
  readonly lastCheckpoint: string | null
  readonly threadId: string | null
  readonly resourceId: string | null
  /** Paths of the steps in flight at the last snapshot, outermost first. */
  readonly frontier: ReadonlyArray<string>
  /** Ask-user prompts pending at the last snapshot. */
  readonly pendingAskUser: number
  /** The lease record, when the execution ever had one. */
  readonly lease: { readonly owner: string; readonly expiresAt: number; readonly live: boolean } | null
  /** Why the snapshot could not be read (status `unreadable`), or the failure's first line (status `failed`). */
  readonly problem?: string
  /** The live child process running it (local subprocess adapter), when one does. */
  readonly runningIn?: { readonly handleId: string; readonly pid: number | null }
}

/**
 * Marks the executions a live child process runs as `running`: a detached child runs
 * its step as an execution of its own, and without a lease its process (pid and start
 * time) is the only record that someone works on it.
 */
export const withLiveChildren = (
  rows: ReadonlyArray<ExecutionRow>,
  children: ReadonlyArray<{
    readonly handleId: string
    readonly executionId: string | null
    readonly status: string
    readonly pid: number | null
  }>
): ReadonlyArray<ExecutionRow> => {
  const live = new Map<string, { readonly handleId: string; readonly pid: number | null }>()
  for (const child of children) {
    if (child.executionId !== null && (child.status === "running" || child.status === "starting")) {
      live.set(child.executionId, { handleId: child.handleId, pid: child.pid })
    }
  }
  return rows.map((row) => {
    const child = live.get(row.executionId)
    if (child === undefined || row.status === "running" || row.status === "unreadable") return row
    return { ...row, status: "running", runningIn: child }
  })
}

/** How many records each bulk read of a scan asks for, so progress can be shown between them. */
const BATCH = 256

const decodeLease = Schema.decodeUnknownExit(ExecutionLeaseRecord)
const decodeRunFailed = Schema.decodeUnknownExit(RunFailed)
const decodeLedgerEntry = Schema.decodeUnknownExit(LedgerEntry)

/** Index of the first key not below `prefix` in sorted `keys`. */
const lowerBound = (keys: ReadonlyArray<string>, prefix: string): number => {
  let low = 0
  let high = keys.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if (keys[mid]! < prefix) low = mid + 1
    else high = mid
  }
  return low
}

/** The ledger seqs of `executionId` among sorted `keys`, ascending. */
const ledgerSeqsIn = (keys: ReadonlyArray<string>, executionId: string): Array<number> => {
  const prefix = ledgerPrefix(executionId)
  const seqs: Array<number> = []
  for (let i = lowerBound(keys, prefix); i < keys.length && keys[i]!.startsWith(prefix); i++) {
    const seq = parseLedgerSeq(prefix, keys[i]!)
    if (seq !== undefined) seqs.push(seq)
  }
  return seqs.sort((a, b) => a - b)
}

/** Whether a frontier entry's recorded path is a root path (`/<id>#<n>`, nothing below). */
const pathOf = (entry: { readonly stepId: string; readonly state?: unknown }): string =>
  typeof entry.state === "object" && entry.state !== null && "path" in entry.state && typeof entry.state.path === "string"
    ? entry.state.path
    : entry.stepId

const isRootPath = (path: string) => /^\/[^/[]+$/.test(path)

/** What a bulk read holds for a record the storage could not decode (a damaged row or file). */
export class DamagedRecord {
  constructor(readonly key: string, readonly message: string) {}
}

/**
 * Reads `keys` in batches, reporting progress. A batch that fails on a damaged record
 * is read key by key, and each damaged record is held as a {@link DamagedRecord}, so
 * one bad row does not hide the rest.
 */
const readBatched = (
  storage: StorageAdapterShape,
  keys: ReadonlyArray<string>,
  progress: Progress,
  label: string
): Effect.Effect<ReadonlyMap<string, unknown>, StorageError> =>
  Effect.gen(function*() {
    const found = new Map<string, unknown>()
    for (let start = 0; start < keys.length; start += BATCH) {
      progress.update(label, start, keys.length)
      const slice = keys.slice(start, start + BATCH)
      const batch = yield* getMany(storage, slice).pipe(
        Effect.catchIf((error) => error.reason._tag === "Corrupt", () =>
          Effect.map(
            Effect.forEach(slice, (key) =>
              storage.get(key).pipe(
                Effect.map((value) => Option.map(value, (v): readonly [string, unknown] => [key, v])),
                Effect.catchIf((error) => error.reason._tag === "Corrupt", (error) =>
                  Effect.succeed(Option.some([key, new DamagedRecord(key, error.message)] as const)))
              ), { concurrency: 16 }),
            (pairs) => new Map(pairs.flatMap((pair) => Option.isSome(pair) ? [pair.value] : []))
          ))
      )
      for (const [key, value] of batch) found.set(key, value)
    }
    return found
  })

const isString = (value: unknown): value is string => typeof value === "string"
const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const isInt = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value)

/**
 * Whether `value` is a snapshot head of `executionId` as the schema reads it
 * (`StoredSnapshotHead`), checked by hand: a list reads thousands of snapshots, and a
 * schema walk over each costs more than reading it. What fails this check goes through
 * `decodeStoredSnapshot`, which says why (or accepts what this check is too strict for).
 */
const isSnapshotHead = (value: unknown, executionId: string): value is StoredSnapshotHead => {
  if (!isRecord(value) || value.schemaVersion !== 2 || value.executionId !== executionId || !isString(value.capturedAt)) return false
  if ((value.threadId !== undefined && !isString(value.threadId)) || (value.resourceId !== undefined && !isString(value.resourceId))) return false
  if (!Array.isArray(value.frontier) || !value.frontier.every((entry) => isRecord(entry) && isString(entry.stepId))) return false
  if (!isRecord(value.layers)) return false
  const cwd = value.cwd
  if (cwd !== null && !(isRecord(cwd) && (cwd.current === null || isString(cwd.current)) &&
    (cwd.previous === undefined || cwd.previous === null || isString(cwd.previous)))) return false
  if (!Array.isArray(value.askUser) || !value.askUser.every((prompt) => isRecord(prompt) && isString(prompt.id) && typeof prompt.createdAt === "number")) {
    return false
  }
  const log = value.itemLog
  if (!isRecord(log) || !Array.isArray(log.items)) return false
  return log.chunks === undefined || (isRecord(log.chunks) && isInt(log.chunks.size) && isInt(log.chunks.count))
}

/** What the status needs of the newest ledger record: its kind and path. */
interface NewestRecord {
  readonly _tag: string
  readonly path: string
}

/**
 * The kind and path of a stored ledger record: read off a record that has them as
 * strings (a list reads one per execution), through the schema otherwise; undefined
 * when it does not decode.
 */
const newestOf = (stored: unknown): NewestRecord | undefined => {
  if (
    isRecord(stored) && stored._tag === "StepRecorded" && stored.version === LEDGER_ENTRY_VERSION && isString(stored.path) &&
    isString(stored.stepId) && isRecord(stored.output)
  ) {
    return { _tag: "StepRecorded", path: stored.path }
  }
  const decoded = decodeLedgerEntry(stored)
  return Exit.isSuccess(decoded) ? decoded.value : undefined
}

/** The statuses of a snapshot head given its lease and the newest ledger record. */
const statusOf = (
  head: StoredSnapshotHead,
  lease: ExecutionRow["lease"],
  stepsRecorded: number,
  newest: NewestRecord | undefined
): ExecutionStatus => {
  if (lease !== null && lease.live) return "running"
  if (head.frontier.length === 0) return stepsRecorded > 0 ? "finished" : "idle"
  const root = head.frontier.map(pathOf).find(isRootPath)
  if (root !== undefined && newest !== undefined && newest._tag === "StepRecorded" && newest.path === root) return "finished"
  return "interrupted"
}

/** Every recorded execution (or only `only`) with its status, newest checkpoint first. */
export const listExecutions = (
  storage: StorageAdapterShape,
  progress: Progress,
  now: number,
  only?: string
): Effect.Effect<ReadonlyArray<ExecutionRow>, StorageError> =>
  Effect.gen(function*() {
    progress.update("listing executions")
    const ids = only !== undefined
      ? [only]
      : (yield* storage.list(INDEX_PREFIX)).map((key) => key.slice(INDEX_PREFIX.length))
    if (ids.length === 0) return []
    // One listing of every execution key, rather than one per execution: a file
    // storage lists by reading its whole directory.
    progress.update("listing ledgers")
    const keys = yield* storage.list(only !== undefined ? ledgerPrefix(only) : "execution:")
    return sortRows(yield* rowsFor(storage, ids, keys, progress, now, only !== undefined ? "ledger keys" : "every execution key"))
  })

/** Newest checkpoint first, then by id; executions without a snapshot last. */
export const sortRows = (rows: ReadonlyArray<ExecutionRow>): Array<ExecutionRow> =>
  [...rows].sort((a, b) =>
    a.lastCheckpoint === b.lastCheckpoint
      ? (a.executionId < b.executionId ? -1 : 1)
      : a.lastCheckpoint === null
      ? 1
      : b.lastCheckpoint === null
      ? -1
      : a.lastCheckpoint < b.lastCheckpoint
      ? 1
      : -1
  )

/**
 * What the sorted key listing `keys` (every `execution:` key, or one execution's
 * ledger keys) says of `executionId`: its ledger seqs, ascending. The inspector
 * compares these between listings to re-read only executions whose ledger moved.
 */
export const ledgerSeqsOf = (keys: ReadonlyArray<string>, executionId: string): ReadonlyArray<number> =>
  ledgerSeqsIn(keys, executionId)

/**
 * The rows of `ids`, in their order, read from their snapshots, leases and newest
 * ledger records; `keys` is a sorted listing holding their ledger keys.
 */
export const rowsFor = (
  storage: StorageAdapterShape,
  ids: ReadonlyArray<string>,
  keys: ReadonlyArray<string>,
  progress: Progress,
  now: number,
  listing: "every execution key" | "ledger keys" = "ledger keys"
): Effect.Effect<Array<ExecutionRow>, StorageError> =>
  Effect.gen(function*() {
    const seqs = new Map(ids.map((id) => [id, ledgerSeqsIn(keys, id)]))
    const heads = yield* readBatched(storage, ids.map(snapshotKey), progress, "reading snapshots")
    // A listing of every execution key names the leases there are: only those are read.
    const leaseKeys = ids.map(leaseKey).filter((key) => listing === "ledger keys" || keys[lowerBound(keys, key)] === key)
    const leases = yield* readBatched(storage, leaseKeys, progress, "reading leases")
    const failedKeys = ids.map(runFailedKey).filter((key) => listing === "ledger keys" || keys[lowerBound(keys, key)] === key)
    const failures = yield* readBatched(storage, failedKeys, progress, "reading failures")
    // The newest ledger record only tells apart a root in flight that finished since
    // (statusOf): it is read for executions whose snapshot holds a root in flight.
    const newestKeys = ids.flatMap((id) => {
      const own = seqs.get(id)!
      const stored = heads.get(snapshotKey(id))
      const rootInFlight = !isRecord(stored) || !Array.isArray(stored.frontier) || stored.frontier.length > 0
      return own.length === 0 || !rootInFlight ? [] : [`${ledgerPrefix(id)}${String(own[own.length - 1]).padStart(16, "0")}`]
    })
    const newest = yield* readBatched(storage, newestKeys, progress, "reading ledgers")

    const rows: Array<ExecutionRow> = []
    for (const id of ids) {
      const own = seqs.get(id)!
      const stored = heads.get(snapshotKey(id))
      const leaseRecord = leases.has(leaseKey(id)) ? decodeLease(leases.get(leaseKey(id))) : undefined
      const lease = leaseRecord !== undefined && Exit.isSuccess(leaseRecord)
        ? { owner: leaseRecord.value.owner, expiresAt: leaseRecord.value.expiresAt, live: leaseRecord.value.expiresAt > now }
        : null
      const base = { executionId: id, stepsRecorded: own.length, lease }
      if (stored === undefined) {
        rows.push({
          ...base,
          status: lease?.live === true ? "running" : "empty",
          lastCheckpoint: null,
          threadId: null,
          resourceId: null,
          frontier: [],
          pendingAskUser: 0
        })
        continue
      }
      // The hand check passes a good head without running an effect per row.
      const head = isSnapshotHead(stored, id) ? Exit.succeed(stored) : yield* Effect.exit(
        stored instanceof DamagedRecord
          ? Effect.fail({ message: `record ${stored.key} is damaged: ${stored.message}` })
          : decodeStoredSnapshot(id, stored)
      )
      if (Exit.isFailure(head)) {
        const error = head.cause.reasons.find((reason) => reason._tag === "Fail")
        rows.push({
          ...base,
          status: "unreadable",
          lastCheckpoint: null,
          threadId: null,
          resourceId: null,
          frontier: [],
          pendingAskUser: 0,
          problem: error === undefined ? "the snapshot does not decode" : error.error.message
        })
        continue
      }
      const newestKey = own.length === 0 ? undefined : `${ledgerPrefix(id)}${String(own[own.length - 1]).padStart(16, "0")}`
      const newestRecord = newestKey === undefined || !newest.has(newestKey) ? undefined : newestOf(newest.get(newestKey))
      const status = statusOf(head.value, lease, own.length, newestRecord)
      const mark = failures.has(runFailedKey(id)) ? decodeRunFailed(failures.get(runFailedKey(id))) : undefined
      const failed = status === "interrupted" && mark !== undefined && Exit.isSuccess(mark) &&
        Date.parse(mark.value.at) >= Date.parse(head.value.capturedAt)
      rows.push({
        ...base,
        status: failed ? "failed" : status,
        ...(failed && Exit.isSuccess(mark) ? { problem: mark.value.error } : {}),
        lastCheckpoint: head.value.capturedAt,
        threadId: head.value.threadId ?? null,
        resourceId: head.value.resourceId ?? null,
        frontier: head.value.frontier.map(pathOf),
        pendingAskUser: head.value.askUser.length
      })
    }
    return rows
  })

/** One ledger record as `executions show` prints it. */
export interface LedgerRecordView {
  readonly seq: number
  readonly path: string
  readonly record: "step" | "intent" | "tombstone" | "corrupt"
  readonly stepId: string | null
  readonly kind: string | null
  /** UTF-8 bytes of the output's JSON (0 for `undefined`); null for a tombstone. */
  readonly outputBytes: number | null
  /** When it was written, ISO text; null for records written before records carried it. */
  readonly at: string | null
  /**
   * `live`: what a resume replays at this path; `superseded`: a later record at the
   * same path replaced it; `discarded`: a later tombstone at or above its path voided it.
   */
  readonly state: "live" | "superseded" | "discarded" | "tombstone" | "corrupt"
  /** The seq of the record that superseded or discarded it. */
  readonly by: number | null
}

/** An execution's ledger as stored. */
export interface LedgerView {
  readonly records: ReadonlyArray<LedgerRecordView>
  /** The highest seq stored; -1 without records. */
  readonly highestSeq: number
  /** Seqs below the highest that are gone: evicted past `maxEntries` (oldest first), or a write that never landed. */
  readonly missing: number
  /** The lowest seq still stored; every seq below it was evicted. */
  readonly lowestSeq: number
  /** Step records whose write failed, as the execution's ledger statistics record counts them. */
  readonly recordFailed: number
}

/** Reads the ledger rows; a backend that fails a whole scan on one bad row is read key by key. */
const readLedgerRows = (storage: StorageAdapterShape, executionId: string) =>
  scan(storage, ledgerPrefix(executionId)).pipe(
    Effect.map((rows) => rows.map(([key, value]) => ({ key, value: Option.some(value) }))),
    Effect.catchIf((error) => error.reason._tag === "Corrupt", () =>
      Effect.flatMap(storage.list(ledgerPrefix(executionId)), (keys) =>
        Effect.forEach(keys, (key) =>
          storage.get(key).pipe(
            Effect.map((value) => ({ key, value })),
            Effect.catchIf((error) => error.reason._tag === "Corrupt", () => Effect.succeed({ key, value: Option.some<unknown>(undefined) }))
          ), { concurrency: 32 })))
  )

/** Every ledger record of an execution, with what each still counts for. */
export const readLedger = (
  storage: StorageAdapterShape,
  executionId: string
): Effect.Effect<{ readonly view: LedgerView; readonly outputs: ReadonlyMap<number, { readonly value: unknown; readonly undefined: boolean }> }, StorageError> =>
  Effect.gen(function*() {
    const prefix = ledgerPrefix(executionId)
    const read = yield* readLedgerRows(storage, executionId)
    const stats = read.find(({ key }) => key === ledgerStatsKey(executionId))
    const recordFailed = stats === undefined || Option.isNone(stats.value) ? 0 : recordFailedOf(stats.value.value)
    const rows = read.flatMap(({ key, value }) => {
      const seq = parseLedgerSeq(prefix, key)
      return seq === undefined || Option.isNone(value) ? [] : [{ seq, value: value.value }]
    }).sort((a, b) => a.seq - b.seq)
    const records: Array<{ -readonly [K in keyof LedgerRecordView]: LedgerRecordView[K] }> = []
    const outputs = new Map<number, { value: unknown; undefined: boolean }>()
    const live = new Map<string, (typeof records)[number]>()
    for (const { seq, value } of rows) {
      const decoded = decodeLedgerEntry(value)
      if (Exit.isFailure(decoded)) {
        records.push({ seq, path: "?", record: "corrupt", stepId: null, kind: null, outputBytes: null, at: null, state: "corrupt", by: null })
        continue
      }
      const entry = decoded.value
      const at = "at" in entry && entry.at !== undefined ? new Date(entry.at).toISOString() : null
      if (entry._tag === "StepRecorded" || entry._tag === "IntentRecorded") {
        // An intent is an at-most-once step about to run its body; a later record at its path supersedes it.
        const json = entry._tag === "StepRecorded" && entry.output._tag === "Json" ? JSON.stringify(entry.output.value) : undefined
        const view: (typeof records)[number] = {
          seq,
          path: entry.path,
          record: entry._tag === "StepRecorded" ? "step" : "intent",
          stepId: entry.stepId,
          kind: entry.kind,
          outputBytes: entry._tag === "IntentRecorded" ? null : json === undefined ? 0 : utf8Length(json),
          at,
          state: "live",
          by: null
        }
        const previous = live.get(entry.path)
        if (previous !== undefined) {
          previous.state = "superseded"
          previous.by = seq
        }
        live.set(entry.path, view)
        records.push(view)
        if (entry._tag === "StepRecorded") {
          outputs.set(seq, entry.output._tag === "Json" ? { value: entry.output.value, undefined: false } : { value: undefined, undefined: true })
        }
      } else {
        for (const [path, view] of live) {
          if (isAtOrBelow(path, entry.path)) {
            view.state = "discarded"
            view.by = seq
            live.delete(path)
          }
        }
        records.push({ seq, path: entry.path, record: "tombstone", stepId: null, kind: null, outputBytes: null, at, state: "tombstone", by: null })
      }
    }
    const highestSeq = rows.length === 0 ? -1 : rows[rows.length - 1]!.seq
    return {
      view: {
        records,
        highestSeq,
        lowestSeq: rows.length === 0 ? -1 : rows[0]!.seq,
        missing: highestSeq + 1 - rows.length,
        recordFailed
      },
      outputs
    }
  })

/** The raw snapshot head of one execution, decoded (chunked items are counted, not read). */
export const loadHead = (
  storage: StorageAdapterShape,
  executionId: string
): Effect.Effect<Option.Option<StoredSnapshotHead>, StorageError | CliFailure> =>
  Effect.flatMap(storage.get(snapshotKey(executionId)), (stored) =>
    Option.isNone(stored)
      ? Effect.succeedNone
      : decodeStoredSnapshot(executionId, stored.value).pipe(
        Effect.map(Option.some),
        Effect.mapError((error) => new CliFailure({ message: `execution ${executionId}: ${error.message}` }))
      ))

/** How many items a snapshot head's item log holds. */
export const itemCount = (head: StoredSnapshotHead): number =>
  head.itemLog.items.length + (head.itemLog.chunks === undefined ? 0 : head.itemLog.chunks.size * head.itemLog.chunks.count)

/** Whether anything of `executionId` is recorded: an index key, a snapshot or ledger keys. */
export const isRecorded = (storage: StorageAdapterShape, executionId: string): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    if (Option.isSome(yield* storage.get(`${INDEX_PREFIX}${executionId}`))) return true
    if (Option.isSome(yield* storage.get(snapshotKey(executionId)))) return true
    const keys = yield* storage.list(ledgerPrefix(executionId))
    return keys.some((key) => parseLedgerSeq(ledgerPrefix(executionId), key) !== undefined)
  })

/** Removes an execution's snapshot, ledger and its in-process child agents' snapshots (the engine's clear). */
export const clearExecution = (storage: StorageAdapterShape, executionId: string): Effect.Effect<void, StorageError> =>
  Effect.flatMap(makeCheckpointStore(storage), (store) => store.clear(executionId))
