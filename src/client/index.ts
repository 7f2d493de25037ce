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

const isJson = (contentType: string | null) =>
  contentType !== null && contentType.split(";")[0]!.trim().toLowerCase() === "application/json"

/**
 * Reads the stream at `url` from `offset`: catch-up reads, then long-polls while `live`,
 * until the stream is closed. On a network failure or a 5xx it reconnects with backoff
 * (100 ms doubling up to `maxBackoffMillis`) and resumes from the last offset it
 * yielded past, so no item is skipped or repeated. Ends when the stream is closed (at
 * its tail), at the tail when not `live`, or when `signal` aborts.
 */
export async function* readStream(url: string, options: ReadStreamOptions = {}): AsyncGenerator<StreamItem, void> {
  const { signal } = options
  const live = options.live ?? true
  const maxBackoff = options.maxBackoffMillis ?? 5_000
  let offset = options.offset ?? "-1"
  let cursor: string | undefined
  let caughtUp = false
  let backoff = 100
  while (!isAborted(signal)) {
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
