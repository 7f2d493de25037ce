/**
 * A Durable Streams server: the stream routes served by `HttpServe` over the
 * `DurableStreams` service in context. `layer` serves it; `StreamRoutes.layerRouter`
 * mounts the same routes into a host's own router. Several servers on one Postgres wake
 * each other's live reads through `layerPostgresSignals` (LISTEN/NOTIFY). See
 * docs/http-streams.md.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as DurableStreamsModule from "../services/DurableStreams.ts"
import type { StorageAdapter } from "../services/StorageAdapter.ts"
import * as HttpServe from "./HttpServe.ts"
import * as StreamRoutes from "./StreamRoutes.ts"

/**
 * Where and how to serve streams.
 *
 * @since 0.1.0
 * @category options
 */
export interface StreamServerOptions extends HttpServe.HttpServeOptions, StreamRoutes.StreamRoutesOptions {}

/**
 * Refuses a `longPollMillis` or `sseMillis` that is not a positive finite number: a
 * negative or NaN wait would answer every long-poll at once (a reader polls in a hot
 * loop), a non-number would fail every live read with a 500, and an infinite one never
 * ends a long-poll.
 */
const checkRouteOptions = (options: StreamRoutes.StreamRoutesOptions): Effect.Effect<void, HttpServe.HttpServeError> =>
  Effect.suspend(() => {
    for (const name of ["longPollMillis", "sseMillis"] as const) {
      const value: unknown = options[name]
      if (value !== undefined && !(typeof value === "number" && Number.isFinite(value) && value > 0)) {
        return Effect.fail(
          new HttpServe.HttpServeError({
            reason: "InvalidOption",
            message: `${name} must be a positive number of milliseconds, not ${String(value)}`
          })
        )
      }
    }
    return Effect.void
  })

/**
 * Serves the streams of the `DurableStreams` in context until the scope closes; the base
 * URL (a stream `a/b` is at `${url}/a/b`) is the `ServedUrl` service.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: StreamServerOptions = {}
): Layer.Layer<HttpServe.ServedUrl, HttpServe.HttpServeError, DurableStreamsModule.DurableStreams> =>
  Layer.unwrap(Effect.as(checkRouteOptions(options), HttpServe.layer(StreamRoutes.layerRouter(options), options))) as never

/**
 * The server together with its service, over the `StorageAdapter` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithService = (
  options: StreamServerOptions & DurableStreamsModule.DurableStreamsOptions = {}
): Layer.Layer<HttpServe.ServedUrl | DurableStreamsModule.DurableStreams, HttpServe.HttpServeError, StorageAdapter> =>
  layer(options).pipe(Layer.provideMerge(DurableStreamsModule.layer(options)))

/**
 * The stream routes under `prefix` as a Node `request` listener over the service's
 * storage, for a host's own `http.Server` (docs/http-streams.md#in-your-own-server):
 * the host sends it the requests under the prefix.
 *
 * @since 0.1.0
 * @category constructors
 */
export const nodeListener = (
  options: StreamRoutes.StreamRoutesOptions & DurableStreamsModule.DurableStreamsOptions & {
    readonly token?: string | undefined
    readonly maxBodyBytes?: number | undefined
  } = {}
) =>
  Effect.andThen(
    checkRouteOptions(options),
    HttpServe.nodeListener(StreamRoutes.layerRouter(options).pipe(Layer.provide(DurableStreamsModule.layer(options))), options)
  )

/** The Postgres channel appends are announced on. */
export const SIGNAL_CHANNEL = "noetic_durable_streams"

/**
 * Cross-process wake-ups through Postgres LISTEN/NOTIFY on its own connection: an append
 * through one server wakes the live reads of every server on the same database at once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makePostgresSignals = (url: string) =>
  Effect.gen(function*() {
    const { PgClient } = yield* Effect.promise(() => import("@effect/sql-pg"))
    const Reactivity = yield* Effect.promise(() => import("effect/reactivity/Reactivity"))
    const client = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 2 }).pipe(
      Effect.provide(Reactivity.layer)
    )
    const changes = yield* client.listen(SIGNAL_CHANNEL)
    const signals: DurableStreamsModule.StreamSignals = {
      publish: (streamId) => Effect.ignore(client.notify(SIGNAL_CHANNEL, streamId)),
      changes: Stream.fromQueue(changes).pipe(
        Stream.map((notification) => notification.payload),
        Stream.orDie
      )
    }
    return signals
  })
