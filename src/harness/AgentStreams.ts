/**
 * Agent streams: what a step writes to a durable stream of its execution
 * (`executions/<executionId>/<name>`, a JSON-mode Durable Stream on the harness's
 * storage), exactly once across replay and re-run, closed with a final event when the
 * execution finishes. See docs/agent-streams.md and
 * docs/architecture.md#agent-streams.
 *
 * Exactly once: a replayed step does not run, so it writes nothing. A step that runs
 * again (a retry, or a resume after a crash) writes as the idempotent producer
 * `<executionId><stepPath>/<name>` with chunk index = producer sequence, so the chunks
 * the earlier attempt got durable come back as duplicates and are not stored again.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import { Buffer } from "node:buffer"
import { pathKey } from "../internal/streams/model.ts"
import type * as DurableStreams from "../services/DurableStreams.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"

/**
 * Why a stream operation was refused: `InvalidName` (empty, `/`, `..`, NUL, over 200
 * bytes), `Closed` (a write after `close()`), `TooLarge` (a chunk over the maximum;
 * nothing written), `InvalidChunk` (not JSON-encodable, or a reserved `$end` / `$bytes`
 * object), `Unsupported` (the harness has no storage with compare-and-set), `Storage`
 * (the storage or stream refused; the write is not durable).
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentStreamError extends Schema.TaggedError<AgentStreamError>("noetic-effect/AgentStreamError")(
  "AgentStreamError",
  {
    reason: Schema.Literals(["InvalidName", "Closed", "TooLarge", "InvalidChunk", "Unsupported", "Storage"]),
    executionId: Schema.String,
    name: Schema.String,
    detail: Schema.String
  }
) {
  /** The error code. */
  get code(): "AGENT_STREAM" {
    return "AGENT_STREAM"
  }
  override get message(): string {
    return `stream ${JSON.stringify(this.name)} of execution ${this.executionId}: ${this.detail}`
  }
}

/**
 * One chunk: a string, a JSON value, or bytes (stored as `{ "$bytes": <base64> }`).
 *
 * @since 0.1.0
 * @category models
 */
export type StreamChunk = string | number | boolean | null | Uint8Array | ReadonlyArray<unknown> | {
  readonly [key: string]: unknown
}

/**
 * A writer on one stream of an execution. `write` resolves when the chunk is durable;
 * `close` ends this writer (the stream itself is closed when the execution finishes).
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamWriter {
  /** The stream's path, appended to a server's base URL: `/executions/<executionId>/<name>`. */
  readonly path: string
  readonly write: (chunk: StreamChunk) => Effect.Effect<void, AgentStreamError>
  readonly close: () => Effect.Effect<void>
}

/**
 * The last message of a stream, written when its execution finishes.
 *
 * @since 0.1.0
 * @category models
 */
export type EndEvent = { readonly $end: "succeeded" } | { readonly $end: "failed"; readonly error: string }

/** The default stream name. */
export const DEFAULT_NAME = "output"

/** The largest chunk, in bytes of its JSON message: the stream server's default body limit (16 MiB). */
export const DEFAULT_MAX_CHUNK_BYTES = 16 * 1024 * 1024

const MAX_NAME_BYTES = 200
const CONTENT_TYPE = "application/json"
const PREFIX = "/executions/"

/** The stream path of `name` in `executionId`, as the server names it (`/executions/<id>/<name>`). */
export const streamPath = (executionId: string, name: string): string => `${PREFIX}${executionId}/${name}`

/** Why `name` is not a stream name, or undefined when it is one. */
export const nameProblem = (name: string): string | undefined => {
  if (name.length === 0) return "a stream name is not empty"
  if (name.includes("/")) return "a stream name has no '/'"
  if (name.includes("..")) return "a stream name has no '..'"
  if (name.includes("\0")) return "a stream name has no NUL"
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) return `a stream name is at most ${MAX_NAME_BYTES} bytes`
  return undefined
}

const isReserved = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && ("$end" in value || "$bytes" in value)

/** The JSON text of one message (wrapped in `[...]` so an array stays one message), or why not. */
const encode = (chunk: StreamChunk): string | { readonly problem: string } => {
  if (chunk instanceof Uint8Array) {
    return JSON.stringify([{ $bytes: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("base64") }])
  }
  if (isReserved(chunk)) return { problem: "an object with a '$end' or '$bytes' key is reserved" }
  let text: string | undefined
  try {
    text = JSON.stringify([chunk])
  } catch (error) {
    return { problem: `the chunk is not JSON: ${String(error)}` }
  }
  if (text === undefined || text === "[null]" && chunk !== null) return { problem: "the chunk is not JSON" }
  return text
}

/**
 * The streams of one harness.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentStreams {
  /**
   * A writer on `name` of `executionId` for the step at `stepPath`; `indexes` holds the
   * next chunk index per name for this step attempt (shared by its writers).
   */
  readonly open: (
    executionId: string,
    stepPath: string,
    name: string | undefined,
    indexes: Map<string, { next: number }>
  ) => Effect.Effect<StreamWriter, AgentStreamError>
  /**
   * Lists the streams `executionId` has now and, from then on, notes the ones this
   * process opens for it: given to `finish`, they spare it its own listing. A resume
   * reads this beside its snapshot (one round trip on Postgres). `undefined` when the
   * listing failed (`finish` then lists), or when there is no storage to list.
   */
  readonly known: (executionId: string) => Effect.Effect<KnownStreams | undefined>
  /** Stops noting streams opened for a run's `known` (its run is over). */
  readonly forget: (known: KnownStreams) => void
  /**
   * Closes every stream of `executionId` with its final event (idempotent): those in
   * `known` when given, or else those a listing finds.
   */
  readonly finish: (executionId: string, end: EndEvent, known?: KnownStreams) => Effect.Effect<void>
}

/**
 * The stream names of one execution a run knows of: listed at its start, plus those
 * opened in this process since.
 *
 * @since 0.1.0
 * @category models
 */
export interface KnownStreams {
  readonly executionId: string
  readonly names: Set<string>
}

/**
 * The streams over `storage` (none without compare-and-set: `open` fails `Unsupported`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  storage: StorageAdapterShape | undefined,
  options: { readonly maxChunkBytes?: number | undefined } = {}
): AgentStreams => {
  const maxChunkBytes = options.maxChunkBytes ?? DEFAULT_MAX_CHUNK_BYTES
  const usable = storage !== undefined && storage.compareAndSet !== undefined ? storage : undefined
  // Loaded on first use: a harness that never streams loads no stream engine (nor
  // effect/Stream), which keeps the facade's import graph light (test/promise/ImportGraph.test.ts).
  let loaded: Promise<typeof DurableStreams> | undefined
  const service = usable === undefined ? undefined : Effect.flatMap(
    Effect.promise(() => loaded ??= import("../services/DurableStreams.ts")),
    (module) => module.forStorage(usable)
  )

  const open = (
    executionId: string,
    stepPath: string,
    given: string | undefined,
    indexes: Map<string, { next: number }>
  ) =>
    Effect.gen(function*() {
      const name = given ?? DEFAULT_NAME
      const refuse = (reason: AgentStreamError["reason"], detail: string) =>
        new AgentStreamError({ reason, executionId, name, detail })
      const problem = nameProblem(name)
      if (problem !== undefined) return yield* refuse("InvalidName", problem)
      if (service === undefined) {
        return yield* refuse("Unsupported", "agent streams need a durable harness whose storage has compare-and-set")
      }
      const streams = yield* service
      // Noted before the create: a create that failed may still have stored the stream.
      const noting = runsNoting.get(executionId)
      if (noting !== undefined) for (const known of noting) known.names.add(name)
      const path = streamPath(executionId, name)
      const storageFailed = (error: DurableStreams.StreamError) => refuse("Storage", error.message)
      yield* streams.create({ path, contentType: CONTENT_TYPE }).pipe(Effect.mapError(storageFailed))
      const producerId = `${executionId}${stepPath}/${name}`
      let index = indexes.get(name)
      if (index === undefined) indexes.set(name, index = { next: 0 })
      const counter = index
      let closed = false
      const write = (chunk: StreamChunk) =>
        Effect.suspend(() => {
          if (closed) return Effect.fail(refuse("Closed", "write after close()"))
          const text = encode(chunk)
          if (typeof text !== "string") return Effect.fail(refuse("InvalidChunk", text.problem))
          const body = Buffer.from(text)
          if (body.byteLength - 2 > maxChunkBytes) {
            return Effect.fail(refuse("TooLarge", `a chunk of ${body.byteLength - 2} bytes is over the maximum of ${maxChunkBytes}`))
          }
          const seq = counter.next++
          return streams.append({
            path,
            contentType: CONTENT_TYPE,
            body,
            producerId,
            producerEpoch: "0",
            producerSeq: String(seq)
          }).pipe(
            Effect.mapError(storageFailed),
            // A failed append is not durable: the index is this chunk's again.
            Effect.tapError(() => Effect.sync(() => void (counter.next = seq))),
            Effect.asVoid
          )
        })
      const writer: StreamWriter = {
        path,
        write,
        close: () => Effect.sync(() => void (closed = true))
      }
      return writer
    })

  // The runs noting the streams opened for an execution in this process (see `known`).
  const runsNoting = new Map<string, Set<KnownStreams>>()

  const namesUnder = (executionId: string) => {
    const prefix = pathKey(`${PREFIX}${executionId}/`)
    return Effect.map(usable!.list(prefix), (keys) => {
      const names = new Set<string>()
      for (const key of keys) {
        const name = key.slice(prefix.length)
        if (!name.includes("/")) names.add(name)
      }
      return names
    })
  }

  const forget = (found: KnownStreams) => {
    const noting = runsNoting.get(found.executionId)
    if (noting === undefined) return
    noting.delete(found)
    if (noting.size === 0) runsNoting.delete(found.executionId)
  }

  // Noting starts before the listing, so a stream opened while it runs is not missed.
  const known = (executionId: string): Effect.Effect<KnownStreams | undefined> =>
    usable === undefined ? Effect.undefined : Effect.suspend(() => {
      const found: KnownStreams = { executionId, names: new Set() }
      let noting = runsNoting.get(executionId)
      if (noting === undefined) runsNoting.set(executionId, noting = new Set())
      noting.add(found)
      return namesUnder(executionId).pipe(
        Effect.map((names) => {
          for (const name of names) found.names.add(name)
          return found
        }),
        Effect.orElseSucceed(() => undefined),
        Effect.onExit((exit) => Effect.sync(() => Exit.isSuccess(exit) && exit.value !== undefined ? undefined : forget(found)))
      )
    })

  const finish = (executionId: string, end: EndEvent, given?: KnownStreams) =>
    service === undefined ? Effect.void : Effect.gen(function*() {
      const names = given !== undefined && given.executionId === executionId
        ? given.names
        : yield* namesUnder(executionId)
      // An execution that opened no stream costs this one list (none when known).
      if (names.size === 0) return
      const streams = yield* service
      const body = Buffer.from(JSON.stringify([end]))
      for (const name of names) {
        // One producer for the end: a finish repeated after a crash is a duplicate.
        yield* streams.append({
          path: streamPath(executionId, name),
          contentType: CONTENT_TYPE,
          body,
          close: true,
          producerId: `${executionId}/$end`,
          producerEpoch: "0",
          producerSeq: "0"
        }).pipe(Effect.ignore)
      }
    }).pipe(Effect.ignore)

  return { open, known, forget, finish }
}
