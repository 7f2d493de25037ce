/**
 * The append-only logs of a file storage: keys of an append-only class (the durable
 * queue's batch records) kept as framed records in segment files instead of one file
 * per key.
 *
 * A log is a directory `.log-<encoded log name>` under the storage root holding
 * segments `<16-digit number>.seg` and, while a process writes it, a `lease` file
 * naming that process. A record is a 21-byte header (magic, key length, value length,
 * kind, a CRC-32 of the header and key, a CRC-32 of the value), the key, and the
 * value's JSON text; a tombstone has no value. The newest record of a key wins.
 *
 * One process writes a log at a time (it holds the lease; a dead holder's lease is
 * broken), always into a segment it created, so a torn tail left by a crash is never
 * followed by a record: damage with no intact record after it in its segment is a
 * write that never completed and is dropped; damage before an intact record is
 * `Corrupt`, naming the key when its header is intact and the log otherwise. Appends
 * made in one task of the event loop (Effect's scheduler runs every ready fiber in one),
 * or while the batch before them was written, share one durable write (group commit);
 * the batch is written from a microtask, so a lone append waits for no further turn of
 * the loop. A new segment costs one fsync of the directory. A
 * writer fills its segment with zeros ahead of its records, so most writes have no new
 * file size to commit; zeros after the last record are an end nothing was written to
 * yet, read like a torn tail. Once every record of the oldest segments is deleted or
 * replaced, they are removed (oldest first, so no tombstone outlives the record it hides).
 *
 * Readers in other processes read the segments from disk: the index is checked against
 * the directory and each segment's inode and size before every read, and only what
 * was appended since is parsed.
 *
 * @since 0.1.0
 */
import * as NodePath from "node:path"
import { nodeFs as Fs } from "./builtins.ts"
import { errorCode, isProcessAlive } from "./processes.ts"
import { encodeInto, HEADER_BYTES, type Header, KIND_DELETE, KIND_SET, MAGIC, parse, readHeader, recordBound, valueIntact } from "./fileLogCodec.ts"

/** The record format (see `fileLogCodec.ts`). */
export { encodeRecord } from "./fileLogCodec.ts"

/** The prefix of a log directory's name inside the storage root. */
export const LOG_DIR_PREFIX = ".log-"

/** A failure the storage reports with a reason of its own, not as an I/O error; thrown, and mapped by the storage. */
export class LogProblem {
  constructor(
    readonly reason: "Corrupt" | "Conflict",
    readonly key: string,
    readonly message: string
  ) {}
}

/** How segments are sized and leases waited for. */
export interface LogSettings {
  /** A segment at least this long is sealed and the next write starts a new one. */
  readonly segmentBytes: number
  /** A fully deleted active segment at least this long is removed at once. */
  readonly reclaimBytes: number
  /** How long a writer waits for another live process's lease before failing `Conflict`. */
  readonly leaseWaitMs: number
  /** Names a file in the root that no other writer uses (for the lease's link). */
  readonly tempPath: () => string
}

const SEGMENT_NAME = /^(\d{16})\.seg$/
const LEASE = "lease"
const LEASE_RETRY_MS = 2
/**
 * On Linux, segments are opened with `O_DSYNC`: a write returns once its data (and a
 * size it changed) is on disk, so a batch is durable in one thread-pool call, a write,
 * with no `fdatasync` after it. Elsewhere each write is followed by an `fdatasync`,
 * which libuv makes a full flush where the platform's `O_DSYNC` is weaker (macOS).
 */
const DSYNC: number = process.platform === "linux" ? Fs.constants.O_DSYNC ?? 0 : 0
/**
 * How far past its end a writer fills its segment with zeros. A synced write that changes
 * the file's size also commits that size (a journal commit on ext4), which costs a small
 * append about a third more than overwriting bytes already allocated; so the size
 * changes once per this many bytes, not on every append.
 */
const PREALLOCATE_BYTES = 64 * 1024
const LEASE_RETRY_MAX_MS = 50

/** `PREALLOCATE_BYTES` of zeros, made at the first batch written. */
let zeros: Buffer | undefined

/**
 * The buffer batches are framed into before their write, shared by every log of the
 * process: no buffer per record and no copy into one per batch. A batch is framed in
 * one synchronous step and holds the buffer until its write is done (a log framing
 * meanwhile takes a new one). It grows as batches need; a batch that needs more than
 * `KEPT_FRAMING_BYTES` frames into a buffer of its own, let go after its write.
 */
let framing: Buffer | undefined
const KEPT_FRAMING_BYTES = 4 * 1024 * 1024

interface Segment {
  readonly number: number
  readonly path: string
  ino: number
  parsedTo: number
  /** The file's size when it was last parsed: past `parsedTo` it held nothing intact then. */
  parsedSize: number
  /** Whether a newer segment existed when it was last read: only the newest segment is ever appended to. */
  sealed: boolean
  /** How many index entries point into this segment. */
  live: number
}

interface Entry {
  readonly segment: Segment
  readonly offset: number
  readonly header: Header
  readonly damaged: boolean
}

interface Append {
  readonly key: string
  /** The value's JSON text; undefined for a delete (a tombstone, written only when the key is present). */
  readonly text: string | undefined
  readonly done: (cause?: unknown) => void
  cancelled: boolean
}

const segmentName = (number: number) => `${String(number).padStart(16, "0")}.seg`

const ifMissing = <A>(run: () => A, otherwise: A): A => {
  try {
    return run()
  } catch (cause) {
    if (errorCode(cause) === "ENOENT") return otherwise
    throw cause
  }
}

/** Writes `buffers` one after another from `position`, in the thread pool; `done` gets the first error. */
const writeFullyAsync = (fd: number, buffers: ReadonlyArray<Buffer>, position: number, done: (error: unknown) => void): void => {
  const from = (rest: ReadonlyArray<Buffer>, at: number): void => {
    if (rest.length === 0) return done(undefined)
    Fs.writev(fd, rest, at, (error, written) => {
      if (error) return done(error)
      // A short write: go on from the first byte not written.
      const left: Array<Buffer> = []
      let skip = written
      for (const buffer of rest) {
        if (skip >= buffer.length) skip -= buffer.length
        else {
          left.push(skip > 0 ? buffer.subarray(skip) : buffer)
          skip = 0
        }
      }
      from(left, at + written)
    })
  }
  from(buffers.filter((buffer) => buffer.length > 0), position)
}

/** fsyncs the directory `path` in the thread pool. */
const fsyncDirectory = (path: string, done: (error: unknown) => void): void =>
  Fs.open(path, "r", (error, fd) => {
    if (error) return done(error)
    Fs.fsync(fd, (syncError) => Fs.close(fd, (closeError) => done(syncError ?? closeError ?? undefined)))
  })

/** Runs callback steps one after another; `done` gets the first error, or undefined. */
const runSteps = (
  steps: ReadonlyArray<(next: (error: unknown) => void) => void>,
  done: (error: unknown) => void
): void => {
  const from = (index: number): void => {
    if (index >= steps.length) return done(undefined)
    steps[index]!((error) => (error ? done(error) : from(index + 1)))
  }
  from(0)
}

/** Runs callback tasks at once; `done` gets the first error, or undefined, once every one has finished. */
const runAll = (
  tasks: ReadonlyArray<(next: (error: unknown) => void) => void>,
  done: (error: unknown) => void
): void => {
  if (tasks.length === 1) return tasks[0]!(done)
  let left = tasks.length
  let failure: unknown = undefined
  for (const task of tasks) {
    task((error) => {
      if (error && failure === undefined) failure = error
      if (--left === 0) done(failure)
    })
  }
}

/** Whether a record's magic starts at `at` in the file. */
const startsRecord = (path: string, at: number): boolean => {
  const bytes = Buffer.alloc(4)
  return readAt(path, bytes, at) === 4 && bytes.readUInt32BE(0) === MAGIC
}

const readAt = (path: string, bytes: Buffer, position: number): number => {
  const fd = Fs.openSync(path, "r")
  try {
    let read = 0
    while (read < bytes.length) {
      const n = Fs.readSync(fd, bytes, read, bytes.length - read, position + read)
      if (n === 0) break
      read += n
    }
    return read
  } finally {
    Fs.closeSync(fd)
  }
}

/**
 * One log directory, as this process sees it. A batch is written in the thread pool (one
 * `write` to a segment opened `O_DSYNC`), so the event loop never waits for the disk;
 * one batch is in flight at a time, and what is appended meanwhile forms the next. The
 * rest of its I/O is synchronous and small (opening a segment, reading a record), so no
 * other fiber ever sees the index half updated: it changes only once a batch is durable.
 */
export class Log {
  private readonly segments: Array<Segment> = []
  private readonly index = new Map<string, Entry>()
  private unknown: Array<{ readonly segment: Segment; readonly offset: number }> = []
  /** The segment this process appends to: `size` bytes of records, zeros up to `allocated`. */
  private writer: { readonly fd: number; readonly segment: Segment; size: number; allocated: number } | undefined
  private lease: { readonly path: string; readonly token: string } | undefined
  private pending: Array<Append> = []
  private scheduled = false
  /** Whether a batch is being written and synced in the thread pool now. */
  private syncing = false
  /**
   * Directories with an entry this writer made or removed (the log's, a segment's) not
   * yet fsynced: the next batch is durable only once they are.
   */
  private readonly unsyncedDirectories = new Set<string>()
  private leaseWaitSince: number | undefined

  constructor(
    readonly name: string,
    readonly dir: string,
    private readonly root: string,
    private readonly settings: LogSettings
  ) {}

  private resetIndex(): void {
    this.segments.length = 0
    this.index.clear()
    this.unknown = []
  }

  private apply(segment: Segment, offset: number, header: Header, damaged: boolean): void {
    const before = this.index.get(header.key)
    if (before !== undefined) before.segment.live--
    if (header.kind === KIND_DELETE) {
      this.index.delete(header.key)
    } else {
      this.index.set(header.key, { segment, offset, header, damaged })
      segment.live++
    }
  }

  /** Parses what `segment` holds past what was parsed. */
  private parseTail(segment: Segment, size: number, newest: boolean): void {
    if (size <= segment.parsedTo) return
    // A writer's segment ends in zeros it allocated ahead. When the file has not grown,
    // nothing was appended since if it was sealed then, or if no record starts where
    // parsing stopped (a newer segment then seals it: a writer never goes back).
    if (size === segment.parsedSize) {
      if (segment.sealed) return
      if (!startsRecord(segment.path, segment.parsedTo)) {
        segment.sealed = !newest
        return
      }
    }
    const bytes = Buffer.allocUnsafe(size - segment.parsedTo)
    const read = readAt(segment.path, bytes, segment.parsedTo)
    const parsed = parse(bytes.subarray(0, read), segment.parsedTo)
    for (const record of parsed.records) this.apply(segment, record.offset, record.header, record.damaged)
    for (const offset of parsed.unknown) this.unknown.push({ segment, offset })
    segment.parsedTo = parsed.end
    segment.parsedSize = size
    segment.sealed = !newest
  }

  /**
   * Brings the index up to what is on disk. A segment removed, replaced or shrunk
   * since the last read rebuilds the index from scratch; one that grew is parsed from
   * where the last read stopped.
   */
  private refreshNow(): void {
    for (let attempt = 0;; attempt++) {
      try {
        this.refreshOnce()
        return
      } catch (cause) {
        // A segment went (compacted by its writer) while it was read: read again.
        if (errorCode(cause) !== "ENOENT" || attempt >= 3) throw cause
        this.resetIndex()
      }
    }
  }

  private refreshOnce(): void {
    const names = ifMissing(() => Fs.readdirSync(this.dir), [] as Array<string>)
    const numbers: Array<number> = []
    for (const name of names) {
      const match = SEGMENT_NAME.exec(name)
      if (match !== null) numbers.push(Number(match[1]))
    }
    numbers.sort((a, b) => a - b)
    const stats = numbers.map((number) => Fs.statSync(NodePath.join(this.dir, segmentName(number))))
    const known = new Map(this.segments.map((segment) => [segment.number, segment]))
    const newest = this.segments[this.segments.length - 1]?.number ?? 0
    let rebuild = this.segments.some((segment) => !numbers.includes(segment.number))
    for (let i = 0; i < numbers.length && !rebuild; i++) {
      const segment = known.get(numbers[i]!)
      const stat = stats[i]!
      if (segment !== undefined && (segment.ino !== stat.ino || stat.size < segment.parsedTo)) rebuild = true
      // A segment older than one already read appeared: order would be lost.
      else if (segment === undefined && numbers[i]! < newest) rebuild = true
    }
    if (rebuild) {
      this.resetIndex()
      known.clear()
    }
    for (let i = 0; i < numbers.length; i++) {
      const stat = stats[i]!
      let segment = known.get(numbers[i]!)
      if (segment === undefined) {
        segment = {
          number: numbers[i]!,
          path: NodePath.join(this.dir, segmentName(numbers[i]!)),
          ino: stat.ino,
          parsedTo: 0,
          parsedSize: 0,
          sealed: false,
          live: 0
        }
        this.segments.push(segment)
      }
      this.parseTail(segment, stat.size, i === numbers.length - 1)
    }
  }

  /** The index, current: this process's own while it writes the log, else read from disk. */
  private refresh(): void {
    if (this.lease !== undefined) return
    this.refreshNow()
    // An empty log nobody here writes holds nothing worth keeping: a host reading the
    // queues of many children keeps no index of the ones that are gone.
    if (this.segments.length === 0 && this.pending.length === 0 && !this.scheduled) forget(this)
  }

  /** The keys of the log that start with `prefix`. Fails `Corrupt` when the log holds damage whose key is unknown. */
  keys(prefix: string): Array<string> {
    this.refresh()
    this.failOnUnknownDamage()
    const keys: Array<string> = []
    for (const key of this.index.keys()) if (key.startsWith(prefix)) keys.push(key)
    return keys
  }

  private failOnUnknownDamage(key?: string): void {
    const damage = this.unknown[0]
    if (damage === undefined) return
    throw new LogProblem(
      "Corrupt",
      key ?? this.name,
      `the log ${damage.segment.path} is damaged at byte ${damage.offset}, in a record whose key cannot be read`
    )
  }

  /**
   * The JSON text stored at `key`, or undefined when the log does not hold it. Fails
   * `Corrupt` naming the key for a damaged record, or when the key may be the one in
   * damage whose key is unknown.
   */
  read(key: string): string | undefined {
    for (let attempt = 0;; attempt++) {
      this.refresh()
      const entry = this.index.get(key)
      if (entry === undefined) {
        this.failOnUnknownDamage(key)
        return undefined
      }
      if (entry.damaged) throw this.damaged(key, entry)
      const bytes = Buffer.allocUnsafe(entry.header.length)
      let read: number
      try {
        read = readAt(entry.segment.path, bytes, entry.offset)
      } catch (cause) {
        // Another process compacted the segment away after the index was read: look again.
        if (errorCode(cause) === "ENOENT" && attempt < 3 && this.lease === undefined) continue
        throw cause
      }
      const header = readHeader(bytes, 0)
      if (read < bytes.length || typeof header !== "object" || header.key !== key || !valueIntact(bytes, 0, header)) {
        if (attempt < 3 && this.lease === undefined) {
          // Another process may have replaced the segment since: read it afresh.
          this.resetIndex()
          continue
        }
        throw this.damaged(key, entry)
      }
      return bytes.toString("utf8", HEADER_BYTES + header.keyBytes)
    }
  }

  private damaged(key: string, entry: Entry): LogProblem {
    return new LogProblem("Corrupt", key, `the record at byte ${entry.offset} of ${entry.segment.path} is damaged`)
  }

  /** Whether the log may hold `key` (so a delete must write a tombstone). */
  holds(key: string): boolean {
    if (this.pending.some((append) => append.key === key)) return true
    this.refresh()
    return this.index.has(key)
  }

  /**
   * Appends the record of `key`, its value's JSON `text` (a tombstone when undefined),
   * and calls `done` once it is durable or failed. Records appended in one task of the
   * event loop, or while the batch before them is written, share one durable write
   * (group commit). Returns a canceller for an append whose caller gave up before its
   * batch ran.
   */
  append(key: string, text: string | undefined, done: (cause?: unknown) => void): () => void {
    const append: Append = { key, text, done, cancelled: false }
    this.pending.push(append)
    this.schedule(0)
    return () => {
      append.cancelled = true
    }
  }

  private schedule(delay: number): void {
    if (this.scheduled) return
    this.scheduled = true
    if (delay === 0) queueMicrotask(() => this.flush())
    else setTimeout(() => this.flush(), delay)
  }

  private flush(): void {
    this.scheduled = false
    // A batch is being made durable in the thread pool: its completion flushes again.
    if (this.syncing) return
    const batch = this.pending.some((append) => append.cancelled)
      ? this.pending.filter((append) => !append.cancelled)
      : this.pending
    this.pending = []
    if (batch.length === 0) return
    let writer: NonNullable<Log["writer"]> | "busy"
    try {
      writer = this.openWriter()
    } catch (cause) {
      for (const append of batch) append.done(cause)
      return
    }
    if (writer === "busy") {
      // Another live process writes this log: wait from a timer, and let appends made
      // meanwhile join this batch.
      this.leaseWaitSince ??= Date.now()
      const waited = Date.now() - this.leaseWaitSince
      if (waited >= this.settings.leaseWaitMs) {
        this.leaseWaitSince = undefined
        const holder = ifMissing(() => Fs.readFileSync(NodePath.join(this.dir, LEASE), "utf8"), "unknown")
        const problem = new LogProblem("Conflict", this.name, `the log ${this.dir} is being written by process ${holder}`)
        for (const append of batch) append.done(problem)
        return
      }
      this.pending = batch.concat(this.pending)
      this.schedule(Math.min(LEASE_RETRY_MAX_MS, Math.max(LEASE_RETRY_MS, waited)))
      return
    }
    this.leaseWaitSince = undefined
    const settle = (error: unknown) => {
      const cause = error === undefined ? undefined : error ?? new Error("the log write failed")
      for (const append of batch) append.done(cause)
    }
    try {
      this.writeBatch(writer, batch, settle)
    } catch (error) {
      settle(error ?? new Error("the log write failed"))
    }
  }

  /** Writes the records of `batch` and makes them durable, then calls `settle`. */
  private writeBatch(
    writer: NonNullable<Log["writer"]>,
    batch: ReadonlyArray<Append>,
    settle: (error: unknown) => void
  ): void {
    // A delete writes a tombstone only for a key the log holds (or that this batch sets);
    // a lone set (a queue's writer awaiting each batch) is kept as it is.
    let kept: ReadonlyArray<Append> = batch
    if (batch.length > 1 || batch[0]!.text === undefined) {
      const present = new Map<string, boolean>()
      const some: Array<Append> = []
      for (const append of batch) {
        const held = present.get(append.key) ?? this.index.has(append.key)
        if (append.text === undefined && !held) continue
        present.set(append.key, append.text !== undefined)
        some.push(append)
      }
      if (some.length === 0) return settle(undefined)
      kept = some
    }
    let target = framing ??= Buffer.allocUnsafe(PREALLOCATE_BYTES)
    const records: Array<Header> = []
    let length = 0
    for (const append of kept) {
      const room = length + recordBound(append.key, append.text)
      if (room > target.length) {
        const grown = Buffer.allocUnsafe(Math.max(room, 2 * target.length))
        target.copy(grown, 0, 0, length)
        target = grown
        if (grown.length <= KEPT_FRAMING_BYTES) framing = grown
      }
      const recordLength = encodeInto(target, length, append.key, append.text)
      records.push({
        key: append.key,
        kind: append.text === undefined ? KIND_DELETE : KIND_SET,
        keyBytes: target.readUInt32BE(length + 4),
        length: recordLength
      })
      length += recordLength
    }
    const bytes = target.subarray(0, length)
    const abandon = () => {
      // What reached the segment is a torn tail now: the next write starts a new segment.
      if (this.writer === writer) this.writer = undefined
      Fs.close(writer.fd, () => undefined)
    }
    const end = writer.size + bytes.length
    const allocate = end > writer.allocated
    const padding = (zeros ??= Buffer.alloc(PREALLOCATE_BYTES))
    // Written (and synced) in the thread pool: the event loop serves sockets meanwhile,
    // and appends made meanwhile form the next batch. The first batch of a new segment
    // is durable only once the directory entries the writer made are synced too; those
    // syncs run beside the write (the batch counts as durable once all have finished).
    this.syncing = true
    // The batch's bytes are this write's until it is done: another log frames elsewhere.
    if (framing === target) framing = undefined
    const directories = [...this.unsyncedDirectories]
    const write = (next: (error: unknown) => void) =>
      writeFullyAsync(writer.fd, allocate ? [bytes, padding] : [bytes], writer.size, next)
    runAll([
      DSYNC === 0 ? (next) => runSteps([write, (synced) => Fs.fdatasync(writer.fd, synced)], next) : write,
      ...directories.map((directory) => (next: (error: unknown) => void) => fsyncDirectory(directory, next))
    ], (error) => {
      this.syncing = false
      if (target.length <= KEPT_FRAMING_BYTES && (framing === undefined || framing.length < target.length)) framing = target
      let failure: unknown = error ?? undefined
      if (failure === undefined) {
        if (allocate) writer.allocated = end + PREALLOCATE_BYTES
        for (const directory of directories) this.unsyncedDirectories.delete(directory)
        try {
          this.committed(writer, records)
        } catch (cause) {
          failure = cause ?? new Error("the log compaction failed")
        }
      } else {
        abandon()
      }
      settle(failure)
      if (this.pending.length > 0) this.schedule(0)
    })
  }

  /** Records a durable batch in the index, then compacts. */
  private committed(writer: NonNullable<Log["writer"]>, records: ReadonlyArray<Header>): void {
    let offset = writer.size
    for (const record of records) {
      // This process framed the record: its header needs no check.
      this.apply(writer.segment, offset, record, false)
      offset += record.length
    }
    writer.size = offset
    writer.segment.parsedTo = offset
    this.compact()
  }

  /** The segment this process appends to: takes the lease and creates a segment first when needed. */
  private openWriter(): NonNullable<Log["writer"]> | "busy" {
    if (this.writer !== undefined) return this.writer
    if (this.lease === undefined) {
      let lease: ReturnType<Log["takeLease"]>
      // The last writer removes the directory of a log it emptied: make it again then.
      for (let attempt = 0;; attempt++) {
        let created = true
        try {
          Fs.mkdirSync(this.dir, { mode: 0o700 })
        } catch (cause) {
          if (errorCode(cause) !== "EEXIST") throw cause
          created = false
        }
        // The log's directory entry is made durable with the first batch, off the event loop.
        if (created) this.unsyncedDirectories.add(this.root)
        try {
          lease = this.takeLease()
          break
        } catch (cause) {
          if (errorCode(cause) !== "ENOENT" || attempt >= 3) throw cause
        }
      }
      if (lease === undefined) return "busy"
      // What earlier writers left, read under the lease: nobody else appends now.
      this.resetIndex()
      try {
        this.refreshNow()
      } catch (cause) {
        this.releaseLease(lease)
        throw cause
      }
      this.lease = lease
    }
    // A new segment: an earlier writer's last one may end in a torn tail.
    const number = (this.segments[this.segments.length - 1]?.number ?? 0) + 1
    const path = NodePath.join(this.dir, segmentName(number))
    const fd = Fs.openSync(path, Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_EXCL | DSYNC, 0o600)
    try {
      // The segment's directory entry is made durable with its first batch.
      this.unsyncedDirectories.add(this.dir)
      const segment: Segment = { number, path, ino: Fs.fstatSync(fd).ino, parsedTo: 0, parsedSize: 0, sealed: false, live: 0 }
      this.segments.push(segment)
      this.writer = { fd, segment, size: 0, allocated: 0 }
      return this.writer
    } catch (cause) {
      Fs.closeSync(fd)
      throw cause
    }
  }

  /** Takes the lease, breaking a dead holder's; undefined while another live holder has it. */
  private takeLease(): { readonly path: string; readonly token: string } | undefined {
    const path = NodePath.join(this.dir, LEASE)
    const token = `${process.pid} ${Math.random().toString(36).slice(2)}`
    for (let attempt = 0; attempt < 3; attempt++) {
      // Written aside and linked, so the lease never appears without its holder.
      const aside = this.settings.tempPath()
      Fs.writeFileSync(aside, token, { flag: "wx", mode: 0o600 })
      let taken: boolean
      try {
        Fs.linkSync(aside, path)
        taken = true
      } catch (cause) {
        if (errorCode(cause) !== "EEXIST") throw cause
        taken = false
      } finally {
        Fs.rmSync(aside, { force: true })
      }
      if (taken) return { path, token }
      const holder = ifMissing(() => Fs.readFileSync(path, "utf8"), undefined)
      if (holder === undefined) continue
      const pid = Number.parseInt(holder, 10)
      // A lease naming this process is a dead process's that had the same pid: this
      // process's storages share one `Log` per directory, and it holds no lease.
      if (!Number.isInteger(pid) || (pid !== process.pid && isProcessAlive(pid))) return undefined
      // Moved aside and removed only if it is still the dead holder's lease.
      const moved = this.settings.tempPath()
      const wasMoved = ifMissing(() => {
        Fs.renameSync(path, moved)
        return true
      }, false)
      if (wasMoved) {
        if (Fs.readFileSync(moved, "utf8") !== holder) {
          try {
            Fs.linkSync(moved, path)
          } catch {
            // A lease was taken meanwhile.
          }
        }
        Fs.rmSync(moved, { force: true })
      }
    }
    return undefined
  }

  private releaseLease(lease: { readonly path: string; readonly token: string }): void {
    if (ifMissing(() => Fs.readFileSync(lease.path, "utf8"), undefined) === lease.token) Fs.rmSync(lease.path, { force: true })
  }

  /** Removes the oldest segments once nothing in them is live; gives the log up once it is empty. */
  private compact(): void {
    let removed = false
    while (this.segments.length > 0) {
      const oldest = this.segments[0]!
      if (oldest.live > 0 || this.unknown.some((damage) => damage.segment === oldest)) break
      const active = this.writer?.segment === oldest
      if (active && this.writer!.size < this.settings.reclaimBytes) break
      if (active) {
        Fs.closeSync(this.writer!.fd)
        this.writer = undefined
      }
      // Oldest first: a tombstone is never removed while the record it hides remains.
      Fs.rmSync(oldest.path, { force: true })
      removed = true
      this.segments.shift()
    }
    // The removals are made durable with the next batch, in the thread pool: no caller
    // waits for a compaction, and the journal keeps them in order meanwhile.
    if (removed) this.unsyncedDirectories.add(this.dir)
    if (this.writer !== undefined && this.writer.size >= this.settings.segmentBytes) {
      // Sealed: the next write starts a new segment.
      Fs.closeSync(this.writer.fd)
      this.writer = undefined
    }
    if (this.segments.length === 0 && this.lease !== undefined) {
      this.releaseLease(this.lease)
      this.lease = undefined
      try {
        Fs.rmdirSync(this.dir)
        this.unsyncedDirectories.delete(this.dir)
      } catch {
        // Another process took the lease meanwhile, or the directory is gone.
      }
    }
  }
}

/** The logs this process has opened, by directory: storages over one root share them (and their lease). */
const opened = new Map<string, Log>()

const forget = (log: Log): void => {
  if (opened.get(log.dir) === log) opened.delete(log.dir)
}

/** The log in `dir`, shared by every storage of this process over the same root. */
export const logAt = (name: string, dir: string, root: string, settings: LogSettings): Log => {
  let log = opened.get(dir)
  if (log === undefined) {
    log = new Log(name, dir, root, settings)
    opened.set(dir, log)
  }
  return log
}
