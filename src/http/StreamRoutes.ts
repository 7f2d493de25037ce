/**
 * The HTTP face of `DurableStreams`: every path is a stream, and the method, headers and
 * query of a request map to the protocol's operations (PROTOCOL.md of
 * durable-streams/durable-streams, v1). Status codes, caching headers, the browser
 * security headers, long-poll and SSE live here; the rules of streams live in the
 * service. See docs/http-streams.md and docs/architecture.md#http-durable-streams.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import type * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { isTextual, liveCursor } from "../internal/streams/model.ts"
import { type AppendResult, DurableStreams, type ReadResult, StreamError, type StreamInfo } from "../services/DurableStreams.ts"

/**
 * Settings of the routes.
 *
 * @since 0.1.0
 * @category options
 */
export interface StreamRoutesOptions {
  /** Where the routes are mounted (`/streams`); stream paths are what follows it. Default: the root. */
  readonly prefix?: string | undefined
  /** How long a long-poll waits for data before its 204 (default 10 s). */
  readonly longPollMillis?: number | undefined
  /** How long an SSE response stays open before the server ends it for the client to reconnect (default 60 s). */
  readonly sseMillis?: number | undefined
}

const EXPOSED = [
  "Stream-Next-Offset",
  "Stream-Cursor",
  "Stream-Up-To-Date",
  "Stream-Closed",
  "Stream-TTL",
  "Stream-Expires-At",
  "Stream-SSE-Data-Encoding",
  "Producer-Epoch",
  "Producer-Seq",
  "Producer-Expected-Seq",
  "Producer-Received-Seq",
  "ETag",
  "Location"
].join(", ")

/** The headers every response carries: PROTOCOL.md 12.7 and CORS for browsers. */
const COMMON: Record<string, string> = {
  "x-content-type-options": "nosniff",
  "cross-origin-resource-policy": "cross-origin",
  "access-control-allow-origin": "*",
  "access-control-expose-headers": EXPOSED
}

const CACHEABLE = "private, max-age=60, stale-while-revalidate=300"

const respond = (status: number, headers: Record<string, string | undefined>, body?: Uint8Array | string) => {
  const all: Record<string, string> = { ...COMMON }
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) all[name] = value
  if (body === undefined) return HttpServerResponse.empty({ status, headers: all })
  const contentType = all["content-type"] ?? "text/plain; charset=utf-8"
  return typeof body === "string"
    ? HttpServerResponse.text(body, { status, headers: all, contentType })
    : HttpServerResponse.uint8Array(body, { status, headers: all, contentType })
}

/** The response of a refusal: its status, the headers the protocol names, a short reason. */
const refusal = (error: StreamError, method: string) => {
  const status = {
    BadRequest: 400,
    NotFound: 404,
    Gone: 410,
    Conflict: 409,
    StaleEpoch: 403,
    SequenceGap: 409,
    Storage: 500,
    ReadOnly: 405
  }[error.reason]
  const headers: Record<string, string | undefined> = {
    "stream-closed": error.closed === true ? "true" : undefined,
    "stream-next-offset": error.nextOffset,
    "producer-epoch": error.currentEpoch === undefined ? undefined : String(error.currentEpoch),
    "producer-expected-seq": error.expectedSeq === undefined ? undefined : String(error.expectedSeq),
    "producer-received-seq": error.receivedSeq === undefined ? undefined : String(error.receivedSeq),
    allow: error.reason === "ReadOnly" ? "GET, HEAD, OPTIONS" : undefined,
    "cache-control": "no-store"
  }
  return respond(status, headers, method === "HEAD" ? undefined : `${error.message}\n`)
}

const infoHeaders = (info: StreamInfo): Record<string, string | undefined> => ({
  "content-type": info.contentType,
  "stream-next-offset": info.nextOffset,
  "stream-closed": info.closed ? "true" : undefined,
  "stream-ttl": info.ttlSeconds === undefined ? undefined : String(info.ttlSeconds),
  "stream-expires-at": info.expiresAt
})

const badRequest = (message: string) => new StreamError({ reason: "BadRequest", message })

/** The body of a read: bytes, or a JSON array of the messages. */
const readBody = (result: ReadResult): Uint8Array | string =>
  result.json ? `[${result.messages.join(",")}]` : result.bytes

const hasData = (result: ReadResult) => result.json ? result.messages.length > 0 : result.bytes.byteLength > 0

const readHeaders = (result: ReadResult): Record<string, string | undefined> => ({
  "content-type": result.contentType,
  "stream-next-offset": result.nextOffset,
  "stream-up-to-date": result.upToDate ? "true" : undefined,
  "stream-closed": result.closed ? "true" : undefined
})

/** Query parameters the protocol gives one meaning to: a repeated or empty `offset` is refused. */
const queryOf = (url: URL) =>
  Effect.suspend(() => {
    const offsets = url.searchParams.getAll("offset")
    if (offsets.length > 1) return Effect.fail(badRequest("give one offset"))
    const offset = offsets[0]
    if (offset !== undefined && offset.length === 0) return Effect.fail(badRequest("the offset is empty"))
    const live = url.searchParams.get("live") ?? undefined
    if (live !== undefined && live !== "long-poll" && live !== "sse") {
      return Effect.fail(badRequest(`live must be long-poll or sse, not ${JSON.stringify(live)}`))
    }
    return Effect.succeed({ offset, live, cursor: url.searchParams.get("cursor") ?? undefined })
  })

const encoder = new TextEncoder()

/**
 * Turns of the event loop an SSE response lets pass between a wake-up and its read: the
 * appends in flight land meanwhile, and go out as one event instead of one each.
 */
const SSE_SETTLE_TURNS = 3
const nextTurn = Effect.callback<void>((done) => {
  const immediate = setImmediate(() => done(Effect.void))
  return Effect.sync(() => clearImmediate(immediate))
})

/**
 * One SSE event: `event:` then each line as `data:<line>`, then `id:`. Not
 * `effect/encoding`'s `Sse.encoder`: it writes `id:` first and `data: ` with a space,
 * and the official conformance suite reads `event: ...` followed directly by `data:{`.
 */
const sseEvent = (event: string, data: string, id: string | undefined): string => {
  let out = `event: ${event}\n`
  for (const line of data.split(/\r\n|\r|\n/)) out += `data:${line}\n`
  if (id !== undefined) out += `id:${id}\n`
  return out + "\n"
}

/** The data event and the control event of one read, as SSE text. */
const sseFrames = (result: ReadResult, cursor: string, withData: boolean): string => {
  const control: Record<string, unknown> = { streamNextOffset: result.nextOffset }
  if (!result.closed) control.streamCursor = cursor
  if (result.upToDate) control.upToDate = true
  if (result.closed) control.streamClosed = true
  let out = ""
  if (withData) {
    const data = result.json
      ? `[${result.messages.join(",")}]`
      : isTextual(result.contentType)
      ? Buffer.from(result.bytes).toString("utf8")
      : Buffer.from(result.bytes).toString("base64")
    out += sseEvent("data", data, result.nextOffset)
  }
  return out + sseEvent("control", JSON.stringify(control), result.nextOffset)
}

/**
 * The handler of every stream request, for a router.
 *
 * @since 0.1.0
 * @category handlers
 */
export const handler = (streams: DurableStreams["Service"], options: StreamRoutesOptions = {}) => {
  const prefix = (options.prefix ?? "").replace(/\/+$/, "")
  const longPollMillis = options.longPollMillis ?? 10_000
  const sseMillis = options.sseMillis ?? 60_000

  const sse = (
    streams: DurableStreams["Service"],
    path: string,
    first: ReadResult,
    clientCursor: string | undefined
  ) => {
    const started = Date.now()
    interface State {
      readonly result: ReadResult | undefined
      readonly offset: string
      readonly done: boolean
    }
    // The first read is taken from here once, not put in the stream's initial state: the
    // response keeps that state for as long as it is open, and a catch-up read from -1
    // can be large (the per-reader memory bench).
    let firstRead: ReadResult | undefined = first
    const step = (state: State): Effect.Effect<readonly [Uint8Array, State] | undefined> =>
      Effect.gen(function*() {
        if (state.done) return undefined
        const cursor = liveCursor(Date.now(), clientCursor)
        const pending = state.result ?? firstRead
        firstRead = undefined
        if (pending !== undefined) {
          const result = pending
          const text = sseFrames(result, cursor, hasData(result))
          return [encoder.encode(text), { result: undefined, offset: result.nextOffset, done: result.closed }] as const
        }
        const remaining = sseMillis - (Date.now() - started)
        if (remaining <= 0) return undefined
        const changed = yield* streams.awaitChange(path, state.offset, Duration.millis(Math.min(remaining, 15_000)))
        if (!changed) return [encoder.encode(":\n\n"), state] as const
        for (let i = 0; i < SSE_SETTLE_TURNS; i++) yield* nextTurn
        const result = yield* streams.read(path, state.offset)
        if (!hasData(result) && !result.closed) return [new Uint8Array(0), { ...state, result: undefined }] as const
        return [new Uint8Array(0), { result, offset: state.offset, done: false }] as const
      }).pipe(Effect.catch(() => Effect.succeed(undefined)))
    const body = Stream.unfold<State, Uint8Array, never, never>({ result: undefined, offset: first.nextOffset, done: false }, step)
    const headers: Record<string, string> = {
      ...COMMON,
      "cache-control": "no-cache",
      connection: "keep-alive"
    }
    if (!isTextual(first.contentType)) headers["stream-sse-data-encoding"] = "base64"
    return HttpServerResponse.stream(Stream.filter(body, (chunk) => chunk.byteLength > 0), {
      contentType: "text/event-stream",
      headers
    })
  }

  const get = (
    streams: DurableStreams["Service"],
    request: HttpServerRequest.HttpServerRequest,
    path: string,
    url: URL
  ) =>
    Effect.gen(function*() {
      const query = yield* queryOf(url)
      if (query.live === "sse") {
        const resume = request.headers["last-event-id"]
        const offset = resume !== undefined && resume.length > 0 ? resume : query.offset
        if (offset === undefined) return yield* badRequest("an SSE read needs an offset")
        const first = yield* streams.read(path, offset)
        return sse(streams, path, first, query.cursor)
      }
      if (query.live === "long-poll") {
        if (query.offset === undefined) return yield* badRequest("a long-poll read needs an offset")
        let result = yield* streams.read(path, query.offset)
        if (!hasData(result) && !result.closed) {
          const changed = yield* streams.awaitChange(path, result.nextOffset, Duration.millis(longPollMillis))
          if (changed) result = yield* streams.read(path, result.nextOffset)
        }
        const cursor = result.closed ? undefined : liveCursor(Date.now(), query.cursor)
        if (!hasData(result)) {
          return respond(204, { ...readHeaders(result), "stream-up-to-date": "true", "stream-cursor": cursor, "cache-control": "no-store" })
        }
        return respond(200, {
          ...readHeaders(result),
          "stream-cursor": cursor,
          etag: etagOf(result),
          "cache-control": CACHEABLE
        }, readBody(result))
      }
      const result = yield* streams.read(path, query.offset)
      if (query.offset === "now") {
        return respond(200, { ...readHeaders(result), "cache-control": "no-store" }, readBody(result))
      }
      const etag = etagOf(result)
      if (request.headers["if-none-match"] === etag) {
        return respond(304, { etag, "stream-next-offset": result.nextOffset, "cache-control": CACHEABLE })
      }
      return respond(200, { ...readHeaders(result), etag, "cache-control": CACHEABLE }, readBody(result))
    })

  const bodyOf = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.map(request.arrayBuffer, (buffer) => new Uint8Array(buffer)).pipe(
      Effect.mapError(() => new StreamError({ reason: "BadRequest", message: "the request body could not be read" }))
    )

  const put = (streams: DurableStreams["Service"], request: HttpServerRequest.HttpServerRequest, path: string, url: URL) =>
    Effect.gen(function*() {
      const h = request.headers
      const body = yield* bodyOf(request)
      const forkedFrom = h["stream-forked-from"]
      const result = yield* streams.create({
        path,
        contentType: h["content-type"],
        ttl: h["stream-ttl"],
        expiresAt: h["stream-expires-at"],
        closed: isTrue(h["stream-closed"]),
        body,
        forkedFrom: forkedFrom === undefined ? undefined : streamPathOf(forkedFrom),
        forkOffset: h["stream-fork-offset"],
        forkSubOffset: h["stream-fork-sub-offset"]
      })
      const location = `${url.protocol}//${url.host}${url.pathname}`
      return respond(result.created ? 201 : 200, {
        ...infoHeaders(result),
        location: result.created ? location : undefined
      })
    })

  const post = (streams: DurableStreams["Service"], request: HttpServerRequest.HttpServerRequest, path: string) =>
    Effect.gen(function*() {
      const h = request.headers
      const body = yield* bodyOf(request)
      const result: AppendResult = yield* streams.append({
        path,
        contentType: h["content-type"],
        body,
        close: isTrue(h["stream-closed"]),
        seq: h["stream-seq"],
        producerId: h["producer-id"],
        producerEpoch: h["producer-epoch"],
        producerSeq: h["producer-seq"]
      })
      const status = result.producer !== undefined && result.outcome === "appended" && body.byteLength > 0 ? 200 : 204
      return respond(status, {
        "stream-next-offset": result.nextOffset,
        "stream-closed": result.closed ? "true" : undefined,
        "producer-epoch": result.producer === undefined ? undefined : String(result.producer.epoch),
        "producer-seq": result.producer === undefined ? undefined : String(result.producer.seq)
      })
    })

  /** A `Stream-Forked-From` value names a path on this server: the mount prefix is not part of the stream path. */
  const streamPathOf = (value: string) => {
    const pathname = value.startsWith("http://") || value.startsWith("https://") ? new URL(value).pathname : value
    return prefix !== "" && pathname.startsWith(prefix + "/") ? pathname.slice(prefix.length) : pathname
  }

  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = new URL(request.url, `http://${request.headers["host"] ?? "localhost"}`)
    const method = request.method
    if (method === "OPTIONS") {
      return respond(204, {
        "access-control-allow-methods": "GET, HEAD, POST, PUT, DELETE, OPTIONS",
        "access-control-allow-headers": request.headers["access-control-request-headers"] ?? "*",
        "access-control-max-age": "86400"
      })
    }
    let path: string
    try {
      path = decodeURIComponent(url.pathname)
    } catch {
      return refusal(badRequest("the path is not valid percent-encoding"), method)
    }
    const operation = method === "GET"
      ? get(streams, request, path, url)
      : method === "HEAD"
      ? Effect.map(streams.head(path), (info) => respond(200, { ...infoHeaders(info), "cache-control": "no-store" }))
      : method === "PUT"
      ? put(streams, request, path, url)
      : method === "POST"
      ? post(streams, request, path)
      : method === "DELETE"
      ? Effect.as(streams.remove(path), respond(204, {}))
      : Effect.succeed(respond(405, { allow: "GET, HEAD, POST, PUT, DELETE, OPTIONS" }, "method not allowed\n"))
    return yield* Effect.catch(operation, (error) => Effect.succeed(refusal(error, method)))
  })
}

const isTrue = (value: string | undefined) => value !== undefined && value.trim().toLowerCase() === "true"

/** `"<stream id>:<start>:<end>[:c]"`: changes with the data and with closure (PROTOCOL.md 10.1). */
const etagOf = (result: ReadResult) =>
  `"${result.streamId}:${result.startOffset}:${result.nextOffset}${result.closed ? ":c" : ""}"`

/**
 * The routes as a layer for a host's `HttpRouter`: every method on every path under
 * `prefix` (the root by default).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRouter = (options: StreamRoutesOptions = {}): Layer.Layer<never, never, HttpRouter.HttpRouter | DurableStreams> => {
  const prefix = (options.prefix ?? "").replace(/\/+$/, "")
  return HttpRouter.use((router) =>
    Effect.flatMap(DurableStreams, (streams) => {
      const mounted = prefix === "" ? router : router.prefixed(prefix)
      return mounted.add("*", "/*", handler(streams, options))
    })
  )
}
