/**
 * The one escaping of text shown to people (the CLI's tables and lines, its errors on
 * stderr): control characters in ids, messages and frames are printed as visible
 * escapes, so a recorded value cannot clear the screen (ESC[2J), retitle the terminal
 * (ESC]0;), forge a line (a newline or carriage return), or reorder what is shown
 * (bidi overrides). JSON output is never escaped: it stays exact. See
 * docs/operations-failclosed.md ("Escaped output").
 *
 * @internal
 */

/** C0 and C1 controls, DEL, line and paragraph separators, and the bidi marks, embeddings, overrides and isolates. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" }

/** `text` with every control character written as an escape: `\n`, `\r`, `\t`, `\x1b`, `\u202e`. */
export const escapeControl = (text: string): string =>
  text.replace(UNSAFE, (char) => {
    const named = NAMED[char]
    if (named !== undefined) return named
    const code = char.charCodeAt(0)
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
  })
