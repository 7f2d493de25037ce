/**
 * `createStreamServer`: the Durable Streams server for Promise callers. It translates
 * shapes, Promises and errors only; the server is `http/StreamServer.ts`. See
 * docs/http-streams.md#promise-api.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type * as Http from "node:http"
import type { HttpServeError } from "../http/HttpServe.ts"
import { StorageAdapter as StorageAdapterService } from "../services/StorageAdapter.ts"
import { NoeticConfigError } from "./errors.ts"
import { runForFacade, type StorageAdapter, toEngineStorage } from "./storage.ts"

/** What `createStreamServer` takes. */
export interface StreamServerConfig {
  /** The storage the streams are kept on (SQLite, file, memory, Postgres, or a host's with compare-and-set). */
  readonly storage: StorageAdapter
  /** The address to bind; `127.0.0.1` by default. Any other address needs `token`. */
  readonly host?: string | undefined
  /** The port; 0 (the default) picks a free one. */
  readonly port?: number | undefined
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  readonly token?: string | undefined
  /** The largest request body, in bytes (default 16 MiB). */
  readonly maxBodyBytes?: number | undefined
  /** How long a long-poll waits before its 204, in milliseconds (default 10 s). */
  readonly longPollMillis?: number | undefined
  /**
   * Serves durable outbound (IPC) queues read-only, each at `${url}/queues/<socketId>`:
   * `true` for every queue in `storage`, or the storage the queues are in and which
   * socket ids to serve (docs/agent-streams.md#watching-an-ipc-queue).
   */
  readonly queues?: true | {
    readonly storage?: StorageAdapter | undefined
    readonly socketIds?: ReadonlyArray<string> | undefined
  } | undefined
}

/** A running server: `url` is the base every stream path is appended to (`${url}/a/b`). */
export interface StreamServerHandle {
  readonly url: string
  /** Stops accepting, lets open requests end for about a second, then closes. */
  close(): Promise<void>
}

const configError = (error: HttpServeError) =>
  new NoeticConfigError({
    code: error.reason === "TokenRequired"
      ? "STREAM_SERVER_TOKEN_REQUIRED"
      : error.reason === "BindFailed"
      ? "STREAM_SERVER_BIND_FAILED"
      : "STREAM_SERVER_INVALID_OPTION",
    message: error.message,
    hint: error.reason === "TokenRequired"
      ? "give a token, or bind to 127.0.0.1"
      : "check host, port, maxBodyBytes, longPollMillis"
  })

/** What `createStreamHandler` takes. */
export interface StreamHandlerConfig {
  /** The storage the streams are kept on, as for `createStreamServer`. */
  readonly storage: StorageAdapter
  /** The path the streams are mounted under (default `/streams`): a stream `a/b` is at `<prefix>/a/b`. */
  readonly prefix?: string | undefined
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  readonly token?: string | undefined
  /** The largest request body, in bytes (default 16 MiB). */
  readonly maxBodyBytes?: number | undefined
  /** How long a long-poll waits before its 204, in milliseconds (default 10 s). */
  readonly longPollMillis?: number | undefined
  /** Serves queues read-only under `<prefix>/queues/<socketId>`, as for `createStreamServer`. */
  readonly queues?: StreamServerConfig["queues"]
}

/** The stream routes for a host's own Node `http.Server`. */
export interface StreamHandler {
  /** The prefix the routes answer under. */
  readonly prefix: string
  /** Whether a request's URL is under the prefix (the host hands those to `handle`). */
  matches(url: string | undefined): boolean
  /** Answers one request (a Node `request` listener). */
  handle(request: Http.IncomingMessage, response: Http.ServerResponse): void
  /** Ends the live reads in flight and releases the handler. */
  close(): Promise<void>
}

/** The queue settings of the engine, from the facade's. */
const queueOptions = async (queues: StreamServerConfig["queues"]) => {
  if (queues === undefined) return undefined
  const storage = queues === true || queues.storage === undefined ? undefined : await runForFacade(toEngineStorage(queues.storage))
  return { storages: storage === undefined ? undefined : [storage], socketIds: queues === true ? undefined : queues.socketIds }
}

const engineStorageOf = async (config: { readonly storage: StorageAdapter } | undefined) => {
  const storage: unknown = config?.storage
  if (typeof storage !== "object" || storage === null) {
    throw new NoeticConfigError({
      code: "STREAM_STORAGE_UNSUPPORTED",
      message: `durable streams need a storage, not ${String(storage)}`,
      hint: "pass { storage: createSqliteStorage({ path }) } (or file, memory, Postgres)"
    })
  }
  const engine = await runForFacade(toEngineStorage(storage as StorageAdapter))
  if (engine.compareAndSet === undefined) {
    throw new NoeticConfigError({
      code: "STREAM_STORAGE_UNSUPPORTED",
      message: "durable streams need a storage with compare-and-set",
      hint: "use createSqliteStorage, createFileStorage, createInMemoryStorage or createPostgresStorage"
    })
  }
  return engine
}

/**
 * The Durable Streams routes as a handler a host mounts in its own Node HTTP server
 * under a prefix, beside its own pages (docs/http-streams.md#in-your-own-server).
 */
export const createStreamHandler = async (config: StreamHandlerConfig): Promise<StreamHandler> => {
  const storage = await engineStorageOf(config)
  const prefix = (config.prefix ?? "/streams").replace(/\/+$/, "")
  if (!prefix.startsWith("/") || prefix.length < 2) {
    throw new NoeticConfigError({
      code: "STREAM_SERVER_INVALID_OPTION",
      message: `the prefix must be a path such as /streams, not ${JSON.stringify(config.prefix)}`,
      hint: "give a prefix that starts with / and names a path"
    })
  }
  const queues = await queueOptions(config.queues)
  const StreamServer = await import("../http/StreamServer.ts")
  const scope = Effect.runSync(Scope.make())
  const exit = await Effect.runPromiseExit(
    StreamServer.nodeListener({
      prefix,
      token: config.token,
      maxBodyBytes: config.maxBodyBytes,
      longPollMillis: config.longPollMillis,
      queues
    }).pipe(Effect.provideService(StorageAdapterService, storage), Scope.provide(scope))
  )
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    if (failure !== undefined && failure._tag === "Fail") throw configError(failure.error)
    return runForFacade(Effect.failCause(exit.cause))
  }
  const listener = exit.value
  let closing: Promise<void> | undefined
  return {
    prefix,
    matches: (url) => url !== undefined && (url === prefix || url.startsWith(prefix + "/") || url.startsWith(prefix + "?")),
    handle: (request, response) => listener(request, response),
    close: () => closing ??= Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** Starts a Durable Streams server on `storage`. */
export const createStreamServer = async (config: StreamServerConfig): Promise<StreamServerHandle> => {
  const storage = await engineStorageOf(config)
  const queues = await queueOptions(config.queues)
  // Loaded when a server is made: importing the facade loads no HTTP or socket stack.
  const [{ ServedUrl }, StreamServer] = await Promise.all([import("../http/HttpServe.ts"), import("../http/StreamServer.ts")])
  const scope = Effect.runSync(Scope.make())
  const server = StreamServer.layerWithService({
    host: config.host,
    port: config.port,
    token: config.token,
    maxBodyBytes: config.maxBodyBytes,
    longPollMillis: config.longPollMillis,
    queues
  }).pipe(Layer.provide(Layer.succeed(StorageAdapterService, storage)))
  const exit = await Effect.runPromiseExit(Layer.buildWithScope(server, scope))
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    if (failure !== undefined && failure._tag === "Fail") throw configError(failure.error)
    return runForFacade(Effect.failCause(exit.cause))
  }
  const served = exit.value.mapUnsafe.get(ServedUrl.key) as typeof ServedUrl.Service
  let closing: Promise<void> | undefined
  return {
    url: served.url,
    close: () => closing ??= Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
