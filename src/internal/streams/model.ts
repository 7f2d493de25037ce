/**
 * The stored shapes of a durable stream and the pure rules over them: offsets, keys,
 * header syntax, JSON-mode framing. See docs/http-streams.md#storage-layout.
 *
 * A stream is a path record (`durable-streams/p/<path>`: its config, its random id,
 * its fork ancestry, its sliding-TTL touch time) and numbered chunk records
 * (`durable-streams/c/<id>/<index>`). Chunk `i` is committed by a compare-and-set of
 * its absent key, so of several writers (processes) exactly one wins each index, and
 * the chunk carries the stream's state after it (closed, `Stream-Seq`, producers), so
 * an append and its state change are one atomic write. The appends one group commit
 * takes together are one chunk (docs/http-streams.md#the-write-path): an offset
 * `<index>_<bytes>` whose bytes lie past the start of chunk `index` names the position
 * inside it where one of its appends ended.
 */
import { Buffer } from "node:buffer"

/** The key every record of the streams lives under. */
export const KEY_ROOT = "durable-streams/"

/** The key of the path record of `path`. */
export const pathKey = (path: string): string => `${KEY_ROOT}p/${path}`

/** The key prefix of the chunks of the stream with this id. */
export const chunkPrefix = (id: string): string => `${KEY_ROOT}c/${id}/`

/** The key of chunk `index` of the stream with this id. */
export const chunkKey = (id: string, index: number): string => `${chunkPrefix(id)}${pad(index)}`

const ZEROS = "0000000000000000"
const pad = (n: number): string => {
  const digits = String(n)
  return digits.length >= 16 ? digits : ZEROS.slice(digits.length) + digits
}

/**
 * A position: the index of the next chunk and the byte count before it; or, with more
 * bytes than chunk `index` starts at, a position inside that chunk (where one of the
 * appends it holds ended).
 */
export interface Position {
  readonly index: number
  readonly bytes: number
}

/**
 * The offset token of a position: `<index>_<bytes>`, both 16 digits, so tokens sort by
 * position: a position inside chunk `i` sorts after the start of `i` and before the start
 * of `i + 1`, where the end of `i` is.
 */
export const formatOffset = (position: Position): string => `${pad(position.index)}_${pad(position.bytes)}`

const OFFSET = /^(\d{16})_(\d{16})$/

/** The position an offset token names, or undefined for a malformed token. */
export const parseOffset = (text: string): Position | undefined => {
  const match = OFFSET.exec(text)
  if (match === null) return undefined
  const index = Number(match[1])
  const bytes = Number(match[2])
  return Number.isSafeInteger(index) && Number.isSafeInteger(bytes) ? { index, bytes } : undefined
}

/** A producer's state: its epoch and the highest sequence accepted in it. */
export type ProducerState = readonly [epoch: number, seq: number]

/**
 * One committed chunk. `a` is the byte count before it, `z` its length in offset units,
 * `d` its data (base64 bytes, or for a JSON stream its messages' texts joined by `,`),
 * `n` its JSON message count, `e` where its appends end when it holds several; the rest
 * is the stream's state after it.
 */
export interface ChunkRecord {
  readonly a: number
  readonly z: number
  readonly d: string
  readonly n?: number | undefined
  /**
   * The ends of its appends but the last (which ends at `z`), in offset units from its
   * start, when it holds more than one: the positions inside it an append was answered
   * with, and the data boundaries a fork's sub-offset counts to.
   */
  readonly e?: ReadonlyArray<number> | undefined
  /** Closed after this chunk. */
  readonly c?: 1 | undefined
  /** The last `Stream-Seq` accepted. */
  readonly s?: string | undefined
  /** Producer id to [epoch, highest seq]. */
  readonly p?: Readonly<Record<string, ProducerState>> | undefined
  /** The producer tuple whose append closed the stream. */
  readonly k?: readonly [string, number, number] | undefined
}

/** The stored configuration of a stream, at its path. */
export interface PathRecord {
  readonly v: 1
  /** Random per creation: a stream created again at a path never sees the old chunks. */
  readonly id: string
  /** The content type as given at creation. */
  readonly ct: string
  readonly ttl?: number | undefined
  /** Absolute expiry, RFC 3339 as given. */
  readonly exp?: string | undefined
  /** When the sliding TTL was last reset (epoch ms), stored so every process agrees. */
  readonly t: number
  /** Created with `Stream-Closed: true`. */
  readonly cc?: 1 | undefined
  /** Where this stream's own chunks start; 0/0 unless it is a fork. */
  readonly base: Position
  /** Older chunks: from the first entry whose `from` is at most the index: [stream id, first index]. */
  readonly anc: ReadonlyArray<readonly [string, number]>
  /** What it was forked from, as requested (for idempotent re-creation). */
  readonly fork?: { readonly path: string; readonly offset: string; readonly sub: number } | undefined
  /** How many forks read this stream's chunks. */
  readonly forks: number
  /** Deleted while forks still read it: 410 to clients, kept for the forks. */
  readonly gone?: 1 | undefined
}

/** The state of a stream at its tail: the next position and what the last chunk says. */
export interface Head extends Position {
  readonly closed: boolean
  readonly seq: string | undefined
  readonly producers: Readonly<Record<string, ProducerState>>
  readonly closedBy: readonly [string, number, number] | undefined
}

/** The head of a stream with no chunks of its own yet. */
export const emptyHead = (base: Position): Head => ({
  index: base.index,
  bytes: base.bytes,
  closed: false,
  seq: undefined,
  producers: {},
  closedBy: undefined
})

/** The head after `chunk`, committed at `index`. */
export const headAfter = (index: number, chunk: ChunkRecord): Head => ({
  index: index + 1,
  bytes: chunk.a + chunk.z,
  closed: chunk.c === 1,
  seq: chunk.s,
  producers: chunk.p ?? {},
  closedBy: chunk.k
})

/** The id whose chunk `index` a stream reads: its own, or the ancestor's it inherited. */
export const ownerOf = (record: PathRecord, index: number): string => {
  if (index >= record.base.index) return record.id
  for (const [id, from] of record.anc) if (index >= from) return id
  return record.anc.length > 0 ? record.anc[record.anc.length - 1]![0] : record.id
}

/** Media types of the content types seen, by content type. */
const mediaTypes = new Map<string, string>()

/** The media type without parameters, lower case: what two content types are compared by. */
export const mediaType = (contentType: string): string => {
  let media = mediaTypes.get(contentType)
  if (media === undefined) {
    media = contentType.split(";")[0]!.trim().toLowerCase()
    // Every append and read asks about a stream's content type: the few in use are remembered.
    if (mediaTypes.size >= 256) mediaTypes.clear()
    mediaTypes.set(contentType, media)
  }
  return media
}

/** Whether a stream of this content type is in JSON mode (messages, arrays on read). */
export const isJson = (contentType: string): boolean => mediaType(contentType) === "application/json"

/** Whether SSE data events of this content type are sent as text (else base64). */
export const isTextual = (contentType: string): boolean => {
  const media = mediaType(contentType)
  return media.startsWith("text/") || media === "application/json"
}

const DECIMAL = /^(0|[1-9]\d*)$/

/** A non-negative decimal integer without sign, leading zeros, point or exponent, or undefined. */
export const parseDecimal = (text: string): number | undefined => {
  if (!DECIMAL.test(text)) return undefined
  const value = Number(text)
  return Number.isSafeInteger(value) ? value : undefined
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

/** The epoch ms of an RFC 3339 timestamp, or undefined. */
export const parseTimestamp = (text: string): number | undefined => {
  if (!RFC3339.test(text)) return undefined
  const ms = Date.parse(text)
  return Number.isNaN(ms) ? undefined : ms
}

/**
 * The messages of a JSON body: an array is flattened one level, any other value is one
 * message. Undefined when the body is not JSON.
 */
export const jsonMessages = (body: Uint8Array): ReadonlyArray<string> | undefined => {
  let value: unknown
  try {
    value = JSON.parse(
      Buffer.isBuffer(body) ? body.toString("utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8")
    )
  } catch {
    return undefined
  }
  return Array.isArray(value) ? value.map((item) => JSON.stringify(item)) : [JSON.stringify(value)]
}

/** The stored data of JSON messages and its length in offset units (never 0 for a message). */
export const jsonChunkData = (messages: ReadonlyArray<string>): { readonly d: string; readonly z: number } => {
  const d = messages.join(",")
  return { d, z: messages.length === 0 ? 0 : Buffer.byteLength(d) + 1 }
}

/**
 * How many of a JSON chunk's `messages` fill exactly its first `units` offset units (a
 * message is its UTF-8 length plus one), or undefined when `units` falls inside one.
 */
export const messagesWithin = (messages: ReadonlyArray<string>, units: number): number | undefined => {
  let at = 0
  for (let i = 0; i < messages.length; i++) {
    if (at >= units) return at === units ? i : undefined
    at += Buffer.byteLength(messages[i]!) + 1
  }
  return at === units ? messages.length : undefined
}

/** Where the append that holds offset unit `units` of a chunk ends (its next data boundary), in units from its start. */
export const appendEndAfter = (chunk: { readonly z: number; readonly e?: ReadonlyArray<number> | undefined }, units: number): number => {
  if (chunk.e !== undefined) for (const end of chunk.e) if (end > units) return end
  return chunk.z
}

/** The bytes of a non-JSON chunk. */
export const chunkBytes = (chunk: ChunkRecord): Buffer => Buffer.from(chunk.d, "base64")

/** The messages' texts of a JSON chunk. */
export const chunkMessages = (chunk: ChunkRecord): ReadonlyArray<string> =>
  chunk.d.length === 0 ? [] : splitMessages(chunk.d, chunk.n ?? 1)

/**
 * Splits `a,b,c` made of JSON texts back into the texts: a comma at depth 0 outside a
 * string separates two messages.
 */
const splitMessages = (joined: string, count: number): ReadonlyArray<string> => {
  if (count <= 1) return [joined]
  const out: Array<string> = []
  let depth = 0
  let inString = false
  let start = 0
  for (let i = 0; i < joined.length; i++) {
    const ch = joined.charCodeAt(i)
    if (inString) {
      if (ch === 92) i++
      else if (ch === 34) inString = false
      continue
    }
    if (ch === 34) inString = true
    else if (ch === 91 || ch === 123) depth++
    else if (ch === 93 || ch === 125) depth--
    else if (ch === 44 && depth === 0) {
      out.push(joined.slice(start, i))
      start = i + 1
    }
  }
  out.push(joined.slice(start))
  return out
}

/** The time-bucketed cursor of a live response (20 s intervals since 2024-10-09), never at or below the client's. */
export const liveCursor = (now: number, clientCursor: string | undefined): string => {
  const interval = Math.floor((now - Date.UTC(2024, 9, 9)) / 20_000)
  const client = clientCursor === undefined ? undefined : parseDecimal(clientCursor)
  if (client !== undefined && client >= interval) return String(client + 1 + Math.floor(Math.random() * 180))
  return String(interval)
}
