/**
 * The record format of the file storage's append-only logs (`internal/fileLog.ts`):
 * each record a header (magic, key and value lengths, kind, CRC-32s of the header and
 * key and of the value), the key and the value's JSON text, or a tombstone; and the
 * parse of a stretch of a segment into intact records, damage and a torn tail.
 *
 * @since 0.1.0
 */
import { nodeZlib } from "./builtins.ts"

/** `zlib.crc32`, looked up at its first use. */
let zlibCrc32: ((data: Uint8Array, value?: number) => number) | undefined

/** CRC-32 of `bytes`, continuing from `value`. */
const crc32 = (bytes: Uint8Array, value?: number): number => (zlibCrc32 ??= nodeZlib().crc32)(bytes, value)

export const MAGIC = 0x4e454c31 // "NEL1": the record format's version is in its magic.
export const HEADER_BYTES = 21
export const KIND_SET = 1
export const KIND_DELETE = 2
const MAX_KEY_BYTES = 1 << 20
/**
 * The most bytes the framed record of `key` and `text` can take: UTF-8 needs at most
 * three bytes per UTF-16 code unit (a lone surrogate becomes U+FFFD, three bytes).
 */
export const recordBound = (key: string, text: string | undefined): number =>
  HEADER_BYTES + 3 * (key.length + (text === undefined ? 0 : text.length))

/**
 * Frames the record of `key` (its value's JSON text, or a tombstone when `text` is
 * undefined) into `target` at `at`, which has `recordBound` bytes of room; returns the
 * record's length.
 */
export const encodeInto = (target: Buffer, at: number, key: string, text: string | undefined): number => {
  const keyAt = at + HEADER_BYTES
  const keyBytes = target.write(key, keyAt, "utf8")
  const valueAt = keyAt + keyBytes
  const valueBytes = text === undefined ? 0 : target.write(text, valueAt, "utf8")
  target.writeUInt32BE(MAGIC, at)
  target.writeUInt32BE(keyBytes, at + 4)
  target.writeUInt32BE(valueBytes, at + 8)
  target.writeUInt8(text === undefined ? KIND_DELETE : KIND_SET, at + 12)
  target.writeUInt32BE(crc32(target.subarray(valueAt, valueAt + valueBytes)), at + 17)
  target.writeUInt32BE(crc32(target.subarray(keyAt, valueAt), crc32(target.subarray(at, at + 13))), at + 13)
  return HEADER_BYTES + keyBytes + valueBytes
}

/** The framed record of `key`: its value's JSON text, or a tombstone when `text` is undefined. */
export const encodeRecord = (key: string, text: string | undefined): Buffer => {
  const record = Buffer.allocUnsafe(recordBound(key, text))
  return record.subarray(0, encodeInto(record, 0, key, text))
}

/** A record header read at some offset. */
export interface Header {
  readonly key: string
  readonly kind: number
  readonly keyBytes: number
  readonly length: number
}

/** The header at `at` when it is intact and whole in `bytes`; "short" when `bytes` ends inside it. */
export const readHeader = (bytes: Buffer, at: number): Header | "short" | "bad" => {
  if (at + HEADER_BYTES > bytes.length) return "short"
  if (bytes.readUInt32BE(at) !== MAGIC) return "bad"
  const keyBytes = bytes.readUInt32BE(at + 4)
  const valueBytes = bytes.readUInt32BE(at + 8)
  const kind = bytes.readUInt8(at + 12)
  if (keyBytes === 0 || keyBytes > MAX_KEY_BYTES || (kind !== KIND_SET && kind !== KIND_DELETE)) return "bad"
  if (kind === KIND_DELETE && valueBytes !== 0) return "bad"
  const keyEnd = at + HEADER_BYTES + keyBytes
  if (keyEnd > bytes.length) return "short"
  const check = crc32(bytes.subarray(at + HEADER_BYTES, keyEnd), crc32(bytes.subarray(at, at + 13)))
  if (check !== bytes.readUInt32BE(at + 13)) return "bad"
  return { key: bytes.toString("utf8", at + HEADER_BYTES, keyEnd), kind, keyBytes, length: HEADER_BYTES + keyBytes + valueBytes }
}

export const valueIntact = (bytes: Buffer, at: number, header: Header): boolean =>
  crc32(bytes.subarray(at + HEADER_BYTES + header.keyBytes, at + header.length)) === bytes.readUInt32BE(at + 17)

/** The offset of the first whole, intact record at or after `from`, or -1. */
const nextIntact = (bytes: Buffer, from: number): number => {
  const magic = Buffer.from([0x4e, 0x45, 0x4c, 0x31])
  for (let at = bytes.indexOf(magic, from); at !== -1; at = bytes.indexOf(magic, at + 1)) {
    const header = readHeader(bytes, at)
    if (typeof header === "object" && at + header.length <= bytes.length && valueIntact(bytes, at, header)) return at
  }
  return -1
}

/** What parsing a stretch of a segment found. */
export interface Parsed {
  readonly records: Array<{ readonly offset: number; readonly header: Header; readonly damaged: boolean }>
  /** Offsets of damage whose key cannot be read. */
  readonly unknown: Array<number>
  /** Where the next parse starts: the end of the last record or damage that is known not to be a torn tail. */
  readonly end: number
}

/** Parses `bytes` (the segment from `base` on). */
export const parse = (bytes: Buffer, base: number): Parsed => {
  const records: Parsed["records"] = []
  const unknown: Array<number> = []
  let at = 0
  while (at < bytes.length) {
    const header = readHeader(bytes, at)
    if (typeof header === "object" && at + header.length <= bytes.length) {
      const damaged = !valueIntact(bytes, at, header)
      // A damaged value with nothing intact after it is a write that never completed.
      if (damaged && nextIntact(bytes, at + header.length) === -1) break
      records.push({ offset: base + at, header, damaged })
      at += header.length
      continue
    }
    const resume = nextIntact(bytes, at + 1)
    if (resume === -1) break
    if (typeof header === "object") {
      // The header is intact but claims more than lies before the next record.
      records.push({ offset: base + at, header, damaged: true })
    } else {
      unknown.push(base + at)
    }
    at = resume
  }
  return { records, unknown, end: base + at }
}
