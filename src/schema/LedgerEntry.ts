/**
 * The persisted records of the step ledger and the keys they live at.
 *
 * One record per key `execution:<id>:ledger:<seq>`, seq zero-padded to 16 digits. A
 * record holds a completed step's output, an at-most-once step's intent to run, or
 * is a tombstone that discards a path and everything below it; a ledger is read by
 * applying its records in seq order.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** The version every ledger record carries. */
export const LEDGER_ENTRY_VERSION = 1 as const

/** Digits of the zero-padded seq in a ledger key. */
export const SEQ_DIGITS = 16

/**
 * A step output as stored. JSON has no `undefined`, so it gets its own tag rather
 * than vanishing into a missing key.
 */
export const RecordedOutput = Schema.Union([
  Schema.TaggedStruct("Json", { value: Schema.Unknown }),
  Schema.TaggedStruct("Undefined", {})
])

/** A step output as stored. */
export type RecordedOutput = typeof RecordedOutput.Type

/** A completed step: its identity at `path` and its output. */
export const StepRecorded = Schema.TaggedStruct("StepRecorded", {
  version: Schema.Literal(LEDGER_ENTRY_VERSION),
  path: Schema.String,
  stepId: Schema.String,
  kind: Schema.String,
  output: RecordedOutput,
  /**
   * The step's place among the distinct children its parent dispatched, in order:
   * a resume that finds another step there learns the workflow changed. Absent in
   * records written before it existed.
   */
  position: Schema.optionalKey(Schema.Number),
  /** When the record was written, epoch milliseconds (records written before it existed lack it). */
  at: Schema.optionalKey(Schema.Number)
})

/** A completed step: its identity at `path` and its output. */
export type StepRecorded = typeof StepRecorded.Type

/** A tombstone: every record before it at `path` or below `path` no longer counts. */
export const SubtreeDiscarded = Schema.TaggedStruct("SubtreeDiscarded", {
  version: Schema.Literal(LEDGER_ENTRY_VERSION),
  path: Schema.String,
  /** When the record was written, epoch milliseconds (records written before it existed lack it). */
  at: Schema.optionalKey(Schema.Number)
})

/** A tombstone: every record before it at `path` or below `path` no longer counts. */
export type SubtreeDiscarded = typeof SubtreeDiscarded.Type

/**
 * An at-most-once step is about to run its body: written, durably, before the body
 * starts. A later `StepRecorded` at the path supersedes it; one left alone means the
 * body may or may not have done its work.
 */
export const IntentRecorded = Schema.TaggedStruct("IntentRecorded", {
  version: Schema.Literal(LEDGER_ENTRY_VERSION),
  path: Schema.String,
  stepId: Schema.String,
  kind: Schema.String,
  /** As `StepRecorded`'s. */
  position: Schema.optionalKey(Schema.Number)
})

/** An at-most-once step's intent to run its body. */
export type IntentRecorded = typeof IntentRecorded.Type

/** Any ledger record. */
export const LedgerEntry = Schema.Union([StepRecorded, SubtreeDiscarded, IntentRecorded])

/** Any ledger record. */
export type LedgerEntry = typeof LedgerEntry.Type

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** An optional number field: absent, or a finite number. */
const optionalNumber = (record: Record<string, unknown>, field: string): boolean =>
  !(field in record) || (typeof record[field] === "number" && Number.isFinite(record[field]))

/**
 * `value` itself when it is a ledger record as this library writes them (each field
 * of its type, nothing to convert), else undefined. A restore checks thousands of
 * records, and this check costs a few property reads where the schema's decoder
 * builds a new record. It accepts nothing {@link LedgerEntry} rejects (a test checks
 * this on mutated records); a value it does not accept is for the decoder to judge.
 */
export const asWrittenLedgerEntry = (value: unknown): LedgerEntry | undefined => {
  if (!isRecord(value) || value.version !== LEDGER_ENTRY_VERSION || typeof value.path !== "string") return undefined
  switch (value._tag) {
    case "StepRecorded": {
      const output = value.output
      if (typeof value.stepId !== "string" || typeof value.kind !== "string" || !isRecord(output)) return undefined
      if (!(output._tag === "Json" ? "value" in output : output._tag === "Undefined")) return undefined
      return optionalNumber(value, "position") && optionalNumber(value, "at") ? value as StepRecorded : undefined
    }
    case "SubtreeDiscarded":
      return optionalNumber(value, "at") ? value as SubtreeDiscarded : undefined
    case "IntentRecorded":
      return typeof value.stepId === "string" && typeof value.kind === "string" && optionalNumber(value, "position")
        ? value as IntentRecorded
        : undefined
    default:
      return undefined
  }
}

/**
 * What a restore reads of a `StepRecorded` record from its JSON text before its output
 * is parsed: its identity, and where the output's value is in the text.
 */
export interface StepRecordedHead {
  readonly path: string
  readonly stepId: string
  readonly kind: string
  readonly position: number | undefined
  /**
   * Where the JSON of the output's `value` starts in the text (it ends two characters
   * before the text does), or -1 when the output is `Undefined`.
   */
  readonly valueAt: number
}

/** A JSON string that needs no escape, as `JSON.stringify` writes it; captures its body. */
const PLAIN_STRING = String.raw`"([^"\\\u0000-\u001f]*)"`
/** A JSON integer of at most 16 digits: finite, and `Number` reads it as `JSON.parse` does. */
const SHORT_INTEGER = String.raw`-?(?:0|[1-9]\d{0,15})`

/**
 * A `StepRecorded` record's text up to its output's value, exactly as the ledger
 * writes it: fields in the writer's order, no whitespace, strings without escapes.
 * Anything else (records written before this order, records from elsewhere, a path
 * that needs an escape) does not match and is parsed whole. The pattern is native
 * code: a restore reads thousands of heads, and it reads one faster than plain code
 * comparing the text character by character.
 */
const STEP_RECORDED_HEAD = new RegExp(
  String.raw`^\{"_tag":"StepRecorded","version":${LEDGER_ENTRY_VERSION},"path":${PLAIN_STRING},` +
    String.raw`"stepId":${PLAIN_STRING},"kind":${PLAIN_STRING}(?:,"at":${SHORT_INTEGER})?` +
    String.raw`(?:,"position":(${SHORT_INTEGER}))?,"output":\{"_tag":"(?:Json","value":|Undefined"\}\}$)`
)

/**
 * The step id and kind last read: a ledger's records name few of them, so a restore
 * holds one string for each rather than one per record.
 */
let lastStepId = ""
let lastKind = ""

/**
 * The identity of a `StepRecorded` record and where its output's value is, read from
 * the record's JSON text without parsing the output; undefined when the text is not
 * such a record as the ledger writes it (it is then for `JSON.parse` and the schema to
 * judge). A restore reads thousands of records and replays few of them, so an output
 * is parsed when it replays ({@link recordedValueOf}). When the value is JSON, the
 * schema decodes the whole text to this identity and that value (a test checks it).
 */
export const readStepRecordedHead = (text: string): StepRecordedHead | undefined => {
  const match = STEP_RECORDED_HEAD.exec(text)
  if (match === null) return undefined
  let valueAt = match[0].length
  // The match ends with the `:` before a JSON value, or with the record's `}` after an undefined output.
  if (text.charCodeAt(valueAt - 1) !== 0x3a) valueAt = -1
  // At least one character of value, then the closing braces of the output and of the record.
  else if (text.length < valueAt + 3 || !text.endsWith("}}")) return undefined
  const stepId = match[2] === lastStepId ? lastStepId : (lastStepId = match[2]!)
  const kind = match[3] === lastKind ? lastKind : (lastKind = match[3]!)
  const position = match[4] === undefined ? undefined : Number(match[4])
  return { path: match[1]!, stepId, kind, position, valueAt }
}

/** The output of a record read by {@link readStepRecordedHead}, or why it cannot be replayed. */
export type RecordedValue =
  | { readonly _tag: "Read"; readonly value: unknown }
  | { readonly _tag: "Unreadable"; readonly message: string }

const decodeLedgerEntry = Schema.decodeUnknownExit(LedgerEntry)

/**
 * The output of the `StepRecorded` record `text` whose head is `head`: its value
 * parsed on its own, or, when that is not one JSON value, the whole record parsed and
 * decoded by the schema, which must find the same identity. `Unreadable` whenever the
 * schema would not accept the record, so such an output is never replayed.
 */
export const recordedValueOf = (text: string, head: StepRecordedHead): RecordedValue => {
  if (head.valueAt === -1) return { _tag: "Read", value: undefined }
  try {
    return { _tag: "Read", value: JSON.parse(text.slice(head.valueAt, text.length - 2)) }
  } catch {
    // Not one JSON value: the record may still be JSON the schema accepts (a member
    // of the output after `value`), or not JSON at all.
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (cause) {
    return { _tag: "Unreadable", message: `not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}` }
  }
  let entry = asWrittenLedgerEntry(parsed)
  if (entry === undefined) {
    const decoded = decodeLedgerEntry(parsed)
    if (decoded._tag === "Failure") return { _tag: "Unreadable", message: "not a ledger record the schema accepts" }
    entry = decoded.value
  }
  if (
    entry._tag !== "StepRecorded" || entry.path !== head.path || entry.stepId !== head.stepId ||
    entry.kind !== head.kind || entry.position !== head.position
  ) {
    return { _tag: "Unreadable", message: "its fields, read whole, disagree with the record's identity as first read" }
  }
  return { _tag: "Read", value: entry.output._tag === "Json" ? entry.output.value : undefined }
}

/** The prefix every ledger key of an execution starts with (keys of other executions may too). */
export const ledgerPrefix = (executionId: string): string => `execution:${executionId}:ledger:`

/** The storage key of one ledger record. */
export const ledgerKey = (executionId: string, seq: number): string =>
  ledgerPrefix(executionId) + String(seq).padStart(SEQ_DIGITS, "0")

/**
 * The key of an execution's ledger statistics record, `{ version: 1, recordFailed }`:
 * how many step records of the execution failed to be written (best-effort, see
 * `StepLedger`). Under the ledger prefix, so a ledger load reads it in the same scan;
 * not a seq key, so nothing takes it for a record.
 */
export const ledgerStatsKey = (executionId: string): string => `${ledgerPrefix(executionId)}stats`

/** The `recordFailed` count a stored statistics record holds (its value, or its JSON text); 0 when unreadable. */
export const recordFailedOf = (stored: unknown): number => {
  let value = stored
  if (typeof stored === "string") {
    try {
      value = JSON.parse(stored)
    } catch {
      return 0
    }
  }
  const count = typeof value === "object" && value !== null ? (value as { recordFailed?: unknown }).recordFailed : undefined
  return typeof count === "number" && Number.isSafeInteger(count) && count > 0 ? count : 0
}

const isDigit = (code: number): boolean => code >= 0x30 && code <= 0x39

/**
 * The seq of `key` when it is a ledger key of the execution whose prefix is `prefix`,
 * else undefined. Exactly 16 digits must follow: execution `a` lists the keys of
 * execution `a:ledger:x` under its prefix too, and they must not count as its own.
 */
export const parseLedgerSeq = (prefix: string, key: string): number | undefined => {
  if (key.length !== prefix.length + SEQ_DIGITS || !key.startsWith(prefix)) return undefined
  let seq = 0
  for (let i = prefix.length; i < key.length; i++) {
    const code = key.charCodeAt(i)
    if (!isDigit(code)) return undefined
    seq = seq * 10 + (code - 0x30)
  }
  // Past 2^53 the sum above may round otherwise than the number the digits name.
  return seq <= Number.MAX_SAFE_INTEGER ? seq : Number(key.slice(prefix.length))
}

/** Whether `candidate` is `path` or below it: a child (`/`) or an `inParallel` branch (`[`). */
export const isAtOrBelow = (candidate: string, path: string): boolean =>
  candidate === path ||
  (candidate.length > path.length && candidate.startsWith(path) &&
    (candidate.charCodeAt(path.length) === 0x2f || candidate.charCodeAt(path.length) === 0x5b))
