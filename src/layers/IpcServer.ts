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
 * @since 0.1.0
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import { Clock, Context, Deferred, Effect, Exit, Fiber, Latch, Layer, Option, Semaphore } from "effect"
import * as Socket from "effect/socket/Socket"
import * as Fs from "node:fs/promises"
import type * as Net from "node:net"
import * as NodeNet from "node:net"
import * as NodePath from "node:path"
import type { StorageError } from "../Errors.ts"
import { makeLineSplitter } from "../internal/lineSplitter.ts"
import { AddressInUse, FrameTooLarge, IpcError, type IpcErrorReason, ListenFailed, SocketClosed } from "../IpcError.ts"
import {
  type ClientFrame,
  decodeClientFrame,
  durableLine,
  encodeFrame,
  MaxFrameBytes,
  PROTOCOL_VERSION,
  type V1ServerFrame
} from "../schema/IpcFrame.ts"
import {
  DurableOutboundQueue,
  type DurableOutboundQueueShape,
  makeWith as makeQueue
} from "../services/DurableOutboundQueue.ts"
import { makeMemory } from "../services/StorageAdapter.ts"

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
  /** Appends a frame durably, delivers it live to streaming connections, and returns its seq. */
  readonly emit: (frame: V1ServerFrame) => Effect.Effect<number, IpcError | StorageError>
  /** Emits frames in order in one group commit; returns their seqs. */
  readonly emitAll: (frames: ReadonlyArray<V1ServerFrame>) => Effect.Effect<ReadonlyArray<number>, IpcError | StorageError>
  /** Waits until a client has acknowledged every frame up to `seq`. */
  readonly awaitAcked: (seq: number) => Effect.Effect<void>
  /** How many connections are open. */
  readonly connectionCount: Effect.Effect<number>
}

/** A running IPC server, provided by {@link layer}. */
export class IpcServer extends Context.Service<IpcServer, IpcServerShape>()("noetic-effect/IpcServer") {}

const DEFAULT_PAGE_FRAMES = 512
/** The bytes a durable envelope adds around a frame, rounded up. */
const ENVELOPE_BYTES = 64
/** Leaves room under the ~104-byte `sun_path` limit of macOS and Linux. */
const MAX_SOCKET_PATH_BYTES = 100

const causeMessage = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** Whether a live server accepts connections at `path`. */
const probe = (path: string): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    const conn = NodeNet.connect({ path })
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
      startAfter: Number((yield* Clock.currentTimeNanos) / 1000n)
    }).pipe(Effect.orDie)
  const onClientFrame = options.onClientFrame
  const services = yield* Effect.context<R>()

  // Refuse to take the path from a live server or from a file that is not a socket.
  const existing = yield* Effect.promise(() => Fs.lstat(socketPath).catch(() => undefined))
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
    try: () => Fs.mkdtemp(NodePath.join(dir, ".ipc-")),
    catch: listenFailed("cannot create a private directory beside the socket")
  })
  const bindPath = Buffer.byteLength(NodePath.join(privateDir, "s")) <= MAX_SOCKET_PATH_BYTES
    ? NodePath.join(privateDir, "s")
    : undefined
  let boundInode: number | undefined
  yield* Effect.addFinalizer(() =>
    Effect.promise(async () => {
      await Fs.rm(privateDir, { recursive: true, force: true })
      const stat = await Fs.stat(socketPath).catch(() => undefined)
      if (stat !== undefined && stat.ino === boundInode) await Fs.unlink(socketPath).catch(() => undefined)
    })
  )
  if (bindPath === undefined) {
    // No room for the private directory in the path: bind in place, protected until
    // the chmod only by the umask. A stale socket has to go first.
    yield* Effect.promise(() => Fs.unlink(socketPath).catch(() => undefined))
  }
  const server = yield* NodeSocketServer.make({ path: bindPath ?? socketPath }).pipe(
    Effect.mapError(listenFailed("cannot listen"))
  )
  boundInode = yield* Effect.tryPromise({
    try: async () => {
      const at = bindPath ?? socketPath
      await Fs.chmod(at, 0o600)
      if (bindPath !== undefined) {
        await Fs.rename(bindPath, socketPath)
        await Fs.rmdir(privateDir)
      }
      return (await Fs.stat(socketPath)).ino
    },
    catch: listenFailed("cannot secure the socket file")
  })

  const open = new Set<Net.Socket>()
  yield* Effect.addFinalizer(() => Effect.sync(() => open.forEach((conn) => conn.destroy())))
  let nextConnectionId = 0

  const handle = (socket: Socket.Socket) =>
    Effect.gen(function*() {
      const id = ++nextConnectionId
      // NodeSocketServer provides the Node socket to every handler.
      const netSocket = yield* Effect.serviceOption(NodeSocket.NetSocket)
      if (Option.isSome(netSocket)) {
        open.add(netSocket.value)
        yield* Effect.addFinalizer(() => Effect.sync(() => open.delete(netSocket.value)))
      }
      const scope = yield* Effect.scope
      const pull = yield* Socket.readerBytes(socket)
      const writer = yield* socket.writer
      const closed = (cause: unknown) =>
        fail(new SocketClosed({ message: `connection ${id}: ${causeMessage(cause)}`, cause }))
      const writeLine = (line: string) => Effect.mapError(writer.write(line), closed)
      const send = (frame: V1ServerFrame) =>
        encodeFrame(frame, maxFrameBytes).pipe(Effect.mapError(fail), Effect.flatMap(writeLine))
      const connection: IpcConnection = { id, send }

      // A sender or acker failure ends the connection; the client resumes on a new one.
      const fatal = Deferred.makeUnsafe<never, IpcError | StorageError>()

      let mode: "idle" | "live" | "durable" = "idle"
      let cursor = 0
      let sender: Fiber.Fiber<never, never> | undefined
      const sendLock = Semaphore.makeUnsafe(1)

      const sendPage = Effect.gen(function*() {
        const head = yield* queue.headSeq
        const entries = yield* queue.frameRange(cursor + 1, { limit: pageFrames })
        if (entries.length === 0) {
          // The page was compacted while it was read: go on after the watermark, which
          // may still be below the head (a page is not the whole range).
          const acked = yield* queue.ackedSeq
          // Otherwise nothing is stored in (cursor, head]: never landed.
          cursor = acked > cursor ? acked : Math.max(cursor, head)
          return
        }
        const lines = entries.map((entry) => mode === "durable" ? durableLine(entry.seq, entry.frame) : entry.frame + "\n")
        yield* Effect.mapError(writer.writeAll(lines as [string, ...Array<string>]), closed)
        cursor = entries[entries.length - 1]!.seq
      })
      const senderLoop: Effect.Effect<never> = Effect.suspend(() => queue.awaitHeadAbove(cursor)).pipe(
        Effect.andThen(sendLock.withPermit(sendPage)),
        Effect.forever,
        Effect.catchCause((cause) => Deferred.failCause(fatal, cause)),
        Effect.andThen(Effect.never)
      )
      const startStreaming = (next: "live" | "durable", from: Effect.Effect<number>) =>
        sendLock.withPermit(Effect.gen(function*() {
          if (sender !== undefined) yield* Fiber.interrupt(sender)
          mode = next
          cursor = yield* from
          sender = yield* Effect.forkIn(senderLoop, scope)
        }))

      let ackTarget = 0
      const ackWanted = Latch.makeUnsafe(false)
      yield* Effect.gen(function*() {
        yield* ackWanted.await
        ackWanted.closeUnsafe()
        yield* queue.ackUpTo(ackTarget)
      }).pipe(
        Effect.forever,
        Effect.catchCause((cause) => Deferred.failCause(fatal, cause)),
        Effect.forkIn(scope)
      )

      const handleFrame = (frame: ClientFrame): Effect.Effect<void, IpcError | StorageError> => {
        switch (frame.type) {
          case "durableResume":
            // The watermark is an ack too: the client has durably handled what it names.
            return queue.ackUpTo(frame.ackedThrough).pipe(
              Effect.andThen(startStreaming("durable", queue.ackedSeq))
            )
          case "durableAck":
            return Effect.sync(() => {
              if (frame.throughSeq > ackTarget) {
                ackTarget = frame.throughSeq
                ackWanted.openUnsafe()
              }
            })
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
            Effect.catchCause((cause) => Effect.logWarning("IpcServer: onClientFrame failed", cause))
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

      yield* send({ type: "hello", protocolVersion: PROTOCOL_VERSION, capabilities: ["durable"], maxFrameBytes })
      yield* Effect.raceFirst(readLoop, Deferred.await(fatal))
    }).pipe(
      Effect.scoped,
      Effect.catchCause((cause) => Effect.logDebug("IpcServer: connection ended", cause))
    )

  yield* Effect.forkScoped(server.run(handle))

  const encodeForQueue = (frame: V1ServerFrame) =>
    encodeFrame(frame, maxFrameBytes - ENVELOPE_BYTES).pipe(
      Effect.mapError(fail),
      Effect.map((line) => line.slice(0, -1))
    )

  return IpcServer.of({
    socketPath,
    queue,
    emit: (frame) => encodeForQueue(frame).pipe(Effect.flatMap(queue.append)),
    emitAll: (frames) => Effect.forEach(frames, encodeForQueue).pipe(Effect.flatMap(queue.appendAll)),
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

