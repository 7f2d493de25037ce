/**
 * The local web inspector: the CLI's views of executions, children and queues (see
 * docs/cli.md) in the browser, live, over the same storages. {@link layer} is an
 * `HttpRouter` layer; `noetic-effect inspect` serves it on 127.0.0.1 (see
 * docs/inspector.md).
 *
 * Every request needs the random token of that start: as `?token=` (the first visit,
 * answered with a cookie and a redirect that drops it from the address), as the
 * `noetic_inspector` cookie, or as a bearer token. A wrong or missing one is a 401
 * with an empty body. Actions (clear an execution, stop a child) are POSTs carrying
 * the header `x-noetic-inspector: 1` (which a page of another origin cannot send
 * without the inspector's consent), and a 403 under `readOnly`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as HttpRouter from "effect/http/HttpRouter"
import type * as HttpServerRequest from "effect/http/HttpServerRequest"
import type * as Scope from "effect/Scope"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Crypto from "node:crypto"
import * as Children from "../cli/Children.ts"
import * as Executions from "../cli/Executions.ts"
import * as ReadModel from "../cli/ReadModel.ts"
import type { CliStorages } from "../cli/Storages.ts"
import * as HttpServe from "../http/HttpServe.ts"
import { APP_JS } from "./assets/app.ts"
import { STYLE_CSS } from "./assets/style.ts"
import * as Views from "./Views.ts"

/**
 * Opens the storages the inspector reads, as the CLI's `--home` / `--pg` / `--table`
 * select them (each an `Option`), for the life of the scope.
 *
 * @since 0.1.0
 */
export { type CliStorages, openStorages, type SourceFlags } from "../cli/Storages.ts"

/** What the inspector serves and how. */
export interface InspectorOptions {
  /** The storages to read: `openStorages` of the CLI's flags, open for as long as the layer lives. */
  readonly storages: CliStorages
  /** The token every request must carry; {@link makeToken} makes one. */
  readonly token: string
  /** Refuse the actions (403). */
  readonly readOnly: boolean
  /** How long a stopped child has between SIGTERM and SIGKILL (default 5 s). */
  readonly stopGraceMs?: number
}

/** The name of the cookie that carries the token after the first visit. */
export const COOKIE = "noetic_inspector"

/** A fresh random token (256 bits, URL-safe). */
export const makeToken = (): string => Crypto.randomBytes(32).toString("base64url")

/** How often a live view is read again while a page watches it. */
const LIVE_EVERY_MS = 500

const sameToken = (given: string | undefined, token: string): boolean => {
  if (given === undefined) return false
  const a = Buffer.from(given)
  const b = Buffer.from(token)
  return a.length === b.length && Crypto.timingSafeEqual(a, b)
}

const urlOf = (request: HttpServerRequest.HttpServerRequest): URL => new URL(request.url, "http://inspector.invalid")

/** How a request proves it comes from the one who started the inspector. */
const tokenOf = (request: HttpServerRequest.HttpServerRequest, token: string): "cookie" | "query" | "header" | null => {
  if (sameToken(request.cookies[COOKIE], token)) return "cookie"
  const bearer = request.headers["authorization"]
  if (typeof bearer === "string" && bearer.startsWith("Bearer ") && sameToken(bearer.slice(7), token)) return "header"
  if (sameToken(urlOf(request).searchParams.get("token") ?? undefined, token)) return "query"
  return null
}

const unauthorized = HttpServerResponse.empty({ status: 401 })

const json = (body: unknown, status = 200) =>
  HttpServerResponse.text(JSON.stringify(body), {
    status,
    contentType: "application/json; charset=utf-8",
    headers: { "cache-control": "no-store" }
  })

const problem = (status: number, message: string) => json({ error: message }, status)

const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

/** The page every view starts from: the views render in the browser from the JSON API. */
const shell = (status: number) =>
  HttpServerResponse.html(
    `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>noetic inspector</title>
<link rel="stylesheet" href="/assets/style.css">
<script src="/assets/app.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="Views">
<strong class="brand">noetic inspector</strong>
<a href="/executions" data-nav="executions">Executions</a>
<a href="/children" data-nav="children">Children</a>
<a href="/queues" data-nav="queues">Queues</a>
<span id="source" class="muted"></span>
<span id="live" class="live" aria-live="polite"></span>
</nav></header>
<main id="main" tabindex="-1" data-status="${status}"><noscript>The inspector needs JavaScript (served by itself; nothing is loaded from elsewhere).</noscript></main>
<dialog id="confirm"><form method="dialog"><h2 id="confirm-title"></h2><p id="confirm-text"></p>
<menu><button value="cancel" autofocus>Cancel</button><button value="ok" id="confirm-ok" class="danger">Confirm</button></menu></form></dialog>
</body>
</html>`
  ).pipe(HttpServerResponse.setStatus(status), HttpServerResponse.setHeaders(SECURITY_HEADERS))

/** The JSON of one view, by name and parameters; the live stream reads the same. */
type ViewRequest =
  | { readonly view: "executions"; readonly query: Views.ListQuery }
  | { readonly view: "execution"; readonly id: string }
  | { readonly view: "children" }
  | { readonly view: "child"; readonly id: string }
  | { readonly view: "queues" }

const viewRequest = (params: URLSearchParams): ViewRequest | undefined => {
  const id = params.get("id")
  switch (params.get("view")) {
    case "executions":
      return { view: "executions", query: Views.parseListQuery(params) }
    case "execution":
      return id === null ? undefined : { view: "execution", id }
    case "children":
      return { view: "children" }
    case "child":
      return id === null ? undefined : { view: "child", id }
    case "queues":
      return { view: "queues" }
    default:
      return undefined
  }
}

/**
 * The inspector's routes, as an `HttpRouter` layer over `options.storages` (which the
 * caller opens and keeps open). Serve it with `HttpRouter.serve`.
 *
 * @since 0.1.0
 */
export const layer = (options: InspectorOptions): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const views = yield* Views.make(options.storages)
      const { token } = options

      /** The JSON of a view: its status and body (404 for an unknown execution or child). */
      const read = (request: ViewRequest): Effect.Effect<{ readonly status: number; readonly body: unknown }> => {
        const found = (value: Option.Option<unknown>, what: string) =>
          Option.match(value, {
            onNone: () => ({ status: 404, body: { error: `unknown ${what}`, notFound: true } }),
            onSome: (body) => ({ status: 200, body })
          })
        const run = (() => {
          switch (request.view) {
            case "executions":
              return Effect.map(views.executions(request.query), (body) => ({ status: 200, body }))
            case "execution":
              return Effect.map(views.execution(request.id), (value) => found(value, `execution ${request.id}`))
            case "children":
              return Effect.map(views.children, (body) => ({ status: 200, body }))
            case "child":
              return Effect.map(views.child(request.id), (value) => found(value, `child ${request.id}`))
            case "queues":
              return Effect.map(views.queues, (body) => ({ status: 200, body }))
          }
        })()
        return run.pipe(
          Effect.catch((error: { readonly message: string }) =>
            Effect.succeed({ status: 500, body: { error: ReadModel.firstLineOf(error.message) } })
          )
        )
      }

      /** Wraps a handler: the token first (401 with nothing else), then the handler. */
      const guarded = <E, R>(
        handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
      ) =>
      (request: HttpServerRequest.HttpServerRequest) => {
        const via = tokenOf(request, token)
        if (via === null) return Effect.succeed(unauthorized)
        if (via === "query" && request.method === "GET" && !urlOf(request).pathname.startsWith("/api/")) {
          // The first visit: the token moves into a cookie and out of the address bar.
          const url = urlOf(request)
          url.searchParams.delete("token")
          return Effect.succeed(
            HttpServerResponse.redirect(`${url.pathname}${url.search}`, { status: 303 }).pipe(
              HttpServerResponse.setHeader("set-cookie", `${COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict`),
              HttpServerResponse.setHeaders(SECURITY_HEADERS)
            )
          )
        }
        return handler(request)
      }

      /** Wraps an action: a POST from the inspector's own page, refused under read-only. */
      const action = <E, R>(
        handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
      ) =>
        guarded((request) => {
          if (options.readOnly) return Effect.succeed(problem(403, "the inspector is read-only (--read-only)"))
          if (request.headers["x-noetic-inspector"] !== "1") {
            return Effect.succeed(problem(403, "actions come from the inspector's own page (header x-noetic-inspector)"))
          }
          return handler(request)
        })

      const param = (name: string) => Effect.map(HttpRouter.params, (params) => params[name] ?? "")

      const page = (status: number) => guarded(() => Effect.succeed(shell(status)))
      const asset = (body: string, contentType: string) =>
        guarded(() =>
          Effect.succeed(HttpServerResponse.text(body, { contentType }).pipe(HttpServerResponse.setHeaders(SECURITY_HEADERS)))
        )
      const api = <R>(
        request: (params: URLSearchParams, path: typeof param) => Effect.Effect<ViewRequest, never, R>
      ) =>
        guarded((http) =>
          Effect.flatMap(request(urlOf(http).searchParams, param), (view) => Effect.map(read(view), ({ body, status }) => json(body, status)))
        )

      yield* router.add("GET", "/", page(200))
      yield* router.add("GET", "/executions", page(200))
      yield* router.add("GET", "/children", page(200))
      yield* router.add("GET", "/queues", page(200))
      yield* router.add(
        "GET",
        "/executions/:id",
        guarded(() =>
          Effect.gen(function*() {
            const id = yield* param("id")
            const storage = Option.getOrUndefined((yield* views.storages).checkpoints)
            const known = storage !== undefined && (yield* Effect.orElseSucceed(Executions.isRecorded(storage, id), () => true))
            return shell(known ? 200 : 404)
          })
        )
      )
      yield* router.add(
        "GET",
        "/children/:id",
        guarded(() =>
          Effect.gen(function*() {
            const id = yield* param("id")
            const storage = Option.getOrUndefined((yield* views.storages).subprocess)
            const known = storage !== undefined && (yield* Effect.orElseSucceed(Children.hasChild(storage, id), () => true))
            return shell(known ? 200 : 404)
          })
        )
      )
      yield* router.add("GET", "/assets/app.js", asset(APP_JS, "text/javascript; charset=utf-8"))
      yield* router.add("GET", "/assets/style.css", asset(STYLE_CSS, "text/css; charset=utf-8"))
      yield* router.add(
        "GET",
        "/api/meta",
        guarded(() => Effect.succeed(json({ source: options.storages.source, readOnly: options.readOnly, statuses: Views.STATUSES })))
      )
      yield* router.add("GET", "/api/executions", api((params) => Effect.succeed({ view: "executions", query: Views.parseListQuery(params) })))
      yield* router.add("GET", "/api/executions/:id", api((_, path) => Effect.map(path("id"), (id) => ({ view: "execution", id }))))
      yield* router.add(
        "GET",
        "/api/executions/:id/outputs/:seq",
        guarded(() =>
          Effect.gen(function*() {
            const id = yield* param("id")
            const seq = Number(yield* param("seq"))
            if (!Number.isInteger(seq) || seq < 0) return problem(400, "seq must be a ledger seq (a whole number)")
            const found = yield* Effect.exit(views.output(id, seq))
            if (found._tag === "Failure") return problem(500, "the ledger could not be read")
            return Option.match(found.value, {
              onNone: () => problem(404, `execution ${id} has no recorded output at seq ${seq}`),
              onSome: (output) => json({ seq, undefined: output.undefined, value: output.undefined ? null : output.value })
            })
          })
        )
      )
      yield* router.add("GET", "/api/children", api(() => Effect.succeed({ view: "children" })))
      yield* router.add("GET", "/api/children/:id", api((_, path) => Effect.map(path("id"), (id) => ({ view: "child", id }))))
      yield* router.add("GET", "/api/queues", api(() => Effect.succeed({ view: "queues" })))

      // Live: the JSON of one view, sent again whenever it changes (read every half second).
      yield* router.add(
        "GET",
        "/api/events",
        guarded((request) => {
          const wanted = viewRequest(urlOf(request).searchParams)
          if (wanted === undefined) return Effect.succeed(problem(400, "name a view: ?view=executions|execution|children|child|queues"))
          const events = Stream.fromEffectSchedule(read(wanted), Schedule.spaced(LIVE_EVERY_MS)).pipe(
            Stream.map((result) => JSON.stringify(result)),
            Stream.changes,
            Stream.map((text) => `data: ${text}\n\n`),
            Stream.encodeText
          )
          return Effect.succeed(
            HttpServerResponse.stream(Stream.concat(Stream.make(new TextEncoder().encode("retry: 1000\n\n")), events), {
              contentType: "text/event-stream",
              headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
            })
          )
        })
      )

      yield* router.add(
        "POST",
        "/api/executions/:id/clear",
        action(() =>
          Effect.gen(function*() {
            const id = yield* param("id")
            const storage = Option.getOrUndefined((yield* views.storages).checkpoints)
            if (storage === undefined || !(yield* Executions.isRecorded(storage, id))) return problem(404, `unknown execution ${id}`)
            const now = Date.now()
            const [row] = yield* ReadModel.executionRows(yield* views.storages, now, ReadModel.silent, id)
            if (row?.status === "running") return problem(409, `execution ${id} is running; stop what runs it first`)
            yield* Executions.clearExecution(storage, id)
            return json({ cleared: id })
          }).pipe(Effect.catch((error: { readonly message: string }) => Effect.succeed(problem(500, ReadModel.firstLineOf(error.message)))))
        )
      )
      yield* router.add(
        "POST",
        "/api/children/:id/stop",
        action(() =>
          Effect.gen(function*() {
            const id = yield* param("id")
            const storage = Option.getOrUndefined((yield* views.storages).subprocess)
            if (storage === undefined || !(yield* Children.hasChild(storage, id))) return problem(404, `unknown child ${id}`)
            const outcome = yield* Children.stopChild(storage, id, options.stopGraceMs ?? 5_000)
            return json(outcome)
          }).pipe(Effect.catch((error: { readonly message: string }) => Effect.succeed(problem(409, ReadModel.firstLineOf(error.message)))))
        )
      )
      yield* router.add("*", "*", page(404))
    })
  )

/** The port `noetic-effect inspect` serves on unless told otherwise. */
export const DEFAULT_PORT = 4438

/**
 * Serves the inspector on 127.0.0.1 (through `HttpServe`, without its bearer token:
 * the inspector checks its own, which becomes a cookie) until the scope closes, and
 * returns the address to open, token included.
 *
 * @since 0.1.0
 */
export const serve = (
  options: Omit<InspectorOptions, "token"> & { readonly port?: number; readonly token?: string }
): Effect.Effect<{ readonly url: string; readonly base: string; readonly token: string }, HttpServe.HttpServeError, Scope.Scope> =>
  Effect.gen(function*() {
    const token = options.token ?? makeToken()
    const context = yield* Layer.build(
      HttpServe.layer(layer({ ...options, token }), { host: "127.0.0.1", port: options.port ?? DEFAULT_PORT })
    )
    const served = Context.get(context, HttpServe.ServedUrl)
    return { url: `${served.url}/?token=${token}`, base: served.url, token }
  })
