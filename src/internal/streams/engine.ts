/**
 * The implementation of `DurableStreams` over a `StorageAdapter`; see model.ts for the
 * records and docs/architecture.md#http-durable-streams for where each rule lives.
 *
 * Appends to one path are serialised in this process by a lock; across processes the
 * compare-and-set of the next chunk key decides (the loser re-reads the head and
 * validates again), so producer and `Stream-Seq` checks hold for several servers on one
 * Postgres too.
 */
import { Buffer } from "node:buffer"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import type { StorageError } from "../../Errors.ts"
import {
  type AppendInput,
  type AppendResult,
  type CreateInput,
  type CreateResult,
  type DurableStreamsOptions,
  type ReadResult,
  StreamError,
  type StreamInfo
} from "./types.ts"
import type { StorageAdapterShape } from "../../services/StorageAdapter.ts"
import { randomId } from "../randomId.ts"
import * as ChunkCache from "./chunkCache.ts"
import { decodeChunk } from "./chunkCache.ts"
import * as Reads from "./reads.ts"
import {
  type ChunkRecord,
  chunkBytes,
  chunkKey,
  chunkMessages,
  chunkPrefix,
  emptyHead,
  formatOffset,
  type Head,
  headAfter,
  isJson,
  jsonChunkData,
  jsonMessages,
  mediaType,
  ownerOf,
  parseDecimal,
  parseOffset,
  parseTimestamp,
  type PathRecord,
  pathKey,
  type Position,
  type ProducerState
} from "./model.ts"

const DEFAULT_CONTENT_TYPE = "application/octet-stream"
const MAX_CACHED_HEADS = 10_000
const DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
const EMPTY = Buffer.alloc(0)

const fail = (reason: StreamError["reason"], message: string, extra: Partial<StreamError> = {}) =>
  Effect.fail(new StreamError({ reason, message, ...extra }))

const storageFailed = (error: StorageError) => new StreamError({ reason: "Storage", message: error.message })

/** Builds the service's operations. */
export const make = Effect.fnUntraced(function*(storage: StorageAdapterShape, options: DurableStreamsOptions) {
  if (storage.compareAndSet === undefined) {
    return yield* Effect.die(new Error("DurableStreams needs a storage with compareAndSet"))
  }
  const cas = storage.compareAndSet
  const maxReadBytes = options.maxReadBytes ?? 1024 * 1024
  const cache = ChunkCache.make(options.cacheBytes ?? DEFAULT_CACHE_BYTES)
  const { chunksFrom, joinBytes } = Reads.make(storage, cache, maxReadBytes)
  const pollMillis = options.pollMillis ?? (options.signals === undefined ? 1_000 : 30_000)
  /** The last head seen per stream id: a hint, always checked against the next chunk key. */
  const heads = new Map<string, Head>()
  /** Keeps a head, the most recent last; the oldest is forgotten past MAX_CACHED_HEADS (it is only a hint). */
  const rememberHead = (id: string, head: Head) => {
    heads.delete(id)
    heads.set(id, head)
    if (heads.size > MAX_CACHED_HEADS) heads.delete(heads.keys().next().value!)
  }
  const waiters = new Map<string, Set<() => void>>()
  const locks = new Map<string, { readonly lock: Semaphore.Semaphore; users: number }>()

  const wake = (id: string) => {
    const set = waiters.get(id)
    if (set === undefined) return
    waiters.delete(id)
    for (const resume of set) resume()
  }

  if (options.signals !== undefined) {
    yield* options.signals.changes.pipe(
      Stream.runForEach((id) => Effect.sync(() => wake(id))),
      Effect.forkScoped
    )
  }

  const announce = (id: string) =>
    Effect.andThen(Effect.sync(() => wake(id)), options.signals === undefined ? Effect.void : options.signals.publish(id))

  const withLock = <A, E>(path: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      let entry = locks.get(path)
      if (entry === undefined) {
        entry = { lock: Semaphore.makeUnsafe(1), users: 0 }
        locks.set(path, entry)
      }
      const held = entry
      held.users++
      return held.lock.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          held.users--
          if (held.users === 0) locks.delete(path)
        }))
      )
    })

  const getValue = (key: string) => Effect.mapError(storage.get(key), storageFailed)

  const loadRecord = (path: string) =>
    Effect.map(getValue(pathKey(path)), (value) => Option.getOrUndefined(value) as PathRecord | undefined)

  const isExpired = (record: PathRecord, now: number): boolean => {
    if (record.exp !== undefined && (parseTimestamp(record.exp) ?? Infinity) <= now) return true
    return record.ttl !== undefined && record.t + record.ttl * 1000 <= now
  }

  /** The record at `path` that a client may use: none (404), soft-deleted (410), expired (removed, 404). */
  const liveRecord = (path: string): Effect.Effect<PathRecord, StreamError> =>
    Effect.gen(function*() {
      const record = yield* loadRecord(path)
      if (record === undefined) return yield* fail("NotFound", `no stream at ${path}`)
      if (record.gone === 1) return yield* fail("Gone", `the stream at ${path} was deleted`)
      const now = yield* Clock.currentTimeMillis
      if (isExpired(record, now)) {
        yield* removeRecord(path, record)
        return yield* fail("NotFound", `the stream at ${path} expired`)
      }
      return record
    })

  /** Resets a sliding TTL (stored, so every process sees it); at most a few writes a second. */
  const touch = (path: string, record: PathRecord) =>
    Effect.gen(function*() {
      if (record.ttl === undefined) return
      const now = yield* Clock.currentTimeMillis
      if (now - record.t < Math.min(1_000, record.ttl * 250)) return
      yield* Effect.ignore(cas(pathKey(path), Option.some(record), { ...record, t: now }))
    })

  const readChunk = (id: string, index: number) =>
    Effect.map(getValue(chunkKey(id, index)), (value) => Option.getOrUndefined(value) as ChunkRecord | undefined)

  /**
   * The head of a stream: the cached one moved on past every chunk that exists since.
   * A writer may `trustCache`: its compare-and-set of the next chunk key fails anyway
   * when another process wrote it, and then it looks again.
   */
  const currentHead = (record: PathRecord, trustCache = false): Effect.Effect<Head, StreamError> =>
    Effect.gen(function*() {
      let head = heads.get(record.id)
      if (head !== undefined && trustCache) return head
      if (head === undefined) head = yield* discoverHead(record)
      for (;;) {
        const next = yield* readChunk(record.id, head.index)
        if (next === undefined) break
        head = headAfter(head.index, next)
      }
      rememberHead(record.id, head)
      return head
    })

  /** Finds the tail of a stream this process has not seen: doubling probes, then a binary search. */
  const discoverHead = (record: PathRecord): Effect.Effect<Head, StreamError> =>
    Effect.gen(function*() {
      const start = record.base.index
      if ((yield* readChunk(record.id, start)) === undefined) return emptyHead(record.base)
      let low = start
      let step = 1
      let high = start + step
      while ((yield* readChunk(record.id, high)) !== undefined) {
        low = high
        step *= 2
        high = start + step
      }
      while (high - low > 1) {
        const mid = Math.floor((low + high) / 2)
        if ((yield* readChunk(record.id, mid)) !== undefined) low = mid
        else high = mid
      }
      const last = yield* readChunk(record.id, low)
      return last === undefined ? emptyHead(record.base) : headAfter(low, last)
    })

  const infoOf = (record: PathRecord, head: Head): StreamInfo => ({
    contentType: record.ct,
    nextOffset: formatOffset(head),
    closed: head.closed,
    ttlSeconds: record.ttl,
    expiresAt: record.exp
  })

  /** Commits `chunk` at the head's index; fails with none when another writer took the index. */
  const commit = (record: PathRecord, index: number, chunk: ChunkRecord) =>
    Effect.mapError(cas(chunkKey(record.id, index), Option.none(), chunk), storageFailed)

  // ---------------------------------------------------------------- delete / GC

  const deleteChunks = (id: string) =>
    Effect.gen(function*() {
      const keys = yield* Effect.mapError(storage.list(chunkPrefix(id)), storageFailed)
      if (storage.writeAll !== undefined && keys.length > 0) {
        yield* Effect.mapError(storage.writeAll(keys.map((key) => ({ op: "delete" as const, key }))), storageFailed)
      } else {
        yield* Effect.forEach(keys, (key) => Effect.mapError(storage.delete(key), storageFailed), { discard: true })
      }
      heads.delete(id)
      cache.drop(id)
    })

  /** Changes a record by compare-and-set until it holds; none when the record is gone. */
  const updateRecord = (path: string, change: (record: PathRecord) => PathRecord | undefined) =>
    Effect.gen(function*() {
      for (;;) {
        const record = yield* loadRecord(path)
        if (record === undefined) return undefined
        const next = change(record)
        if (next === undefined) return record
        if (yield* Effect.mapError(cas(pathKey(path), Option.some(record), next), storageFailed)) return next
      }
    })

  /** Drops one fork's reference to the stream at `path`, collecting it when it was deleted and unread. */
  const releaseSource = (path: string, sourceId: string): Effect.Effect<void, StreamError> =>
    Effect.gen(function*() {
      const after = yield* updateRecord(
        path,
        (record) => record.id === sourceId ? { ...record, forks: Math.max(0, record.forks - 1) } : undefined
      )
      if (after !== undefined && after.id === sourceId && after.gone === 1 && after.forks === 0) {
        yield* purge(path, after)
      }
    })

  /** Removes a record and its chunks for good, then releases what it forked from. */
  const purge = (path: string, record: PathRecord): Effect.Effect<void, StreamError> =>
    Effect.gen(function*() {
      const removed = yield* Effect.mapError(
        storage.writeAll !== undefined
          ? Effect.as(storage.writeAll([{ op: "delete", key: pathKey(path) }]), true)
          : Effect.as(storage.delete(pathKey(path)), true),
        storageFailed
      )
      if (!removed) return
      yield* deleteChunks(record.id)
      yield* announce(record.id)
      if (record.fork !== undefined && record.anc.length > 0) yield* releaseSource(record.fork.path, record.anc[0]![0])
    })

  /** Deletes the stream `record` at `path`: soft while forks read it, else for good. */
  const removeRecord = (path: string, record: PathRecord): Effect.Effect<void, StreamError> =>
    record.forks > 0
      ? Effect.asVoid(updateRecord(path, (current) => current.id === record.id ? { ...current, gone: 1 } : undefined))
      : Effect.gen(function*() {
        const swapped = yield* Effect.mapError(cas(pathKey(path), Option.some(record), { ...record, gone: 1 }), storageFailed)
        if (!swapped) return
        yield* purge(path, { ...record, gone: 1 })
      })

  // ---------------------------------------------------------------- reads

  const chunkAt = (record: PathRecord, index: number) => readChunk(ownerOf(record, index), index)

  /** Where a read offset points: -1 / absent is the start, `now` the tail; a token must be at or before the tail. */
  const resolveOffset = (record: PathRecord, head: Head, offset: string | undefined) =>
    Effect.suspend((): Effect.Effect<Position, StreamError> => {
      if (offset === undefined || offset === "-1") return Effect.succeed({ index: 0, bytes: 0 })
      if (offset === "now") return Effect.succeed({ index: head.index, bytes: head.bytes })
      const position = parseOffset(offset)
      if (position === undefined) return fail("BadRequest", `malformed offset ${JSON.stringify(offset)}`)
      if (position.index > head.index || (position.index === head.index && position.bytes !== head.bytes)) {
        return fail("BadRequest", `offset ${offset} is beyond the tail of ${formatOffset(head)}`)
      }
      return Effect.succeed(position)
    })

  const read = (path: string, offset: string | undefined): Effect.Effect<ReadResult, StreamError> =>
    Effect.gen(function*() {
      const record = yield* liveRecord(path)
      yield* touch(path, record)
      const head = yield* currentHead(record)
      const start = yield* resolveOffset(record, head, offset)
      const json = isJson(record.ct)
      const chunks = offset === "now" ? [] : yield* chunksFrom(record, start, head, json)
      const messages: Array<string> = []
      if (json) for (const chunk of chunks) for (const message of chunk.messages!) messages.push(message)
      const last = chunks[chunks.length - 1]
      const next: Position = last === undefined ? start : { index: start.index + chunks.length, bytes: last.a + last.z }
      const upToDate = next.index === head.index
      return {
        contentType: record.ct,
        json,
        bytes: json ? EMPTY : joinBytes(record, start.index, chunks),
        messages,
        startOffset: formatOffset(start),
        nextOffset: formatOffset(next),
        upToDate,
        closed: upToDate && head.closed,
        streamId: record.id
      }
    })

  const head = (path: string) =>
    Effect.gen(function*() {
      const record = yield* liveRecord(path)
      return infoOf(record, yield* currentHead(record))
    })

  const awaitChange = (path: string, offset: string, timeout: Duration.Input) =>
    Effect.gen(function*() {
      const position = parseOffset(offset)
      if (position === undefined) return yield* fail("BadRequest", `malformed offset ${JSON.stringify(offset)}`)
      const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(Duration.fromInputUnsafe(timeout))
      for (;;) {
        const record = yield* liveRecord(path)
        let resume: (() => void) | undefined
        let woken = false
        const signalled = Effect.callback<void>((done) => {
          resume = () => {
            woken = true
            done(Effect.void)
          }
          let set = waiters.get(record.id)
          if (set === undefined) waiters.set(record.id, set = new Set())
          set.add(resume)
          return Effect.sync(() => {
            const set = waiters.get(record.id)
            set?.delete(resume!)
            if (set?.size === 0) waiters.delete(record.id)
          })
        })
        const current = yield* currentHead(record)
        if (current.index > position.index || current.closed) return true
        const now = yield* Clock.currentTimeMillis
        if (now >= deadline) return false
        yield* Effect.raceFirst(signalled, Effect.sleep(Duration.millis(Math.min(pollMillis, deadline - now))))
        // Woken by an append or a delete (here, or announced by another process): the
        // caller's read finds out which, without this wait reading the stream again.
        if (woken) return true
      }
    })

  // ---------------------------------------------------------------- appends

  interface Producer {
    readonly id: string
    readonly epoch: number
    readonly seq: number
  }

  const parseProducer = (input: AppendInput): Effect.Effect<Producer | undefined, StreamError> => {
    const given = [input.producerId, input.producerEpoch, input.producerSeq].filter((value) => value !== undefined)
    if (given.length === 0) return Effect.succeed(undefined)
    if (given.length !== 3) return fail("BadRequest", "Producer-Id, Producer-Epoch and Producer-Seq go together")
    if (input.producerId!.length === 0) return fail("BadRequest", "Producer-Id is empty")
    const epoch = parseDecimal(input.producerEpoch!.trim())
    const seq = parseDecimal(input.producerSeq!.trim())
    if (epoch === undefined || seq === undefined) {
      return fail("BadRequest", "Producer-Epoch and Producer-Seq must be non-negative integers")
    }
    return Effect.succeed({ id: input.producerId!, epoch, seq })
  }

  /** The data of an append body for a stream of `contentType`, or why it is refused. */
  const bodyChunk = (contentType: string, body: Uint8Array, forCreate: boolean) =>
    Effect.suspend((): Effect.Effect<{ readonly d: string; readonly z: number; readonly n?: number }, StreamError> => {
      if (!isJson(contentType)) {
        return Effect.succeed({ d: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64"), z: body.byteLength })
      }
      if (body.byteLength === 0) return Effect.succeed({ d: "", z: 0, n: 0 })
      const messages = jsonMessages(body)
      if (messages === undefined) return fail("BadRequest", "the body is not valid JSON")
      if (messages.length === 0 && !forCreate) return fail("BadRequest", "an empty JSON array appends nothing")
      return Effect.succeed({ ...jsonChunkData(messages), n: messages.length })
    })

  const append = (input: AppendInput): Effect.Effect<AppendResult, StreamError> =>
    Effect.gen(function*() {
      const producer = yield* parseProducer(input)
      const close = input.close === true
      if (input.body.byteLength === 0 && !close) return yield* fail("BadRequest", "an append needs a body")
      return yield* withLock(input.path, appendLocked(input, producer, close))
    })

  const appendLocked = (input: AppendInput, producer: Producer | undefined, close: boolean) =>
    Effect.gen(function*() {
      for (;;) {
        const record = yield* liveRecord(input.path)
        const trusted = heads.has(record.id)
        const head = yield* currentHead(record, true)
        const decision = yield* decide(record, head, input, producer, close).pipe(
          // A refusal on a cached head is checked against storage first: another process may have moved it.
          Effect.catch((error) =>
            trusted
              ? Effect.flatMap(currentHead(record), (fresh) =>
                fresh.index === head.index ? Effect.fail(error) : Effect.succeed({ _tag: "Retry" } as const))
              : Effect.fail(error)
          )
        )
        if (decision._tag === "Retry") continue
        if (decision._tag === "Done") {
          yield* touch(input.path, record)
          return decision.result
        }
        if (yield* commit(record, head.index, decision.chunk)) {
          const after = headAfter(head.index, decision.chunk)
          rememberHead(record.id, after)
          cache.put(record.id, head.index, decodeChunk(decision.chunk, isJson(record.ct)))
          yield* announce(record.id)
          yield* touch(input.path, record)
          return {
            outcome: "appended" as const,
            nextOffset: formatOffset(after),
            closed: after.closed,
            producer: producer === undefined ? undefined : { epoch: producer.epoch, seq: producer.seq }
          }
        }
        // Another process committed this index first: re-read and validate again.
        heads.delete(record.id)
      }
    })

  type Decision =
    | { readonly _tag: "Done"; readonly result: AppendResult }
    | { readonly _tag: "Write"; readonly chunk: ChunkRecord }

  /** The protocol's checks, in its order of precedence (PROTOCOL.md 5.2, 5.2.1). */
  const decide = (
    record: PathRecord,
    head: Head,
    input: AppendInput,
    producer: Producer | undefined,
    close: boolean
  ): Effect.Effect<Decision, StreamError> =>
    Effect.gen(function*() {
      const tail = formatOffset(head)
      const hasBody = input.body.byteLength > 0
      const state: ProducerState | undefined = producer === undefined ? undefined : head.producers[producer.id]
      if (producer !== undefined && state !== undefined) {
        if (producer.epoch < state[0]) {
          return yield* fail("StaleEpoch", `producer epoch ${producer.epoch} is older than ${state[0]}`, {
            currentEpoch: state[0]
          })
        }
        if (producer.epoch === state[0] && producer.seq <= state[1]) {
          return {
            _tag: "Done",
            result: { outcome: "duplicate", nextOffset: tail, closed: head.closed, producer: { epoch: state[0], seq: state[1] } }
          }
        }
      }
      if (head.closed) {
        if (!hasBody && close && producer === undefined) {
          return { _tag: "Done", result: { outcome: "duplicate", nextOffset: tail, closed: true } }
        }
        return yield* fail("Conflict", "the stream is closed", { closed: true, nextOffset: tail })
      }
      let producers = head.producers
      if (producer !== undefined) {
        if (state !== undefined && producer.epoch > state[0] && producer.seq !== 0) {
          return yield* fail("BadRequest", `a new producer epoch starts at sequence 0, not ${producer.seq}`)
        }
        const expected = state === undefined || producer.epoch > state[0] ? 0 : state[1] + 1
        if (producer.seq !== expected) {
          return yield* fail("SequenceGap", `expected producer sequence ${expected}, received ${producer.seq}`, {
            expectedSeq: expected,
            receivedSeq: producer.seq
          })
        }
        producers = { ...producers, [producer.id]: [producer.epoch, producer.seq] }
      }
      if (hasBody) {
        if (input.contentType === undefined || input.contentType.trim() === "") {
          return yield* fail("BadRequest", "an append with a body needs a Content-Type")
        }
        if (mediaType(input.contentType) !== mediaType(record.ct)) {
          return yield* fail("Conflict", `content type ${input.contentType} does not match the stream's ${record.ct}`)
        }
      }
      let seq = head.seq
      if (input.seq !== undefined) {
        if (head.seq !== undefined && input.seq <= head.seq) {
          return yield* fail("Conflict", `Stream-Seq ${input.seq} is not after ${head.seq}`)
        }
        seq = input.seq
      }
      const data = hasBody ? yield* bodyChunk(record.ct, input.body, false) : { d: "", z: 0 }
      const chunk: ChunkRecord = {
        a: head.bytes,
        ...data,
        ...(close ? { c: 1 as const } : {}),
        ...(seq === undefined ? {} : { s: seq }),
        ...(Object.keys(producers).length === 0 ? {} : { p: producers }),
        ...(close && producer !== undefined ? { k: [producer.id, producer.epoch, producer.seq] as const } : {})
      }
      return { _tag: "Write", chunk }
    })

  // ---------------------------------------------------------------- create

  interface CreateConfig {
    readonly ct: string
    readonly ttl: number | undefined
    readonly exp: string | undefined
    readonly closed: boolean
    readonly fork: PathRecord["fork"]
  }

  const parseCreate = (input: CreateInput) =>
    Effect.gen(function*() {
      const ttl = input.ttl === undefined ? undefined : parseDecimal(input.ttl.trim())
      if (input.ttl !== undefined && ttl === undefined) {
        return yield* fail("BadRequest", `Stream-TTL must be a non-negative integer of seconds, not ${JSON.stringify(input.ttl)}`)
      }
      if (input.expiresAt !== undefined && parseTimestamp(input.expiresAt.trim()) === undefined) {
        return yield* fail("BadRequest", `Stream-Expires-At must be an RFC 3339 timestamp, not ${JSON.stringify(input.expiresAt)}`)
      }
      if (ttl !== undefined && input.expiresAt !== undefined) {
        return yield* fail("BadRequest", "give Stream-TTL or Stream-Expires-At, not both")
      }
      if (input.forkedFrom === undefined && (input.forkOffset !== undefined || input.forkSubOffset !== undefined)) {
        return yield* fail("BadRequest", "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From")
      }
      const sub = input.forkSubOffset === undefined ? 0 : parseDecimal(input.forkSubOffset.trim())
      if (sub === undefined) return yield* fail("BadRequest", "Stream-Fork-Sub-Offset must be a non-negative integer")
      if (input.forkOffset !== undefined && parseOffset(input.forkOffset) === undefined) {
        return yield* fail("BadRequest", `malformed Stream-Fork-Offset ${JSON.stringify(input.forkOffset)}`)
      }
      const contentType = input.contentType === undefined || input.contentType.trim() === ""
        ? undefined
        : input.contentType.trim()
      return { ttl, exp: input.expiresAt?.trim(), sub, contentType }
    })

  const create = (input: CreateInput): Effect.Effect<CreateResult, StreamError> =>
    Effect.gen(function*() {
      const parsed = yield* parseCreate(input)
      return yield* withLock(input.path, createLocked(input, parsed))
    })

  const sameConfig = (record: PathRecord, head: Head, wanted: CreateConfig): boolean =>
    mediaType(record.ct) === mediaType(wanted.ct) &&
    record.ttl === wanted.ttl &&
    (record.exp === undefined ? wanted.exp === undefined : wanted.exp !== undefined &&
      parseTimestamp(record.exp) === parseTimestamp(wanted.exp)) &&
    head.closed === wanted.closed &&
    JSON.stringify(record.fork ?? null) === JSON.stringify(wanted.fork ?? null)

  const createLocked = (
    input: CreateInput,
    parsed: Effect.Success<ReturnType<typeof parseCreate>>
  ): Effect.Effect<CreateResult, StreamError> =>
    Effect.gen(function*() {
      const existing = yield* existingRecord(input.path)
      const now = yield* Clock.currentTimeMillis
      const id = yield* randomId
      let base: Position = { index: 0, bytes: 0 }
      let anc: ReadonlyArray<readonly [string, number]> = []
      let ct = parsed.contentType ?? DEFAULT_CONTENT_TYPE
      let ttl = parsed.ttl
      let exp = parsed.exp
      let prefix: { readonly d: string; readonly z: number; readonly n?: number } | undefined
      let fork: PathRecord["fork"]
      let source: PathRecord | undefined
      if (input.forkedFrom !== undefined) {
        source = yield* liveRecord(input.forkedFrom).pipe(
          Effect.catchIf((error) => error.reason === "Gone", () => fail("Conflict", `the source ${input.forkedFrom} was deleted`))
        )
        if (parsed.contentType !== undefined && mediaType(parsed.contentType) !== mediaType(source.ct)) {
          return yield* fail("Conflict", `a fork has its source's content type ${source.ct}`)
        }
        ct = parsed.contentType ?? source.ct
        if (ttl === undefined && exp === undefined) {
          ttl = source.ttl
          exp = source.exp
        }
        const sourceHead = yield* currentHead(source)
        const at = input.forkOffset === undefined ? sourceHead : parseOffset(input.forkOffset)!
        if (at.index > sourceHead.index) {
          return yield* fail("BadRequest", `Stream-Fork-Offset ${input.forkOffset} is beyond the source's tail`)
        }
        base = { index: at.index, bytes: at.bytes }
        if (at.index === sourceHead.index) base = { index: sourceHead.index, bytes: sourceHead.bytes }
        anc = [[source.id, source.base.index], ...source.anc]
        fork = { path: input.forkedFrom, offset: formatOffset(base), sub: parsed.sub }
        if (parsed.sub > 0) {
          const cut = base.index < sourceHead.index ? yield* chunkAt(source, base.index) : undefined
          prefix = cut === undefined ? undefined : subPrefix(source.ct, cut, parsed.sub)
          if (prefix === undefined) {
            return yield* fail("BadRequest", `Stream-Fork-Sub-Offset ${parsed.sub} is past the next data boundary`)
          }
        }
      }
      const wanted: CreateConfig = { ct, ttl, exp, closed: input.closed === true, fork }
      if (existing !== undefined) {
        if (existing.gone === 1) return yield* fail("Conflict", `the stream at ${input.path} was deleted; its path is kept for its forks`)
        const existingHead = yield* currentHead(existing)
        if (!sameConfig(existing, existingHead, wanted)) {
          return yield* fail("Conflict", `a stream with another configuration exists at ${input.path}`)
        }
        return { ...infoOf(existing, existingHead), created: false }
      }
      const body = yield* bodyChunk(ct, input.body ?? new Uint8Array(0), true)
      const record: PathRecord = {
        v: 1,
        id,
        ct,
        ...(ttl === undefined ? {} : { ttl }),
        ...(exp === undefined ? {} : { exp }),
        t: now,
        ...(input.closed === true ? { cc: 1 as const } : {}),
        base,
        anc,
        ...(fork === undefined ? {} : { fork }),
        forks: 0
      }
      let head = emptyHead(base)
      const data = mergeData(ct, prefix, body)
      if (data.z > 0 || input.closed === true) {
        const chunk: ChunkRecord = { a: base.bytes, ...data, ...(input.closed === true ? { c: 1 as const } : {}) }
        yield* commit(record, base.index, chunk)
        head = headAfter(base.index, chunk)
      }
      if (source !== undefined) {
        const sourceId = source.id
        yield* updateRecord(input.forkedFrom!, (current) => current.id === sourceId ? { ...current, forks: current.forks + 1 } : undefined)
      }
      const created = yield* Effect.mapError(cas(pathKey(input.path), Option.none(), record), storageFailed)
      if (!created) {
        // Another process created it in between: drop ours and answer as for an existing stream.
        yield* deleteChunks(id)
        if (source !== undefined) yield* releaseSource(input.forkedFrom!, source.id)
        return yield* createLocked(input, parsed)
      }
      rememberHead(id, head)
      return { ...infoOf(record, head), created: true }
    })

  /** The record at a path as a create sees it: an expired one is removed first. */
  const existingRecord = (path: string) =>
    Effect.gen(function*() {
      const record = yield* loadRecord(path)
      if (record === undefined || record.gone === 1) return record
      if (isExpired(record, yield* Clock.currentTimeMillis)) {
        yield* removeRecord(path, record)
        return yield* loadRecord(path)
      }
      return record
    })

  const remove = (path: string) =>
    withLock(
      path,
      Effect.gen(function*() {
        const record = yield* liveRecord(path)
        yield* removeRecord(path, record)
        yield* announce(record.id)
      })
    )

  return { create, append, read, head, remove, awaitChange }
})

/** The first `sub` bytes (or JSON messages) of `chunk`, or undefined when it has fewer. */
const subPrefix = (contentType: string, chunk: ChunkRecord, sub: number) => {
  if (isJson(contentType)) {
    const messages = chunkMessages(chunk)
    if (sub > messages.length) return undefined
    const taken = messages.slice(0, sub)
    return { ...jsonChunkData(taken), n: taken.length }
  }
  const bytes = chunkBytes(chunk)
  if (sub > bytes.byteLength) return undefined
  const taken = bytes.subarray(0, sub)
  return { d: taken.toString("base64"), z: taken.byteLength }
}

/** A fork's inherited prefix followed by its initial body, as one chunk's data. */
const mergeData = (
  contentType: string,
  prefix: { readonly d: string; readonly z: number; readonly n?: number } | undefined,
  body: { readonly d: string; readonly z: number; readonly n?: number }
): { readonly d: string; readonly z: number; readonly n?: number } => {
  if (prefix === undefined || prefix.z === 0) return body
  if (body.z === 0) return prefix
  if (isJson(contentType)) {
    const messages = [...chunkMessages({ a: 0, ...prefix }), ...chunkMessages({ a: 0, ...body })]
    return { ...jsonChunkData(messages), n: messages.length }
  }
  const bytes = Buffer.concat([Buffer.from(prefix.d, "base64"), Buffer.from(body.d, "base64")])
  return { d: bytes.toString("base64"), z: bytes.byteLength }
}
