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
})
