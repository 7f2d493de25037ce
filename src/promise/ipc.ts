/**
 * The Promise facade of durable IPC, as noetic's platform package has it:
 * `createDurableOutboundQueue`, `AgentIpcServer`, `AgentIpcClient`, `encodeFrame` and
 * `createLocalFsAdapter`. The endpoints are thin shells over the Effect `IpcServer`
 * and `IpcClient`, so they speak the same protocol (v1 frames in noetic's forms, v2
 * durable frames) with the same guarantees.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as NodePath from "node:path"
import { IpcError } from "../IpcError.ts"
import { fsPromises, sha256Hex } from "../internal/builtins.ts"
import type * as IpcClient from "../layers/IpcClient.ts"
import * as IpcRequests from "../layers/IpcRequests.ts"
import type * as IpcServer from "../layers/IpcServer.ts"
import {
  type ClientFrame,
  encodeFrame as encodeFrameEffect,
  type Hello,
  type ServerFrame,
  type V1ServerFrame
} from "../schema/IpcFrame.ts"
import { makeWith } from "../services/DurableOutboundQueue.ts"
import { makeDirectory } from "../internal/makeDirectory.ts"
import * as Bridge from "./bridge.ts"
import { toFacadeError } from "./errors.ts"
import { runForFacade, type StorageAdapter, toEngineStorage } from "./storage.ts"

/** One persisted entry returned from `frameRange` or `append`. */
export interface DurableFrameEntry {
  readonly seq: number
  readonly frame: string
}

/** A durable outbound queue: numbered, persisted frames, kept until acknowledged. */
export interface DurableOutboundQueue extends AsyncDisposable {
  /** The id the queue's keys are written under. */
  readonly socketId: string
  /** Appends a frame (opaque text, usually a frame's JSON) durably; resolves with its entry. */
  append(frame: string): Promise<DurableFrameEntry>
  /** The unacked frames with seq at least `fromSeq`, in order. Rejects a seq that is not a non-negative integer. */
  frameRange(fromSeq: number): Promise<Array<DurableFrameEntry>>
  /** Marks frames up to `seq` handled and compacts them (clamped to the head; lower acks ignored). */
  ackUpTo(seq: number): Promise<void>
  /** Acknowledges and removes every stored frame. Numbering carries on: a seq is never issued twice. */
  clear(): Promise<void>
  /** How many frames are stored and not yet acknowledged. */
  queueSize(): Promise<number>
  /**
   * The seq of the last durable frame, or the acked watermark when that is higher (0
   * when none). After a crash the next append may number above it: seqs reserved
   * before the crash are never issued again.
   */
  getHeadSeq(): number
  /** The acked watermark: every frame up to it is gone. */
  getLastAckedSeq(): number
  /** The seq of the last durable frame (0 when none); as `getHeadSeq()`. */
  readonly headSeq: number
  /** The acked watermark; as `getLastAckedSeq()`. */
  readonly ackedSeq: number
  /** Waits for in-flight writes; the queue is unusable afterwards. */
  close(): Promise<void>
}

/** The queue id a socket path gets when none is given: short, so file keys stay short. */
export const socketIdOf = (socketPath: string): string =>
  sha256Hex(NodePath.resolve(socketPath)).slice(0, 20)

/** Options of {@link createDurableOutboundQueue}. */
export interface CreateDurableOutboundQueueOptions {
  readonly storage: StorageAdapter
  /** Names the queue; any stable string works. */
  readonly socketPath: string
  /** The id its keys are written under. Default: derived from `socketPath`. */
  readonly socketId?: string
}

/** Opens (or reopens, repairing what a crash left) the durable outbound queue of `socketPath`; resolves once loaded. */
export const createDurableOutboundQueue = async (
  options: CreateDurableOutboundQueueOptions
): Promise<DurableOutboundQueue> => {
  const socketId = options.socketId ?? socketIdOf(options.socketPath)
  const queue = await runForFacade(
    Effect.flatMap(toEngineStorage(options.storage), (storage) => makeWith(storage, { socketId }))
  )
  const close = () => runForFacade(queue.close)
  const facade: DurableOutboundQueue = {
    socketId,
    // Frames are opaque strings: the queue refuses anything else before it reaches a
    // batch, so the frames appended after it are unaffected.
    append: (frame) => runForFacade(Effect.map(queue.append(frame), (seq): DurableFrameEntry => ({ seq, frame }))),
    frameRange: (fromSeq) => runForFacade(Effect.map(queue.frameRange(fromSeq), (entries) => entries.map((e) => ({ ...e })))),
    ackUpTo: (seq) => runForFacade(Effect.asVoid(queue.ackUpTo(seq))),
    clear: () => runForFacade(queue.clear),
    queueSize: () => runForFacade(queue.size),
    getHeadSeq: () => Effect.runSync(queue.lastFrameSeq),
    getLastAckedSeq: () => Effect.runSync(queue.ackedSeq),
    get headSeq() {
      return Effect.runSync(queue.lastFrameSeq)
    },
    get ackedSeq() {
      return Effect.runSync(queue.ackedSeq)
    },
    close,
    [Symbol.asyncDispose]: close
  }
  // The endpoints built on a facade queue use the engine queue behind it.
  return Bridge.durableQueue.attach(facade, queue)
}

/** One wire line (with its newline) for a frame; throws `NoeticError` when it cannot be encoded. */
export const encodeFrame = (frame: ServerFrame | ClientFrame): string => {
  const result = Effect.runSync(Effect.result(encodeFrameEffect(frame)))
  if (result._tag === "Success") return result.success
  throw toFacadeError(new IpcError({ socketPath: "", reason: result.failure }))
}

// ---------------------------------------------------------------------------
// AgentIpcServer
// ---------------------------------------------------------------------------

/** A pending ask-user request as it travels over the wire. */
export interface AskUserPendingFrame {
  readonly id: string
  readonly input: unknown
  readonly createdAt: number
}

/** What the server needs of a harness (noetic's `IpcHarness`). */
export interface IpcHarness {
  execute(input: string, options?: { threadId?: string; messageId?: string }): Promise<unknown>
  getItemStream?(scope?: { threadId?: string }): AsyncIterable<unknown>
  getFullStream?(scope?: { threadId?: string }): AsyncIterable<unknown>
  getStatus(scope?: { threadId?: string }): unknown
  abort(scope?: { threadId?: string; reason?: string }): Promise<void>
}

/** Chat-history persistence the server reads for `getHistory` and appends completed items to. */
export interface ChatHistoryStore {
  readChatHistory(taskId: string): Promise<Array<unknown>>
  appendChatItem(taskId: string, item: unknown): Promise<void>
}

/** An entry the server hands its logger on an internal error. */
export interface TaskLogEntry {
  readonly kind: string
  readonly ts: string
  readonly message: string
  readonly meta?: Record<string, unknown>
}

/** The server's logger; a logger that rejects is ignored. */
export type TaskLogger = (taskId: string, entry: TaskLogEntry) => Promise<void>

/** The ask-user bridge the server routes `askUserResolve` / `askUserCancel` into. */
export interface IpcAskUserService {
  peek(): AskUserPendingFrame | null
  handleResolve(id: string, output: unknown): void
  handleCancel(id: string, reason: string): void
  cancelAll(reason: string): void
}

/** What a filesystem adapter offers (noetic's `FsAdapter`). */
export interface FsStats {
  size: number
  isDirectory(): boolean
  isSymbolicLink(): boolean
  isFile(): boolean
}

/** What a filesystem adapter offers (noetic's `FsAdapter`). */
/** What a shell adapter offers (noetic's `ShellAdapter`). */
export interface ShellAdapter {
  exec(
    command: string,
    options?: { readonly cwd?: string; readonly timeout?: number; readonly env?: Record<string, string> }
  ): Promise<{ readonly stdout: string; readonly stderr: string; readonly exitCode: number }>
}

export interface FsAdapter {
  readFile(path: string): Promise<Buffer>
  readFileText(path: string): Promise<string>
  writeFile(path: string, content: string): Promise<void>
  writeFileBytes(path: string, content: Buffer): Promise<void>
  appendFile(path: string, content: string): Promise<void>
  mkdir(dir: string): Promise<void>
  rename(oldPath: string, newPath: string): Promise<void>
  rm(path: string, options?: { recursive?: boolean; force?: boolean }): Promise<void>
  access(path: string, mode?: number): Promise<void>
  stat(path: string): Promise<FsStats>
  lstat(path: string): Promise<FsStats>
  readdir(path: string): Promise<Array<string>>
}

/** Options of {@link AgentIpcServer}, as noetic has them. */
export interface AgentIpcServerOpts {
  readonly harness: IpcHarness
  readonly chatHistoryStore: ChatHistoryStore
  readonly logger: TaskLogger
  readonly taskId: string
  readonly role: string
  readonly runnerId: string
  readonly threadId: string
  /** Absolute path of the unix socket. */
  readonly socketPath: string
  readonly askUserService: IpcAskUserService
  /** Prepares the socket's directory. */
  readonly fs: FsAdapter
  /**
   * Opts into durable delivery: stream frames are numbered and kept under
   * `durableOutboundQueue:<socketId>:…` until a client acknowledges them. Without it
   * frames are still numbered, in memory only.
   */
  readonly storage?: StorageAdapter
  /** A queue opened by the host instead of `storage`. */
  readonly queue?: DurableOutboundQueue
}

const errorMessage = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** Fills `request` from the flat fields, so either form of a prompt reaches a noetic peer. */
const askUserFrame = (request: AskUserPendingFrame): V1ServerFrame => ({
  type: "askUserRequest",
  id: request.id,
  input: request.input,
  createdAt: request.createdAt
})

/**
 * The per-task agent IPC server: exposes a harness over a unix socket. A thin shell
 * over the Effect `IpcServer`: stream frames go through its durable queue, client
 * frames are routed to the harness, the chat history and the ask-user service.
 */
export class AgentIpcServer implements AsyncDisposable {
  readonly threadId: string
  readonly harness: IpcHarness
  readonly askUserService: IpcAskUserService
  private readonly opts: AgentIpcServerOpts
  private durableQueue: DurableOutboundQueue | null = null
  private ownsQueue = false
  private server: IpcServer.IpcServerShape | undefined
  private scope: Scope.Closeable | undefined
  private closed = false

  constructor(opts: AgentIpcServerOpts) {
    this.opts = opts
    this.threadId = opts.threadId
    this.harness = opts.harness
    this.askUserService = opts.askUserService
  }

  /** The durable queue, or null when the server was built without `storage` or `queue`. */
  getDurableQueue(): DurableOutboundQueue | null {
    return this.durableQueue
  }

  /** Frames awaiting a client's acknowledgement (0 without durability). */
  async queueSize(): Promise<number> {
    return this.durableQueue === null ? 0 : this.durableQueue.queueSize()
  }

  /** The socket path the server is bound to. */
  getSocketPath(): string {
    return this.opts.socketPath
  }

  /** The chat history, as `getHistory` answers it. */
  async loadHistorySnapshot(): Promise<Array<unknown>> {
    return this.opts.chatHistoryStore.readChatHistory(this.opts.taskId)
  }

  /** Sends an ask-user prompt to every streaming client (durably when the server is durable). */
  broadcastAskUserRequest(request: AskUserPendingFrame): void {
    void this.appendAndBroadcastDurable(askUserFrame(request)).catch((error) => this.log(`askUserRequest: ${errorMessage(error)}`))
  }

  /** Tells every streaming client a prompt is settled. */
  broadcastAskUserCleared(id: string): void {
    void this.appendAndBroadcastDurable({ type: "askUserCleared", id }).catch((error) => this.log(`askUserCleared: ${errorMessage(error)}`))
  }

  /** Appends a stream frame to the queue and delivers it once durable: plain to v1 subscribers, numbered to durable ones. */
  async appendAndBroadcastDurable(frame: V1ServerFrame): Promise<void> {
    const server = this.server
    if (server === undefined) throw new Error("AgentIpcServer: listen() first")
    await runForFacade(server.emit(frame))
  }

  /** Binds the socket and starts serving; rejects when a live server holds the path. */
  async listen(): Promise<void> {
    if (this.scope !== undefined) throw new Error("AgentIpcServer.listen() called twice")
    const { opts } = this
    await opts.fs.mkdir(NodePath.dirname(opts.socketPath))
    if (opts.queue !== undefined) this.durableQueue = opts.queue
    else if (opts.storage !== undefined) {
      this.durableQueue = await createDurableOutboundQueue({ storage: opts.storage, socketPath: opts.socketPath })
      this.ownsQueue = true
    }
    const queue = this.durableQueue === null ? undefined : Bridge.durableQueue.get(this.durableQueue)
    const scope = Effect.runSync(Scope.make())
    this.scope = scope
    // Loaded here, not at import: a program that never serves a socket skips the socket stack.
    const { make } = await import("../layers/IpcServer.ts")
    this.server = await runForFacade(Scope.provide(
      make({
        socketPath: opts.socketPath,
        queue,
        // Without storage noetic's server keeps nothing: frames go once sent.
        retain: queue === undefined ? "untilSent" : "untilAcked",
        hello: { taskId: opts.taskId, role: opts.role, runnerId: opts.runnerId, threadId: opts.threadId },
        onClientFrame: (frame, connection) =>
          Effect.promise(() =>
            this.handle(frame, connection).catch((error) =>
              runForFacade(Effect.ignore(connection.send({ type: "error", kind: "handler_error", message: errorMessage(error) })))
            )
          )
      }),
      scope
    )).catch(async (error) => {
      this.scope = undefined
      await runForFacade(Scope.close(scope, Exit.void))
      throw error
    })
    void this.pump("item stream", opts.harness.getItemStream?.({ threadId: this.threadId }), async (item) => {
      if (typeof item === "object" && item !== null && "isComplete" in item && item.isComplete === true) {
        const { isComplete: _, ...rest } = item as Record<string, unknown>
        await opts.chatHistoryStore.appendChatItem(opts.taskId, rest)
      }
      await this.appendAndBroadcastDurable({ type: "item", item })
    })
    void this.pump("event stream", opts.harness.getFullStream?.({ threadId: this.threadId }), (event) =>
      this.appendAndBroadcastDurable({ type: "event", event }))
  }

  /** Stops serving, cancels a pending prompt and removes the socket file. Idempotent. */
  async close(reason?: string): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.opts.askUserService.cancelAll(reason ?? "agent ipc server closed")
    const scope = this.scope
    this.scope = undefined
    this.server = undefined
    if (scope !== undefined) await runForFacade(Scope.close(scope, Exit.void))
    if (this.ownsQueue && this.durableQueue !== null) await this.durableQueue.close()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  private async pump(name: string, stream: AsyncIterable<unknown> | undefined, each: (value: unknown) => Promise<void>) {
    if (stream === undefined) return
    try {
      for await (const value of stream) {
        if (this.closed) return
        await each(value)
      }
    } catch (error) {
      if (!this.closed) this.log(`${name}: ${errorMessage(error)}`)
    }
  }

  private log(message: string) {
    void this.opts.logger(this.opts.taskId, { kind: "system", ts: new Date().toISOString(), message: `agent-ipc-server: ${message}` })
      .catch(() => undefined)
  }

  private async handle(frame: IpcServer.ApplicationClientFrame, connection: IpcServer.IpcConnection): Promise<void> {
    const { opts } = this
    const send = (reply: V1ServerFrame) => runForFacade(Effect.ignore(connection.send(reply)))
    switch (frame.type) {
      case "subscribe": {
        await send({ type: "status", status: opts.harness.getStatus({ threadId: this.threadId }) })
        // A durable client gets a pending prompt from the queue's replay instead.
        if (this.durableQueue !== null) return
        const pending = opts.askUserService.peek()
        if (pending !== null) await send(askUserFrame(pending))
        return
      }
      case "getHistory":
        return send({ type: "history", items: await this.loadHistorySnapshot() })
      case "send":
        await opts.harness.execute(frame.text, { threadId: this.threadId, messageId: frame.messageId })
        return send({ type: "ack", messageId: frame.messageId })
      case "getStatus":
        return send({ type: "status", status: opts.harness.getStatus({ threadId: this.threadId }) })
      case "abort":
        return opts.harness.abort(frame.reason === undefined ? { threadId: this.threadId } : { threadId: this.threadId, reason: frame.reason })
      case "askUserResolve":
        return opts.askUserService.handleResolve(frame.id, frame.output)
      case "askUserCancel":
        return opts.askUserService.handleCancel(frame.id, frame.reason ?? "user cancelled")
    }
  }
}

// ---------------------------------------------------------------------------
// AgentIpcClient
// ---------------------------------------------------------------------------

/** The server's `hello`, as noetic's client reports it. */
export interface HelloInfo {
  readonly protocolVersion: number
  readonly taskId: string
  readonly role: string
  readonly runnerId: string
  readonly threadId: string
}

/** What the `askUser` subscription stream yields. */
export type AskUserStreamEvent =
  | { readonly kind: "pending"; readonly request: AskUserPendingFrame }
  | { readonly kind: "cleared"; readonly id: string }

/** Options of {@link AgentIpcClient}. */
export interface AgentIpcClientOpts {
  readonly socketPath: string
}

/** An async iterable fed by pushes, ended by `close`. */
const queueIterable = <T>() => {
  const buffered: Array<T> = []
  let done = false
  let wake: (() => void) | undefined
  const notify = () => {
    const resolve = wake
    wake = undefined
    resolve?.()
  }
  return {
    iter: {
      [Symbol.asyncIterator]: (): AsyncIterator<T> => ({
        next: async (): Promise<IteratorResult<T>> => {
          for (;;) {
            if (buffered.length > 0) return { value: buffered.shift()!, done: false }
            if (done) return { value: undefined, done: true }
            await new Promise<void>((resolve) => (wake = resolve))
          }
        }
      })
    } satisfies AsyncIterable<T>,
    push: (value: T) => {
      buffered.push(value)
      notify()
    },
    close: () => {
      done = true
      notify()
    }
  }
}

/**
 * The client of an agent's IPC socket, as noetic's platform package has it: one
 * connection; `subscribe()` streams items, events and ask-user prompts;
 * `sendDurableResume` / `acknowledgeDurableFrames` drive the durable stream. A thin
 * shell over the Effect `IpcClient` (which drops repeated durable seqs).
 */
export class AgentIpcClient implements AsyncDisposable {
  private readonly opts: AgentIpcClientOpts
  private client: IpcClient.IpcClientShape | undefined
  private scope: Scope.Closeable | undefined
  private reader: Fiber.Fiber<void, never> | undefined
  private hello: HelloInfo | null = null
  private streams: {
    readonly items: ReturnType<typeof queueIterable<unknown>>
    readonly events: ReturnType<typeof queueIterable<unknown>>
    readonly askUser: ReturnType<typeof queueIterable<AskUserStreamEvent>>
  } | undefined
  /** The requests in flight and their answers (the engine's `IpcRequests`). */
  private requests: IpcRequests.IpcRequestsShape | undefined
  private subscribed = false
  private closed = false
  private closeError: Error | null = null
  private lastError: Error | null = null

  constructor(opts: AgentIpcClientOpts) {
    this.opts = opts
  }

  /** Connects; resolves with the server's `hello`. */
  async connect(): Promise<HelloInfo> {
    if (this.scope !== undefined) throw new Error("AgentIpcClient.connect() called twice")
    const scope = Effect.runSync(Scope.make())
    this.scope = scope
    const { connect } = await import("../layers/IpcClient.ts")
    const client = await runForFacade(Scope.provide(
      connect({ socketPath: this.opts.socketPath, autoOpen: false, once: true }),
      scope
    ))
    this.client = client
    this.requests = IpcRequests.make(client)
    const hello: Hello = await runForFacade(client.awaitConnected).catch((error) => {
      this.fail(error instanceof Error ? error : new Error(String(error)))
      throw error
    })
    this.hello = {
      protocolVersion: hello.protocolVersion,
      taskId: hello.taskId ?? "",
      role: hello.role ?? "",
      runnerId: hello.runnerId ?? "",
      threadId: hello.threadId ?? ""
    }
    this.reader = Effect.runFork(
      client.take.pipe(
        Effect.flatMap((delivery) => Effect.sync(() => this.dispatch(delivery.frame))),
        Effect.forever,
        Effect.catchCause((cause) => Effect.sync(() => this.fail(new Error(`AgentIpcClient: connection ended: ${String(cause)}`))))
      )
    )
    return this.hello
  }

  /** Switches to streaming mode; returns the item, event and ask-user streams. */
  subscribe(): { items: AsyncIterable<unknown>; events: AsyncIterable<unknown>; askUser: AsyncIterable<AskUserStreamEvent> } {
    this.requireConnected()
    if (this.streams === undefined) {
      this.streams = { items: queueIterable(), events: queueIterable(), askUser: queueIterable() }
      this.write({ type: "subscribe" })
      this.subscribed = true
    }
    return { items: this.streams.items.iter, events: this.streams.events.iter, askUser: this.streams.askUser.iter }
  }

  /** The chat history snapshot. */
  getHistory(): Promise<ReadonlyArray<unknown>> {
    this.requireConnected()
    return this.request(this.requests!.history, "AgentIpcClient: ")
  }

  /** The runner's status. */
  getStatus(): Promise<unknown> {
    this.requireConnected()
    return this.request(this.requests!.status, "AgentIpcClient: ")
  }

  /** Sends a user message; resolves when the server acks it. */
  send(args: { messageId: string; text: string }): Promise<void> {
    this.requireConnected()
    return this.request(this.requests!.send(args.messageId, args.text), "")
  }

  /**
   * Runs a request: its answer, or an `Error` of why not (a refused request's message,
   * `prefix` before one in flight); a write that failed closes the client.
   */
  private request<A>(request: Effect.Effect<A, IpcRequests.IpcRequestFailed | IpcError>, prefix: string): Promise<A> {
    return Effect.runPromiseExit(request).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      const error = Cause.findErrorOption(exit.cause)
      if (Option.isNone(error)) throw Cause.squash(exit.cause)
      if (error.value._tag === "IpcError") {
        this.fail(error.value)
        throw new Error("AgentIpcClient closed")
      }
      const failed = error.value
      throw new Error(
        failed.reason === "InFlight" ? `${prefix}${failed.message}`
          : failed.reason === "ServerError" ? `server error (${failed.kind}): ${failed.message}`
          : failed.message
      )
    })
  }

  /** Asks the runner to abort its turn. */
  abort(reason?: string): void {
    this.requireConnected()
    this.write(reason === undefined ? { type: "abort" } : { type: "abort", reason })
  }

  /** Answers a pending ask-user prompt. */
  resolveAskUser(id: string, output: unknown): void {
    this.requireConnected()
    this.write({ type: "askUserResolve", id, output })
  }

  /** Cancels a pending ask-user prompt. */
  cancelAskUser(id: string, reason?: string): void {
    this.requireConnected()
    this.write(reason === undefined ? { type: "askUserCancel", id } : { type: "askUserCancel", id, reason })
  }

  /** Asks for every durable frame after `ackedThrough` (default: the highest delivered). */
  sendDurableResume(ackedThrough?: number): void {
    this.requireConnected()
    void runForFacade(this.client!.resume(ackedThrough)).catch((error) => this.fail(error))
  }

  /**
   * Acknowledges every durable frame up to `throughSeq`, as noetic's client does: an
   * ack above the last one is sent as it is, even past the frames delivered (the
   * server refuses an ack above what it sent on the connection, with an `error` frame
   * of kind `AckAboveSent`, and forgets it); a seq at or below the last ack is a no-op,
   * except an ack of frames delivered since an ack past them, which is sent (the
   * refused ack acknowledged nothing). The client's own watermark never passes the
   * frames it delivered.
   */
  acknowledgeDurableFrames(throughSeq: number): void {
    this.requireConnected()
    // The rule is the engine client's (`acknowledge` in layers/IpcClient.ts).
    void runForFacade(this.client!.acknowledge(throughSeq)).catch((error) => {
      this.lastError = error instanceof Error ? error : new Error(String(error))
    })
  }

  /** The highest durable seq delivered to the subscription streams. */
  getHighestDeliveredDurableSeq(): number {
    return this.client === undefined ? 0 : Effect.runSync(this.client.deliveredSeq)
  }

  /** The highest durable seq acknowledged to the server. */
  getLastAckedDurableSeq(): number {
    return this.client === undefined ? 0 : Effect.runSync(this.client.acknowledgedSeq)
  }

  /** The server's hello, or null before `connect()` resolves. */
  getHelloInfo(): HelloInfo | null {
    return this.hello
  }

  /** Whether `subscribe()` was called. */
  isSubscribed(): boolean {
    return this.subscribed
  }

  /** The error that closed the client, or null. */
  getCloseError(): Error | null {
    return this.closeError
  }

  /** The last `error` frame the server sent, or null. */
  getLastError(): Error | null {
    return this.lastError
  }

  /** Closes the connection. Idempotent; pending requests reject. */
  close(): void {
    if (this.closed) return
    this.closed = true
    this.failPending(new Error("AgentIpcClient closed"))
    this.streams?.items.close()
    this.streams?.events.close()
    this.streams?.askUser.close()
    const scope = this.scope
    const reader = this.reader
    void Effect.runPromise(Effect.gen(function*() {
      if (reader !== undefined) yield* Fiber.interrupt(reader)
      if (scope !== undefined) yield* Scope.close(scope, Exit.void)
    }))
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close()
  }

  private requireConnected() {
    if (this.closed) throw new Error("AgentIpcClient is closed")
    if (this.client === undefined || this.hello === null) throw new Error("AgentIpcClient not connected — call connect() first")
  }

  private write(frame: IpcServer.ApplicationClientFrame) {
    void runForFacade(this.client!.send(frame)).catch((error) => this.fail(error))
  }

  private dispatch(frame: V1ServerFrame) {
    // The server's error frame is kept for getLastError; requests settle in the engine.
    if (frame.type === "error") this.lastError = new Error(`server error (${frame.kind}): ${frame.message}`)
    if (this.requests!.route(frame)) return
    switch (frame.type) {
      case "item":
        return this.streams?.items.push(frame.item)
      case "event":
        return this.streams?.events.push(frame.event)
      case "askUserRequest":
        return this.streams?.askUser.push({
          kind: "pending",
          request: { id: frame.id, input: frame.input, createdAt: frame.createdAt }
        })
      case "askUserCleared":
        return this.streams?.askUser.push({ kind: "cleared", id: frame.id })
      case "bye":
        return this.close()
      case "hello":
        return
    }
  }

  private fail(error: unknown) {
    if (this.closed) return
    this.closeError = error instanceof Error ? error : new Error(String(error))
    this.close()
  }

  private failPending(error: Error) {
    this.requests?.close(error.message)
  }
}

// ---------------------------------------------------------------------------
// createLocalFsAdapter
// ---------------------------------------------------------------------------

const toFsStats = (stats: { size: number; isDirectory(): boolean; isSymbolicLink(): boolean; isFile(): boolean }): FsStats => ({
  size: stats.size,
  isDirectory: () => stats.isDirectory(),
  isSymbolicLink: () => stats.isSymbolicLink(),
  isFile: () => stats.isFile()
})

/** A filesystem adapter on the local disk (`node:fs/promises`), as noetic's `createLocalFsAdapter`. */
export const createLocalFsAdapter = (): FsAdapter => ({
  readFile: (path) => fsPromises().readFile(path),
  readFileText: (path) => fsPromises().readFile(path, "utf-8"),
  writeFile: (path, content) => fsPromises().writeFile(path, content, "utf-8"),
  writeFileBytes: (path, content) => fsPromises().writeFile(path, content),
  appendFile: (path, content) => fsPromises().appendFile(path, content, "utf-8"),
  mkdir: async (dir) => {
    await makeDirectory(dir, 0o777)
  },
  rename: (from, to) => fsPromises().rename(from, to),
  rm: (path, options) => fsPromises().rm(path, options),
  access: (path, mode) => fsPromises().access(path, mode ?? fsPromises().constants.R_OK),
  stat: async (path) => toFsStats(await fsPromises().stat(path)),
  lstat: async (path) => toFsStats(await fsPromises().lstat(path)),
  readdir: (path) => fsPromises().readdir(path)
})
