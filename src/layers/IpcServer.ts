/**
 * The IPC server: a unix socket speaking protocol v2 over a `DurableOutboundQueue`.
 *
 * `emit(frame)` appends the frame durably and then delivers it live. Each connection
 * has one cursor, the last seq it was sent, and one sender that moves it forward
 * page by page under a per-connection lock; `durableResume` takes that lock, moves
 * the cursor back to the client's watermark and restarts the sender. Replay and live
 * delivery are the same loop, so a seq is never skipped or repeated on a connection,
 * whatever is appended during a replay.
 *
 * A connection streams nothing until it asks: `subscribe` gets live v1 frames from
 * that moment, `durableResume` gets durable envelopes from its watermark. Bad input
 * gets an `error` frame; an over-long frame also closes that connection.
 *
 * The socket file is bound inside a private 0700 directory, made 0600 and renamed into
 * place, so it is never reachable with wider permissions; it is removed when the
 * server's scope closes (unless another server has since taken the path).
 *
 * The listener is `node:net`'s own, each connection wrapped as an `effect/socket`
 * `Socket`: `NodeSocketServer` would also load `node:http`, `ws` and their
 * dependencies for its WebSocket server, which a unix socket never needs and a child
 * process would pay for just after its step body starts.
 *
 * @since 0.1.0
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Latch from "effect/Latch"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Semaphore from "effect/Semaphore"
import * as Socket from "effect/socket/Socket"
import type * as Net from "node:net"
import * as NodePath from "node:path"
import { StorageError } from "../Errors.ts"
import { fsPromises, nodeNet } from "../internal/builtins.ts"
import { makeLineSplitter } from "../internal/lineSplitter.ts"
import { AddressInUse, FrameTooLarge, IpcError, type IpcErrorReason, ListenFailed, SocketClosed } from "../IpcError.ts"
import {
  type ClientFrame,
  decodeClientFrame,
  DURABLE_ENVELOPE_BYTES,
  durableLine,
  encodeFrame,
  encodeFrameText,
  MaxFrameBytes,
  PROTOCOL_VERSION,
  toWireForm,
  type V1ServerFrame
} from "../schema/IpcFrame.ts"
import {
  DurableOutboundQueue,
  type DurableOutboundQueueShape,
  JSON_FRAMES,
  makeWith as makeQueue
} from "../services/DurableOutboundQueue.ts"
import { makeMemory } from "../services/StorageAdapter.ts"
import { logDebug, logInfo, logWarning } from "../internal/diagnostics.ts"

/** The client frames an application handles; `durableResume` and `durableAck` are the server's own. */
export type ApplicationClientFrame = Exclude<ClientFrame, { readonly type: "durableResume" | "durableAck" }>

/** One client connection, as an application frame handler sees it. */
export interface IpcConnection {
  /** Numbers connections from 1 in the order they were accepted. */
  readonly id: number
  /** Sends a frame to this connection only, now and not durably (a reply to a request). */
  readonly send: (frame: V1ServerFrame) => Effect.Effect<void, IpcError>
}

/** How a server is started. */
export interface IpcServerOptions<R = never> {
  /** Where the socket file goes; keep it short (unix socket paths stop near 100 bytes). */
  readonly socketPath: string
  /**
   * The durable outbox behind `emit`. Default: a fresh queue in memory, durable across
   * reconnects only (frames not yet acked are lost with the process). It numbers from
   * the clock, so a server restarted on a new one numbers above what it sent before.
   * A server whose frames must survive its restart needs a queue over durable storage.
   */
  readonly queue?: DurableOutboundQueueShape | undefined
  /** The limit on one frame line, both ways. Default: the `MaxFrameBytes` reference. */
  readonly maxFrameBytes?: number | undefined
  /**
   * The window of the default queue: frames (and bytes) emitted and not yet
   * acknowledged, beyond which `publish` and `emit` wait. A queue passed as `queue`
   * has its own. Defaults: the queue's (65,536 frames, 64 MiB).
   */
  readonly window?: { readonly frames?: number | undefined; readonly bytes?: number | undefined } | undefined
  /**
   * How long frames are kept. `"untilAcked"` (default): until the durable consumer
   * acknowledges them, which is what makes delivery exactly-once across reconnects and
   * restarts. `"untilSent"`: until every streaming connection has been sent them (at once
   * when none streams), for a server that promises no durability (noetic's server
   * without `storage`); its producer is then never held back by a client that is not there.
   */
  readonly retain?: "untilAcked" | "untilSent" | undefined
  /**
   * What `hello` tells a peer about the agent behind the socket. noetic's v1 client
   * requires all four; defaults: `taskId` the socket file's name, `role` "agent",
   * `runnerId` the process id, `threadId` "main".
   */
  readonly hello?: {
    readonly taskId?: string | undefined
    readonly role?: string | undefined
    readonly runnerId?: string | undefined
    readonly threadId?: string | undefined
  } | undefined
  /** How many frames one replay page reads and writes at once. Default 512. */
  readonly pageFrames?: number | undefined
  /** Handles every client frame except `durableResume` and `durableAck`, in order per connection. */
  readonly onClientFrame?: ((frame: ApplicationClientFrame, connection: IpcConnection) => Effect.Effect<void, never, R>) | undefined
}

/** A running server. */
export interface IpcServerShape {
  readonly socketPath: string
  /** The queue frames are emitted through. */
  readonly queue: DurableOutboundQueueShape
  /**
   * Appends a frame durably, delivers it live to streaming connections, and returns
   * its seq once it is durable. Fails with a queue record's `Corrupt` error (once per
   * record) when a delivery met an unreadable record since the last call; the frame is
   * then not emitted.
   */
  readonly emit: (frame: V1ServerFrame) => Effect.Effect<number, IpcError | StorageError>
  /** Emits frames in order in one group commit; returns their seqs once durable. */
  readonly emitAll: (frames: ReadonlyArray<V1ServerFrame>) => Effect.Effect<ReadonlyArray<number>, IpcError | StorageError>
  /**
   * The pipelined emit: numbers the frame and hands it to the queue's writer without
   * waiting for the disk, only for room in the window. It goes on the wire once its
   * batch is durable. A write failure is reported by the next `publish`, `emit` or `flush`.
   */
  readonly publish: (frame: V1ServerFrame) => Effect.Effect<number, IpcError | StorageError>
  /** Publishes frames in order; see `publish`. */
  readonly publishAll: (frames: ReadonlyArray<V1ServerFrame>) => Effect.Effect<ReadonlyArray<number>, IpcError | StorageError>
  /** Waits until every published frame is durable; fails with a write or record failure not yet reported. */
  readonly flush: Effect.Effect<void, StorageError>
  /** Waits until a client has acknowledged every frame up to `seq`. */
  readonly awaitAcked: (seq: number) => Effect.Effect<void>
  /** How many connections are open. */
  readonly connectionCount: Effect.Effect<number>
}

/** A running IPC server, provided by {@link layer}. */
export class IpcServer extends Context.Service<IpcServer, IpcServerShape>()("noetic-effect/IpcServer") {}

const DEFAULT_PAGE_FRAMES = 512

/**
 * A socket write is cut once its text reaches this many UTF-16 code units: V8 puts a
 * string over 128 KiB in its large-object space, one fresh mapping per string, and
 * flattening and encoding such a page cost several times what the same bytes cost in
 * pieces (measured: ~1.2 µs against ~0.2 µs per 260-byte frame).
 */
const WRITE_PIECE_CHARS = 32 * 1024
/** Leaves room under the ~104-byte `sun_path` limit of macOS and Linux. */
const MAX_SOCKET_PATH_BYTES = 100

const ignoreError = (_: Error) => {}

const causeMessage = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** Whether a live server accepts connections at `path`. */
const probe = (path: string): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    const conn = nodeNet().connect({ path })
    conn.once("connect", () => {
      conn.destroy()
      resume(Effect.succeed(true))
    })
    conn.once("error", () => {
      conn.destroy()
      resume(Effect.succeed(false))
    })
    return Effect.sync(() => conn.destroy())
  })

/** Starts a server in the current scope. */
export const make = Effect.fnUntraced(function*<R = never>(options: IpcServerOptions<R>) {
  const socketPath = NodePath.resolve(options.socketPath)
  const maxFrameBytes = options.maxFrameBytes !== undefined ? options.maxFrameBytes : yield* MaxFrameBytes
  const pageFrames = Math.max(1, options.pageFrames ?? DEFAULT_PAGE_FRAMES)
  const fail = (reason: IpcErrorReason) => new IpcError({ socketPath, reason })
  const queue = options.queue !== undefined
    ? options.queue
    // Numbered from the clock in microseconds: a server restarted on a new in-memory queue
    // numbers above everything the old one sent, so a connected client never takes its
    // frames for repeats.
    : yield* makeQueue(yield* makeMemory, {
      socketId: socketPath,
      startAfter: Number((yield* Clock.currentTimeNanos) / 1000n),
      windowFrames: options.window?.frames,
      windowBytes: options.window?.bytes
    }).pipe(Effect.orDie)
  const helloFrame: V1ServerFrame = {
    type: "hello",
    protocolVersion: PROTOCOL_VERSION,
    capabilities: ["durable"],
    maxFrameBytes,
    taskId: options.hello?.taskId ?? NodePath.basename(socketPath),
    role: options.hello?.role ?? "agent",
    runnerId: options.hello?.runnerId ?? String(process.pid),
    threadId: options.hello?.threadId ?? "main"
  }
  // Failures a producer has not been told of yet: a batch that could not be written,
  // a record a delivery could not read.
  const faults: Array<StorageError> = []
  const reportedKeys = new Set<string>()
  const reported = new WeakSet<StorageError>()
  const reportFault = (error: StorageError) => {
    if (reported.has(error)) return
    reported.add(error)
    if (error.reason._tag === "Corrupt") {
      if (reportedKeys.has(error.reason.key)) return
      reportedKeys.add(error.reason.key)
    }
    faults.push(error)
  }
  const takeFault: Effect.Effect<void, StorageError> = Effect.flatMap(queue.takeWriteFailures, (failures) => {
    for (const error of failures) reportFault(error)
    const fault = faults.shift()
    return fault === undefined ? Effect.void : Effect.fail(fault)
  })
  // Under "untilSent", frames go once every streaming connection's cursor has passed them.
  const cursors = new Map<number, () => number>()
  const releaseSent: Effect.Effect<void> = options.retain === "untilSent"
    ? Effect.flatMap(queue.headSeq, (head) => {
      let target = head
      for (const cursor of cursors.values()) target = Math.min(target, cursor())
      return Effect.ignore(queue.ackUpTo(target))
    })
    : Effect.void
  // The one durable consumer: the connection whose acks may compact the queue.
  let consumer: { readonly id: number; readonly takeOver: Effect.Effect<void> } | undefined
  const consumerLock = Semaphore.makeUnsafe(1)
  const onClientFrame = options.onClientFrame
  const services = yield* Effect.context<R>()

  // Refuse to take the path from a live server or from a file that is not a socket.
  const existing = yield* Effect.promise(() => fsPromises().lstat(socketPath).catch(() => undefined))
  if (existing !== undefined) {
    if (!existing.isSocket()) {
      return yield* fail(new AddressInUse({ message: "a file that is not a socket is in the way" }))
    }
    if (yield* probe(socketPath)) {
      return yield* fail(new AddressInUse({ message: "another server is listening on this path" }))
    }
  }

  const listenFailed = (message: string) => (cause: unknown) => fail(new ListenFailed({ message: `${message}: ${causeMessage(cause)}`, cause }))
  const dir = NodePath.dirname(socketPath)
  const privateDir = yield* Effect.tryPromise({
    try: () => fsPromises().mkdtemp(NodePath.join(dir, ".ipc-")),
    catch: listenFailed("cannot create a private directory beside the socket")
  })
  const bindPath = Buffer.byteLength(NodePath.join(privateDir, "s")) <= MAX_SOCKET_PATH_BYTES
    ? NodePath.join(privateDir, "s")
    : undefined
  let boundInode: number | undefined
  yield* Effect.addFinalizer(() =>
    Effect.promise(async () => {
      await fsPromises().rm(privateDir, { recursive: true, force: true })
      const stat = await fsPromises().stat(socketPath).catch(() => undefined)
      if (stat !== undefined && stat.ino === boundInode) await fsPromises().unlink(socketPath).catch(() => undefined)
    })
  )
  if (bindPath === undefined) {
    // No room for the private directory in the path: bind in place, protected until
    // the chmod only by the umask. A stale socket has to go first.
    yield* Effect.promise(() => fsPromises().unlink(socketPath).catch(() => undefined))
  }
  const open = new Set<Net.Socket>()
  let nextConnectionId = 0

  const handle = (conn: Net.Socket) =>
    Effect.gen(function*() {
      const id = ++nextConnectionId
      yield* Effect.addFinalizer(() => Effect.sync(() => open.delete(conn)))
      // Ended gracefully once the connection's scope closes: what was written still goes out.
      const socket = yield* NodeSocket.fromDuplex(
        Effect.acquireRelease(Effect.succeed(conn), () =>
          Effect.sync(() => {
            if (!conn.closed) conn.destroySoon()
          }))
      )
      const scope = yield* Effect.scope
      const pull = yield* Socket.readerBytes(socket)
      const writer = yield* socket.writer
      const closed = (cause: unknown) =>
        fail(new SocketClosed({ message: `connection ${id}: ${causeMessage(cause)}`, cause }))
      const writeLine = (line: string) => Effect.mapError(writer.write(line), closed)
      const send = (frame: V1ServerFrame) =>
        encodeFrame(toWireForm(frame), maxFrameBytes).pipe(Effect.mapError(fail), Effect.flatMap(writeLine))
      const connection: IpcConnection = { id, send }

      // A sender or acker failure ends the connection; the client resumes on a new one.
      const fatal = Deferred.makeUnsafe<never, IpcError | StorageError>()

      let mode: "idle" | "live" | "durable" = "idle"
      let cursor = 0
      let sender: Fiber.Fiber<never, never> | undefined
      const sendLock = Semaphore.makeUnsafe(1)

      const sendPage = Effect.gen(function*() {
        const read = yield* queue.readRange(cursor + 1, { limit: pageFrames }).pipe(
          Effect.catchTag("InvalidQueueInput", Effect.die)
        )
        const entries = read.entries
        if (entries.length > 0) {
          // A few writes per page, not one per frame; each piece stays under V8's
          // large-object size, whose allocation costs several times the copy.
          let piece = ""
          for (const entry of entries) {
            piece += mode === "durable" ? durableLine(entry.seq, entry.frame) : entry.frame + "\n"
            if (piece.length >= WRITE_PIECE_CHARS) {
              yield* Effect.mapError(writer.write(piece), closed)
              piece = ""
            }
          }
          if (piece.length > 0) yield* Effect.mapError(writer.write(piece), closed)
        }
        if (read.damage !== undefined) {
          // An unreadable record: the frames before it went out; the client, the log and
          // the producer hear of it, and delivery goes on after it.
          const error = read.damage.error
          yield* logWarning(`IpcServer ${socketPath}: connection ${id}: ${error.message}`)
          reportFault(error)
          yield* send({ type: "error", kind: error.reason._tag, message: error.message })
        }
        // Compacted while it was read, burnt by a failed write, or skipped: all covered.
        const acked = yield* queue.ackedSeq
        cursor = Math.max(read.through, acked, entries.length > 0 ? entries[entries.length - 1]!.seq : 0, cursor)
      })
      const senderLoop: Effect.Effect<never> = Effect.suspend(() => queue.awaitHeadAbove(cursor)).pipe(
        Effect.andThen(sendLock.withPermit(sendPage)),
        Effect.andThen(releaseSent),
        Effect.forever,
        Effect.catchCause((cause) => Deferred.failCause(fatal, cause)),
        Effect.andThen(Effect.never)
      )
      const startStreaming = (next: "live" | "durable", from: Effect.Effect<number>) =>
        sendLock.withPermit(Effect.gen(function*() {
          cursors.set(id, () => cursor)
          if (sender !== undefined) yield* Fiber.interrupt(sender)
          mode = next
          cursor = yield* from
          sender = yield* Effect.forkIn(senderLoop, scope)
        }))

      let ackTarget = 0
      const ackWanted = Latch.makeUnsafe(false)
      // Only the queue's consumer compacts it: a connection taken over acks nothing more.
      const ackAsConsumer = (seq: number) =>
        consumerLock.withPermit(Effect.suspend(() =>
          consumer?.id === id ? Effect.asVoid(queue.ackUpTo(seq)) : Effect.void
        )).pipe(Effect.catchTag("InvalidQueueInput", Effect.die))
      yield* Effect.gen(function*() {
        yield* ackWanted.await
        ackWanted.closeUnsafe()
        yield* ackAsConsumer(ackTarget)
      }).pipe(
        Effect.forever,
        Effect.catchCause((cause) => Deferred.failCause(fatal, cause)),
        Effect.forkIn(scope)
      )

      const handleFrame = (frame: ClientFrame): Effect.Effect<void, IpcError | StorageError> => {
        switch (frame.type) {
          case "durableResume":
            // One consumer per queue: a resume takes the queue over, and the previous
            // consumer's connection is closed so its acks cannot compact frames this one
            // still needs. The watermark is an ack too: the client has durably handled what it names.
            return consumerLock.withPermit(Effect.gen(function*() {
              const previous = consumer
              consumer = { id, takeOver: Deferred.fail(fatal, fail(new SocketClosed({ message: `connection ${id}: taken over by another durableResume`, cause: undefined }))).pipe(Effect.asVoid) }
              if (previous !== undefined && previous.id !== id) {
                yield* logInfo(`IpcServer ${socketPath}: connection ${id} takes the durable stream over from connection ${previous.id}`)
                yield* previous.takeOver
              }
              yield* queue.ackUpTo(frame.ackedThrough).pipe(Effect.catchTag("InvalidQueueInput", Effect.die))
            })).pipe(Effect.andThen(startStreaming("durable", queue.ackedSeq)))
          case "durableAck": {
            // An ack of a seq this connection was never sent is refused, and forgotten:
            // it must not raise the bar for the acks after it.
            if (mode !== "durable" || frame.throughSeq > cursor) {
              return send({
                type: "error",
                kind: "AckAboveSent",
                message: `durableAck ${frame.throughSeq} is above the highest seq sent on this connection (${mode === "durable" ? cursor : "none"})`
              })
            }
            return Effect.sync(() => {
              if (frame.throughSeq > ackTarget) {
                ackTarget = frame.throughSeq
                ackWanted.openUnsafe()
              }
            })
          }
          case "subscribe": {
            const start = mode === "idle" ? startStreaming("live", queue.headSeq) : Effect.void
            return Effect.andThen(start, dispatch(frame))
          }
          default:
            return dispatch(frame)
        }
      }
      const dispatch = (frame: ApplicationClientFrame): Effect.Effect<void> =>
        onClientFrame === undefined
          ? Effect.void
          : onClientFrame(frame, connection).pipe(
            Effect.provideContext(services),
            Effect.catchCause((cause) => logWarning("IpcServer: onClientFrame failed", cause))
          )

      const splitter = makeLineSplitter(maxFrameBytes)
      const readLoop: Effect.Effect<void, IpcError | StorageError> = Effect.gen(function*() {
        while (true) {
          const chunks = yield* Effect.exit(pull)
          if (Exit.isFailure(chunks)) return
          for (const chunk of chunks.value) {
            const { lines, tooLargeBytes } = splitter.push(chunk)
            for (const line of lines) {
              const frame = yield* Effect.result(decodeClientFrame(line))
              if (frame._tag === "Failure") {
                yield* send({ type: "error", kind: frame.failure._tag, message: frame.failure.message })
                continue
              }
              yield* handleFrame(frame.success)
            }
            if (tooLargeBytes !== undefined) {
              const reason = new FrameTooLarge({
                bytes: tooLargeBytes,
                limit: maxFrameBytes,
                message: `a frame of at least ${tooLargeBytes} bytes exceeds ${maxFrameBytes}; closing the connection`
              })
              yield* Effect.ignore(send({ type: "error", kind: reason._tag, message: reason.message }))
              return
            }
          }
        }
      })

      yield* Effect.addFinalizer(() =>
        consumerLock.withPermit(Effect.sync(() => {
          if (consumer?.id === id) consumer = undefined
          cursors.delete(id)
        }))
      )
      yield* send(helloFrame)
      const ended = yield* Effect.exit(Effect.raceFirst(readLoop, Deferred.await(fatal)))
      if (Exit.isFailure(ended)) {
        const error = Option.getOrUndefined(Exit.findErrorOption(ended))
        if (error !== undefined && error._tag === "IpcError" && error.reason._tag === "SocketClosed" && String(error.reason.message).includes("taken over")) {
          yield* Effect.ignore(send({ type: "bye", reason: "taken over by another durableResume" }))
        } else if (error !== undefined && error._tag === "StorageError") {
          // Never a silent close: the client, the log and the producer hear why.
          yield* logWarning(`IpcServer ${socketPath}: connection ${id}: ${error.message}`)
          reportFault(error)
          yield* Effect.ignore(send({ type: "error", kind: error.reason._tag, message: error.message }))
        }
        return yield* ended
      }
    }).pipe(
      Effect.scoped,
      Effect.catchCause((cause) => logDebug("IpcServer: connection ended", cause))
    )

  // Each connection runs in a fiber of the server's scope. The listener is closed with
  // that scope after those fibers have ended; a connection still open then is
  // destroyed, as `close` waits for every one.
  const serverScope = yield* Effect.scope
  const runConnection = Effect.runForkWith(services)
  const listener = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const server = nodeNet().createServer((conn) => {
        // Paused until its reader is acquired, so nothing is read before it is wanted.
        // A reset before the reader listens, or after it has stopped, must not be an
        // uncaught error: the reader sees the close.
        conn.pause()
        conn.on("error", ignoreError)
        // Counted from its accept: one whose fiber the closing scope interrupts before it
        // starts is still destroyed below, or `close` would wait for it.
        open.add(conn)
        Fiber.runIn(runConnection(handle(conn)), serverScope)
      })
      // Likewise a failed accept once the server listens.
      server.on("error", ignoreError)
      return server
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        open.forEach((conn) => conn.destroy())
        server.close(() => resume(Effect.void))
      })
  )
  yield* Effect.callback<void, unknown>((resume) => {
    const failed = (cause: unknown) => resume(Effect.fail(cause))
    listener.once("error", failed)
    listener.listen({ path: bindPath ?? socketPath }, () => {
      listener.off("error", failed)
      resume(Effect.void)
    })
  }).pipe(Effect.mapError(listenFailed("cannot listen")))

  boundInode = yield* Effect.tryPromise({
    try: async () => {
      const at = bindPath ?? socketPath
      await fsPromises().chmod(at, 0o600)
      if (bindPath !== undefined) {
        await fsPromises().rename(bindPath, socketPath)
        await fsPromises().rmdir(privateDir)
      }
      return (await fsPromises().stat(socketPath)).ino
    },
    catch: listenFailed("cannot secure the socket file")
  })

  if (options.retain === "untilSent") {
    // With no connection streaming, frames are released as they commit.
    let seen = yield* queue.headSeq
    yield* queue.awaitHeadAbove(seen).pipe(
      Effect.tap((head) => Effect.sync(() => void (seen = head))),
      Effect.andThen(releaseSent),
      Effect.forever,
      Effect.forkScoped
    )
  }

  /** The frames' JSON texts as the queue stores them, or the first one's failure. */
  const encodeForQueue = (frames: ReadonlyArray<V1ServerFrame>): Effect.Effect<Array<string>, IpcError> =>
    Effect.suspend(() => {
      const texts: Array<string> = []
      for (const frame of frames) {
        const text = encodeFrameText(toWireForm(frame), maxFrameBytes - DURABLE_ENVELOPE_BYTES)
        if (typeof text !== "string") return Effect.fail(fail(text))
        texts.push(text)
      }
      return Effect.succeed(texts)
    })

  const publishAll = (frames: ReadonlyArray<V1ServerFrame>) =>
    takeFault.pipe(
      Effect.andThen(encodeForQueue(frames)),
      Effect.flatMap((texts) => queue.offerAll(texts, JSON_FRAMES)),
      Effect.map((offered) => offered.seqs)
    )
  // One frame at a time is the common producer: when nothing is to be reported and the
  // queue takes the frame at once, publishing it is one effect, not a pipeline of them.
  const publish = (frame: V1ServerFrame): Effect.Effect<number, IpcError | StorageError> =>
    Effect.suspend(() => {
      if (faults.length > 0) return Effect.map(publishAll([frame]), (seqs) => seqs[0]!)
      const text = encodeFrameText(toWireForm(frame), maxFrameBytes - DURABLE_ENVELOPE_BYTES)
      if (typeof text !== "string") return Effect.fail(fail(text))
      const seq = queue.offerUnsafe(text, JSON_FRAMES)
      if (seq !== undefined) return Effect.succeed(seq)
      return takeFault.pipe(
        Effect.andThen(queue.offerAll([text], JSON_FRAMES)),
        Effect.map((offered) => offered.seqs[0]!)
      )
    })
  const emitAll = (frames: ReadonlyArray<V1ServerFrame>) =>
    takeFault.pipe(
      Effect.andThen(encodeForQueue(frames)),
      // The texts are the server's own encoding: never a frame the queue refuses.
      Effect.flatMap((texts) => Effect.catchTag(queue.appendAll(texts, JSON_FRAMES), "InvalidQueueInput", Effect.die)),
      // The caller hears of its own batch's failure here, not again at the next call.
      Effect.tapError((error) => Effect.sync(() => void (error._tag === "StorageError" && reported.add(error))))
    )

  return IpcServer.of({
    socketPath,
    queue,
    emit: (frame) => Effect.map(emitAll([frame]), (seqs) => seqs[0]!),
    emitAll,
    publish,
    publishAll,
    // Batches are written in order; a failed one is kept by the queue for `takeFault`.
    flush: Effect.andThen(queue.awaitOffered, takeFault),
    awaitAcked: queue.awaitAcked,
    connectionCount: Effect.sync(() => open.size)
  })
})

/** A server over the `DurableOutboundQueue` in context, for the life of the layer. */
export const layer = <R = never>(
  options: Omit<IpcServerOptions<R>, "queue">
): Layer.Layer<IpcServer, IpcError, DurableOutboundQueue | R> =>
  Layer.effect(
    IpcServer,
    Effect.gen(function*() {
      return yield* make({ ...options, queue: yield* DurableOutboundQueue })
    })
  )

