/**
 * The in-memory view of one execution's step ledger (`services/StepLedger.ts`): what
 * each path replays (`LedgerState`), and the load that builds it from the stored rows
 * in seq order (`loadRows`). Plain code, no effect per row: a restore loads thousands.
 *
 * @since 0.1.0
 */
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import {
  asWrittenLedgerEntry,
  isAtOrBelow,
  LedgerEntry,
  parseLedgerSeq,
  readStepRecordedHead,
  type RecordedValue,
  recordedValueOf
} from "../schema/LedgerEntry.ts"

const decodeEntry = Schema.decodeUnknownExit(LedgerEntry)

/**
 * How a recorded output is held in memory: loaded values as they are, loaded records
 * read from their text as that text (the output parsed when it replays, see
 * `readStepRecordedHead`), fresh ones as their JSON.
 */
export type HeldOutput =
  | { readonly _tag: "Value"; readonly value: unknown }
  | { readonly _tag: "Stored"; readonly record: string; readonly valueAt: number }
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Undefined" }
  // An at-most-once step's intent: no output yet.
  | { readonly _tag: "Intent" }

export interface HeldEntry {
  readonly seq: number
  readonly stepId: string
  readonly kind: string
  readonly output: HeldOutput
  /**
   * Loaded when the ledger was opened (not recorded by this run). Evicting its key
   * from storage keeps it in memory: the entries a resumed run starts with serve that
   * whole run, so a re-run step's new entry cannot push out one not yet replayed.
   */
  readonly loaded?: true
  readonly position?: number | undefined
}

/**
 * What each key still in storage holds, so evicting it can update the lookup state:
 * the path of a step's record (completed or intent), a discard of a path, or nothing
 * readable (null).
 */
export type KeyInfo = string | { readonly discarded: string } | null

export const UNDEFINED_OUTPUT: HeldOutput = { _tag: "Undefined" }

/** The output `held` replays (an intent has none: undefined). */
export const outputOf = (path: string, held: HeldEntry): RecordedValue => {
  const output = held.output
  switch (output._tag) {
    case "Value":
      return { _tag: "Read", value: output.value }
    case "Stored":
      return recordedValueOf(output.record, {
        path,
        stepId: held.stepId,
        kind: held.kind,
        position: held.position,
        valueAt: output.valueAt
      })
    case "Text":
      return { _tag: "Read", value: JSON.parse(output.text) }
    default:
      return { _tag: "Read", value: undefined }
  }
}

/** The rows under a ledger prefix; `text`: each value is the row's JSON text, unparsed. */
export interface LedgerRows {
  readonly rows: ReadonlyArray<readonly [string, unknown]>
  readonly text: boolean
}

/** The value of a listed ledger key that could not be read (skipped with a warning) or is gone. */
export const UNREAD: unique symbol = Symbol("noetic-effect/StepLedger/unread")

/**
 * The path `path` is directly below, as `ExecutionLedger.children` counts it: the
 * path up to its last `/`, when what follows has no `[` (an `inParallel` branch's
 * steps are below the branch, not below the parallel step). Undefined for a path
 * with no `/`, which is below nothing.
 */
export const parentOf = (path: string): string | undefined => {
  const slash = path.lastIndexOf("/")
  if (slash === -1 || path.indexOf("[", slash + 1) !== -1) return undefined
  return path.slice(0, slash)
}

/**
 * The in-memory view of one execution's ledger: what each path replays, the keys
 * still in storage (in seq order, for eviction) and the writes in flight. A restore
 * builds it from thousands of records, so each record costs a few map operations.
 */
export class LedgerState {
  /** What each path replays. Read here; changed only through `setEntry` and `deleteEntry`. */
  readonly entries = new Map<string, HeldEntry>()
  /**
   * The paths of `entries` that carry a position, by parent (see `parentOf`), then by
   * position: one path, or a set once a second path holds that position.
   */
  private readonly byPosition = new Map<string, Map<number, string | Set<string>>>()
  readonly inflight = new Set<number>()
  /**
   * Paths whose replayable record retention evicted (a trace marks their re-run
   * `evicted`): shared by every ledger this process opens on the execution, so a
   * resume in the same process still says why a step ran again.
   */
  constructor(readonly evictedPaths: Set<string> = new Set()) {}
  private readonly discards = new Map<number, string>()
  // Seqs of the keys in storage, ascending from `head` (a head index keeps eviction
  // O(1)), and what each holds, at the same index.
  private stored: Array<number> = []
  private storedInfo: Array<KeyInfo> = []
  private head = 0

  get storedCount(): number {
    return this.stored.length - this.head
  }

  /** Notes a key now in storage. Writes land nearly in seq order, so this is an append. */
  keep(seq: number, info: KeyInfo): void {
    let i = this.stored.length
    while (i > this.head && this.stored[i - 1]! > seq) i--
    if (i === this.stored.length) {
      this.stored.push(seq)
      this.storedInfo.push(info)
    } else {
      this.stored.splice(i, 0, seq)
      this.storedInfo.splice(i, 0, info)
    }
  }

  /**
   * Takes the oldest keys past `maxEntries` (counting writes in flight) out of the
   * view. The newest key in storage is never taken: it carries the highest seq.
   */
  takeVictims(maxEntries: number): Array<number> {
    const victims: Array<number> = []
    if (this.storedCount + this.inflight.size <= maxEntries) return victims
    // A key above a write still in flight is not among the oldest once that write lands.
    let lowestInflight = Infinity
    for (const seq of this.inflight) if (seq < lowestInflight) lowestInflight = seq
    while (
      this.storedCount + this.inflight.size > maxEntries && this.storedCount > 1 &&
      this.stored[this.head]! < lowestInflight
    ) {
      const seq = this.stored[this.head]!
      const info = this.storedInfo[this.head]!
      this.storedInfo[this.head++] = null
      victims.push(seq)
      this.forget(seq, info)
    }
    if (this.head > 1024 && this.head * 2 > this.stored.length) {
      this.stored = this.stored.slice(this.head)
      this.storedInfo = this.storedInfo.slice(this.head)
      this.head = 0
    }
    return victims
  }

  /** The paths recorded directly below `parent` at `position`, in no particular order. */
  childrenAt(parent: string, position: number): ReadonlyArray<string> {
    const at = this.byPosition.get(parent)?.get(position)
    return at === undefined ? [] : typeof at === "string" ? [at] : [...at]
  }

  /**
   * Applies a loaded record of a step. Records load in ascending seq order, so a
   * later one at a path always wins and no discard is newer than it: one map write,
   * and the position index is built once, by `finishLoad`.
   */
  loadStep(path: string, held: HeldEntry): void {
    this.entries.set(path, held)
  }

  /** Indexes what the load left (see `loadStep`). */
  finishLoad(): void {
    this.entries.forEach((held, path) => this.index(path, held))
  }

  applyStep(path: string, held: HeldEntry): void {
    const current = this.entries.get(path)
    if (current !== undefined && current.seq > held.seq) return
    if (this.evictedPaths.size > 0) this.evictedPaths.delete(path)
    if (this.discards.size > 0) {
      for (const [seq, discarded] of this.discards) {
        if (seq > held.seq && isAtOrBelow(path, discarded)) return
      }
    }
    if (current !== undefined) this.unindex(path, current)
    this.entries.set(path, held)
    this.index(path, held)
  }

  applyDiscard(seq: number, path: string): void {
    this.discards.set(seq, path)
    for (const [candidate, held] of this.entries) {
      if (held.seq < seq && isAtOrBelow(candidate, path)) this.deleteEntry(candidate)
    }
  }

  private deleteEntry(path: string): void {
    const current = this.entries.get(path)
    if (current === undefined) return
    this.entries.delete(path)
    this.unindex(path, current)
  }

  /** The parent `index` last saw: siblings share it, so its hash is computed once. */
  private lastParent: string | undefined

  private index(path: string, held: HeldEntry): void {
    if (held.position === undefined) return
    const parent = this.sameParent(path) ?? parentOf(path)
    this.lastParent = parent
    if (parent === undefined) return
    let positions = this.byPosition.get(parent)
    if (positions === undefined) this.byPosition.set(parent, positions = new Map())
    const at = positions.get(held.position)
    if (at === undefined) positions.set(held.position, path)
    else if (typeof at !== "string") at.add(path)
    else if (at !== path) positions.set(held.position, new Set([at, path]))
  }

  /** `lastParent` when it is `path`'s parent, without slicing `path`. */
  private sameParent(path: string): string | undefined {
    const parent = this.lastParent
    if (parent === undefined || path.length <= parent.length || path.charCodeAt(parent.length) !== 0x2f) return undefined
    if (!path.startsWith(parent) || path.indexOf("/", parent.length + 1) !== -1) return undefined
    return path.indexOf("[", parent.length + 1) === -1 ? parent : undefined
  }

  private unindex(path: string, held: HeldEntry): void {
    if (held.position === undefined) return
    const parent = parentOf(path)
    if (parent === undefined) return
    const positions = this.byPosition.get(parent)
    const at = positions?.get(held.position)
    if (positions === undefined || at === undefined) return
    if (typeof at !== "string") {
      at.delete(path)
      if (at.size > 0) return
    } else if (at !== path) return
    positions.delete(held.position)
    if (positions.size === 0) this.byPosition.delete(parent)
  }

  private forget(seq: number, info: KeyInfo): void {
    if (typeof info === "string") {
      const held = this.entries.get(info)
      if (held?.seq === seq && held.loaded !== true) {
        this.deleteEntry(info)
        this.evictedPaths.add(info)
      }
    } else if (info !== null) {
      this.discards.delete(seq)
    }
  }
}

/** A row a load skipped as corrupt: its key, and why. */
export interface SkippedRow {
  readonly key: string
  readonly why: string
}

/**
 * Applies an execution's rows (those under `prefix`) to a fresh `state`, in ascending
 * seq order (see `LedgerState.loadStep`). Plain code, no effect per row: a restore
 * loads thousands of them. Returns the highest seq among the rows' keys (-1: none),
 * unreadable rows included, so no seq is reused, and the rows skipped as corrupt.
 */
export const loadRows = (
  state: LedgerState,
  prefix: string,
  { rows, text }: LedgerRows
): { readonly highest: number; readonly skipped: ReadonlyArray<SkippedRow> } => {
  // The seq of each row (-1: not a ledger key of this execution).
  const rowSeqs = new Array<number>(rows.length)
  let highest = -1
  let ordered = true
  for (let i = 0; i < rows.length; i++) {
    const seq = parseLedgerSeq(prefix, rows[i]![0]) ?? -1
    rowSeqs[i] = seq
    if (seq === -1) continue
    if (seq < highest) ordered = false
    else highest = seq
  }
  // Listing order is by code unit, which matches numeric order only while every
  // seq has 16 digits; sort by number so nothing depends on it.
  let order: Array<number> | undefined
  if (!ordered) {
    order = rowSeqs.flatMap((seq, i) => seq === -1 ? [] : [i]).sort((a, b) => rowSeqs[a]! - rowSeqs[b]!)
    highest = rowSeqs[order.at(-1)!]!
  }
  const skipped: Array<SkippedRow> = []
  const count = order === undefined ? rows.length : order.length
  for (let n = 0; n < count; n++) {
    const i = order === undefined ? n : order[n]!
    const seq = rowSeqs[i]!
    if (seq === -1) continue
    const row = rows[i]!
    const stored = row[1]
    // Its seq still counts (above), so it is never reused.
    if (stored === UNREAD) continue
    let value = stored
    if (text) {
      // A completed step as this library writes it: its identity now, its output
      // when it replays (most of a long ledger never does).
      const head = readStepRecordedHead(stored as string)
      if (head !== undefined) {
        state.keep(seq, head.path)
        state.loadStep(head.path, {
          seq,
          stepId: head.stepId,
          kind: head.kind,
          output: head.valueAt === -1 ? UNDEFINED_OUTPUT : { _tag: "Stored", record: stored as string, valueAt: head.valueAt },
          position: head.position,
          loaded: true
        })
        continue
      }
      try {
        value = JSON.parse(stored as string)
      } catch {
        state.keep(seq, null)
        skipped.push({ key: row[0], why: "not valid JSON" })
        continue
      }
    }
    // Records as this library writes them need no decoding; anything else is the schema's to judge.
    let entry = asWrittenLedgerEntry(value)
    if (entry === undefined) {
      const decoded = decodeEntry(value)
      if (Exit.isFailure(decoded)) {
        state.keep(seq, null)
        skipped.push({ key: row[0], why: "not a ledger record" })
        continue
      }
      entry = decoded.value
    }
    if (entry._tag === "StepRecorded") {
      state.keep(seq, entry.path)
      state.loadStep(entry.path, {
        seq,
        stepId: entry.stepId,
        kind: entry.kind,
        output: entry.output._tag === "Json" ? { _tag: "Value", value: entry.output.value } : { _tag: "Undefined" },
        position: entry.position,
        loaded: true
      })
    } else if (entry._tag === "IntentRecorded") {
      state.keep(seq, entry.path)
      state.loadStep(entry.path, {
        seq,
        stepId: entry.stepId,
        kind: entry.kind,
        output: { _tag: "Intent" },
        position: entry.position
      })
    } else {
      state.keep(seq, { discarded: entry.path })
      state.applyDiscard(seq, entry.path)
    }
  }
  state.finishLoad()
  return { highest, skipped }
}
