/**
 * `noetic-effect serve`: a Durable Streams server on the home directory's SQLite
 * database (`<home>/streams/streams.db`) or on Postgres (`--pg`, with LISTEN/NOTIFY
 * between servers). Its first line on stdout is `listening on http://HOST:PORT`; it
 * stops cleanly (exit 0) on SIGINT or SIGTERM. With `--queues` it also serves the
 * durable outbound queues of the same home (or table) read-only at `/queues/<socketId>`.
 * See docs/http-streams.md#the-serve-command.
 *
 * @since 0.1.0
 */
import * as Console from "effect/Console"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Flag from "effect/cli/Flag"
import * as NodePath from "node:path"
import * as HttpServe from "../http/HttpServe.ts"
import * as StreamServer from "../http/StreamServer.ts"
import * as PostgresStorage from "../layers/PostgresStorage.ts"
import * as SqliteStorage from "../layers/SqliteStorage.ts"
import { roots } from "../NoeticHome.ts"
import * as DurableStreams from "../services/DurableStreams.ts"
import { StorageAdapter } from "../services/StorageAdapter.ts"
import { queueStorages } from "./Queues.ts"
import { CliFailure, openStorages } from "./Storages.ts"

/** The default port of a standalone server (PROTOCOL.md 13.1). */
export const DEFAULT_PORT = 4437

/** The flags of `serve`, beside the shared `--home`, `--pg`, `--table`. */
export const flags = {
  host: Flag.String("host").pipe(
    Flag.withDescription("The address to bind (default 127.0.0.1; any other needs --token)"),
    Flag.withDefault("127.0.0.1")
  ),
  port: Flag.Int("port").pipe(Flag.withDescription(`The port (default ${DEFAULT_PORT}; 0 picks one)`), Flag.withDefault(DEFAULT_PORT)),
  token: Flag.String("token").pipe(
    Flag.withDescription("Require Authorization: Bearer <token> on every request"),
    Flag.optional
  ),
  maxBodyBytes: Flag.Int("max-body-bytes").pipe(
    Flag.withDescription("The largest request body in bytes (default 16 MiB)"),
    Flag.withDefault(HttpServe.DEFAULT_MAX_BODY_BYTES)
  ),
  queues: Flag.Boolean("queues").pipe(
    Flag.withDescription("Also serve the durable outbound (IPC) queues read-only at /queues/<socketId>"),
    Flag.withDefault(false)
  )
}

/** The shared storage flags, as the parent command parses them. */
export interface SharedFlags {
  readonly home: Option.Option<string>
  readonly pg: Option.Option<string>
  readonly table: Option.Option<string>
}

/** Resolves when the process gets SIGINT or SIGTERM. The server owns these signals while it runs. */
const stopSignal = Effect.gen(function*() {
  const stop = yield* Deferred.make<void>()
  // The runtime's own handlers would interrupt the command (exit 130); a server stops cleanly instead.
  process.removeAllListeners("SIGINT")
  process.removeAllListeners("SIGTERM")
  const onSignal = () => Deferred.doneUnsafe(stop, Effect.void)
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)
  return Deferred.await(stop)
})

/** Serves until SIGINT or SIGTERM. */
export const run = (shared: SharedFlags, options: {
  readonly host: string
  readonly port: number
  readonly token: Option.Option<string>
  readonly maxBodyBytes: number
  readonly queues: boolean
}) =>
  Effect.scoped(Effect.gen(function*() {
    if (Option.isSome(shared.pg) && Option.isSome(shared.home)) {
      return yield* new CliFailure({ message: "--home and --pg name two different stores; pass one of them" })
    }
    let storage: StorageAdapter["Service"]
    let signals: DurableStreams.StreamSignals | undefined
    if (Option.isSome(shared.pg)) {
      const table = Option.getOrElse(shared.table, () => PostgresStorage.DEFAULT_TABLE)
      storage = yield* PostgresStorage.makeFromUrl(shared.pg.value, { table }).pipe(
        Effect.mapError((error) => new CliFailure({ message: `cannot open PostgreSQL: ${error.message}` }))
      )
      signals = yield* StreamServer.makePostgresSignals(shared.pg.value).pipe(
        Effect.mapError((error) => new CliFailure({ message: `cannot listen on PostgreSQL: ${error.message}` }))
      )
    } else {
      if (Option.isSome(shared.table)) return yield* new CliFailure({ message: "--table needs --pg <url>" })
      const path = NodePath.join(roots(Option.getOrUndefined(shared.home)).home, "streams", "streams.db")
      storage = yield* SqliteStorage.make({ path }).pipe(
        Effect.mapError((error) => new CliFailure({ message: `cannot open ${path}: ${error.message}` }))
      )
    }
    // The queues are read where the engine writes them: the home's subprocess and
    // checkpoints roots (opened read-only), or the same Postgres table.
    let queues: DurableStreams.QueueStreamsOptions | undefined
    if (options.queues) {
      const stores = yield* openStorages(shared)
      queues = { storages: queueStorages(stores).map(([, queueStorage]) => queueStorage) }
    }
    const server = StreamServer.layerWithService({
      queues,
      host: options.host,
      port: options.port,
      token: Option.getOrUndefined(options.token),
      maxBodyBytes: options.maxBodyBytes,
      signals
    }).pipe(Layer.provide(Layer.succeed(StorageAdapter, storage)))
    const context = yield* Layer.build(server).pipe(
      Effect.mapError((error) => new CliFailure({ message: error.message }))
    )
    const stopped = yield* stopSignal
    const served = context.mapUnsafe.get(HttpServe.ServedUrl.key) as HttpServe.ServedUrl["Service"]
    yield* Console.log(`listening on ${served.url}`)
    yield* stopped
  }))
