/**
 * Requests over an IPC client and their answers, matched: `send` completes when the
 * server acks its `messageId`, `history` and `status` with the server's answer frame.
 * The application feeds every frame it takes from the client to `route`, which settles
 * the request a frame answers; a server `error` frame fails the sends in flight (one of
 * kind `AckAboveSent` concerns none: it refused a durable ack). The Promise API's
 * `AgentIpcClient` (`src/promise/ipc.ts`) is a client and these requests.
 *
 * @since 0.2.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { IpcError } from "../IpcError.ts"
import type { V1ServerFrame } from "../schema/IpcFrame.ts"
import type { IpcClientShape } from "./IpcClient.ts"

/** A request could not be answered: one like it is in flight, the server refused it, or the requests were closed. */
export class IpcRequestFailed extends Schema.TaggedError<IpcRequestFailed>("noetic-effect/IpcRequestFailed")(
  "IpcRequestFailed",
  {
    reason: Schema.Literals(["InFlight", "ServerError", "Closed"]),
    /** The server's error kind, for `ServerError`. */
    kind: Schema.optional(Schema.String),
    message: Schema.String
  }
) {
  /** The error code. */
  get code(): "IPC_REQUEST_FAILED" {
    return "IPC_REQUEST_FAILED"
  }
}

/** The requests of one client. */
export interface IpcRequestsShape {
  /** Sends a user message; completes when the server acks `messageId`. */
  readonly send: (messageId: string, text: string) => Effect.Effect<void, IpcRequestFailed | IpcError>
  /** The chat history snapshot. */
  readonly history: Effect.Effect<ReadonlyArray<unknown>, IpcRequestFailed | IpcError>
  /** The runner's status. */
  readonly status: Effect.Effect<unknown, IpcRequestFailed | IpcError>
  /** Settles the request `frame` answers; true when it answered one (or was a server error), false otherwise. */
  readonly route: (frame: V1ServerFrame) => boolean
  /** Fails every request in flight with `message` (reason `Closed`); later ones fail at once. */
  readonly close: (message: string) => void
}

/** The requests over `client`; its frames must be given to `route`. */
export const make = (client: IpcClientShape): IpcRequestsShape => {
  const acks = new Map<string, Deferred.Deferred<void, IpcRequestFailed>>()
  let history: Deferred.Deferred<ReadonlyArray<unknown>, IpcRequestFailed> | undefined
  let status: Deferred.Deferred<unknown, IpcRequestFailed> | undefined
  let closed: string | undefined

  const failed = (reason: IpcRequestFailed["reason"], message: string, kind?: string) =>
    new IpcRequestFailed({ reason, message, ...(kind === undefined ? {} : { kind }) })

  /**
   * Registers a request (refused while closed or while `busy`), writes it, then awaits
   * its answer; a write that fails takes the registration back.
   */
  const request = <A>(
    busy: string | undefined,
    register: (answer: Deferred.Deferred<A, IpcRequestFailed> | undefined) => void,
    write: Effect.Effect<void, IpcError>
  ): Effect.Effect<A, IpcRequestFailed | IpcError> =>
    Effect.suspend(() => {
      if (closed !== undefined) return Effect.fail(failed("Closed", closed))
      if (busy !== undefined) return Effect.fail(failed("InFlight", busy))
      const answer = Deferred.makeUnsafe<A, IpcRequestFailed>()
      register(answer)
      return Effect.andThen(
        Effect.onError(write, () => Effect.sync(() => register(undefined))),
        Deferred.await(answer)
      )
    })

  const failAll = (error: IpcRequestFailed) => {
    for (const answer of acks.values()) Deferred.doneUnsafe(answer, Effect.fail(error))
    acks.clear()
  }

  return {
    send: (messageId, text) =>
      request(
        acks.has(messageId) ? `messageId already in flight: ${messageId}` : undefined,
        (answer) => void (answer === undefined ? acks.delete(messageId) : acks.set(messageId, answer)),
        client.send({ type: "send", messageId, text })
      ),
    history: Effect.suspend(() =>
      request(
        history === undefined ? undefined : "history request already in flight",
        (answer) => void (history = answer),
        client.send({ type: "getHistory" })
      )
    ),
    status: Effect.suspend(() =>
      request(
        status === undefined ? undefined : "status request already in flight",
        (answer) => void (status = answer),
        client.send({ type: "getStatus" })
      )
    ),
    route: (frame) => {
      switch (frame.type) {
        case "history": {
          const answer = history
          history = undefined
          if (answer !== undefined) Deferred.doneUnsafe(answer, Effect.succeed(frame.items))
          return true
        }
        case "status": {
          const answer = status
          status = undefined
          if (answer !== undefined) Deferred.doneUnsafe(answer, Effect.succeed(frame.status))
          return true
        }
        case "ack": {
          if (frame.messageId === undefined) return true
          const answer = acks.get(frame.messageId)
          acks.delete(frame.messageId)
          if (answer !== undefined) Deferred.doneUnsafe(answer, Effect.void)
          return true
        }
        case "error": {
          // Not fatal: the stream goes on; a send in flight learns of it.
          if (frame.kind !== "AckAboveSent") failAll(failed("ServerError", frame.message, frame.kind))
          return true
        }
        default:
          return false
      }
    },
    close: (message) => {
      if (closed !== undefined) return
      closed = message
      const error = failed("Closed", message)
      if (history !== undefined) Deferred.doneUnsafe(history, Effect.fail(error))
      if (status !== undefined) Deferred.doneUnsafe(status, Effect.fail(error))
      history = undefined
      status = undefined
      failAll(error)
    }
  }
}
