/**
 * The append rules of durable streams as plain functions (the protocol's checks in its
 * order of precedence, PROTOCOL.md 5.2 and 5.2.1), and the per-path queue that lets one
 * fiber commit the appends waiting on a stream in one pass (group commit; see
 * docs/http-streams.md#the-write-path). engine.ts runs them against storage.
 */
import { Buffer } from "node:buffer"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { CachedChunk } from "./chunkCache.ts"
import {
  type ChunkRecord,
  formatOffset,
  type Head,
  isJson,
  jsonChunkData,
  jsonMessages,
  mediaType,
  parseDecimal,
  type PathRecord,
  type ProducerState
} from "./model.ts"
import { type AppendInput, type AppendResult, StreamError } from "./types.ts"

const refuse = (reason: StreamError["reason"], message: string, extra: Partial<StreamError> = {}) =>
  new StreamError({ reason, message, ...extra })

/** An idempotent producer's headers, parsed. */
export interface Producer {
  readonly id: string
  readonly epoch: number
  readonly seq: number
}

/** The producer an append names, none, or why its headers are refused. */
export const parseProducer = (input: AppendInput): Producer | undefined | StreamError => {
  const given = (input.producerId === undefined ? 0 : 1) + (input.producerEpoch === undefined ? 0 : 1) +
    (input.producerSeq === undefined ? 0 : 1)
  if (given === 0) return undefined
  if (given !== 3) return refuse("BadRequest", "Producer-Id, Producer-Epoch and Producer-Seq go together")
  if (input.producerId!.length === 0) return refuse("BadRequest", "Producer-Id is empty")
  const epoch = parseDecimal(input.producerEpoch!.trim())
  const seq = parseDecimal(input.producerSeq!.trim())
  if (epoch === undefined || seq === undefined) {
    return refuse("BadRequest", "Producer-Epoch and Producer-Seq must be non-negative integers")
  }
  return { id: input.producerId!, epoch, seq }
}

/** The stored data of a body. */
export interface ChunkData {
  readonly d: string
  readonly z: number
  readonly n?: number
}

/** The data of an append body for a stream of `contentType`, or why it is refused. */
export const bodyData = (contentType: string, body: Uint8Array, forCreate: boolean): ChunkData | StreamError => {
  if (!isJson(contentType)) {
    return { d: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64"), z: body.byteLength }
  }
  if (body.byteLength === 0) return { d: "", z: 0, n: 0 }
  const messages = jsonMessages(body)
  if (messages === undefined) return refuse("BadRequest", "the body is not valid JSON")
  if (messages.length === 0 && !forCreate) return refuse("BadRequest", "an empty JSON array appends nothing")
  return { ...jsonChunkData(messages), n: messages.length }
}

/** One append's data, ready to join a chunk: a JSON append's messages, or a binary one's bytes. */
export interface Part {
  /** Its length in offset units (a JSON message is its UTF-8 length plus one). */
  readonly z: number
  readonly messages: ReadonlyArray<string> | undefined
  readonly bytes: Uint8Array | undefined
}

const NO_PART: Part = { z: 0, messages: undefined, bytes: undefined }

/**
 * What an append does at a head: answer without writing, or write `part`, leaving the
 * stream in state `head` (its bytes moved past the part; its index still the chunk's).
 */
export type Decision =
  | { readonly _tag: "Done"; readonly result: AppendResult }
  | { readonly _tag: "Write"; readonly part: Part; readonly head: Head }

/** The part of an append body for a stream of `contentType`, or why it is refused. */
const partOf = (contentType: string, body: Uint8Array): Part | StreamError => {
  if (!isJson(contentType)) return { z: body.byteLength, messages: undefined, bytes: body }
  const messages = jsonMessages(body)
  if (messages === undefined) return refuse("BadRequest", "the body is not valid JSON")
  if (messages.length === 0) return refuse("BadRequest", "an empty JSON array appends nothing")
  let z = 0
  for (const message of messages) z += Buffer.byteLength(message) + 1
  return { z, messages, bytes: undefined }
}

/** The protocol's checks of one append at `head`, in their order of precedence (PROTOCOL.md 5.2, 5.2.1). */
export const decide = (
  record: PathRecord,
  head: Head,
  input: AppendInput,
  producer: Producer | undefined,
  close: boolean
): Decision | StreamError => {
  const hasBody = input.body.byteLength > 0
  const state: ProducerState | undefined = producer === undefined ? undefined : head.producers[producer.id]
  if (producer !== undefined && state !== undefined) {
    if (producer.epoch < state[0]) {
      return refuse("StaleEpoch", `producer epoch ${producer.epoch} is older than ${state[0]}`, { currentEpoch: state[0] })
    }
    if (producer.epoch === state[0] && producer.seq <= state[1]) {
      return {
        _tag: "Done",
        result: {
          outcome: "duplicate",
          nextOffset: formatOffset(head),
          closed: head.closed,
          producer: { epoch: state[0], seq: state[1] }
        }
      }
    }
  }
  if (head.closed) {
    if (!hasBody && close && producer === undefined) {
      return { _tag: "Done", result: { outcome: "duplicate", nextOffset: formatOffset(head), closed: true } }
    }
    return refuse("Conflict", "the stream is closed", { closed: true, nextOffset: formatOffset(head) })
  }
  let producers = head.producers
  if (producer !== undefined) {
    if (state !== undefined && producer.epoch > state[0] && producer.seq !== 0) {
      return refuse("BadRequest", `a new producer epoch starts at sequence 0, not ${producer.seq}`)
    }
    const expected = state === undefined || producer.epoch > state[0] ? 0 : state[1] + 1
    if (producer.seq !== expected) {
      return refuse("SequenceGap", `expected producer sequence ${expected}, received ${producer.seq}`, {
        expectedSeq: expected,
        receivedSeq: producer.seq
      })
    }
    producers = { ...producers, [producer.id]: [producer.epoch, producer.seq] }
  }
  if (hasBody) {
    if (input.contentType === undefined || input.contentType.trim() === "") {
      return refuse("BadRequest", "an append with a body needs a Content-Type")
    }
    if (mediaType(input.contentType) !== mediaType(record.ct)) {
      return refuse("Conflict", `content type ${input.contentType} does not match the stream's ${record.ct}`)
    }
  }
  let seq = head.seq
  if (input.seq !== undefined) {
    if (head.seq !== undefined && input.seq <= head.seq) {
      return refuse("Conflict", `Stream-Seq ${input.seq} is not after ${head.seq}`)
    }
    seq = input.seq
  }
  const part = hasBody ? partOf(record.ct, input.body) : NO_PART
  if (part instanceof StreamError) return part
  return {
    _tag: "Write",
    part,
    head: {
      index: head.index,
      bytes: head.bytes + part.z,
      closed: close,
      seq,
      producers,
      closedBy: close && producer !== undefined ? [producer.id, producer.epoch, producer.seq] : undefined
    }
  }
}

/**
 * What one group of a batch does: the appends it decided (a prefix of those given), the
 * chunk their data makes together, and each one's answer.
 */
export interface GroupPlan {
  /** How many of the appends it decided. */
  readonly taken: number
  /** The chunk to commit at the head's index, when any of them writes. */
  readonly chunk: ChunkRecord | undefined
  /** That chunk's data, decoded, for the cache. */
  readonly entry: CachedChunk | undefined
  /** The head after the chunk (the head given when there is none). */
  readonly after: Head
  /** Each decided append's answer: right once the chunk commits (with none, at an up-to-date head). */
  readonly exits: ReadonlyArray<Exit.Exit<AppendResult, StreamError>>
  /** Which decided appends write (their fate is the chunk's). */
  readonly writes: ReadonlyArray<boolean>
  /** Whether any was refused. */
  readonly refused: boolean
}

/**
 * Decides `items` in order at `head`, each against the state the ones before it left,
 * and joins the data of those that write into one chunk at the head's index
 * (docs/http-streams.md#the-write-path). The group ends before an append that would
 * take it past `maxUnits` offset units or that closes without data, and after one that
 * closes, so each answer names a position no other append in it shares: one that ends
 * inside the chunk gets `<index>_<its end>`, the last writer and those after it the
 * chunk's end. Pure: the caller commits the chunk, and decides the same items again at
 * a new head when another writer took the index.
 */
export const planGroup = (
  record: PathRecord,
  head: Head,
  items: ReadonlyArray<PendingAppend>,
  maxUnits: number
): GroupPlan => {
  const parts: Array<Part> = []
  const ends: Array<number> = []
  const decided: Array<{ readonly decision: Decision | StreamError; readonly end: number }> = []
  let state = head
  let lastWrite = -1
  let taken = 0
  while (taken < items.length) {
    const item = items[taken]!
    const decision = decide(record, state, item.input, item.producer, item.close)
    const write = !(decision instanceof StreamError) && decision._tag === "Write" ? decision : undefined
    if (write !== undefined && parts.length > 0) {
      if (write.part.z === 0 || state.bytes - head.bytes + write.part.z > maxUnits) break
    }
    if (write !== undefined) {
      parts.push(write.part)
      state = write.head
      lastWrite = taken
      ends.push(state.bytes - head.bytes)
    }
    decided.push({ decision, end: state.bytes })
    taken++
    if (write !== undefined && state.closed) break
  }
  const written = parts.length > 0
  const after: Head = written ? { ...state, index: head.index + 1 } : head
  const tail = formatOffset(after)
  const exits: Array<Exit.Exit<AppendResult, StreamError>> = []
  const writes: Array<boolean> = []
  let refused = false
  for (let k = 0; k < decided.length; k++) {
    const { decision, end } = decided[k]!
    const nextOffset = written && k >= lastWrite ? tail : formatOffset({ index: head.index, bytes: end })
    writes.push(false)
    if (decision instanceof StreamError) {
      refused = true
      exits.push(Exit.fail(
        decision.nextOffset === undefined
          ? decision
          : new StreamError({ reason: decision.reason, message: decision.message, closed: decision.closed, nextOffset })
      ))
    } else if (decision._tag === "Done") {
      exits.push(Exit.succeed({ ...decision.result, nextOffset }))
    } else {
      writes[k] = true
      const producer = items[k]!.producer
      exits.push(Exit.succeed({
        outcome: "appended",
        nextOffset,
        closed: decision.head.closed,
        producer: producer === undefined ? undefined : { epoch: producer.epoch, seq: producer.seq }
      }))
    }
  }
  if (!written) return { taken, chunk: undefined, entry: undefined, after, exits, writes, refused }
  const joined = joinParts(isJson(record.ct), parts)
  let hasProducers = false
  for (const _ in state.producers) {
    hasProducers = true
    break
  }
  const e = ends.length > 1 ? ends.slice(0, -1) : undefined
  const chunk: ChunkRecord = {
    a: head.bytes,
    z: state.bytes - head.bytes,
    d: joined.d,
    ...(joined.messages === undefined ? {} : { n: joined.messages.length }),
    ...(e === undefined ? {} : { e }),
    ...(state.closed ? { c: 1 as const } : {}),
    ...(state.seq === undefined ? {} : { s: state.seq }),
    ...(hasProducers ? { p: state.producers } : {}),
    ...(state.closedBy === undefined ? {} : { k: state.closedBy })
  }
  const entry: CachedChunk = { a: chunk.a, z: chunk.z, bytes: joined.bytes, messages: joined.messages, e }
  return { taken, chunk, entry, after, exits, writes, refused }
}

/** The stored data of parts written as one chunk, and its decoded form. */
const joinParts = (json: boolean, parts: ReadonlyArray<Part>) => {
  if (json) {
    const messages: Array<string> = []
    for (const part of parts) if (part.messages !== undefined) for (const message of part.messages) messages.push(message)
    return { d: messages.join(","), messages, bytes: undefined }
  }
  // A copy: the caller may reuse its body's memory once answered.
  const bytes = Buffer.concat(parts.flatMap((part) => part.bytes === undefined ? [] : [part.bytes]))
  return { d: bytes.toString("base64"), messages: undefined, bytes }
}

/** One append waiting in its path's queue. */
export interface PendingAppend {
  readonly input: AppendInput
  readonly producer: Producer | undefined
  readonly close: boolean
  /** Its outcome, once its batch ran. */
  exit: Exit.Exit<AppendResult, StreamError> | undefined
  /** Set when its fiber is to commit the queue next (the one before it finished). */
  lead: boolean
  woken: boolean
  resume: (() => void) | undefined
}

/**
 * Appends to one path queue up while one fiber commits: the first to arrive leads, and
 * commits everything queued in batches until its own append is done; then the next in
 * line leads. `run` commits a batch (it sets every `exit`, and never fails).
 */
export const makeQueues = (
  run: (path: string, batch: ReadonlyArray<PendingAppend>) => Effect.Effect<void>
) => {
  const queues = new Map<string, Array<PendingAppend>>()
  /** Paths whose last batch ended in this turn of the event loop. */
  const busy = new Set<string>()
  let clearing = false
  const markBusy = (path: string) => {
    busy.add(path)
    if (clearing) return
    clearing = true
    setImmediate(() => {
      clearing = false
      busy.clear()
    })
  }

  const wake = (item: PendingAppend, lead: boolean) => {
    item.lead = lead
    item.woken = true
    const resume = item.resume
    item.resume = undefined
    resume?.()
  }

  /** Waits for its turn: then it leads the next batch, or its own batch has answered it. */
  const turn = (path: string, queue: Array<PendingAppend>, item: PendingAppend) =>
    Effect.callback<AppendResult, StreamError>((resume) => {
      // A leader handed the queue lets the scheduler run once first: the appends just
      // answered make room for their writers' next ones, which then join its batch.
      const go = () => resume(item.lead ? Effect.andThen(Effect.yieldNow, lead(path, queue, item)) : outcome(item))
      if (item.woken) return go()
      item.resume = go
    })

  const outcome = (item: PendingAppend): Effect.Effect<AppendResult, StreamError> =>
    item.exit ?? Effect.die(new Error("an append left its batch without an outcome"))

  const lead = (path: string, queue: Array<PendingAppend>, self: PendingAppend): Effect.Effect<AppendResult, StreamError> =>
    Effect.gen(function*() {
      while (self.exit === undefined) {
        const batch = queue.splice(0, queue.length)
        if (batch.length === 0) break
        const ran = yield* Effect.exit(run(path, batch))
        // A defect in the batch is every unanswered append's outcome: none is left waiting.
        if (ran._tag === "Failure") for (const item of batch) item.exit ??= Exit.failCause(ran.cause)
        for (const item of batch) if (item !== self) wake(item, false)
      }
      const next = queue[0]
      if (next !== undefined) wake(next, true)
      else if (queues.get(path) === queue) queues.delete(path)
      markBusy(path)
      return yield* outcome(self)
    })

  /**
   * Runs one append through its path's queue: uninterruptible once queued, so a batch
   * never loses the fiber that leads it (an append is a bounded storage write).
   */
  const submit = (path: string, input: AppendInput, producer: Producer | undefined, close: boolean) =>
    Effect.uninterruptible(Effect.suspend(() => {
      const item: PendingAppend = { input, producer, close, exit: undefined, lead: false, woken: false, resume: undefined }
      const queue = queues.get(path)
      if (queue === undefined) {
        const fresh = [item]
        queues.set(path, fresh)
        // Appends that follow one another within one turn of the event loop are concurrent
        // writers: the leader lets the scheduler run once, so theirs join its batch. A lone
        // awaited append (one per request) commits at once.
        return busy.has(path) ? Effect.andThen(Effect.yieldNow, lead(path, fresh, item)) : lead(path, fresh, item)
      }
      queue.push(item)
      return turn(path, queue, item)
    }))

  return { submit }
}
