/**
 * Durable Streams: append-only byte streams addressed by path, kept on any
 * `StorageAdapter`, with the semantics of the Durable Streams protocol (create, append
 * with `Stream-Seq` and idempotent producers, close, catch-up reads from opaque offsets,
 * JSON mode, forks, TTL and expiry). The HTTP mapping is `http/StreamRoutes.ts`; what
 * lives where is in docs/architecture.md#http-durable-streams.
 *
 * A 2xx append is durable: its chunk is committed by one compare-and-set of the storage
 * (fsync'd on SQLite and file, committed on Postgres) before the answer.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Engine from "../internal/streams/engine.ts"
import * as QueueStreams from "../internal/streams/queues.ts"
import type {
  AppendInput,
  AppendResult,
  CreateInput,
  CreateResult,
  DurableStreamsOptions,
  QueueStreamsOptions,
  ReadResult,
  StreamError,
  StreamInfo
} from "../internal/streams/types.ts"
import { StorageAdapter, type StorageAdapterShape } from "./StorageAdapter.ts"

export {
  type AppendInput,
  type AppendResult,
  type CreateInput,
  type CreateResult,
  type DurableStreamsOptions,
  type QueueStreamsOptions,
  type ReadResult,
  StreamError,
  type StreamInfo,
  type StreamSignals
} from "../internal/streams/types.ts"

/**
 * The service.
 *
 * @since 0.1.0
 * @category services
 */
export class DurableStreams extends Context.Service<DurableStreams, {
  /** Creates a stream (or a fork), or confirms an identical one (PUT). */
  readonly create: (input: CreateInput) => Effect.Effect<CreateResult, StreamError>
  /** Appends and/or closes (POST). A success is durable. */
  readonly append: (input: AppendInput) => Effect.Effect<AppendResult, StreamError>
  /** Reads from an offset (`-1` or absent: the start; `now`: the tail). Resets a sliding TTL. */
  readonly read: (path: string, offset: string | undefined) => Effect.Effect<ReadResult, StreamError>
  /** The metadata (HEAD); does not reset a sliding TTL. */
  readonly head: (path: string) => Effect.Effect<StreamInfo, StreamError>
  /** Deletes a stream (soft while forks read it). */
  readonly remove: (path: string) => Effect.Effect<void, StreamError>
  /**
   * Waits until the stream read at `offset` has more data or is closed, or `timeout`
   * passes: true when it changed, or may have (an append or delete woke it: the caller's
   * next read tells).
   */
  readonly awaitChange: (path: string, offset: string, timeout: Duration.Input) => Effect.Effect<boolean, StreamError>
}>()("noetic-effect/DurableStreams") {}

/**
 * The service over the `StorageAdapter` in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: DurableStreamsOptions = {}) =>
  Effect.flatMap(StorageAdapter, (storage) =>
    options.signals === undefined
      ? forStorage(storage, options)
      : Effect.map(Engine.make(storage, options), (service) => withQueues(service, storage, options.queues, options.maxReadBytes)))

/**
 * The service with the queues `options` names served read-only at `/queues/<socketId>`
 * (docs/agent-streams.md#watching-an-ipc-queue): reads of those paths go to the queue,
 * writes are refused `ReadOnly`; every other path is `service`'s.
 *
 * @since 0.1.0
 * @category constructors
 */
export const withQueues = (
  service: Service,
  storage: StorageAdapterShape,
  options: QueueStreamsOptions | undefined,
  maxReadBytes?: number | undefined
): Service => {
  if (options === undefined) return service
  const queues = QueueStreams.make(storage, options)
  const maxBytes = maxReadBytes ?? 1024 * 1024
  const route = <A>(path: string, onQueue: (socketId: string) => A, otherwise: () => A): A => {
    const socketId = QueueStreams.queueIdOf(path)
    return socketId === undefined ? otherwise() : onQueue(socketId)
  }
  return DurableStreams.of({
    create: (input) => route(input.path, (id) => queues.refuse(id, "create"), () => service.create(input)),
    append: (input) => route(input.path, (id) => queues.refuse(id, "append"), () => service.append(input)),
    remove: (path) => route(path, (id) => queues.refuse(id, "delete"), () => service.remove(path)),
    read: (path, offset) => route(path, (id) => queues.read(id, offset, maxBytes), () => service.read(path, offset)),
    head: (path) => route(path, (id) => queues.head(id), () => service.head(path)),
    awaitChange: (path, offset, timeout) =>
      route(path, (id) => queues.awaitChange(id, offset, timeout), () => service.awaitChange(path, offset, timeout))
  })
}

type Service = typeof DurableStreams.Service
const shared = new WeakMap<StorageAdapterShape, Map<string, Service>>()

/**
 * The service over `storage` without cross-process signals, one per storage object and
 * settings in this process: a harness writing an agent's stream and a server reading it
 * share it, so a live read wakes at the append instead of at its next poll
 * (docs/agent-streams.md#how-it-works).
 *
 * @since 0.1.0
 * @category constructors
 */
export const forStorage = (
  storage: StorageAdapterShape,
  options: Omit<DurableStreamsOptions, "signals"> = {}
): Effect.Effect<Service> =>
  Effect.suspend(() => {
    const key = `${options.pollMillis ?? ""}/${options.maxReadBytes ?? ""}/${options.cacheBytes ?? ""}`
    const served = (service: Service) => withQueues(service, storage, options.queues, options.maxReadBytes)
    let byOptions = shared.get(storage)
    if (byOptions === undefined) shared.set(storage, byOptions = new Map())
    const found = byOptions.get(key)
    if (found !== undefined) return Effect.succeed(served(found))
    // Without signals nothing is forked: the scope is never used.
    return Effect.map(Effect.scoped(Engine.make(storage, { ...options, signals: undefined })), (made) => {
      const service = DurableStreams.of(made)
      byOptions.set(key, service)
      return served(service)
    })
  })

/**
 * The service as a layer over the `StorageAdapter` it is given.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: DurableStreamsOptions = {}): Layer.Layer<DurableStreams, never, StorageAdapter> =>
  Layer.effect(DurableStreams, Effect.map(make(options), DurableStreams.of))
