/**
 * What each inspector view shows, as JSON: the executions list (filtered, searched,
 * sorted, paged), one execution (ledger marks, snapshot fields, children, parent),
 * children with their outcome, queues with a short history of their depth; and the two
 * actions (clear an execution, stop a child). Read through the CLI's read model
 * (src/cli/ReadModel.ts), so the inspector and the CLI never disagree.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { StorageError } from "../Errors.ts"
import * as Children from "../cli/Children.ts"
import * as Executions from "../cli/Executions.ts"
import * as ReadModel from "../cli/ReadModel.ts"
import { type CliFailure, type CliStorages, openRootStorage, SQLITE_FILES } from "../cli/Storages.ts"
import { roots } from "../NoeticHome.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { MANIFEST_PREFIX } from "../schema/SubprocessManifest.ts"
import * as ExecutionIndex from "./ExecutionIndex.ts"

/**
 * An execution's status as the inspector shows it: the CLI's (see docs/cli.md), whose
 * `failed` the inspector also gives an execution a child process ran whose persisted
 * result is a failure.
 */
export type InspectorStatus = Executions.ExecutionStatus

/** The statuses the list filters on. */
export const STATUSES: ReadonlyArray<InspectorStatus> = Executions.EXECUTION_STATUSES

/** A child as the inspector shows it: the CLI's row, and what its persisted result says. */
export interface ChildView extends Children.ChildRow {
  /** `stopped` (an operator or its host stopped it), `failed`, `succeeded`; null without a result. */
  readonly outcome: "stopped" | "failed" | "succeeded" | null
  /** The status shown: the CLI's, with `finished` told apart by outcome (`stopped`, `failed`). */
  readonly shown: string
  /** The storage key of its manifest (named when it is unreadable). */
  readonly key: string
}

const outcomeOf = (result: unknown): ChildView["outcome"] => {
  if (result === null || typeof result !== "object") return null
  const tagged = result as { readonly _tag?: unknown; readonly error?: { readonly _tag?: unknown } }
  if (tagged._tag === "Success") return "succeeded"
  return tagged.error?._tag === "Stopped" ? "stopped" : "failed"
}

/** The inspector's view of a child row. */
export const childView = (row: Children.ChildRow): ChildView => {
  const outcome = outcomeOf(row.result)
  return {
    ...row,
    outcome,
    shown: row.status === "finished" && outcome !== null && outcome !== "succeeded" ? outcome : row.status,
    key: `${MANIFEST_PREFIX}${row.handleId}`
  }
}

/** An execution row as the inspector shows it. */
export type ExecutionView = Omit<Executions.ExecutionRow, "status"> & { readonly status: InspectorStatus }

/** Marks `failed` the executions a child ran whose result is a failure (and that nothing runs now). */
export const withOutcomes = (
  rows: ReadonlyArray<Executions.ExecutionRow>,
  children: ReadonlyArray<ChildView>
): ReadonlyArray<ExecutionView> => {
  const failed = new Set(
    children.flatMap((child) =>
      child.executionId !== null && (child.outcome === "failed" || child.outcome === "stopped") ? [child.executionId] : []
    )
  )
  return Executions.withLiveChildren(rows, children).map((row) =>
    failed.has(row.executionId) && row.status !== "running" && row.status !== "unreadable" ? { ...row, status: "failed" } : row
  )
}

/** The list's query, as the page's URL carries it. */
export interface ListQuery {
  readonly status: InspectorStatus | null
  /** Part of an execution id (case-insensitive). */
  readonly search: string
  readonly sort: "checkpoint" | "id" | "steps" | "status"
  readonly descending: boolean
  readonly offset: number
  readonly limit: number
}

/** The list's query from URL parameters; anything unknown falls back to its default. */
export const parseListQuery = (params: URLSearchParams): ListQuery => {
  const status = params.get("status")
  const sort = params.get("sort")
  const number = (name: string, fallback: number, max: number) => {
    const given = params.get(name)
    const value = given === null || given.trim() === "" ? Number.NaN : Number(given)
    return Number.isInteger(value) && value >= 0 ? Math.min(value, max) : fallback
  }
  return {
    status: STATUSES.includes(status as InspectorStatus) ? (status as InspectorStatus) : null,
    search: (params.get("q") ?? "").trim().toLowerCase(),
    sort: sort === "id" || sort === "steps" || sort === "status" ? sort : "checkpoint",
    descending: params.get("dir") !== "asc",
    offset: number("offset", 0, Number.MAX_SAFE_INTEGER),
    limit: Math.max(1, number("limit", 50, 500))
  }
}

const compare = (query: ListQuery) => (a: ExecutionView, b: ExecutionView): number => {
  const byId = a.executionId < b.executionId ? -1 : a.executionId > b.executionId ? 1 : 0
  let order: number
  switch (query.sort) {
    case "id":
      order = byId
      break
    case "steps":
      order = a.stepsRecorded - b.stepsRecorded || byId
      break
    case "status":
      order = a.status < b.status ? -1 : a.status > b.status ? 1 : byId
      break
    case "checkpoint":
      order = (a.lastCheckpoint ?? "") < (b.lastCheckpoint ?? "") ? -1 : (a.lastCheckpoint ?? "") > (b.lastCheckpoint ?? "") ? 1 : byId
  }
  return query.descending ? -order : order
}

/** Filters, sorts and pages rows. */
export const page = (rows: ReadonlyArray<ExecutionView>, query: ListQuery) => {
  const counts: Record<string, number> = {}
  for (const row of rows) counts[row.status] = (counts[row.status] ?? 0) + 1
  const matching = rows.filter((row) =>
    (query.status === null || row.status === query.status) &&
    (query.search === "" || row.executionId.toLowerCase().includes(query.search))
  ).sort(compare(query))
  return {
    total: matching.length,
    all: rows.length,
    counts,
    offset: query.offset,
    limit: query.limit,
    rows: matching.slice(query.offset, query.offset + query.limit)
  }
}

/** One sample of a queue's depth, for its chart. */
export interface QueueSample {
  readonly at: number
  readonly depth: number
  readonly bytes: number
}

/** How many samples a queue's chart keeps. */
const HISTORY = 120

/**
 * The storages as they are now: a home root nothing was recorded under when the
 * inspector started (no database, no directory) is opened once something appears
 * there, for the life of `scope`. On Postgres both are the one table from the start.
 */
const liveStorages = (initial: CliStorages, scope: Scope.Scope): Effect.Effect<CliStorages> => {
  let current = initial
  const reopen = (present: Option.Option<StorageAdapterShape>, root: string, file: string) =>
    Option.isSome(present)
      ? Effect.succeed(present)
      : openRootStorage(root, file).pipe(Effect.provideService(Scope.Scope, scope), Effect.orElseSucceed(() => Option.none()))
  return Effect.suspend(() => {
    if (Option.isNone(current.home) || (Option.isSome(current.checkpoints) && Option.isSome(current.subprocess))) {
      return Effect.succeed(current)
    }
    const r = roots(current.home.value)
    return Effect.gen(function*() {
      const checkpoints = yield* reopen(current.checkpoints, r.checkpoints, SQLITE_FILES.checkpoints)
      const subprocess = yield* reopen(current.subprocess, r.subprocess, SQLITE_FILES.subprocess)
      current = { ...current, checkpoints, subprocess }
      return current
    })
  })
}

/** The views of one set of storages, for the life of the current scope. */
export const make = (initial: CliStorages) =>
  Effect.gen(function*() {
    const current = liveStorages(initial, yield* Effect.scope)
    let index: { readonly storage: StorageAdapterShape; readonly index: ExecutionIndex.ExecutionIndex } | undefined
    const indexOf = (storages: CliStorages) =>
      Effect.gen(function*() {
        if (Option.isNone(storages.checkpoints)) return undefined
        if (index === undefined || index.storage !== storages.checkpoints.value) {
          index = { storage: storages.checkpoints.value, index: yield* ExecutionIndex.make(storages.checkpoints.value) }
        }
        return index.index
      })
    const history = new Map<string, Array<QueueSample>>()

    const children = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      return (yield* ReadModel.childRows(yield* current, now)).map(childView)
    })

    const executions = (query: ListQuery) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const kids = yield* children
        const index = yield* indexOf(yield* current)
        const rows = index === undefined
          ? []
          : yield* index.refresh(now, (kept) => page(withOutcomes(kept, kids), query).rows.map((row) => row.executionId))
        return { ...page(withOutcomes(rows, kids), query), query, statuses: STATUSES }
      })

    const execution = (executionId: string): Effect.Effect<Option.Option<unknown>, StorageError | CliFailure> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const detail = yield* ReadModel.executionDetail(yield* current, executionId, now)
        if (Option.isNone(detail)) return Option.none()
        const d = detail.value
        const kids = d.allChildren.map(childView)
        const [row] = d.row === null ? [] : withOutcomes([d.row], kids)
        // The child process that ran this execution, when one did: its parent is the execution that spawned it.
        const runBy = kids.find((child) => child.executionId === executionId)
        const divergedPaths = d.ledger.records.filter((record) => record.record === "tombstone").map((record) => record.path)
        return Option.some({
          execution: row ?? null,
          snapshot: d.snapshot,
          snapshotProblem: d.snapshotProblem === null ? null : { key: d.snapshotProblem.key, message: d.snapshotProblem.message },
          ledger: {
            ...d.ledger,
            records: d.ledger.records.map((record) => ({
              ...record,
              key: `${"execution:"}${executionId}:ledger:${String(record.seq).padStart(16, "0")}`,
              // An at-most-once step about to run its body: a resume reconciles it.
              waiting: record.record === "intent" && record.state === "live",
              diverged: divergedPaths.some((path) => record.path === path || record.path.startsWith(`${path}/`) || record.path.startsWith(`${path}[`))
            }))
          },
          children: d.children.map(childView),
          parent: runBy === undefined ? null : { executionId: runBy.parentExecutionId, handleId: runBy.handleId }
        })
      })

    const output = (executionId: string, seq: number) =>
      Effect.gen(function*() {
        const storage = Option.getOrUndefined((yield* current).checkpoints)
        if (storage === undefined) return Option.none()
        const { outputs } = yield* Executions.readLedger(storage, executionId)
        return Option.fromNullishOr(outputs.get(seq))
      })

    const child = (handleId: string) =>
      Effect.map(children, (rows) => Option.fromNullishOr(rows.find((row) => row.handleId === handleId)))

    const queues = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* ReadModel.queueRows(yield* current)
      return {
        queues: rows.map((row) => {
          const key = `${row.storage}/${row.socketId}`
          const samples = history.get(key) ?? []
          const last = samples[samples.length - 1]
          // One sample per half second at most: several pages watching add none.
          if (last === undefined || now - last.at >= 450) {
            samples.push({ at: now, depth: row.pendingFrames, bytes: row.pendingBytes })
            if (samples.length > HISTORY) samples.splice(0, samples.length - HISTORY)
            history.set(key, samples)
          }
          return { ...row, history: samples.map((sample) => sample.depth) }
        })
      }
    })

    // The first list read is the costly one (every snapshot once): start it now, not on the first visit.
    yield* Effect.forkScoped(Effect.ignore(executions(parseListQuery(new URLSearchParams()))))

    return {
      storages: current,
      executions,
      execution,
      output,
      children: Effect.map(children, (rows) => ({ children: rows })),
      child,
      queues
    }
  })

/** The views of one set of storages. */
export type Views = Effect.Success<ReturnType<typeof make>>
