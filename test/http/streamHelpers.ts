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

/**
 * Reads SSE events from `url` until `onEvent` returns true, the server ends the
 * response, or the connection fails. Sends `Last-Event-ID` when given one. Resolves with
 * how it ended.
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
  let buffer = ""
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return "ended"
      buffer += decoder.decode(value, { stream: true })
      let boundary: number
      while ((boundary = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, boundary)
        buffer = buffer.slice(boundary + 2)
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
        if (data.length === 0 && id === undefined) continue
        if (onEvent({ event, data: data.join("\n"), id })) {
          await reader.cancel()
          return "stopped"
        }
      }
    }
  } catch {
    return "failed"
  }
}
