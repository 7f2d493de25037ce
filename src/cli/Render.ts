/**
 * How the CLI prints: aligned tables, sizes, ages and durations for people, and a
 * progress line on stderr (only on a terminal) for scans that take a while.
 *
 * @internal
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { escapeControl } from "../internal/escapeText.ts"
import { CliFailure } from "./Storages.ts"

/**
 * Text for people with its control characters escaped (see `escapeControl`): every
 * value the CLI prints as text (ids, messages, frames, paths) goes through it; `--json`
 * output does not.
 */
export const escape: (text: string) => string = escapeControl

/** A line for people: the literal parts as written, every interpolated value escaped. */
export const text = (parts: TemplateStringsArray, ...values: ReadonlyArray<unknown>): string =>
  parts.reduce((line, part, i) => line + escape(String(values[i - 1])) + part)

/** Prints one line for people, its values escaped: ``yield* Render.say`cleared ${id}` ``. */
export const say = (parts: TemplateStringsArray, ...values: ReadonlyArray<unknown>): Effect.Effect<void> =>
  Console.log(text(parts, ...values))

/** Prints lines for people, each escaped whole (a value's newline cannot start a line of its own). */
export const lines = (...shown: ReadonlyArray<string>): Effect.Effect<void> =>
  Console.log(shown.map(escape).join("\n"))

/**
 * A JSON value shown to people: pretty JSON (which escapes C0 controls in strings)
 * with the rest (DEL, C1, bidi) escaped too. `--json` prints exact JSON instead.
 */
export const jsonText = (value: unknown): string =>
  (JSON.stringify(value, null, 2) ?? "undefined").split("\n").map(escape).join("\n")

/** An aligned table: a header row, then one row per entry, every cell escaped; columns separated by two spaces. */
export const table = (header: ReadonlyArray<string>, cells: ReadonlyArray<ReadonlyArray<string>>): string => {
  const rows = cells.map((row) => row.map(escape))
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!))).join("  ").trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

/** A byte count for people: `812 B`, `4.2 KiB`, `1.3 MiB`. */
export const bytes = (count: number): string => {
  if (count < 1024) return `${count} B`
  if (count < 1024 * 1024) return `${(count / 1024).toFixed(1)} KiB`
  return `${(count / (1024 * 1024)).toFixed(1)} MiB`
}

/** A length of time for people, coarsest two units: `45s`, `3m 12s`, `2h 5m`, `4d 1h`. */
export const span = (millis: number): string => {
  const seconds = Math.max(0, Math.floor(millis / 1000))
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m ${seconds % 60}s`
  const hours = Math.floor(minutes / 60)
  if (hours < 24) return `${hours}h ${minutes % 60}m`
  return `${Math.floor(hours / 24)}d ${hours % 24}h`
}

/** An epoch-millisecond time as ISO text, or `-`. */
export const iso = (millis: number | undefined): string =>
  millis === undefined || !Number.isFinite(millis) ? "-" : new Date(millis).toISOString()

const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  m: 60_000,
  min: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000
}

/**
 * Parses a duration such as `90s`, `15m`, `2h`, `7d`, `1w` or `1h30m` into
 * milliseconds; anything else is a one-line failure naming the flag.
 */
export const parseDuration = (flag: string, text: string): Effect.Effect<number, CliFailure> =>
  Effect.suspend(() => {
    const trimmed = text.trim().toLowerCase()
    const part = /(\d+(?:\.\d+)?)\s*(ms|sec|min|s|m|h|d|w)/y
    let total = 0
    let index = 0
    while (index < trimmed.length) {
      part.lastIndex = index
      const match = part.exec(trimmed)
      if (match === null) break
      total += Number(match[1]) * UNITS[match[2]!]!
      index = part.lastIndex
    }
    if (trimmed === "" || index !== trimmed.length) {
      return Effect.fail(
        new CliFailure({ message: `bad ${flag} ${JSON.stringify(text)}: expected a duration such as 90s, 15m, 2h, 7d or 1h30m` })
      )
    }
    return Effect.succeed(total)
  })

/**
 * A `--since` value: a duration back from now, or an ISO date; epoch milliseconds.
 */
export const parseSince = (text: string, now: number): Effect.Effect<number, CliFailure> =>
  /^\d{4}-\d{2}-\d{2}/.test(text.trim())
    ? Effect.suspend(() => {
      const at = Date.parse(text)
      return Number.isNaN(at)
        ? Effect.fail(new CliFailure({ message: `bad --since ${JSON.stringify(text)}: not a date` }))
        : Effect.succeed(at)
    })
    : Effect.map(parseDuration("--since", text), (millis) => now - millis)

/** How long a scan runs before its progress line appears. */
const PROGRESS_DELAY_MS = 300
const PROGRESS_EVERY_MS = 100

/** What a scan reports as it goes. */
export interface Progress {
  /** Sets what the progress line says: a phase and, when known, how far it got. */
  readonly update: (label: string, done?: number, total?: number) => void
}

/**
 * Runs `body` with a progress line on stderr that appears only when stderr is a
 * terminal and the scan takes longer than a moment, and is erased when it ends; on
 * anything else (a pipe, a CI log, a test) nothing is printed.
 */
export const withProgress = <A, E, R>(body: (progress: Progress) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const state = { label: "", done: undefined as number | undefined, total: undefined as number | undefined }
    const progress: Progress = {
      update: (label, done, total) => {
        state.label = label
        state.done = done
        state.total = total
      }
    }
    if (process.stderr.isTTY !== true) return body(progress)
    let shown = false
    const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
    let frame = 0
    const render = Effect.sync(() => {
      const count = state.done === undefined ? "" : state.total === undefined ? ` ${state.done}` : ` ${state.done}/${state.total}`
      process.stderr.write(`\r\x1b[2K${frames[frame++ % frames.length]} ${state.label}${count}`)
      shown = true
    })
    const ticker = Effect.sleep(PROGRESS_DELAY_MS).pipe(
      Effect.andThen(Effect.forever(Effect.andThen(render, Effect.sleep(PROGRESS_EVERY_MS))))
    )
    return Effect.flatMap(Effect.forkChild(ticker), (fiber) =>
      body(progress).pipe(
        Effect.ensuring(
          Effect.andThen(
            Fiber.interrupt(fiber),
            Effect.sync(() => {
              if (shown) process.stderr.write("\r\x1b[2K")
            })
          )
        )
      ))
  })

/** Prints one JSON document. */
export const printJson = (value: unknown): Effect.Effect<void> => Console.log(JSON.stringify(value, null, 2))
