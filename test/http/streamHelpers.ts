/**
 * Helpers of the stream server tests: a `noetic-effect serve` process, and an SSE
 * reader that behaves as a browser's EventSource does (it keeps the last `id:` and
 * sends it as `Last-Event-ID` when it connects again).
 */
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Readline from "node:readline"

const CLI = Path.join(import.meta.dirname, "..", "..", "src", "cli", "main.ts")

/** A running `noetic-effect serve` and the base URL it printed first. */
export interface ServeProcess {
  readonly proc: ChildProcess.ChildProcess
  readonly url: string
  /** Resolves with the exit code (or signal) once the process has exited. */
  readonly exited: Promise<number | NodeJS.Signals | null>
}

/** Starts `noetic-effect serve` with `args` and waits for its `listening on` line. */
export const startServe = async (args: ReadonlyArray<string>): Promise<ServeProcess> => {
  const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", CLI, "serve", ...args], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
    proc.once("exit", (code, signal) => resolve(code ?? signal))
  )
  let stderr = ""
  proc.stderr!.on("data", (chunk) => (stderr += String(chunk)))
  const lines = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
  const first = await lines.next()
  if (first.done === true) throw new Error(`serve exited before listening: ${stderr}`)
  const match = /^listening on (http:\/\/\S+)$/.exec(first.value)
  if (match === null) throw new Error(`unexpected first line: ${first.value}`)
  return { proc, url: match[1]!, exited }
}

/** SIGKILLs a serve process and waits for its exit. */
export const kill9 = async (serve: ServeProcess): Promise<void> => {
  if (serve.proc.exitCode === null && serve.proc.signalCode === null) serve.proc.kill("SIGKILL")
  await serve.exited
}

/** One parsed SSE event. */
export interface SseEvent {
  readonly event: string
  readonly data: string
  readonly id: string | undefined
}

/** Where the first blank line (`\n\n`) at or after `from` starts in `bytes`, or -1. */
const blankLine = (bytes: Uint8Array, from: number): number => {
  for (let i = from; i + 1 < bytes.byteLength; i++) if (bytes[i] === 10 && bytes[i + 1] === 10) return i
  return -1
}

/** One event block's fields (`event`, `data` lines joined by `\n`, `id`); comments skipped. */
const parseBlock = (block: string): SseEvent | undefined => {
  let event = "message"
  const data: Array<string> = []
  let id: string | undefined
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue
    const colon = line.indexOf(":")
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "event") event = value
    else if (field === "data") data.push(value)
    else if (field === "id") id = value
  }
  return data.length === 0 && id === undefined ? undefined : { event, data: data.join("\n"), id }
}

/**
 * Reads SSE events from `url` until `onEvent` returns true, the server ends the
 * response, or the connection fails. Sends `Last-Event-ID` when given one. Resolves with
 * how it ended.
 *
 * Events are cut from the bytes and each one decoded on its own, and what is left of a
 * read is copied: a reader waiting for its next event holds no string of an earlier
 * one (a slice of one large decoded text would keep all of it alive while the reader
 * waits, and the readers' memory bench counts what readers hold).
 */
export const readSse = async (
  url: string,
  lastEventId: string | undefined,
  onEvent: (event: SseEvent) => boolean,
  signal?: AbortSignal
): Promise<"stopped" | "ended" | "failed"> => {
  let response: Response
  try {
    response = await fetch(url, {
      headers: lastEventId === undefined ? {} : { "last-event-id": lastEventId },
      ...(signal === undefined ? {} : { signal })
    })
  } catch {
    return "failed"
  }
  if (response.status !== 200 || response.body === null) return "failed"
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  let pending: Uint8Array = new Uint8Array(0)
  /** Takes one read's bytes: whether `onEvent` asked to stop. */
  const take = (bytes: Uint8Array): boolean => {
    // The bytes already held have no blank line but maybe at their last byte.
    const scanned = Math.max(0, pending.byteLength - 1)
    if (pending.byteLength === 0) {
      pending = bytes
    } else {
      const joined = new Uint8Array(pending.byteLength + bytes.byteLength)
      joined.set(pending)
      joined.set(bytes, pending.byteLength)
      pending = joined
    }
    let start = 0
    for (let boundary = blankLine(pending, scanned); boundary >= 0; boundary = blankLine(pending, start)) {
      const event = parseBlock(decoder.decode(pending.subarray(start, boundary)))
      start = boundary + 2
      if (event !== undefined && onEvent(event)) return true
    }
    if (start > 0) pending = pending.slice(start)
    return false
  }
  // Callbacks, not an async loop: a suspended async function may keep its last values
  // (a read's bytes) alive until it resumes.
  return new Promise((resolve) => {
    const next = (): void => {
      reader.read().then((read) => {
        if (read.done) return resolve("ended")
        let stop: boolean
        try {
          stop = take(read.value)
        } catch {
          return resolve("failed")
        }
        if (!stop) return next()
        reader.cancel().then(() => resolve("stopped"), () => resolve("stopped"))
      }, () => resolve("failed"))
    }
    next()
  })
}
