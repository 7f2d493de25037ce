/**
 * How a read gets its chunks (docs/http-streams.md#reading): from the cache of committed
 * chunks where it has them, the rest from storage in one range read of their keys (or
 * one `getMany`), decoded and cached; and the bytes of a read joined with no copy when
 * they already lie back to back.
 */
import { Buffer } from "node:buffer"
import * as Effect from "effect/Effect"
import type { StorageError } from "../../Errors.ts"
import type { StorageAdapterShape } from "../../services/StorageAdapter.ts"
import type { CachedChunk, ChunkCache } from "./chunkCache.ts"
import { decodeChunk } from "./chunkCache.ts"
import {
  type ChunkRecord,
  chunkKey,
  chunkPrefix,
  formatOffset,
  type Head,
  messagesWithin,
  ownerOf,
  type PathRecord,
  type Position
} from "./model.ts"
import { StreamError } from "./types.ts"

/** The most chunk keys one storage read asks for (a read of smaller chunks takes several). */
const MAX_KEYS_PER_GET = 16_384
/** A read of at least this many chunks leaves the cached ones pointing into its output. */
const REBASE_MIN_CHUNKS = 16
const EMPTY = Buffer.alloc(0)

const fail = (message: string) => Effect.fail(new StreamError({ reason: "Storage", message }))

const badOffset = (position: Position) =>
  Effect.fail(new StreamError({ reason: "BadRequest", message: `offset ${formatOffset(position)} is not a position of this stream` }))

/**
 * The part of a chunk from `bytes` on, when that is where one of its appends ended
 * (`ChunkRecord.e`); undefined for any other position inside it.
 */
export const restOf = (entry: CachedChunk, bytes: number): CachedChunk | undefined => {
  const units = bytes - entry.a
  if (units <= 0 || units >= entry.z || entry.e === undefined || !entry.e.includes(units)) return undefined
  if (entry.messages !== undefined) {
    const skip = messagesWithin(entry.messages, units)
    if (skip === undefined) return undefined
    return { a: bytes, z: entry.z - units, bytes: undefined, messages: entry.messages.slice(skip) }
  }
  if (entry.bytes === undefined) return undefined
  return { a: bytes, z: entry.z - units, bytes: entry.bytes.subarray(units), messages: undefined }
}

const storageFailed = (error: StorageError) => new StreamError({ reason: "Storage", message: error.message })

/** The chunk reads of one service, over its storage and its cache. */
export const make = (storage: StorageAdapterShape, cache: ChunkCache, maxReadBytes: number) => {
  /**
   * The chunks from `start` toward the head, decoded, as many as `maxReadBytes` holds
   * (at least one): from the cache where it has them, the rest read from storage in
   * batches of keys sized by the stream's mean chunk length (see `fetchChunks`), and
   * kept in the cache. Every index read is below the head, so committed.
   */
  const chunksFrom = (record: PathRecord, start: Position, head: Head, json: boolean) =>
    Effect.gen(function*() {
      const out: Array<CachedChunk> = []
      let size = 0
      let index = start.index
      let bytesAt = start.bytes
      let fetched: ReadonlyArray<CachedChunk> = []
      let fetchedFrom = 0
      while (index < head.index) {
        let entry = index >= fetchedFrom && index - fetchedFrom < fetched.length
          ? fetched[index - fetchedFrom]
          : cache.get(ownerOf(record, index), index)
        if (entry === undefined) {
          const mean = (head.bytes - bytesAt) / (head.index - index)
          const wanted = mean > 0 ? Math.ceil((maxReadBytes - size) / mean) + 1 : MAX_KEYS_PER_GET
          const end = Math.min(head.index, index + Math.max(1, Math.min(wanted, MAX_KEYS_PER_GET)))
          fetched = yield* fetchChunks(record, index, end, json)
          fetchedFrom = index
          entry = fetched[0]!
        }
        if (index === start.index && start.bytes !== entry.a) {
          // An offset inside a chunk: where one of its appends ended.
          const rest = restOf(entry, start.bytes)
          if (rest === undefined) return yield* badOffset(start)
          entry = rest
        }
        if (size > 0 && size + entry.z > maxReadBytes) break
        out.push(entry)
        size += entry.z
        bytesAt = entry.a + entry.z
        index++
      }
      if (out.length > 0) cache.touch(record.id)
      return out
    })

  /**
   * Chunks `from` to `end` (all committed) read in one range read of their keys when
   * the storage has one and one stream owns them all, else one `getMany`; decoded and
   * cached. A binary stream's chunks are decoded into one buffer, back to back, so a
   * read of them is one view of it.
   */
  const fetchChunks = (record: PathRecord, from: number, end: number, json: boolean) =>
    Effect.gen(function*() {
      const owner = ownerOf(record, from)
      const records: Array<ChunkRecord> = []
      if (storage.scanBetween !== undefined && ownerOf(record, end - 1) === owner) {
        const rows = yield* Effect.mapError(
          storage.scanBetween(chunkPrefix(owner), chunkKey(owner, from), chunkKey(owner, end)),
          storageFailed
        )
        if (rows.length !== end - from) return yield* fail(`chunks ${from} to ${end - 1} of ${owner}: ${rows.length} found`)
        for (let i = from; i < end; i++) {
          const [key, value] = rows[i - from]!
          if (key !== chunkKey(owner, i)) return yield* fail(`chunk ${chunkKey(owner, i)} is missing`)
          records.push(value as ChunkRecord)
        }
      } else {
        const keys: Array<string> = []
        for (let i = from; i < end; i++) keys.push(chunkKey(ownerOf(record, i), i))
        const found = yield* Effect.mapError(storage.getMany(keys), storageFailed)
        for (const key of keys) {
          const chunk = found.get(key) as ChunkRecord | undefined
          if (chunk === undefined) return yield* fail(`chunk ${key} is missing`)
          records.push(chunk)
        }
      }
      const chunks: Array<CachedChunk> = []
      if (json) {
        for (const chunk of records) chunks.push(decodeChunk(chunk, true))
      } else {
        let total = 0
        for (const chunk of records) total += chunk.z
        const block = Buffer.allocUnsafe(total)
        let at = 0
        for (let i = 0; i < records.length; i++) {
          const chunk = records[i]!
          if (block.write(chunk.d, at, chunk.z, "base64") !== chunk.z || Buffer.byteLength(chunk.d, "base64") !== chunk.z) {
            return yield* fail(`chunk ${chunkKey(ownerOf(record, from + i), from + i)} holds ${chunk.z} bytes by its record, not its data`)
          }
          chunks.push({ a: chunk.a, z: chunk.z, bytes: block.subarray(at, at + chunk.z), messages: undefined, e: chunk.e })
          at += chunk.z
        }
      }
      for (let i = 0; i < chunks.length; i++) cache.put(ownerOf(record, from + i), from + i, chunks[i]!)
      return chunks
    })

  /**
   * The bytes of `chunks` (from `from`) as one buffer: a view when they already lie back
   * to back in one buffer (an earlier read's), else a copy, which the cached chunks then
   * point into, so the next read of them copies nothing.
   */
  const joinBytes = (record: PathRecord, from: number, chunks: ReadonlyArray<CachedChunk>): Buffer => {
    if (chunks.length === 0) return EMPTY
    const first = chunks[0]!.bytes!
    let end = first.byteOffset + first.byteLength
    let contiguous = true
    for (let i = 1; i < chunks.length && contiguous; i++) {
      const bytes = chunks[i]!.bytes!
      contiguous = bytes.buffer === first.buffer && bytes.byteOffset === end
      end += bytes.byteLength
    }
    if (contiguous) return Buffer.from(first.buffer, first.byteOffset, end - first.byteOffset)
    const joined = Buffer.concat(chunks.map((chunk) => chunk.bytes!))
    if (chunks.length >= REBASE_MIN_CHUNKS) {
      let at = 0
      for (let i = 0; i < chunks.length; i++) {
        const length = chunks[i]!.bytes!.byteLength
        cache.rebase(ownerOf(record, from + i), from + i, joined.subarray(at, at + length))
        at += length
      }
    }
    return joined
  }

  return { chunksFrom, joinBytes }
}
