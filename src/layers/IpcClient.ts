/**
 * The IPC client: connects to an `IpcServer`'s unix socket and, in durable mode
 * (the default), sends `durableResume { ackedThrough }` on every connection so the
 * server replays what was not acknowledged.
 *
 * One client is one logical subscription that outlives its connections: when a
 * connection drops it reconnects on a schedule and resumes. It drops any durable seq
 * it has already delivered, so the application sees each frame once for the life of
 * the client; with a persisted watermark a restarted client resumes after its last
 * ack (frames delivered but not yet acked come again: ack once a frame's effect is
 * durable). A queue has one consumer: when another client resumes it, the server
 * sends this one `bye` and closes it; the client delivers the `bye`, then ends
 * (`take` fails with `SocketClosed`) instead of reconnecting and taking the stream
 * back.
 *
 * @since 0.1.0
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Latch from "effect/Latch"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as Socket from "effect/socket/Socket"
import * as NodePath from "node:path"
import { Corrupt, StorageError } from "../Errors.ts"
import { makeLineSplitter } from "../internal/lineSplitter.ts"
import { FrameTooLarge, IpcError, type IpcErrorReason, SocketClosed } from "../IpcError.ts"
import {
  type ClientFrame,
  decodeServerFrameSync,
  encodeFrame,
  type Hello,
  MaxFrameBytes,
  type V1ServerFrame
} from "../schema/IpcFrame.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import { logWarning } from "../internal/diagnostics.ts"

/** Where a client keeps the highest seq it has acknowledged. */
export interface WatermarkStore {
  readonly load: Effect.Effect<number, StorageError>
  readonly save: (seq: number) => Effect.Effect<void, StorageError>
}

/** A watermark that lives only as long as the process. */
export const memoryWatermark = (initial = 0): WatermarkStore => {
  let value = initial
  return {
    load: Effect.sync(() => value),
    save: (seq) => Effect.sync(() => void (value = seq))
  }
}

/** The persisted watermark of a client. */
const WatermarkRecord = Schema.Struct({
  version: Schema.Literal(1),
  ackedThrough: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
})

/** A watermark kept at `key` in a storage, so a restarted client resumes where it stopped. */
export const storageWatermark = (storage: StorageAdapterShape, key: string): WatermarkStore => ({
  load: Effect.flatMap(storage.get(key), (value) =>
    Option.match(value, {
      onNone: () => Effect.succeed(0),
      // A record that is not a watermark is reported, not read as 0: a client that
      // silently restarts from 0 would hand the application frames it already handled.
      onSome: (stored) =>
        Schema.decodeUnknownEffect(WatermarkRecord)(stored).pipe(
          Effect.map((record) => record.ackedThrough),
          Effect.mapError((error) =>
            new StorageError({
              operation: "load",
              reason: new Corrupt({ key, message: `not a client watermark record: ${error.message}` })
            })
          )
        )
    })),
  save: (seq) => storage.set(key, { version: 1, ackedThrough: seq })
})


/** One frame handed to the application. */
export interface Delivery {
  /** The durable seq, to pass to `ack`; undefined for a frame sent outside the queue (a reply, an error). */
  readonly seq: number | undefined
  readonly frame: V1ServerFrame
}

/** How a client connects. */
export interface IpcClientOptions {
  readonly socketPath: string
  /** Opt into protocol v2 (`durableResume`, `durableAck`). Default true; false speaks plain v1 and subscribes. */
  readonly durable?: boolean | undefined
  /** Where the acked watermark is kept. Default: in memory, starting at `ackedThrough`. */
  readonly watermark?: WatermarkStore | undefined
  /** The starting watermark when no store is given. Default 0. */
  readonly ackedThrough?: number | undefined
  /** The limit on one frame line. Default: the `MaxFrameBytes` reference. */
  readonly maxFrameBytes?: number | undefined
  /** When to try again after a failed connect. Default: backoff from 10 ms to 1 s, forever. */
  readonly reconnect?: Schedule.Schedule<unknown, IpcError> | undefined
  /** How many delivered frames may wait for the application before reading pauses. Default 4096. */
  readonly bufferFrames?: number | undefined
  /**
   * Send the opening frame (`durableResume` or `subscribe`) on every connection.
   * Default true; false leaves it to the application (`resume`, `send({ type: "subscribe" })`),
   * as noetic's client does.
   */
  readonly autoOpen?: boolean | undefined
  /** Make one connection only: when it ends, `frames` and `take` fail with `SocketClosed`. Default false. */
  readonly once?: boolean | undefined
}

/** A connected (or reconnecting) client. */
export interface IpcClientShape {
  /** Every frame for the application, in order, each durable seq once. One consumer. */
  readonly frames: Stream.Stream<Delivery, IpcError>
  /** The next frame; an alternative to `frames`. */
  readonly take: Effect.Effect<Delivery, IpcError>
  /** Records that frames up to `seq` are handled (persists the watermark, then tells the server). */
  readonly ack: (seq: number) => Effect.Effect<void, StorageError>
  /** Sends a frame on the current connection, waiting for one if there is none; fails with `SocketClosed` once the client is closed. */
  readonly send: (frame: Exclude<ClientFrame, { readonly type: "durableResume" | "durableAck" }>) => Effect.Effect<void, IpcError>
  /** Waits for a connection to be open and returns the server's `hello`. */
  readonly connected: Effect.Effect<Hello>
  /** Like `connected`, but fails with `SocketClosed` once the client has given up (closed, or its one connection ended). */
  readonly awaitConnected: Effect.Effect<Hello, IpcError>
  /** Drops the current connection; the client reconnects and resumes. */
  readonly disconnect: Effect.Effect<void>
  /** The highest durable seq delivered to the application. */
  readonly deliveredSeq: Effect.Effect<number>
  /** The acked watermark. */
  readonly ackedSeq: Effect.Effect<number>
  /** Sends `durableResume` on the current connection, from `ackedThrough` (default: the highest seq delivered). */
  readonly resume: (ackedThrough?: number) => Effect.Effect<void, IpcError>
  /**
   * Sends `durableAck { throughSeq }` on the current connection as it is, leaving the
   * watermark alone (noetic's client acknowledges this way): the server refuses an ack
   * above what it sent on the connection with an `error` frame `AckAboveSent`.
   */
  readonly sendAck: (throughSeq: number) => Effect.Effect<void, IpcError>
  /**
   * noetic's acknowledgement rule (its client's `acknowledgeDurableFrames`): an ack above
   * the highest one asked for so far is sent as it is, `ack` when the frames were
   * delivered, else `sendAck` (the server refuses one above what it sent, and it
   * acknowledges nothing); a seq at or below it is a no-op, except one of frames
   * delivered since, past the watermark, which is acked. The watermark never passes
   * the frames delivered.
   */
  readonly acknowledge: (throughSeq: number) => Effect.Effect<void, IpcError | StorageError>
  /** The highest seq `acknowledge` was asked for (noetic's `getLastAckedDurableSeq`). */
  readonly acknowledgedSeq: Effect.Effect<number>
}

const DEFAULT_BUFFER_FRAMES = 4096

const defaultReconnect: Schedule.Schedule<unknown, IpcError> = Schedule.min([
  Schedule.exponential("10 millis"),
  Schedule.spaced("1 second")
])

const causeMessage = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

interface Connection {
  readonly write: (line: string) => Effect.Effect<void, IpcError>
  readonly drop: Deferred.Deferred<void>
  hello: Hello | undefined
  /** The highest durable seq this connection has carried (repeats included). */
  received: number
  /** The highest ack sent on this connection. */
  ackSent: number
}

/** Connects a client in the current scope; it reconnects until the scope closes. */
export const connect = Effect.fnUntraced(function*(options: IpcClientOptions) {
  const socketPath = NodePath.resolve(options.socketPath)
  const durable = options.durable ?? true
  const maxFrameBytes = options.maxFrameBytes !== undefined ? options.maxFrameBytes : yield* MaxFrameBytes
  const watermark = options.watermark ?? memoryWatermark(options.ackedThrough ?? 0)
  const fail = (reason: IpcErrorReason) => new IpcError({ socketPath, reason })

  let acked = yield* watermark.load
  let delivered = acked
  const inbox = yield* Queue.bounded<Delivery, IpcError>(options.bufferFrames ?? DEFAULT_BUFFER_FRAMES)
  let current: Connection | undefined
  // A durable client opens with `durableResume`: a `bye` then means another consumer took the stream.
  const opensDurable = durable && (options.autoOpen ?? true)
  let takenOver = false
  const ready = Latch.makeUnsafe(false)
  // Done when the client's scope closes: no connection will ever open again.
  const shut = Deferred.makeUnsafe<void>()
  const ackLock = Semaphore.makeUnsafe(1)

  const session = Effect.gen(function*() {
    const socket = yield* NodeSocket.makeNet({ path: socketPath })
    const opened = (cause: unknown) => fail(new SocketClosed({ message: `cannot connect: ${causeMessage(cause)}`, cause }))
    const pull = yield* Effect.mapError(Socket.readerBytes(socket), opened)
    const writer = yield* socket.writer
    const connection: Connection = {
      write: (line) =>
        writer.write(line).pipe(
          Effect.mapError((cause) => fail(new SocketClosed({ message: causeMessage(cause), cause })))
        ),
      drop: Deferred.makeUnsafe<void>(),
      hello: undefined,
      received: 0,
      ackSent: acked
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (current === connection) current = undefined
        ready.closeUnsafe()
      })
    )
    current = connection
    if (options.autoOpen ?? true) {
      const opening: ClientFrame = durable ? { type: "durableResume", ackedThrough: acked } : { type: "subscribe" }
      yield* connection.write(yield* Effect.orDie(encodeFrame(opening, maxFrameBytes)))
    }

    const splitter = makeLineSplitter(maxFrameBytes)
    const readLoop = Effect.gen(function*() {
      while (true) {
        const chunks = yield* Effect.exit(pull)
        // The peer went away: end this session, the outer loop reconnects.
        if (Exit.isFailure(chunks)) return
        for (const chunk of chunks.value) {
          const { lines, tooLargeBytes } = splitter.push(chunk)
          // Delivered a chunk at a time: one offer per chunk, not per frame.
          const batch: Array<Delivery> = []
          for (const line of lines) {
            const decoded = decodeServerFrameSync(line)
            if (decoded._tag === "Failure") {
              yield* logWarning(`IpcClient ${socketPath}: dropped a bad frame: ${decoded.failure.message}`)
              continue
            }
            const frame = decoded.success
            if (frame.type === "durable") {
              if (frame.seq > connection.received) connection.received = frame.seq
              // An ack waiting for this connection to carry its seq can go now.
              if (acked > connection.ackSent && connection.received >= acked) yield* sendAck(connection)
              if (frame.seq <= delivered) continue
              delivered = frame.seq
              batch.push({ seq: frame.seq, frame: frame.frame })
            } else if (frame.type === "hello") {
              connection.hello = frame
              ready.openUnsafe()
            } else if (frame.type === "bye" && opensDurable) {
              // Another consumer resumed this queue: the stream is theirs now. Reconnecting
              // would take it back, and two clients would trade it for as long as both live.
              takenOver = true
              batch.push({ seq: undefined, frame })
            } else {
              batch.push({ seq: undefined, frame })
            }
          }
          if (batch.length > 0) yield* Queue.offerAll(inbox, batch)
          if (takenOver) {
            return yield* fail(
              new SocketClosed({ message: "the stream was taken over by another durableResume", cause: undefined })
            )
          }
          if (tooLargeBytes !== undefined) {
            // The server would send the same frame again on every resume: give up.
            return yield* fail(
              new FrameTooLarge({
                bytes: tooLargeBytes,
                limit: maxFrameBytes,
                message: `the server sent a frame of at least ${tooLargeBytes} bytes, over ${maxFrameBytes}`
              })
            )
          }
        }
      }
    })
    yield* Effect.raceFirst(readLoop, Deferred.await(connection.drop))
  }).pipe(Effect.scoped)

  const isRetryable = (error: IpcError) => error.reason._tag === "SocketClosed" && !takenOver
  const sessions = options.once === true
    ? session.pipe(
      Effect.andThen(Effect.fail(fail(new SocketClosed({ message: "the connection ended", cause: undefined }))))
    )
    : session.pipe(
      Effect.retry({ schedule: options.reconnect ?? defaultReconnect, while: isRetryable }),
      Effect.forever
    )
  yield* sessions.pipe(
    Effect.catchCause((cause) => Effect.andThen(Effect.sync(() => shutUnsafe()), Queue.failCause(inbox, cause))),
    Effect.forkScoped
  )
  yield* Effect.addFinalizer(() => Effect.andThen(Deferred.succeed(shut, undefined), Queue.shutdown(inbox)))

  function shutUnsafe() {
    Deferred.doneUnsafe(shut, Exit.void)
  }

  const connected: Effect.Effect<Hello> = ready.await.pipe(
    Effect.andThen(Effect.suspend(() =>
      current?.hello !== undefined ? Effect.succeed(current.hello) : connected
    ))
  )

  const whileOpen = <A>(effect: Effect.Effect<A>): Effect.Effect<A, IpcError> =>
    Effect.raceFirst(
      effect,
      Effect.andThen(
        Deferred.await(shut),
        Effect.fail(fail(new SocketClosed({ message: "the client is closed", cause: undefined })))
      )
    )

  /**
   * Tells the server of the watermark, as far as this connection has carried it: the
   * server refuses an ack above what it sent on the connection. Best effort: a lost
   * ack is carried by a later ack or the next connection's durableResume.
   */
  function sendAck(connection: Connection): Effect.Effect<void> {
    return Effect.suspend(() => {
      const through = Math.min(acked, connection.received)
      if (!(through > connection.ackSent)) return Effect.void
      connection.ackSent = through
      return Effect.ignore(connection.write(`{"type":"durableAck","throughSeq":${through}}\n`))
    })
  }

  let acknowledged = 0
  const client: IpcClientShape = {
    frames: Stream.fromQueue(inbox),
    take: Queue.take(inbox),
    ack: (seq) =>
      ackLock.withPermit(Effect.suspend(() => {
        const target = Math.min(Math.floor(seq), delivered)
        if (!(target > acked)) return Effect.void
        return watermark.save(target).pipe(
          Effect.andThen(Effect.suspend(() => {
            acked = target
            return current === undefined ? Effect.void : sendAck(current)
          }))
        )
      })),
    send: (frame) =>
      encodeFrame(frame, maxFrameBytes).pipe(
        Effect.mapError(fail),
        Effect.flatMap((line) =>
          Effect.andThen(whileOpen(connected), Effect.suspend(() =>
            current === undefined
              ? Effect.fail(fail(new SocketClosed({ message: "the connection closed before the frame was sent", cause: undefined })))
              : current.write(line)
          ))
        )
      ),
    connected,
    awaitConnected: whileOpen(connected),
    disconnect: Effect.suspend(() => (current === undefined ? Effect.void : Deferred.succeed(current.drop, undefined))),
    deliveredSeq: Effect.sync(() => delivered),
    ackedSeq: Effect.sync(() => acked),
    resume: (ackedThrough) =>
      Effect.andThen(whileOpen(connected), Effect.suspend(() => {
        if (current === undefined) {
          return Effect.fail(fail(new SocketClosed({ message: "no connection to resume on", cause: undefined })))
        }
        const from = Math.max(0, Math.floor(ackedThrough ?? delivered))
        current.ackSent = Math.max(current.ackSent, from)
        return current.write(`{"type":"durableResume","ackedThrough":${from}}\n`)
      })),
    sendAck: (throughSeq) =>
      Effect.andThen(whileOpen(connected), Effect.suspend(() => {
        if (current === undefined) {
          return Effect.fail(fail(new SocketClosed({ message: "no connection to acknowledge on", cause: undefined })))
        }
        return current.write(`{"type":"durableAck","throughSeq":${Math.max(0, Math.floor(throughSeq))}}\n`)
      })),
    acknowledge: (throughSeq) =>
      Effect.suspend((): Effect.Effect<void, IpcError | StorageError> => {
        if (throughSeq > acknowledged) {
          acknowledged = throughSeq
          return throughSeq <= delivered ? client.ack(throughSeq) : client.sendAck(throughSeq)
        }
        return throughSeq > acked && throughSeq <= delivered ? client.ack(throughSeq) : Effect.void
      }),
    acknowledgedSeq: Effect.sync(() => acknowledged)
  }
  return client
})
