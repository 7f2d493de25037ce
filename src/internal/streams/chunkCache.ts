/**
 * A bounded in-memory cache of committed chunks' data, decoded, for reads
 * (docs/http-streams.md#reading). A chunk is immutable once its compare-and-set
 * committed it, and a stream created again at a path gets a new random id, so a cached
 * chunk is right for every process that reads the same storage: nothing here is ever
 * invalidated by a write, only dropped to stay under its byte budget (least recently
 * used stream first) or when its stream's chunks are deleted.
 */
import { Buffer } from "node:buffer"
import { chunkBytes, type ChunkRecord, chunkMessages } from "./model.ts"

/** One committed chunk as a read uses it: its position and its data, decoded. */
export interface CachedChunk {
  /** The byte count before it. */
  readonly a: number
  /** Its length in offset units. */
  readonly z: number
  /** The bytes of a non-JSON chunk. */
  readonly bytes: Buffer | undefined
  /** The message texts of a JSON chunk. */
  readonly messages: ReadonlyArray<string> | undefined
  /** Where its appends end, when it holds several (`ChunkRecord.e`). */
  readonly e?: ReadonlyArray<number> | undefined
}

/** What an entry costs besides its data: the objects around it, roughly. */
const ENTRY_OVERHEAD = 96

/** The data of a chunk record, decoded once. */
export const decodeChunk = (chunk: ChunkRecord, json: boolean): CachedChunk =>
  json
    ? { a: chunk.a, z: chunk.z, bytes: undefined, messages: chunkMessages(chunk), e: chunk.e }
    : { a: chunk.a, z: chunk.z, bytes: chunkBytes(chunk), messages: undefined, e: chunk.e }

const costOf = (entry: CachedChunk): number =>
  ENTRY_OVERHEAD + (entry.bytes !== undefined ? entry.bytes.byteLength : entry.z)

export interface ChunkCache {
  /** The chunk `index` of the stream with id `id`, when cached. */
  readonly get: (id: string, index: number) => CachedChunk | undefined
  /** Marks a stream's chunks as recently used (a read served from them). */
  readonly touch: (id: string) => void
  /** Keeps a committed chunk (only ever a committed one: the cache is never checked against storage). */
  readonly put: (id: string, index: number, entry: CachedChunk) => void
  /**
   * Points a cached chunk's bytes at `bytes`, the same bytes inside a larger buffer (a
   * read's output): chunks that then lie back to back in one buffer are served as one
   * view of it, with no copy.
   */
  readonly rebase: (id: string, index: number, bytes: Buffer) => void
  /** Forgets every chunk of a stream (its chunks were deleted). */
  readonly drop: (id: string) => void
}

/** A cache holding at most about `maxBytes` of chunk data; 0 caches nothing. */
export const make = (maxBytes: number): ChunkCache => {
  /** Per stream id, its cached chunks by index; the map's order is the streams' recency, oldest first. */
  const streams = new Map<string, Map<number, CachedChunk>>()
  let total = 0

  const touch = (id: string): Map<number, CachedChunk> | undefined => {
    const chunks = streams.get(id)
    if (chunks === undefined) return undefined
    // Most recent last: a Map keeps insertion order.
    if (streams.size > 1) {
      streams.delete(id)
      streams.set(id, chunks)
    }
    return chunks
  }

  const evict = () => {
    while (total > maxBytes) {
      const oldest = streams.entries().next()
      if (oldest.done === true) return
      const [id, chunks] = oldest.value
      // Within one stream, the chunks put first go first.
      for (const [index, entry] of chunks) {
        chunks.delete(index)
        total -= costOf(entry)
        if (total <= maxBytes) break
      }
      if (chunks.size === 0) streams.delete(id)
    }
  }

  return {
    get: (id, index) => streams.get(id)?.get(index),
    touch: (id) => void touch(id),
    put: (id, index, entry) => {
      if (maxBytes <= 0) return
      let chunks = touch(id)
      if (chunks === undefined) streams.set(id, chunks = new Map())
      if (chunks.has(index)) return
      chunks.set(index, entry)
      total += costOf(entry)
      if (total > maxBytes) evict()
    },
    rebase: (id, index, bytes) => {
      const chunks = streams.get(id)
      const entry = chunks?.get(index)
      if (entry === undefined || entry.bytes === undefined || entry.bytes.byteLength !== bytes.byteLength) return
      chunks!.set(index, { ...entry, bytes })
    },
    drop: (id) => {
      const chunks = streams.get(id)
      if (chunks === undefined) return
      for (const entry of chunks.values()) total -= costOf(entry)
      streams.delete(id)
    }
  }
}
