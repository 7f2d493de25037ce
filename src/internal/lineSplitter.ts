/**
 * Splits a byte stream into newline-terminated lines, enforcing a size limit without
 * buffering more than the limit: a line that grows past it is reported as soon as the
 * limit is crossed, not when its newline finally arrives.
 */
import { Buffer } from "node:buffer"

/** What one chunk yielded: the complete lines, and the size of an over-long line if one was met. */
export interface SplitResult {
  readonly lines: Array<string>
  readonly tooLargeBytes: number | undefined
}

/** A stateful splitter; feed it chunks in order. */
export interface LineSplitter {
  readonly push: (chunk: Uint8Array) => SplitResult
}

const NEWLINE = 0x0a
const CARRIAGE_RETURN = 0x0d

/** A splitter for lines of at most `maxLineBytes` UTF-8 bytes (newline and a trailing CR excluded). */
export const makeLineSplitter = (maxLineBytes: number): LineSplitter => {
  let parts: Array<Buffer> = []
  let partBytes = 0

  const finish = (tail: Buffer): string => {
    let whole = parts.length === 0 ? tail : Buffer.concat([...parts, tail], partBytes + tail.length)
    parts = []
    partBytes = 0
    if (whole.length > 0 && whole[whole.length - 1] === CARRIAGE_RETURN) whole = whole.subarray(0, whole.length - 1)
    // UTF-8 never puts 0x0A inside a multi-byte character, so a split line decodes whole.
    return whole.toString("utf8")
  }

  return {
    push: (chunk) => {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
      const lines: Array<string> = []
      // Whole lines of this chunk are checked one by one but decoded as one run: one
      // UTF-8 decode and a split instead of a decode per line.
      let runStart = -1
      const flushRun = (runEnd: number) => {
        if (runStart === -1) return
        const pieces = bytes.toString("utf8", runStart, runEnd).split("\n")
        for (const piece of pieces) {
          const line = piece.length > 0 && piece.charCodeAt(piece.length - 1) === CARRIAGE_RETURN ? piece.slice(0, -1) : piece
          if (line.length > 0) lines.push(line)
        }
        runStart = -1
      }
      let start = 0
      if (partBytes + bytes.length <= maxLineBytes) {
        // The common case (chunks of a socket read, far under the limit): no line ending
        // in this chunk, nor the rest it leaves, can pass the limit, so none is looked
        // for alone. The line completing the kept parts is joined; the others are one run.
        const last = bytes.lastIndexOf(NEWLINE)
        if (last !== -1) {
          if (parts.length > 0) {
            const end = bytes.indexOf(NEWLINE)
            const line = finish(bytes.subarray(0, end))
            if (line.length > 0) lines.push(line)
            start = end + 1
          }
          if (start < last) {
            runStart = start
            flushRun(last)
          }
          start = last + 1
        }
        if (start < bytes.length) {
          parts.push(Buffer.from(bytes.subarray(start)))
          partBytes += bytes.length - start
        }
        return { lines, tooLargeBytes: undefined }
      }
      while (start <= bytes.length) {
        const end = bytes.indexOf(NEWLINE, start)
        if (end === -1) {
          flushRun(start - 1)
          const rest = bytes.length - start
          // One byte of slack: a line of exactly the limit may still be followed by its CR.
          if (partBytes + rest > maxLineBytes + 1) return { lines, tooLargeBytes: partBytes + rest }
          if (rest > 0) {
            // Copy: the transport may reuse the chunk's memory.
            parts.push(Buffer.from(bytes.subarray(start)))
            partBytes += rest
          }
          break
        }
        const length = partBytes + (end - start)
        // The byte before the newline may sit in an earlier chunk (a CR split from its LF).
        const lastPart = parts[parts.length - 1]
        const before = end > start ? bytes[end - 1] : lastPart?.[lastPart.length - 1]
        const withoutCr = before === CARRIAGE_RETURN ? length - 1 : length
        if (withoutCr > maxLineBytes) {
          flushRun(start - 1)
          return { lines, tooLargeBytes: withoutCr }
        }
        if (parts.length === 0) {
          if (runStart === -1) runStart = start
        } else {
          const line = finish(bytes.subarray(start, end))
          if (line.length > 0) lines.push(line)
        }
        start = end + 1
      }
      flushRun(start - 1)
      return { lines, tooLargeBytes: undefined }
    }
  }
}
