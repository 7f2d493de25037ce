import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeLineSplitter } from "../../src/internal/lineSplitter.ts"

const bytes = (text: string) => new TextEncoder().encode(text)

describe("lineSplitter", () => {
  it("splits lines across chunks and drops a trailing CR", () => {
    const splitter = makeLineSplitter(16)
    expect(splitter.push(bytes("ab\ncd"))).toEqual({ lines: ["ab"], tooLargeBytes: undefined })
    expect(splitter.push(bytes("e\r\nf\n"))).toEqual({ lines: ["cde", "f"], tooLargeBytes: undefined })
  })

  it("accepts a line of exactly the limit whose CR arrives in the next chunk, alone or with its LF", () => {
    const line = "x".repeat(8)
    const split = makeLineSplitter(8)
    expect(split.push(bytes(line)).tooLargeBytes).toBeUndefined()
    expect(split.push(bytes("\r")).tooLargeBytes).toBeUndefined()
    expect(split.push(bytes("\n"))).toEqual({ lines: [line], tooLargeBytes: undefined })
    const crWithLf = makeLineSplitter(8)
    expect(crWithLf.push(bytes(line + "\r")).tooLargeBytes).toBeUndefined()
    expect(crWithLf.push(bytes("\n"))).toEqual({ lines: [line], tooLargeBytes: undefined })
  })

  it("reports a line one byte over the limit, with or without its newline yet", () => {
    const over = "x".repeat(9)
    expect(makeLineSplitter(8).push(bytes(over + "\n")).tooLargeBytes).toBe(9)
    const split = makeLineSplitter(8)
    expect(split.push(bytes(over)).tooLargeBytes).toBeUndefined()
    expect(split.push(bytes("\n")).tooLargeBytes).toBe(9)
    expect(makeLineSplitter(8).push(bytes(over + "y")).tooLargeBytes).toBe(10)
  })

  it("splits many lines of one chunk in order, keeping inner CRs, multi-byte text and skipping empty lines", () => {
    const split = makeLineSplitter(16)
    expect(split.push(bytes("a\r\n\nb\rc\né€\r\nrest"))).toEqual({ lines: ["a", "b\rc", "é€"], tooLargeBytes: undefined })
    expect(split.push(bytes("!\nx\ny\n"))).toEqual({ lines: ["rest!", "x", "y"], tooLargeBytes: undefined })
  })

  it("hands back the lines before an over-long one in the same chunk, and counts bytes, not characters", () => {
    // "€" is 3 bytes: 6 of them are 18 bytes, over a limit of 16 though only 6 characters.
    expect(makeLineSplitter(16).push(bytes("ok\nfine\n€€€€€€\nafter\n"))).toEqual({ lines: ["ok", "fine"], tooLargeBytes: 18 })
    expect(makeLineSplitter(18).push(bytes("ok\n€€€€€€\r\nafter\n"))).toEqual({ lines: ["ok", "€€€€€€", "after"], tooLargeBytes: undefined })
  })

  it("yields every line within the limit, whatever the chunking, as one decode of the whole text would", () => {
    const line = fc.array(fc.constantFrom("a", "\r", "é", "€", "x", "{}"), { maxLength: 12 }).map((cs) => cs.join(""))
    fc.assert(
      fc.property(
        fc.array(line, { maxLength: 30 }),
        fc.array(fc.integer({ min: 1, max: 80 }), { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 0, max: 40 }),
        (lines, cuts, slack) => {
          const all = bytes(lines.map((l) => l + "\n").join(""))
          const expected = lines.map((l) => l.endsWith("\r") ? l.slice(0, -1) : l).filter((l) => l.length > 0)
          // The limit is at least every line's size (CR included), so none is too large; chunks
          // both under and over the limit are met.
          const limit = Math.max(1, ...lines.map((l) => bytes(l).length)) + slack
          const split = makeLineSplitter(limit)
          const got: Array<string> = []
          let at = 0
          for (let i = 0; at < all.length; i++) {
            const end = Math.min(all.length, at + cuts[i % cuts.length]!)
            const result = split.push(all.subarray(at, end))
            expect(result.tooLargeBytes).toBeUndefined()
            got.push(...result.lines)
            at = end
          }
          expect(got).toEqual(expected)
        }
      ),
      { numRuns: 2000 }
    )
  })
})
