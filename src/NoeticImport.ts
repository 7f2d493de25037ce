/**
 * A way in for noetic's own data: reads a directory that noetic's `createFileStorage`
 * wrote (a checkpoint directory, a subprocess directory, or one holding both) and
 * writes every snapshot, step-ledger entry and subprocess manifest it holds into
 * noetic-effect storages, so `resume` of an imported execution replays its recorded
 * steps.
 *
 * noetic's on-disk format: one file `<encoded key>.json` per key, holding the raw JSON
 * value, where the encoding is `encodeURIComponent(key)` with every `%` replaced by
 * `__`; noetic's hardened file storage escapes every `_` as `_u` first. A name holding
 * `_u` can be either: the record itself settles it (a snapshot's `executionId`, a
 * manifest's `handleId`, a ledger entry's execution among the snapshots found), else
 * the escaped reading wins. The keys it uses:
 * - `execution:<id>:snapshot`: the v2 `CheckpointSnapshot` (the same shape as ours);
 * - `execution:<id>:ledger:<seq, 8 digits>`: `{ path, stepId, kind, output, completedAt }`
 *   (paths are `/<stepId>#<n>` segments, as ours are);
 * - `localSubprocess:manifest:<handleId>` and `inMemorySubprocess:manifest:<handleId>`:
 *   a step child's `{ kind: 'step', handleId, stepId, executionId, serializedInput,
 *   overrides, startedAt, pid?, pidStarttime? }` (process manifests have `command`).
 *
 * A record that cannot be read or converted is reported with its key and why; it never
 * stops the others. Keys of no kind above (noetic's auxiliary ones) are listed as skipped.
 *
 * The directory is untrusted input: only regular files directly inside it are read
 * (checked with lstat and again on the open file, never through a symbolic link);
 * symbolic links, FIFOs, devices, sockets and directories are listed in `notRead`
 * and never opened. A file over `maxFileBytes` (64 MiB by default) or a record nested
 * deeper than `maxDepth` (512 by default) is reported, not read, and no error quotes
 * a file's content. Each record is written whole, one at a time, so an interrupted
 * import (SIGINT, SIGTERM) leaves whole records behind.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import type { StorageError } from "./Errors.ts"
import { nodeFs as Fs } from "./internal/builtins.ts"
import { CHECKPOINT_SCHEMA_VERSION, CheckpointSnapshot } from "./schema/CheckpointSnapshot.ts"
import { LEDGER_ENTRY_VERSION, ledgerKey, type StepRecorded } from "./schema/LedgerEntry.ts"
import type { SubprocessManifest } from "./schema/SubprocessManifest.ts"
import { makeWith as makeCheckpointStore } from "./services/CheckpointStore.ts"
import type { StorageAdapterShape } from "./services/StorageAdapter.ts"
import { saveManifest } from "./services/SubprocessRecords.ts"

/** What kind of record a key held, as far as the import could tell. */
export type NoeticRecordKind = "snapshot" | "ledger" | "manifest" | "file"

/** One record the import could not bring over, and why; the others are unaffected. */
export class NoeticRecordUnreadable extends Schema.TaggedError<NoeticRecordUnreadable>(
  "noetic-effect/NoeticRecordUnreadable"
)("NoeticRecordUnreadable", {
  /** The decoded key, or the file name when the name does not decode. */
  key: Schema.String,
  /** The file it came from. */
  file: Schema.String,
  kind: Schema.Literals(["snapshot", "ledger", "manifest", "file"]),
  message: Schema.String
}) {
  /** The error code. */
  get code(): "NOETIC_RECORD_UNREADABLE" {
    return "NOETIC_RECORD_UNREADABLE"
  }
}

/** A directory entry the import did not open: not a regular file (a symbolic link, a FIFO, a device...). */
export interface NoeticEntryNotRead {
  readonly file: string
  /** What it is: `symbolic link`, `FIFO`, `directory`, `socket`, `character device`, `block device`. */
  readonly type: string
}

/** How much of one file or record an import reads. */
export interface NoeticImportLimits {
  /** The largest file read, in bytes (default 64 MiB); a larger one is reported, not read. */
  readonly maxFileBytes?: number | undefined
  /** The deepest nesting of arrays and objects in a record (default 512); a deeper one is reported, not parsed. */
  readonly maxDepth?: number | undefined
}

/** The default {@link NoeticImportLimits.maxFileBytes}: 64 MiB. */
export const DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024

/** The default {@link NoeticImportLimits.maxDepth}. */
export const DEFAULT_MAX_DEPTH = 512

/** The directory could not be listed at all. */
export class NoeticDirectoryUnreadable extends Schema.TaggedError<NoeticDirectoryUnreadable>(
  "noetic-effect/NoeticDirectoryUnreadable"
)("NoeticDirectoryUnreadable", { directory: Schema.String, message: Schema.String }) {
  /** The error code. */
  get code(): "NOETIC_DIRECTORY_UNREADABLE" {
    return "NOETIC_DIRECTORY_UNREADABLE"
  }
}

/** What an import brought over. */
export interface NoeticImportReport {
  readonly snapshots: number
  readonly ledgerEntries: number
  readonly manifests: number
  /** The executions whose snapshot was imported. */
  readonly executionIds: ReadonlyArray<string>
  /** Keys of no kind the import knows (noetic's auxiliary keys), left behind. */
  readonly skipped: ReadonlyArray<string>
  /** The records that could not be read or converted, per key. */
  readonly failures: ReadonlyArray<NoeticRecordUnreadable>
  /** Entries named `*.json` that are not regular files (symbolic links, FIFOs, devices...): never opened. */
  readonly notRead: ReadonlyArray<NoeticEntryNotRead>
}

/** Where imported records go. */
export interface NoeticImportTargets {
  /** Snapshots and ledger entries (a checkpoint store's storage). */
  readonly checkpoints: StorageAdapterShape
  /** Subprocess manifests; default: `checkpoints`. */
  readonly subprocess?: StorageAdapterShape | undefined
}

/** noetic's file name of a key; `escaped`: its hardened encoding, which writes every `_` as `_u` first. */
export const encodeNoeticKey = (key: string, options?: { readonly escaped?: boolean }): string =>
  encodeURIComponent(options?.escaped === true ? key.replaceAll("_", "_u") : key).replace(/%/g, "__")

/** The key of a noetic file name (without `.json`); undefined when it does not decode. */
export const decodeNoeticKey = (encoded: string, options?: { readonly escaped?: boolean }): string | undefined => {
  try {
    const key = decodeURIComponent(encoded.replaceAll("__", "%"))
    return options?.escaped === true ? key.replaceAll("_u", "_") : key
  } catch {
    return undefined
  }
}

/**
 * The keys a noetic file name (without `.json`) can stand for: its escaped reading
 * first, then the first encoding's, each only when it encodes back to the same name.
 */
export const noeticKeysOf = (encoded: string): ReadonlyArray<string> => {
  const keys: Array<string> = []
  for (const escaped of [true, false]) {
    const key = decodeNoeticKey(encoded, { escaped })
    if (key !== undefined && encodeNoeticKey(key, { escaped }) === encoded && !keys.includes(key)) keys.push(key)
  }
  return keys
}

const SNAPSHOT = /^execution:(.+):snapshot$/
const LEDGER = /^execution:(.+):ledger:(\d+)$/
const MANIFEST = /^(localSubprocess|inMemorySubprocess):manifest:(.+)$/

const kindOf = (key: string): NoeticRecordKind | undefined =>
  SNAPSHOT.test(key) ? "snapshot" : LEDGER.test(key) ? "ledger" : MANIFEST.test(key) ? "manifest" : undefined

/**
 * Which of the keys a file name reads as (see {@link noeticKeysOf}) the record says it
 * is: a snapshot's own `executionId`, a manifest's `handleId`, a ledger entry of an
 * execution whose snapshot was found; else the first (escaped) reading.
 */
const keyOfRecord = (
  keys: ReadonlyArray<string>,
  kind: NoeticRecordKind,
  value: unknown,
  executionIds: ReadonlyArray<string>
): string => {
  const says = (key: string): boolean => {
    if (kind === "snapshot") return isRecord(value) && value.executionId === SNAPSHOT.exec(key)?.[1]
    if (kind === "manifest") return isRecord(value) && value.handleId === MANIFEST.exec(key)?.[2]
    if (kind === "ledger") return executionIds.includes(LEDGER.exec(key)?.[1] ?? "")
    return false
  }
  return keys.find(says) ?? keys[0]!
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const decodeSnapshot = Schema.decodeUnknownEffect(CheckpointSnapshot)

const optionalString = (value: unknown): string | null => (typeof value === "string" ? value : null)

/** Our ledger record of a noetic ledger entry, or why not. */
const ledgerRecord = (value: unknown): StepRecorded | string => {
  if (!isRecord(value)) return "a ledger entry must be an object"
  const { kind, path, stepId } = value
  if (typeof path !== "string" || path === "") return "a ledger entry needs a non-empty path"
  if (typeof stepId !== "string") return "a ledger entry needs a stepId"
  if (typeof kind !== "string") return "a ledger entry needs a kind"
  return {
    _tag: "StepRecorded",
    version: LEDGER_ENTRY_VERSION,
    path,
    stepId,
    kind,
    // JSON drops an `undefined` output's key; ours records it as its own tag.
    output: "output" in value && value.output !== undefined ? { _tag: "Json", value: value.output } : { _tag: "Undefined" }
  }
}

/** Our manifest of a noetic step manifest, or why not. */
const manifestRecord = (
  source: "localSubprocess" | "inMemorySubprocess",
  key: string,
  value: unknown
): SubprocessManifest | string => {
  if (!isRecord(value)) return "a manifest must be an object"
  if (value.kind === "process") return "a process manifest names an OS process of the old host; it cannot be adopted"
  const { executionId, handleId, stepId } = value
  if (value.kind !== "step" || typeof handleId !== "string" || typeof stepId !== "string" || typeof executionId !== "string") {
    return "a step manifest needs kind 'step', handleId, stepId and executionId"
  }
  if (key !== handleId) return "the manifest's handleId does not match its key"
  const overrides = isRecord(value.overrides) ? value.overrides : {}
  const startedAt = typeof value.startedAt === "string" ? Date.parse(value.startedAt) : Number.NaN
  let serializedInput: string
  try {
    serializedInput = JSON.stringify(value.serializedInput) ?? "null"
  } catch {
    return "the manifest's input has no JSON form"
  }
  return {
    version: 1,
    // A noetic local child is a process speaking noetic's own protocol: it is recorded
    // without its pid, so a local adapter judges it gone instead of signalling it.
    adapter: source === "localSubprocess" ? "local" : "memory",
    handleId,
    stepId,
    module: null,
    entry: null,
    serializedInput,
    executionId,
    parentExecutionId: null,
    threadId: optionalString(overrides.threadId),
    resourceId: optionalString(overrides.resourceId),
    cwdInit: optionalString(overrides.cwdInit) ?? optionalString(value.cwdInit),
    pid: null,
    pidStarttime: null,
    socketPath: null,
    checkpointRoot: null,
    lingerMs: 0,
    metadata: { importedFrom: "noetic", ...(typeof value.reattachMode === "string" ? { reattachMode: value.reattachMode } : {}) },
    createdAt: Number.isNaN(startedAt) ? 0 : startedAt
  }
}

/**
 * noetic's frontier frames carry no path; ours mark the root's (`/<rootId>#0`), which
 * is how `resume` finds the root input of a run that was in flight. The root is the
 * first frame and always the first dispatch of its id, so its path is known.
 */
const withRootPath = (snapshot: CheckpointSnapshot): CheckpointSnapshot => {
  const [root, ...rest] = snapshot.frontier
  if (root === undefined) return snapshot
  const state = root.state
  if (isRecord(state) && typeof state.path === "string") return snapshot
  if (state !== undefined && !isRecord(state)) return snapshot
  return { ...snapshot, frontier: [{ ...root, state: { ...state, path: `/${root.stepId}#0` } }, ...rest] }
}

/** What a directory entry is, for the report of entries not read. */
const typeOf = (stat: import("node:fs").Stats): string =>
  stat.isSymbolicLink()
    ? "symbolic link"
    : stat.isDirectory()
    ? "directory"
    : stat.isFIFO()
    ? "FIFO"
    : stat.isSocket()
    ? "socket"
    : stat.isCharacterDevice()
    ? "character device"
    : stat.isBlockDevice()
    ? "block device"
    : "special file"

/** A file the import refuses to read, and why (never its content). */
class Refused {
  constructor(readonly message: string, readonly notRegular?: string) {}
}

/**
 * The text of the regular file `path`, at most `maxBytes` long: opened without
 * following a symbolic link and without blocking (a FIFO swapped in after the listing
 * neither hangs nor is read), and checked again as a regular file once open.
 */
const readRegularFile = (path: string, maxBytes: number): string => {
  const { constants } = Fs
  let fd: number
  try {
    fd = Fs.openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code
    if (code === "ELOOP") throw new Refused("a symbolic link", "symbolic link")
    throw new Refused(`cannot open (${code ?? "error"})`)
  }
  try {
    const stat = Fs.fstatSync(fd)
    if (!stat.isFile()) throw new Refused(`not a regular file (${typeOf(stat)})`, typeOf(stat))
    if (stat.size > maxBytes) throw new Refused(`${stat.size} bytes, over the limit of ${maxBytes} (maxFileBytes)`)
    const buffer = Buffer.alloc(Math.min(stat.size, maxBytes) + 1)
    let length = 0
    while (length < buffer.length) {
      const read = Fs.readSync(fd, buffer, length, buffer.length - length, null)
      if (read === 0) break
      length += read
    }
    // Grew while read: the limit holds for what is read, not for what fstat said.
    if (length > maxBytes) throw new Refused(`over the limit of ${maxBytes} bytes (maxFileBytes)`)
    return buffer.toString("utf8", 0, length)
  } finally {
    Fs.closeSync(fd)
  }
}

/** Whether `text` nests arrays and objects deeper than `maxDepth` (strings skipped). */
const nestsDeeperThan = (text: string, maxDepth: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return true
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return false
}

/** The JSON value of a record's text, or why not, in words that quote none of it. */
const parseRecord = (text: string, maxDepth: number): unknown => {
  // noetic reads an empty file as no value: there is nothing to import.
  if (text.length === 0) throw new Refused("the file is empty")
  if (nestsDeeperThan(text, maxDepth)) throw new Refused(`nested deeper than ${maxDepth} levels (maxDepth)`)
  try {
    return JSON.parse(text)
  } catch {
    // JSON.parse's message quotes the text around the error: never echoed.
    throw new Refused("not valid JSON")
  }
}

/** A write of one record that failed on the record itself (not on the storage): reported, the others go on. */
const recordLevel = (error: StorageError): boolean => error.reason._tag === "Unserializable"

/**
 * Imports the noetic directory `directory` into `targets`. Fails only when the
 * directory cannot be listed or a target storage rejects a write; unreadable records
 * are reported, not thrown.
 */
export const importNoeticDirectory = Effect.fn("NoeticImport.importDirectory")(function*(
  directory: string,
  targets: NoeticImportTargets,
  limits: NoeticImportLimits = {}
): Effect.fn.Return<NoeticImportReport, NoeticDirectoryUnreadable | StorageError> {
  const maxFileBytes = limits.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES
  const maxDepth = limits.maxDepth ?? DEFAULT_MAX_DEPTH
  const notRead: Array<NoeticEntryNotRead> = []
  const files = yield* Effect.try({
    try: () =>
      Fs.readdirSync(directory).filter((name) => name.endsWith(".json")).sort().filter((file) => {
        // lstat: a symbolic link is listed, never followed (it may point outside the directory).
        const stat = Fs.lstatSync(Path.join(directory, file), { throwIfNoEntry: false })
        if (stat === undefined || stat.isFile()) return stat !== undefined
        notRead.push({ file, type: typeOf(stat) })
        return false
      }),
    catch: (cause) =>
      new NoeticDirectoryUnreadable({
        directory,
        message: `cannot list ${directory}: ${cause instanceof Error ? cause.message : String(cause)}`
      })
  })
  const store = yield* makeCheckpointStore(targets.checkpoints)
  const subprocess = targets.subprocess ?? targets.checkpoints
  const failures: Array<NoeticRecordUnreadable> = []
  const skipped: Array<string> = []
  const executionIds: Array<string> = []
  let ledgerEntries = 0
  let manifests = 0
  const fail = (key: string, file: string, kind: NoeticRecordKind, message: string) =>
    void failures.push(new NoeticRecordUnreadable({ key, file, kind, message }))

  /** Converts and writes one record; fails with why it cannot be converted (never quoting it), or the write's error. */
  const importRecord = (key: string, kind: NoeticRecordKind, value: unknown) =>
    Effect.gen(function*() {
      if (kind === "snapshot") {
        const executionId = SNAPSHOT.exec(key)![1]!
        const decoded = yield* Effect.option(decodeSnapshot(value))
        if (Option.isNone(decoded)) {
          const seen = isRecord(value) ? value.schemaVersion : undefined
          return yield* Effect.fail(
            seen !== CHECKPOINT_SCHEMA_VERSION
              ? `its schemaVersion is not ${CHECKPOINT_SCHEMA_VERSION}: the snapshot was written by another runtime version`
              : "the snapshot does not match the v2 CheckpointSnapshot schema"
          )
        }
        if (decoded.value.executionId !== executionId) {
          return yield* Effect.fail("the snapshot's executionId does not match its key")
        }
        yield* store.save(withRootPath(decoded.value))
        executionIds.push(executionId)
      } else if (kind === "ledger") {
        const [, executionId, seq] = LEDGER.exec(key)!
        const record = ledgerRecord(value)
        if (typeof record === "string") return yield* Effect.fail(record)
        // The seq carries over, so the entries keep their order.
        yield* targets.checkpoints.set(ledgerKey(executionId!, Number(seq)), record)
        ledgerEntries++
      } else {
        const [, source, handleId] = MANIFEST.exec(key)!
        const manifest = manifestRecord(source as "localSubprocess" | "inMemorySubprocess", handleId!, value)
        if (typeof manifest === "string") return yield* Effect.fail(manifest)
        yield* saveManifest(subprocess, manifest)
        manifests++
      }
    })

  // Snapshots first: a ledger entry whose name reads two ways is settled by them.
  const named = files.map((file) => ({ file, keys: noeticKeysOf(file.slice(0, -".json".length)) }))
  const snapshotFirst = [
    ...named.filter(({ keys }) => keys.some((key) => SNAPSHOT.test(key))),
    ...named.filter(({ keys }) => !keys.some((key) => SNAPSHOT.test(key)))
  ]
  for (const { file, keys } of snapshotFirst) {
    if (keys.length === 0) {
      fail(file, file, "file", "the file name is not an encoded key")
      continue
    }
    const kind = keys.map(kindOf).find((found) => found !== undefined)
    if (kind === undefined) {
      skipped.push(keys[0]!)
      continue
    }
    const ofKind = keys.filter((key) => kindOf(key) === kind)
    // Between records: an interrupt (SIGINT, SIGTERM) stops the import here, after a whole record.
    yield* Effect.yieldNow
    const read = yield* Effect.result(Effect.try({
      try: (): unknown => parseRecord(readRegularFile(Path.join(directory, file), maxFileBytes), maxDepth),
      catch: (cause) => cause instanceof Refused ? cause : new Refused("cannot be read")
    }))
    if (Result.isFailure(read)) {
      if (read.failure.notRegular !== undefined) notRead.push({ file, type: read.failure.notRegular })
      else fail(ofKind[0]!, file, kind, `unreadable: ${read.failure.message}`)
      continue
    }
    const value = read.success
    const key = keyOfRecord(ofKind, kind, value, executionIds)
    const written = yield* Effect.exit(importRecord(key, kind, value))
    if (written._tag === "Failure") {
      const error = Cause.findErrorOption(written.cause)
      if (Option.isNone(error)) {
        // A defect of this record alone (say, a value too deep for a serializer): reported, the others go on.
        if (Cause.hasInterrupts(written.cause)) return yield* Effect.failCause(written.cause as Cause.Cause<never>)
        fail(key, file, kind, "the record could not be converted or written")
      } else if (typeof error.value === "string") {
        fail(key, file, kind, error.value)
      } else if (recordLevel(error.value)) {
        fail(key, file, kind, error.value.message)
      } else {
        return yield* error.value
      }
    }
  }
  notRead.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
  return { snapshots: executionIds.length, ledgerEntries, manifests, executionIds, skipped, failures, notRead }
})

