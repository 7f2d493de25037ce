/**
 * Serves an `HttpRouter` application on Node's HTTP server: at a host and port (port 0
 * picks a free one), with an optional bearer token, a maximum request body size, and a
 * graceful shutdown of about a second when the layer's scope closes. The bound base URL
 * is the {@link ServedUrl} service. See docs/http-streams.md#serving.
 *
 * Auth is optional and composable: a host that checks its own credentials (a cookie)
 * serves without a token, but only on a loopback address. A non-loopback host without a
 * token is refused with a typed {@link HttpServeError} before anything binds.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpIncomingMessage from "effect/http/HttpIncomingMessage"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { createHash, timingSafeEqual } from "node:crypto"
import * as Http from "node:http"
import { isIP } from "node:net"

/** The largest request body a served app reads unless told otherwise: 16 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

/** How long open requests get to finish once the scope closes, before their connections are cut. */
export const DEFAULT_SHUTDOWN_MILLIS = 1_000

/**
 * Where and how to serve.
 *
 * @since 0.1.0
 * @category options
 */
export interface HttpServeOptions {
  /** The address to bind; `127.0.0.1` when absent. Any non-loopback address needs `token`. */
  readonly host?: string | undefined
  /** The port; 0 (the default) lets the system pick a free one. */
  readonly port?: number | undefined
  /** When set, every request must carry `Authorization: Bearer <token>` (else 401). */
  readonly token?: string | undefined
  /** The largest request body accepted, in bytes (default 16 MiB); larger is 413, refused before it is read. */
  readonly maxBodyBytes?: number | undefined
  /** How long open requests may run on after the scope closes, in milliseconds (default 1000). */
  readonly shutdownMillis?: number | undefined
}

/**
 * Why serving could not start: a non-loopback host without a token (`TokenRequired`), an
 * option out of range (`InvalidOption`), or the system refused the bind (`BindFailed`).
 *
 * @since 0.1.0
 * @category errors
 */
export class HttpServeError extends Schema.TaggedError<HttpServeError>("noetic-effect/http/HttpServeError")(
  "HttpServeError",
  {
    reason: Schema.Literals(["TokenRequired", "InvalidOption", "BindFailed"]),
    message: Schema.String
  }
) {
  /** The error code. */
  get code(): "HTTP_SERVE" {
    return "HTTP_SERVE"
  }
}

/**
 * The base URL the app is served at (`http://127.0.0.1:4437`, no trailing slash), with
 * the bound host and port.
 *
 * @since 0.1.0
 * @category services
 */
export class ServedUrl extends Context.Service<ServedUrl, {
  readonly url: string
  readonly host: string
  readonly port: number
}>()("noetic-effect/http/HttpServe/ServedUrl") {}

/** Whether `host` names this machine only (127.0.0.0/8, ::1, localhost). */
export const isLoopbackHost = (host: string): boolean => {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host
  if (bare === "localhost" || bare === "::1" || bare === "0:0:0:0:0:0:0:1") return true
  if (isIP(bare) === 4) return bare.startsWith("127.")
  if (bare.toLowerCase().startsWith("::ffff:")) return bare.slice(7).startsWith("127.")
  return false
}

interface Settings {
  readonly host: string
  readonly port: number
  readonly token: string | undefined
  readonly maxBodyBytes: number
  readonly shutdownMillis: number
}

const invalid = (message: string) => new HttpServeError({ reason: "InvalidOption", message })

const settingsOf = (options: HttpServeOptions): Effect.Effect<Settings, HttpServeError> =>
  Effect.suspend(() => {
    const host = options.host ?? "127.0.0.1"
    const port = options.port ?? 0
    const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
    const shutdownMillis = options.shutdownMillis ?? DEFAULT_SHUTDOWN_MILLIS
    if (typeof host !== "string" || host.length === 0) return Effect.fail(invalid("host must be a non-empty string"))
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      return Effect.fail(invalid(`port must be an integer from 0 to 65535, not ${String(port)}`))
    }
    if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes <= 0) {
      return Effect.fail(invalid(`maxBodyBytes must be a positive integer, not ${String(maxBodyBytes)}`))
    }
    if (!Number.isFinite(shutdownMillis) || shutdownMillis < 0) {
      return Effect.fail(invalid(`shutdownMillis must be a non-negative number, not ${String(shutdownMillis)}`))
    }
    const token = options.token
    if (token !== undefined && (typeof token !== "string" || token.length === 0)) {
      return Effect.fail(invalid("token must be a non-empty string when given"))
    }
    if (token === undefined && !isLoopbackHost(host)) {
      return Effect.fail(
        new HttpServeError({
          reason: "TokenRequired",
          message: `refusing to serve on ${host} without a token: only a loopback address may be served without one`
        })
      )
    }
    return Effect.succeed({ host, port, token, maxBodyBytes, shutdownMillis })
  })

const digest = (text: string): Buffer => createHash("sha256").update(text).digest()

/** Whether an `Authorization` header carries `token`, compared in constant time. */
export const bearerMatches = (header: string | undefined, token: string): boolean => {
  if (header === undefined) return false
  const match = /^Bearer\s+(.+)$/i.exec(header.trim())
  if (match === null) return false
  return timingSafeEqual(digest(match[1]!), digest(token))
}

/**
 * Wraps an app with the token check and the body limit: a request without the token is
 * 401, one whose `Content-Length` exceeds the limit is 413 before any of it is read, and
 * a body without a length is cut off at the limit while read (`MaxBodySize`).
 *
 * @since 0.1.0
 * @category middleware
 */
export const guard = (options: { readonly token?: string | undefined; readonly maxBodyBytes: number }) =>
<E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    if (options.token !== undefined && !bearerMatches(request.headers["authorization"], options.token)) {
      return Effect.succeed(HttpServerResponse.text("missing or wrong bearer token\n", {
        status: 401,
        headers: { "www-authenticate": "Bearer" }
      }))
    }
    const length = request.headers["content-length"]
    if (length !== undefined && Number(length) > options.maxBodyBytes) {
      return Effect.succeed(HttpServerResponse.text(
        `request body of ${length} bytes exceeds the limit of ${options.maxBodyBytes}\n`,
        { status: 413, headers: { connection: "close" } }
      ))
    }
    return Effect.provideService(app, HttpIncomingMessage.MaxBodySize, BigInt(options.maxBodyBytes) as never)
  })

/** The URL of a bound address: IPv6 in brackets, the unspecified address as given. */
const baseUrl = (host: string, port: number): string =>
  `http://${isIP(host) === 6 ? `[${host}]` : host}:${port}`

/**
 * Closes the server: stops accepting, lets open requests finish for `millis`, then cuts
 * every connection still open (a live read would otherwise hold the process).
 */
const closeGracefully = (server: Http.Server, millis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (!server.listening) return resume(Effect.void)
    server.once("close", () => resume(Effect.void))
    server.close()
    server.closeIdleConnections()
  }).pipe(
    Effect.timeoutOrElse({ duration: Duration.millis(millis), orElse: () => Effect.void }),
    Effect.ensuring(Effect.sync(() => server.closeAllConnections()))
  )

/**
 * Serves the routes of `app` (layers that add to an `HttpRouter`) until the layer's scope
 * closes, and provides the bound {@link ServedUrl}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <A, E, R>(
  app: Layer.Layer<A, E, R>,
  options: HttpServeOptions = {}
) =>
  Layer.unwrap(Effect.gen(function*() {
    const settings = yield* settingsOf(options)
    // Loaded when a server is made: importing this module (and the entry points that
    // re-export it) loads no Node HTTP stack, whose CommonJS form needs a real filename.
    const NodeHttpServer = yield* Effect.promise(() => import("@effect/platform-node/NodeHttpServer"))
    // Idle keep-alive connections stay open a minute: a client then closes them first,
    // and never sends a request on a socket the server is closing at that moment.
    const server = Http.createServer({ requestTimeout: 0, keepAliveTimeout: 60_000 })
    const serverLayer = NodeHttpServer.layer(() => server, {
      host: settings.host,
      port: settings.port,
      gracefulShutdownTimeout: Duration.millis(settings.shutdownMillis)
    }).pipe(Layer.catchTag("ServeError", (error) =>
      Layer.effectContext(Effect.fail(
        new HttpServeError({
          reason: "BindFailed",
          message: `cannot listen on ${settings.host}:${settings.port}: ${
            error.cause instanceof Error ? error.cause.message : String(error.cause)
          }`
        })
      ))))
    const serving = Layer.unwrap(Effect.map(
      HttpRouter.toHttpEffect(app),
      (handler) => HttpServer.serve(guard(settings)(handler))
    ))
    const url = Layer.effect(
      ServedUrl,
      Effect.gen(function*() {
        const bound = yield* HttpServer.HttpServer
        // Added after the Node server's own finalizer, so it runs first: it bounds the wait.
        yield* Effect.addFinalizer(() => closeGracefully(server, settings.shutdownMillis))
        const port = bound.address._tag !== "UnixPathAddress" ? bound.address.port : settings.port
        return ServedUrl.of({ url: baseUrl(settings.host, port), host: settings.host, port })
      })
    )
    return Layer.merge(serving, url).pipe(Layer.provide(serverLayer))
  }))

/**
 * The routes of `app` as a Node `request` listener, for a host that runs its own
 * `http.Server` and hands some requests to these routes (it decides which). The body
 * limit and the optional bearer token hold as in {@link layer}. Requests in flight are
 * interrupted when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const nodeListener = <A, E, R>(
  app: Layer.Layer<A, E, R>,
  options: { readonly token?: string | undefined; readonly maxBodyBytes?: number | undefined } = {}
) =>
  Effect.gen(function*() {
    const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
    if (!(Number.isSafeInteger(maxBodyBytes) && maxBodyBytes >= 1)) {
      return yield* new HttpServeError({ reason: "InvalidOption", message: `maxBodyBytes must be a positive integer, not ${maxBodyBytes}` })
    }
    const NodeHttpServer = yield* Effect.promise(() => import("@effect/platform-node/NodeHttpServer"))
    const handler = yield* HttpRouter.toHttpEffect(app)
    const scope = yield* Effect.scope
    return yield* NodeHttpServer.makeHandler(guard({ token: options.token, maxBodyBytes })(handler), { scope })
  })
