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
import type {
  AppendInput,
  AppendResult,
  CreateInput,
  CreateResult,
  DurableStreamsOptions,
  ReadResult,
  StreamError,
  StreamInfo
} from "../internal/streams/types.ts"
import { StorageAdapter } from "./StorageAdapter.ts"

export {
  type AppendInput,
  type AppendResult,
  type CreateInput,
  type CreateResult,
  type DurableStreamsOptions,
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
   * passes: true when it changed.
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
  Effect.flatMap(StorageAdapter, (storage) => Engine.make(storage, options))

/**
 * The service as a layer over the `StorageAdapter` it is given.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: DurableStreamsOptions = {}): Layer.Layer<DurableStreams, never, StorageAdapter> =>
  Layer.effect(DurableStreams, Effect.map(make(options), DurableStreams.of))
