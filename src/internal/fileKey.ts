/**
 * The file-name encoding of storage keys.
 *
 * A key is kept byte for byte when it is one of `a-z 0-9 - _`; every other UTF-8 byte
 * (upper-case letters included) becomes `~` and two upper-case hex digits. So no name
 * holds `/`, NUL or a dot (no `.`/`..`, no hidden file, no way out of the root),
 * decoding is exact, and no two names differ only by case: keys `a` and `A` stay two
 * files on a case-insensitive file system (macOS, Windows).
 * A name whose encoding would pass {@link MAX_PLAIN_NAME} keeps a readable prefix and
 * ends in `~~` plus a SHA-256 of the key; plain names never hold `~~` (an escape is
 * always followed by hex), so the two forms cannot meet. The full key of a long name
 * is read back from the record, which always carries its key.
 */
import { sha256Hex } from "./builtins.ts"

/** Longest encoded key kept as the file name itself (file systems allow 255 bytes). */
export const MAX_PLAIN_NAME = 200

const LONG_NAME_PREFIX = 120
const LONG_NAME_MARK = "~~"
const isPlainByte = (byte: number): boolean =>
  (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x7a) || byte === 0x2d || byte === 0x5f

const HEX = "0123456789ABCDEF"

const escapeBytes = (bytes: Uint8Array): string => {
  let out = ""
  for (const byte of bytes) {
    out += isPlainByte(byte) ? String.fromCharCode(byte) : "~" + HEX[byte >> 4] + HEX[byte & 15]
  }
  return out
}

/** The file name of a key (always ASCII, never starting with a dot). */
export const encodeKey = (key: string): string => {
  const plain = escapeBytes(Buffer.from(key, "utf8"))
  if (plain.length <= MAX_PLAIN_NAME) return plain
  const digest = sha256Hex(key)
  return plain.slice(0, LONG_NAME_PREFIX) + LONG_NAME_MARK + digest
}

/**
 * The start of the plain name of every key that starts with `prefix`: names are
 * encoded byte by byte, so a listing can skip every other name without decoding it.
 * A prefix may end in the high half of a surrogate pair that a key completes; its
 * UTF-8 is only that of the whole character, so only what comes before it is encoded.
 */
export const encodeKeyPrefix = (prefix: string): string => {
  const last = prefix.charCodeAt(prefix.length - 1)
  const whole = last >= 0xd800 && last <= 0xdbff ? prefix.slice(0, -1) : prefix
  return escapeBytes(Buffer.from(whole, "utf8"))
}

/** Whether a name is the hashed form, whose full key lives only in the record. */
export const isLongName = (name: string): boolean => name.includes(LONG_NAME_MARK)

const unescape = (text: string): Buffer | undefined => {
  const bytes: Array<number> = []
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code === 0x7e) {
      const byte = Number.parseInt(text.slice(i + 1, i + 3), 16)
      if (i + 3 > text.length || Number.isNaN(byte)) return undefined
      bytes.push(byte)
      i += 2
    } else if (isPlainByte(code)) {
      bytes.push(code)
    } else {
      return undefined
    }
  }
  return Buffer.from(bytes)
}

/**
 * The key of a plain name, or undefined for a name this encoding never produces
 * (a temp file, a foreign file, a hashed long name).
 */
export const decodeKey = (name: string): string | undefined => {
  if (isLongName(name)) return undefined
  const bytes = unescape(name)
  if (bytes === undefined) return undefined
  const key = bytes.toString("utf8")
  // Reject names that are not the canonical encoding of their key (lower-case hex,
  // escaped plain bytes, invalid UTF-8): such files were not written by us.
  return encodeKey(key) === name ? key : undefined
}

/**
 * The start of the key a long name stands for, as far as its readable prefix tells
 * (an escape cut in half at the end is dropped).
 */
export const longNameKeyPrefix = (name: string): string => {
  let visible = name.slice(0, name.indexOf(LONG_NAME_MARK))
  const lastEscape = visible.lastIndexOf("~")
  if (lastEscape !== -1 && lastEscape > visible.length - 3) visible = visible.slice(0, lastEscape)
  const bytes = unescape(visible) ?? Buffer.alloc(0)
  // A multi-byte character may be cut too; drop a trailing replacement character.
  return bytes.toString("utf8").replace(/\uFFFD+$/, "")
}
