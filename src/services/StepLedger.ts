/**
 * The step-completion ledger: one entry per successfully completed step, so a resumed
 * run replays recorded outputs instead of running those steps again.
 *
 * Layout: one record per key `execution:<id>:ledger:<seq>` in the checkpoint store's
 * storage (see `schema/LedgerEntry.ts`), so an append is one write however long the
 * run, and `CheckpointStore.clear` removes the ledger with the snapshot. Loading
 * applies the records in numeric seq order: a later record at a path wins, and a
 * tombstone (written when a step's identity changed at a recorded path) discards the
 * records before it at that path and below it, so a discard survives a crash.
 *
 * Retention counts keys, the oldest going first, and never deletes the newest key
 * while a record is in flight: the highest seq written always stays in storage, which
 * is what lets a reloaded ledger number on after it without reusing a seq. Superseded
 * and discarded records are not deleted eagerly (that would cost a write per append);
 * they age out with the rest, or go with `CheckpointStore.clear`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StepLedgerRetentionInvalid, type StorageError } from "../Errors.ts"
import {
  LEDGER_ENTRY_VERSION,
  LedgerEntry,
  ledgerKey,
  ledgerPrefix,
  ledgerStatsKey,
  recordFailedOf
} from "../schema/LedgerEntry.ts"
import {
  type HeldEntry,
  type HeldOutput,
  type KeyInfo,
  LedgerState,
  type LedgerRows,
  loadRows,
  outputOf,
  parentOf,
  UNREAD
} from "../internal/ledgerState.ts"
import { CheckpointStore, type CheckpointStoreShape, deleteKeys, ledgerKeysToClear } from "./CheckpointStore.ts"
import { getMany, scan, type StorageAdapterShape } from "./StorageAdapter.ts"
import { logWarning } from "../internal/diagnostics.ts"

/** What a step is at a path: replay happens only when both match. */
export interface StepIdentity {
  readonly stepId: string
  readonly kind: string
}

/** A recorded child of a path, as `children` reports it. */
export interface RecordedChild extends StepIdentity {
  readonly path: string
  /** Its place among its parent's distinct children, when the record carries one. */
  readonly position: number | undefined
}

/** Caps on what the ledger keeps; `Infinity` disables an axis. */
export interface StepLedgerRetention {
  /** Largest output recorded, in UTF-8 bytes of its JSON. */
  readonly maxEntryBytes: number
  /** Entries kept per execution; the oldest are evicted first. */
  readonly maxEntries: number
}

/** What the ledger recorded, dropped and evicted since it was built. */
export interface StepLedgerStats {
  readonly recorded: number
  readonly droppedOversize: number
  readonly droppedUnserializable: number
  readonly evicted: number
  /** Step records whose write failed (the storage refused it): those steps re-run on resume. */
  readonly recordFailed: number
}

/** What one execution's ledger counts, across every host that ran it (as far as storage kept the count). */
export interface ExecutionLedgerStats {
  /**
   * Step records of this execution whose write failed, kept in the record at
   * `ledgerStatsKey` (written best-effort: when storage refuses everything, only this
   * process's count is known until a write lands).
   */
  readonly recordFailed: number
}

/** A step output the ledger holds for a path, as `entries` reports it. */
export interface LedgerEntryView {
  readonly seq: number
  readonly path: string
  readonly stepId: string
  readonly kind: string
  readonly output: unknown
}

/**
 * What the ledger holds at a path for a step about to run there:
 * - `Hit`: a completed record of the same identity; `output` replays.
 * - `Miss`: nothing; `evicted` when this ledger evicted a record there (retention).
 * - `Diverged`: a record of another identity (`recorded`): the workflow changed.
 * - `Pending`: an at-most-once step's intent with no completion after it.
 * - `Unreadable`: a completed record of the same identity whose output cannot be read
 *   (its row at `key` is damaged, found when the output is first parsed): the step
 *   runs again, like after a corrupt row skipped at load, and the caller says so.
 */
export type ReplayLookup =
  | { readonly _tag: "Hit"; readonly output: unknown }
  | { readonly _tag: "Miss"; readonly evicted: boolean }
  | { readonly _tag: "Diverged"; readonly recorded: StepIdentity }
  | { readonly _tag: "Pending" }
  | { readonly _tag: "Unreadable"; readonly key: string; readonly message: string }

/** The ledger of one execution, loaded from storage. */
export interface ExecutionLedger {
  readonly executionId: string
  /**
   * The recorded output at `path` when the recorded identity matches; none when
   * nothing is recorded there. When the identity differs, the entry at `path` and
   * every entry below it (paths starting with `path + "/"`, or `path + "["` for
   * `inParallel` branches) are discarded, durably, and none is returned.
   */
  readonly lookup: (path: string, identity: StepIdentity) => Effect.Effect<Option.Option<unknown>, StorageError>
  /**
   * Records a completed step's output (one storage write, plus the delete of any key
   * evicted past `maxEntries`, run alongside it). Outputs over the byte cap or that
   * JSON cannot give back unchanged (a cycle, a bigint, a Date, a Map, a class
   * instance, NaN) are dropped (counted, first drop of each kind logs a warning);
   * past `maxEntries` the oldest entries are evicted. `undefined` is recorded.
   */
  readonly record: (
    path: string,
    identity: StepIdentity,
    output: unknown,
    position?: number
  ) => Effect.Effect<void, StorageError>
  /**
   * The outputs this ledger would replay, one per path, in seq order. An entry loaded
   * when the ledger was opened stays here (and replays) for the ledger's life even
   * after retention evicted its key from storage. An output that cannot be read (see
   * `ReplayLookup`'s `Unreadable`) is left out, with a warning.
   */
  readonly entries: Effect.Effect<ReadonlyArray<LedgerEntryView>>
  /** What is recorded at `path` for a step of `identity`, without discarding anything. */
  readonly inspect: (path: string, identity: StepIdentity) => Effect.Effect<ReplayLookup>
  /** `inspect` in plain code, for a caller already inside an effect (a dispatch asks it once per step). */
  readonly replayAt: (path: string, identity: StepIdentity) => ReplayLookup
  /**
   * The steps recorded directly below `path` (completed, or at-most-once intents), in
   * the order they were recorded, with their positions: what a resume compares its
   * dispatches with.
   */
  readonly children: (path: string) => ReadonlyArray<RecordedChild>
  /**
   * The earliest recorded step directly below `parent` at `position` whose path is not
   * `path` (what `children(parent)` would find there), without listing the others: a
   * dispatch asks it once per step, so it does not grow with the run.
   */
  readonly childAt: (parent: string, position: number, path: string) => RecordedChild | undefined
  /** Discards, durably, every record at `path` and below it (what `lookup` does on a changed identity). */
  readonly discard: (path: string) => Effect.Effect<void, StorageError>
  /**
   * Records, durably, that an at-most-once step of `identity` is about to run its body
   * at `path`; `record` at the same path supersedes it. Never dropped or size-capped.
   */
  readonly recordIntent: (path: string, identity: StepIdentity, position?: number) => Effect.Effect<void, StorageError>
  /** This execution's counts (see {@link ExecutionLedgerStats}). */
  readonly stats: Effect.Effect<ExecutionLedgerStats>
}

/** The operations of the step ledger. */
export interface StepLedgerShape {
  readonly retention: StepLedgerRetention
  /** Loads an execution's ledger (one `getMany`), ready for lookups and records. */
  readonly open: (executionId: string) => Effect.Effect<ExecutionLedger, StorageError>
  /** Counters since the ledger service was built. */
  readonly stats: Effect.Effect<StepLedgerStats>
  /**
   * Deletes every ledger entry of an execution (and its count) from the ledger's
   * storage: what `harness.clearCheckpoint` does beside clearing the snapshot, so a
   * ledger kept apart from the snapshots is cleared too.
   */
  readonly clear: (executionId: string) => Effect.Effect<void, StorageError>
}

/** The step-completion ledger, kept in the checkpoint store's storage. */
export class StepLedger extends Context.Service<StepLedger, StepLedgerShape>()("noetic-effect/StepLedger") {}

/** The documented default caps: 128 KiB per output, 1000 entries per execution. */
export const DEFAULT_STEP_LEDGER_RETENTION: StepLedgerRetention = Object.freeze({
  maxEntryBytes: 128 * 1024,
  maxEntries: 1000
})

/** Options of the step ledger layer. */
export interface StepLedgerOptions {
  /** Caps; a missing axis takes its default from {@link DEFAULT_STEP_LEDGER_RETENTION}. */
  readonly retention?: Partial<StepLedgerRetention> | undefined
}

/**
 * Fills in defaults and checks each cap is at least 1 or `Infinity`. A cap below 1
 * (a fraction too) or NaN fails: it would record nothing while the run still looked
 * healthy (docs/durability.md#retention).
 */
export const validateRetention = (
  retention?: Partial<StepLedgerRetention> | undefined
): Effect.Effect<StepLedgerRetention, StepLedgerRetentionInvalid> =>
  Effect.suspend(() => {
    const resolved = {
      maxEntryBytes: retention?.maxEntryBytes ?? DEFAULT_STEP_LEDGER_RETENTION.maxEntryBytes,
      maxEntries: retention?.maxEntries ?? DEFAULT_STEP_LEDGER_RETENTION.maxEntries
    }
    for (const field of ["maxEntryBytes", "maxEntries"] as const) {
      const value: unknown = resolved[field]
      if (typeof value !== "number" || !(value >= 1)) {
        return Effect.fail(
          new StepLedgerRetentionInvalid({
            field,
            value: typeof value === "number" ? value : Number.NaN,
            message: `stepLedgerRetention.${field} must be at least 1 or Infinity, got ${String(value)}`,
            hint: `Pass a ${field} of at least 1, Infinity to disable that cap, or leave it out for the default (${
              DEFAULT_STEP_LEDGER_RETENTION[field]
            }).`
          })
        )
      }
    }
    return Effect.succeed(resolved)
  })

/** UTF-8 byte length of well-formed text (what `JSON.stringify` produces), without encoding it. */
export const utf8Length = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x80) bytes += 1
    else if (code < 0x800) bytes += 2
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      // A surrogate pair is one code point of four bytes.
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}

const MISS: ReplayLookup = { _tag: "Miss", evicted: false }
const MISS_EVICTED: ReplayLookup = { _tag: "Miss", evicted: true }
const PENDING: ReplayLookup = { _tag: "Pending" }

type Measured =
  | { readonly _tag: "Ok"; readonly held: HeldOutput; readonly bytes: number }
  | { readonly _tag: "Unserializable"; readonly message: string }

/**
 * Whether JSON gives `value` back as it is: a Date would come back a string, a Map or
 * a class instance a plain object, NaN or Infinity null, `undefined` in an array null.
 * (An object property holding `undefined` vanishes, which reads back the same.)
 */
const survivesJson = (value: unknown): boolean => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value)
    case "object": {
      if (value === null) return true
      if (Array.isArray(value)) return value.every((element) => element !== undefined && survivesJson(element))
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) return false
      for (const element of Object.values(value)) {
        if (element !== undefined && !survivesJson(element)) return false
      }
      return true
    }
    default:
      return false
  }
}

const measure = (output: unknown): Measured => {
  if (output === undefined) return { _tag: "Ok", held: { _tag: "Undefined" }, bytes: 0 }
  let text: string | undefined
  try {
    text = JSON.stringify(output)
  } catch (cause) {
    return { _tag: "Unserializable", message: cause instanceof Error ? cause.message : String(cause) }
  }
  if (text === undefined) return { _tag: "Unserializable", message: `a ${typeof output} has no JSON form` }
  // Replaying a value other than the one the run saw is worse than running the step again.
  if (!survivesJson(output)) return { _tag: "Unserializable", message: "JSON would not give it back unchanged" }
  return { _tag: "Ok", held: { _tag: "Text", text }, bytes: utf8Length(text) }
}

/**
 * Whether this process has said that a ledger ran past `maxEntries`. Process-wide, not
 * per ledger service: a harness per execution, or a leased run (which gets a ledger of
 * its own), would otherwise say it again for every execution of a loop of long runs.
 */
let evictionReported = false

/**
 * The step ledger over a checkpoint store's storage; dependencies are explicit for
 * the Promise facade. Fails when a retention cap is invalid.
 */
export const makeWith = (
  checkpointStore: CheckpointStoreShape,
  options?: StepLedgerOptions
): Effect.Effect<StepLedgerShape, StepLedgerRetentionInvalid> =>
  Effect.map(validateRetention(options?.retention), (retention) => {
    const storage: StorageAdapterShape = checkpointStore.storage
    const counters = { recorded: 0, droppedOversize: 0, droppedUnserializable: 0, evicted: 0, recordFailed: 0 }
    // Per execution for the service's life: its failed record writes (at least what its
    // stored statistics record said when a ledger was opened), and whether that count
    // still has to reach storage.
    const failedRecords = new Map<string, { count: number; unsaved: boolean }>()
    const warned = { oversize: false, unserializable: false }
    // One counter per execution for the service's life: two ledgers opened on one
    // execution in this process still never hand out the same seq.
    const nextSeqs = new Map<string, { next: number }>()
    // The paths retention evicted, per execution, for the service's life (see LedgerState).
    const evictedPaths = new Map<string, Set<string>>()

    const warnCorruptRow = (executionId: string, key: string, why: string): Effect.Effect<void> =>
      logWarning(`step ledger of execution ${JSON.stringify(executionId)}: skipping the corrupt row ${key} (${why})`)

    const warnOnce = (kind: keyof typeof warned, message: string): Effect.Effect<void> => {
      if (warned[kind]) return Effect.void
      warned[kind] = true
      return logWarning(message)
    }

    const readAll = Effect.fnUntraced(function*(executionId: string, keys: ReadonlyArray<string>) {
      return yield* getMany(storage, keys).pipe(
        // A backend fails the whole batch on one unreadable row; read the rows one by
        // one then, so the bad one is skipped like any corrupt row.
        Effect.catchIf((error) => error.reason._tag === "Corrupt", () =>
          Effect.map(
            Effect.forEach(keys, (key) =>
              storage.get(key).pipe(
                Effect.map((value) => [key, value] as const),
                Effect.catchIf((error) => error.reason._tag === "Corrupt", (error) =>
                  Effect.as(
                    logWarning(
                      `step ledger of execution ${JSON.stringify(executionId)}: skipping an unreadable row`,
                      error.message
                    ),
                    [key, Option.none()] as const
                  ))
              ), { concurrency: 32 }),
            (pairs) => {
              const found = new Map<string, unknown>()
              for (const [key, value] of pairs) if (Option.isSome(value)) found.set(key, value.value)
              return found as ReadonlyMap<string, unknown>
            }
          ))
      )
    })

    /**
     * Every row under the ledger prefix: one `scanText` when the backend has it (the
     * values then JSON text, `text` true), else one `scan` (one query on Postgres), or,
     * when a row cannot be read and the backend fails the whole scan, a listing read
     * key by key so only the bad row is lost (its value then {@link UNREAD}).
     */
    const readLedger = (
      executionId: string,
      prefix: string
    ): Effect.Effect<LedgerRows, StorageError> => {
      const keyByKey = Effect.flatMap(storage.list(prefix), (listed) =>
        Effect.map(readAll(executionId, listed), (values): LedgerRows => ({
          rows: listed.map((key) => [key, values.has(key) ? values.get(key) : UNREAD] as const),
          text: false
        })))
      const read: Effect.Effect<LedgerRows, StorageError> = storage.scanText === undefined
        ? Effect.map(scan(storage, prefix), (rows) => ({ rows, text: false }))
        : Effect.map(storage.scanText(prefix), (rows) => ({ rows, text: true }))
      return Effect.catchIf(read, (error) => error.reason._tag === "Corrupt", () => keyByKey)
    }

    const open = Effect.fn("StepLedger.open")(function*(executionId: string) {
      const prefix = ledgerPrefix(executionId)
      let evicted = evictedPaths.get(executionId)
      if (evicted === undefined) {
        evicted = new Set()
        evictedPaths.set(executionId, evicted)
      }
      const state = new LedgerState(evicted)
      const rows = yield* readLedger(executionId, prefix)
      const { highest, skipped } = loadRows(state, prefix, rows)
      for (const row of skipped) yield* warnCorruptRow(executionId, row.key, row.why)
      const statsKey = ledgerStatsKey(executionId)
      const storedStats = rows.rows.find(([key]) => key === statsKey)
      let failed = failedRecords.get(executionId)
      if (failed === undefined) {
        failed = { count: 0, unsaved: false }
        failedRecords.set(executionId, failed)
      }
      if (storedStats !== undefined && storedStats[1] !== UNREAD) {
        failed.count = Math.max(failed.count, recordFailedOf(storedStats[1]))
      }
      const failures = failed
      // Writes the count, best-effort: a storage that refused the record may refuse this
      // too; the next record that lands tries again.
      const saveFailures = Effect.suspend(() => {
        failures.unsaved = false
        return storage.set(statsKey, { version: 1, recordFailed: failures.count }).pipe(
          Effect.catch(() => Effect.sync(() => void (failures.unsaved = true)))
        )
      })
      const noteFailure = Effect.suspend(() => {
        counters.recordFailed++
        failures.count++
        return saveFailures
      })

      let counter = nextSeqs.get(executionId)
      if (counter === undefined) {
        counter = { next: 0 }
        nextSeqs.set(executionId, counter)
      }
      counter.next = Math.max(counter.next, highest + 1)
      const seqs = counter

      const evict = (victims: ReadonlyArray<number>): Effect.Effect<void, StorageError> =>
        victims.length === 0 ? Effect.void : Effect.forEach(victims, (seq) =>
          storage.delete(ledgerKey(executionId, seq)).pipe(
            Effect.tap(() => {
              counters.evicted++
              if (evictionReported) return Effect.void
              evictionReported = true
              return logWarning(
                `step ledger of execution ${
                  JSON.stringify(executionId)
                }: past maxEntries (${retention.maxEntries}), evicting the oldest entries; those steps re-run on resume. ` +
                  "Said once per process: later executions past the cap are counted in StepLedger stats (evicted), not logged again."
              )
            })
          ), { concurrency: "unbounded", discard: true })

      /** Writes one record under a fresh seq, evicting alongside so the append stays one round of writes. */
      const append = (record: LedgerEntry, info: KeyInfo, onWritten: (seq: number) => void) =>
        Effect.suspend(() => {
          const seq = seqs.next++
          state.inflight.add(seq)
          const early = state.takeVictims(retention.maxEntries)
          const write = storage.set(ledgerKey(executionId, seq), record)
          // Nothing to evict (a run under the cap): the write alone, no fibers forked for it.
          return (early.length === 0 ? write : Effect.all([write, evict(early)], {
            concurrency: "unbounded",
            discard: true
          })).pipe(
            Effect.onExit((exit) =>
              Effect.sync(() => {
                state.inflight.delete(seq)
                if (Exit.isSuccess(exit)) {
                  state.keep(seq, info)
                  onWritten(seq)
                }
              })
            ),
            Effect.andThen(Effect.suspend(() => evict(state.takeVictims(retention.maxEntries))))
          )
        })

      const recordNow = (path: string, identity: StepIdentity, output: unknown, position: number | undefined) => {
        const measured = measure(output)
        if (measured._tag === "Unserializable") {
          counters.droppedUnserializable++
          return warnOnce(
            "unserializable",
            `step ledger: the output of step ${
              JSON.stringify(identity.stepId)
            } at ${path} has no JSON form (${measured.message}); not recorded, so that step re-runs on resume`
          )
        }
        if (measured.bytes > retention.maxEntryBytes) {
          counters.droppedOversize++
          return warnOnce(
            "oversize",
            `step ledger: the output of step ${
              JSON.stringify(identity.stepId)
            } at ${path} is ${measured.bytes} bytes, over maxEntryBytes (${retention.maxEntryBytes}); not recorded, so that step re-runs on resume`
          )
        }
        const held = measured.held
        return Effect.clockWith((clock) => {
          const at = clock.currentTimeMillisUnsafe()
          const entry: LedgerEntry = {
            _tag: "StepRecorded",
            version: LEDGER_ENTRY_VERSION,
            path,
            stepId: identity.stepId,
            kind: identity.kind,
            // For operators (`executions show`): when the step completed.
            at,
            ...(position === undefined ? {} : { position }),
            // Last, so a restore reads the identity before it and parses the output
            // only when it replays (`readStepRecordedHead`).
            output: held._tag === "Undefined" ? { _tag: "Undefined" } : { _tag: "Json", value: output }
          }
          return append(entry, path, (seq) => {
            counters.recorded++
            state.applyStep(path, { seq, stepId: identity.stepId, kind: identity.kind, output: held, position })
          }).pipe(
            Effect.tapError(() => noteFailure),
            Effect.tap(() => failures.unsaved ? saveFailures : Effect.void)
          )
        })
      }

      // Runs once per durable step: a span without a captured call site (an `Effect.fn`
      // would capture two stack traces per call).
      const record = (path: string, identity: StepIdentity, output: unknown, position?: number) =>
        Effect.withSpan(Effect.suspend(() => recordNow(path, identity, output, position)), "StepLedger.record", {
          captureStackTrace: false
        })

      const discard = Effect.fn("StepLedger.discard")(function*(path: string) {
        yield* append(
          { _tag: "SubtreeDiscarded", version: LEDGER_ENTRY_VERSION, path, at: yield* Clock.currentTimeMillis },
          { discarded: path },
          (seq) => state.applyDiscard(seq, path)
        )
      })

      const replayAt = (path: string, identity: StepIdentity): ReplayLookup => {
        const held = state.entries.get(path)
        if (held === undefined) return state.evictedPaths.has(path) ? MISS_EVICTED : MISS
        if (held.stepId !== identity.stepId || held.kind !== identity.kind) {
          return { _tag: "Diverged", recorded: { stepId: held.stepId, kind: held.kind } }
        }
        if (held.output._tag === "Intent") return PENDING
        const output = outputOf(path, held)
        return output._tag === "Read"
          ? { _tag: "Hit", output: output.value }
          : { _tag: "Unreadable", key: ledgerKey(executionId, held.seq), message: output.message }
      }

      const warnUnreadable = (path: string, found: { readonly key: string; readonly message: string }) =>
        logWarning(
          `step ledger of execution ${
            JSON.stringify(executionId)
          }: the output recorded at ${path} cannot be read from the corrupt row ${found.key} (${found.message}); the step runs again`
        )

      const inspect = (path: string, identity: StepIdentity): Effect.Effect<ReplayLookup> =>
        Effect.sync(() => replayAt(path, identity))

      const lookup = Effect.fn("StepLedger.lookup")(function*(path: string, identity: StepIdentity) {
        const found = yield* inspect(path, identity)
        if (found._tag === "Hit") return Option.some(found.output)
        if (found._tag === "Diverged") yield* discard(path)
        if (found._tag === "Unreadable") yield* warnUnreadable(path, found)
        return Option.none<unknown>()
      })

      const recordIntent = Effect.fn("StepLedger.recordIntent")(
        function*(path: string, identity: StepIdentity, position?: number) {
          yield* append(
            {
              _tag: "IntentRecorded",
              version: LEDGER_ENTRY_VERSION,
              path,
              stepId: identity.stepId,
              kind: identity.kind,
              ...(position === undefined ? {} : { position })
            },
            path,
            (seq) =>
              state.applyStep(path, {
                seq,
                stepId: identity.stepId,
                kind: identity.kind,
                output: { _tag: "Intent" },
                position
              })
          )
        }
      )

      const entries = Effect.suspend(() => {
        const views: Array<LedgerEntryView> = []
        const unreadable: Array<Effect.Effect<void>> = []
        for (const [path, held] of state.entries) {
          if (held.output._tag === "Intent") continue
          const output = outputOf(path, held)
          if (output._tag === "Unreadable") {
            unreadable.push(warnUnreadable(path, { key: ledgerKey(executionId, held.seq), message: output.message }))
          } else views.push({ seq: held.seq, path, stepId: held.stepId, kind: held.kind, output: output.value })
        }
        views.sort((a, b) => a.seq - b.seq)
        return unreadable.length === 0 ? Effect.succeed(views) : Effect.as(Effect.all(unreadable, { discard: true }), views)
      })

      const childOf = (path: string, held: HeldEntry): RecordedChild => ({
        path,
        stepId: held.stepId,
        kind: held.kind,
        position: held.position
      })

      const children = (parent: string): ReadonlyArray<RecordedChild> =>
        [...state.entries].filter(([path]) => parentOf(path) === parent)
          .sort(([, a], [, b]) => a.seq - b.seq)
          .map(([path, held]) => childOf(path, held))

      const childAt = (parent: string, position: number, path: string): RecordedChild | undefined => {
        let found: { readonly path: string; readonly held: HeldEntry } | undefined
        for (const candidate of state.childrenAt(parent, position)) {
          if (candidate === path) continue
          const held = state.entries.get(candidate)!
          if (found === undefined || held.seq < found.held.seq) found = { path: candidate, held }
        }
        return found === undefined ? undefined : childOf(found.path, found.held)
      }

      return {
        executionId,
        lookup,
        record,
        entries,
        inspect,
        replayAt,
        children,
        childAt,
        discard,
        recordIntent,
        stats: Effect.sync(() => ({ recordFailed: failures.count }))
      } satisfies ExecutionLedger
    })

    const clear = (executionId: string) =>
      Effect.flatMap(ledgerKeysToClear(storage, executionId), (keys) => deleteKeys(storage, keys))

    return StepLedger.of({
      retention,
      open,
      stats: Effect.sync(() => ({ ...counters })),
      clear
    })
  })

/** The step ledger over the `CheckpointStore` in context. */
export const make = (options?: StepLedgerOptions): Effect.Effect<StepLedgerShape, StepLedgerRetentionInvalid, CheckpointStore> =>
  Effect.gen(function*() {
    return yield* makeWith(yield* CheckpointStore, options)
  })

/** The step ledger over the `CheckpointStore` the layer is given; fails to build on an invalid cap. */
export const layer = (
  options?: StepLedgerOptions
): Layer.Layer<StepLedger, StepLedgerRetentionInvalid, CheckpointStore> => Layer.effect(StepLedger, make(options))
