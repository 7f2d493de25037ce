/**
 * The shapes of Durable Streams: the refusal (`StreamError`), the inputs and results of
 * the service's operations and its settings. `services/DurableStreams.ts` re-exports
 * them (that module is their public home) and `engine.ts` implements them; they live
 * here so the two import them one way. See docs/architecture.md#http-durable-streams.
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type { StorageAdapterShape } from "../../services/StorageAdapter.ts"

/**
 * Why an operation was refused, in the protocol's terms: `BadRequest` (400),
 * `NotFound` (404), `Gone` (410, soft-deleted), `Conflict` (409: config mismatch,
 * closed stream, content type, `Stream-Seq` regression), `StaleEpoch` (403),
 * `SequenceGap` (409 with the expected and received producer sequence), `Storage`
 * (the storage failed; nothing is acknowledged), `ReadOnly` (405: a write to a path
 * served read-only, such as a queue's).
 *
 * @since 0.1.0
 * @category errors
 */
export class StreamError extends Schema.TaggedError<StreamError>("noetic-effect/DurableStreams/StreamError")(
  "StreamError",
  {
    reason: Schema.Literals(["BadRequest", "NotFound", "Gone", "Conflict", "StaleEpoch", "SequenceGap", "Storage", "ReadOnly"]),
    message: Schema.String,
    /** The stream's tail offset, when the refusal names it (an append to a closed stream). */
    nextOffset: Schema.optional(Schema.String),
    /** Set when the refusal is because the stream is closed. */
    closed: Schema.optional(Schema.Boolean),
    /** The producer's current epoch (`StaleEpoch`). */
    currentEpoch: Schema.optional(Schema.Number),
    /** The producer sequence expected and received (`SequenceGap`). */
    expectedSeq: Schema.optional(Schema.Number),
    receivedSeq: Schema.optional(Schema.Number)
  }
) {
  /** The error code. */
  get code(): "STREAM" {
    return "STREAM"
  }
}

/**
 * A stream's metadata: its content type, tail offset, closure and expiry.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamInfo {
  readonly contentType: string
  readonly nextOffset: string
  readonly closed: boolean
  readonly ttlSeconds?: number | undefined
  readonly expiresAt?: string | undefined
}

/**
 * A create (PUT): raw header values, checked by the service.
 *
 * @since 0.1.0
 * @category models
 */
export interface CreateInput {
  readonly path: string
  readonly contentType?: string | undefined
  readonly ttl?: string | undefined
  readonly expiresAt?: string | undefined
  readonly closed?: boolean | undefined
  readonly body?: Uint8Array | undefined
  readonly forkedFrom?: string | undefined
  readonly forkOffset?: string | undefined
  readonly forkSubOffset?: string | undefined
}

/**
 * What a create did: `created` false means an identical stream was already there.
 *
 * @since 0.1.0
 * @category models
 */
export interface CreateResult extends StreamInfo {
  readonly created: boolean
}

/**
 * An append (POST), optionally closing the stream, with raw producer headers.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendInput {
  readonly path: string
  readonly contentType?: string | undefined
  readonly body: Uint8Array
  readonly close?: boolean | undefined
  readonly seq?: string | undefined
  readonly producerId?: string | undefined
  readonly producerEpoch?: string | undefined
  readonly producerSeq?: string | undefined
}

/**
 * What an append did: `appended` (new data or a new close), or `duplicate` (an
 * idempotent producer's retry, or closing a closed stream): nothing new stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendResult {
  readonly outcome: "appended" | "duplicate"
  readonly nextOffset: string
  readonly closed: boolean
  /** With producer headers: the producer's epoch and highest accepted sequence. */
  readonly producer?: { readonly epoch: number; readonly seq: number } | undefined
}

/**
 * One read from an offset: the data (bytes, or JSON message texts), where it starts and
 * where the next read starts, whether it reached the tail, whether the stream is closed
 * at that tail.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReadResult {
  readonly contentType: string
  readonly json: boolean
  /** The data of a non-JSON stream; may be shared with the service's chunk cache: read it, never modify it. */
  readonly bytes: Uint8Array
  readonly messages: ReadonlyArray<string>
  readonly startOffset: string
  readonly nextOffset: string
  readonly upToDate: boolean
  readonly closed: boolean
  /** Identifies this incarnation of the stream (an ETag part; a re-created stream differs). */
  readonly streamId: string
}

/**
 * How a remote change reaches this process: other processes on one Postgres announce
 * their appends (LISTEN/NOTIFY), so a live read here wakes at once.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamSignals {
  /** Announces an append to the stream with this id to every process. */
  readonly publish: (streamId: string) => Effect.Effect<void>
  /** The ids announced by any process (this one included). */
  readonly changes: Stream.Stream<string>
}

/**
 * Settings of the service.
 *
 * @since 0.1.0
 * @category options
 */
export interface DurableStreamsOptions {
  /** Cross-process wake-ups (Postgres LISTEN/NOTIFY); without it, live reads also poll. */
  readonly signals?: StreamSignals | undefined
  /** How often a waiting live read re-checks storage by itself (default 1 s; 30 s with signals, which wake it at once). */
  readonly pollMillis?: number | undefined
  /** The most data one read returns (default 1 MiB); the rest is the next read's. */
  readonly maxReadBytes?: number | undefined
  /**
   * How much committed chunk data this process keeps decoded in memory for reads
   * (default 16 MiB; 0 keeps none). Committed chunks never change, so the cache is
   * right across processes (docs/http-streams.md#reading).
   */
  readonly cacheBytes?: number | undefined
  /**
   * Serves durable outbound queues read-only at `/queues/<socketId>`
   * (docs/agent-streams.md#watching-an-ipc-queue); without it that path is an ordinary stream path.
   */
  readonly queues?: QueueStreamsOptions | undefined
}

/**
 * Which durable outbound queues a streams service serves read-only, each as the
 * JSON-mode stream `/queues/<socketId>` of its frames in seq order.
 *
 * @since 0.1.0
 * @category options
 */
export interface QueueStreamsOptions {
  /** Where the queues are stored, looked in in order (default: the streams' own storage). */
  readonly storages?: ReadonlyArray<StorageAdapterShape> | undefined
  /** The socket ids served; default every queue in those storages. */
  readonly socketIds?: ReadonlyArray<string> | undefined
  /** How often a live read re-checks a queue for new frames (default 250 ms). */
  readonly pollMillis?: number | undefined
}
