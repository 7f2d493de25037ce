/**
 * How the SQLite storage (`layers/SqliteStorage.ts`) stores keys and reads its
 * errors: a key as its UTF-16 code units, big-endian (so bytewise order is code unit
 * order), the keys of a range's rows, and a `node:sqlite` error as a `StorageError`.
 *
 * @since 0.1.0
 */
import { Corrupt, Io, Permission, StorageError } from "../Errors.ts"

const SQLITE_BUSY = 5
const SQLITE_LOCKED = 6
export const SQLITE_PERM = 3
export const SQLITE_READONLY = 8
const SQLITE_CANTOPEN = 14
const SQLITE_CORRUPT = 11
export const SQLITE_FULL = 13
const SQLITE_NOTADB = 26

/** The primary result code of a `node:sqlite` error, if it is one. */
export const sqliteCode = (cause: unknown): number | undefined =>
  typeof cause === "object" && cause !== null && "errcode" in cause && typeof cause.errcode === "number"
    ? cause.errcode & 0xff
    : undefined

export const isBusy = (cause: unknown): boolean => {
  const code = sqliteCode(cause)
  return code === SQLITE_BUSY || code === SQLITE_LOCKED
}

export const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

export const storageFailure = (operation: string, key: string, cause: unknown): StorageError => {
  const code = sqliteCode(cause)
  const errno = typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined
  const message = messageOf(cause)
  return new StorageError({
    operation,
    reason: code === SQLITE_PERM || code === SQLITE_READONLY || errno === "EACCES" || errno === "EPERM"
      ? new Permission({ key, message, cause })
      : code === SQLITE_CORRUPT || code === SQLITE_NOTADB
      ? new Corrupt({ key, message: `the database is damaged or not a SQLite database: ${message}` })
      : code === SQLITE_CANTOPEN
      ? new Permission({ key, message: `cannot open the database: ${message}`, cause })
      : new Io({ key, message, cause })
  })
}

export const corrupt = (operation: string, key: string, message: string) =>
  new StorageError({ operation, reason: new Corrupt({ key, message }) })

/** A key as stored: its UTF-16 code units, big-endian, so bytewise order is code unit order. */
export const encodeStoredKey = (key: string): Uint8Array => {
  const bytes = Buffer.from(key, "utf16le")
  return bytes.swap16()
}

/** Keys up to this many code units are decoded in plain code; longer ones through a Buffer. */
const SHORT_KEY_UNITS = 512

/** The key a stored key stands for, or undefined when it is not whole code units (a foreign row). */
export const decodeStoredKey = (stored: unknown): string | undefined => {
  if (!(stored instanceof Uint8Array) || stored.byteLength % 2 !== 0) return undefined
  const count = stored.byteLength >> 1
  if (count > SHORT_KEY_UNITS) return Buffer.from(stored).swap16().toString("utf16le")
  // Many keys are decoded at once (`getMany`, a whole-table scan): one small array and one call beat three Buffer operations.
  const units = new Array<number>(count)
  for (let i = 0, at = 0; i < count; i++, at += 2) units[i] = (stored[at]! << 8) | stored[at + 1]!
  return String.fromCharCode.apply(null, units)
}

/** A stored key as text for an error: the key when it decodes, else its bytes in hex. */
export const describeStoredKey = (stored: unknown): string =>
  decodeStoredKey(stored) ??
    (stored instanceof Uint8Array ? `0x${Buffer.from(stored).toString("hex")}` : String(stored))

/** The value of a hex digit's character code, `0-9`, `A-F` or `a-f`. */
const hexDigit = (code: number): number => (code & 0xf) + (code >> 6) * 9

/**
 * How the keys of a range's rows read: a whole stored key (the rows of an empty
 * prefix), or, past a non-empty prefix, the hex of the stored key's bytes after the
 * prefix (SQLite renders it as text, which `node:sqlite` hands back for far less than
 * a buffer per row; every key of the range starts with the prefix).
 */
export interface RangeKeys {
  /** The key a row's first column stands for, or undefined when it is not whole code units. */
  readonly keyOf: (cell: unknown) => string | undefined
  /** A row's first column as text for an error, when it does not decode. */
  readonly describe: (cell: unknown) => string
}

/** Rows whose first column is the whole stored key. */
export const WHOLE_KEYS: RangeKeys = { keyOf: decodeStoredKey, describe: describeStoredKey }

/** How the keys of the rows of a range of `prefix` read (see {@link SQL}). */
export const rangeKeysOf = (prefix: string): RangeKeys => {
  if (prefix.length === 0) return WHOLE_KEYS
  // A key's code units, the prefix's filled in once: a restore decodes thousands of
  // keys, each then one string built from one array (not the rest, then the prefix
  // joined to it, which the first read of the key would copy again).
  const units: Array<number> = []
  for (let i = 0; i < prefix.length; i++) units.push(prefix.charCodeAt(i))
  return {
    keyOf: (cell) => {
      if (typeof cell !== "string" || cell.length % 4 !== 0) return undefined
      const count = cell.length >> 2
      if (prefix.length + count > SHORT_KEY_UNITS) return prefix + Buffer.from(cell, "hex").swap16().toString("utf16le")
      units.length = prefix.length + count
      for (let i = prefix.length, at = 0; at < cell.length; i++, at += 4) {
        units[i] = (hexDigit(cell.charCodeAt(at)) << 12) | (hexDigit(cell.charCodeAt(at + 1)) << 8) |
          (hexDigit(cell.charCodeAt(at + 2)) << 4) | hexDigit(cell.charCodeAt(at + 3))
      }
      return String.fromCharCode.apply(null, units)
    },
    describe: (cell) =>
      `0x${Buffer.from(encodeStoredKey(prefix)).toString("hex")}${typeof cell === "string" ? cell.toLowerCase() : String(cell)}`
  }
}

/**
 * The least byte string above every byte string that starts with `lower`, or undefined
 * when there is none (an empty prefix, or one of only 0xFF bytes).
 */
export const upperBoundOf = (lower: Uint8Array): Uint8Array | undefined => {
  let end = lower.length
  while (end > 0 && lower[end - 1] === 0xff) end--
  if (end === 0) return undefined
  const upper = Uint8Array.from(lower.subarray(0, end))
  upper[end - 1]!++
  return upper
}
