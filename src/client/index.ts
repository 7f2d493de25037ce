/**
 * `noetic-effect/client`: reading a Durable Stream from a browser or any runtime with
 * `fetch`. No Node built-ins and no Effect: it bundles for browsers on its own. See
 * docs/agent-streams.md#reading-a-stream.
 *
 * @since 0.1.0
 */

/** One item read: for a JSON stream one message (parsed), else the bytes of one read. */
export interface StreamItem {
  /**
   * Where a read resumes after the read this item came in (items of one read share it):
   * pass it as `offset` to continue.
   */
  readonly offset: string
  readonly data: unknown
}

/** What `readStream` takes. */
export interface ReadStreamOptions {
  /** Where to start: `-1` (the default) is the start, `now` the tail, or an offset read before. */
  readonly offset?: string | undefined
  /** Follow the stream until it is closed (the default); `false` stops at the tail. */
  readonly live?: boolean | undefined
  /** Stops the reading: the iterator ends. */
  readonly signal?: AbortSignal | undefined
  /** Extra request headers (e.g. `authorization`). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** The longest wait between reconnect attempts, in ms (default 5000; the first waits 100). */
  readonly maxBackoffMillis?: number | undefined
}

/** A read the server refused (4xx other than a long-poll's 204): not retried. */
export class ReadStreamError extends Error {
  override readonly name = "ReadStreamError"
  readonly status: number
  constructor(status: number, message: string) {
    super(message)
    this.status = status
  }
}

const sleep = (millis: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted === true) return resolve()
    const timer = setTimeout(done, millis)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener("abort", done)
      resolve()
    }
    signal?.addEventListener("abort", done, { once: true })
  })

const isAborted = (signal: AbortSignal | undefined) => signal?.aborted === true

const mediaTypeOf = (contentType: string | null) => contentType === null ? "" : contentType.split(";")[0]!.trim().toLowerCase()

const isJson = (contentType: string | null) => mediaTypeOf(contentType) === "application/json"

/**
 * Whether a live read of this content type follows one SSE response: JSON (messages as
 * arrays) and binary types (base64 data, where the server offers it). Not `text/*`: an
 * SSE event cannot carry a carriage return, so text follows by long-polls, byte for byte.
 */
const followsBySse = (contentType: string | null) => {
  const media = mediaTypeOf(contentType)
  return media === "application/json" || (media !== "" && !media.startsWith("text/"))
}

/** The bytes of base64 text, with no Node built-in. */
const fromBase64 = (text: string): Uint8Array => {
  const binary = atob(text)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

/** What one SSE response gave: the items it yielded, where to resume, and whether the stream ended. */
interface SseOutcome {
  offset: string
  cursor: string | undefined
  closed: boolean
  /** The response was refused: its status and body. */
  refused?: { readonly status: number; readonly body: string }
  /** The server does not serve this stream over SSE (400 for a binary stream, or data it does not encode): long-poll instead. */
  unsupported?: boolean
  /** The connection failed or a 5xx: retry with backoff. */
  failed: boolean
}

/**
 * Follows a stream over one SSE response (`live=sse`): every change arrives on the open
 * connection, with no request per read. A JSON stream's `data` event is an array of
 * messages (an item each); a binary stream's is base64 (`Stream-SSE-Data-Encoding:
 * base64`), one item of its bytes. Each `data` event's `id:` is where a read resumes
 * after it; the items are yielded before the offset moves on.
 */
async function* followSse(
  url: string,
  start: { readonly offset: string; readonly cursor: string | undefined; readonly json: boolean },
  options: ReadStreamOptions,
  outcome: SseOutcome
): AsyncGenerator<StreamItem, void> {
  const { signal } = options
  const query = new URLSearchParams({ offset: start.offset, live: "sse" })
  if (start.cursor !== undefined) query.set("cursor", start.cursor)
  let response: Response
  try {
    response = await fetch(`${url}?${query}`, {
      ...(options.headers === undefined ? {} : { headers: options.headers }),
      ...(signal === undefined ? {} : { signal })
    })
  } catch {
    outcome.failed = true
    return
  }
  if (response.status >= 500 || response.body === null) {
    outcome.failed = true
    return
  }
  const base64 = response.headers.get("stream-sse-data-encoding")?.trim().toLowerCase() === "base64"
  if (response.status === 400 && !start.json) {
    // A server that serves SSE for JSON and text only: this stream long-polls.
    await response.body.cancel().catch(() => {})
    outcome.unsupported = true
    return
  }
  if (response.status !== 200) {
    outcome.refused = { status: response.status, body: await response.text().catch(() => "") }
    return
  }
  if (!start.json && !base64) {
    await response.body.cancel().catch(() => {})
    outcome.unsupported = true
    return
  }
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  let event = "message"
  let data: Array<string> = []
  let id: string | undefined
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      try {
        chunk = await reader.read()
      } catch {
        outcome.failed = !isAborted(signal)
        return
      }
      if (chunk.done) return
      buffer += decoder.decode(chunk.value, { stream: true })
      let newline: number
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, "")
        buffer = buffer.slice(newline + 1)
        if (line === "") {
          if (data.length > 0) {
            const text = data.join("\n")
            if (event === "data") {
              const next = id ?? outcome.offset
              if (start.json) {
                for (const message of JSON.parse(text) as ReadonlyArray<unknown>) yield { offset: next, data: message }
              } else {
                const bytes = fromBase64(text.replace(/\s+/g, ""))
                if (bytes.byteLength > 0) yield { offset: next, data: bytes }
              }
              outcome.offset = next
            } else if (event === "control") {
              const control = JSON.parse(text) as { streamNextOffset?: string; streamCursor?: string; streamClosed?: boolean }
              if (control.streamNextOffset !== undefined) outcome.offset = control.streamNextOffset
              if (control.streamCursor !== undefined) outcome.cursor = control.streamCursor
              if (control.streamClosed === true) {
                outcome.closed = true
                return
              }
            }
          }
          event = "message"
          data = []
          id = undefined
        } else if (line.startsWith("data:")) data.push(line.slice(5))
        else if (line.startsWith("event:")) event = line.slice(6).trim()
        else if (line.startsWith("id:")) id = line.slice(3).trim()
      }
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}

/**
 * Reads the stream at `url` from `offset`: catch-up reads, then, while `live`, follows
 * it until it is closed: over one SSE response for JSON and binary streams (every change
 * arrives on the open connection; binary data as base64 where the server offers it, else
 * by long-polls), by long-polls for `text/*` (an SSE event cannot carry a carriage
 * return). On a network failure or a 5xx it reconnects with backoff
 * (100 ms doubling up to `maxBackoffMillis`) and resumes from the last offset it
 * yielded past, so no item is skipped or repeated. Ends when the stream is closed (at
 * its tail), at the tail when not `live`, or when `signal` aborts.
 */
export async function* readStream(url: string, options: ReadStreamOptions = {}): AsyncGenerator<StreamItem, void> {
  const { signal } = options
  const live = options.live ?? true
  const maxBackoff = options.maxBackoffMillis ?? 5_000
  let offset = options.offset ?? "-1"
  // Refused before any request: a string `live` ("sse", "long-poll", as another client
  // spells it) would read as true and pick the transport itself; a bad backoff would
  // reconnect in a hot loop.
  if (typeof live !== "boolean") {
    throw new TypeError(`readStream: live must be true or false, not ${JSON.stringify(live)} (the transport follows the content type)`)
  }
  if (typeof offset !== "string") throw new TypeError(`readStream: offset must be a string, not ${String(offset)}`)
  if (typeof maxBackoff !== "number" || !(maxBackoff >= 100) || !Number.isFinite(maxBackoff)) {
    throw new TypeError(`readStream: maxBackoffMillis must be a finite number of at least 100, not ${String(maxBackoff)}`)
  }
  let cursor: string | undefined
  let caughtUp = false
  /** The stream's content type, from its last 200. */
  let contentType: string | null = null
  /** The server refused SSE for this (non-JSON) stream: follow it by long-polls. */
  let sseRefused = false
  let backoff = 100
  while (!isAborted(signal)) {
    if (live && caughtUp && !sseRefused && followsBySse(contentType)) {
      const outcome: SseOutcome = { offset, cursor, closed: false, failed: false }
      const start = { offset, cursor, json: isJson(contentType) }
      for await (const item of followSse(url, start, options, outcome)) {
        yield item
        backoff = 100
      }
      offset = outcome.offset
      cursor = outcome.cursor
      if (outcome.closed || isAborted(signal)) return
      if (outcome.unsupported === true) {
        sseRefused = true
        continue
      }
      if (outcome.refused !== undefined) {
        throw new ReadStreamError(outcome.refused.status, `reading ${url}: ${outcome.refused.status} ${outcome.refused.body.trim()}`)
      }
      if (outcome.failed) {
        await sleep(backoff, signal)
        backoff = Math.min(backoff * 2, maxBackoff)
      }
      continue
    }
    const query = new URLSearchParams({ offset })
    if (live && caughtUp) query.set("live", "long-poll")
    if (cursor !== undefined) query.set("cursor", cursor)
    let response: Response
    let body: Uint8Array
    try {
      response = await fetch(`${url}?${query}`, {
        ...(options.headers === undefined ? {} : { headers: options.headers }),
        ...(signal === undefined ? {} : { signal })
      })
      body = new Uint8Array(await response.arrayBuffer())
    } catch {
      if (isAborted(signal)) return
      await sleep(backoff, signal)
      backoff = Math.min(backoff * 2, maxBackoff)
      continue
    }
    if (response.status >= 500) {
      await sleep(backoff, signal)
      backoff = Math.min(backoff * 2, maxBackoff)
      continue
    }
    if (response.status !== 200 && response.status !== 204) {
      throw new ReadStreamError(
        response.status,
        `reading ${url}: ${response.status} ${new TextDecoder().decode(body).trim()}`
      )
    }
    backoff = 100
    const next = response.headers.get("stream-next-offset") ?? offset
    const upToDate = response.headers.get("stream-up-to-date") === "true"
    const closed = response.headers.get("stream-closed") === "true"
    cursor = response.headers.get("stream-cursor") ?? cursor
    if (response.status === 200) contentType = response.headers.get("content-type")
    if (response.status === 200 && body.byteLength > 0) {
      if (isJson(response.headers.get("content-type"))) {
        const messages = JSON.parse(new TextDecoder().decode(body)) as ReadonlyArray<unknown>
        // The offset moves before the last item is handed out: a consumer that stops
        // there and resumes from it reads on after this read.
        offset = next
        for (const data of messages) yield { offset: next, data }
      } else {
        offset = next
        yield { offset: next, data: body }
      }
    } else {
      offset = next
    }
    if (closed && upToDate) return
    if (upToDate) {
      if (!live) return
      caughtUp = true
    }
  }
}
