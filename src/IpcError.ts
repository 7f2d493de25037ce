/**
 * The one failure of the durable IPC surface, with a tagged `reason` in the manner of
 * `effect/sql/SqlError`. It is a `Schema.TaggedError`, so a reason survives the JSON
 * round trip of an `error` frame.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** A frame's encoded line is longer than the limit in force. */
export class FrameTooLarge extends Schema.TaggedError<FrameTooLarge>("noetic-effect/IpcError/FrameTooLarge")(
  "FrameTooLarge",
  {
    /** UTF-8 bytes seen so far (at least the limit plus one when read off a socket). */
    bytes: Schema.Number,
    limit: Schema.Number,
    message: Schema.String
  }
) {
  /** The error code. */
  get code(): "FRAME_TOO_LARGE" {
    return "FRAME_TOO_LARGE"
  }
}

/** A line is not JSON, or is JSON that no frame schema accepts. */
export class MalformedFrame extends Schema.TaggedError<MalformedFrame>("noetic-effect/IpcError/MalformedFrame")(
  "MalformedFrame",
  {
    message: Schema.String,
    /** The start of the offending line, for diagnosis. */
    excerpt: Schema.String
  }
) {
  /** The error code. */
  get code(): "MALFORMED_FRAME" {
    return "MALFORMED_FRAME"
  }
}

/** A well-formed frame whose `type` this peer does not speak. */
export class UnknownFrameType extends Schema.TaggedError<UnknownFrameType>(
  "noetic-effect/IpcError/UnknownFrameType"
)("UnknownFrameType", {
  frameType: Schema.String,
  message: Schema.String
}) {
  /** The error code. */
  get code(): "UNKNOWN_FRAME_TYPE" {
    return "UNKNOWN_FRAME_TYPE"
  }
}

/** A value handed to `emit` or `send` has no JSON form (a cycle, a bigint). */
export class Unencodable extends Schema.TaggedError<Unencodable>("noetic-effect/IpcError/Unencodable")(
  "Unencodable",
  { message: Schema.String }
) {
  /** The error code. */
  get code(): "UNENCODABLE" {
    return "UNENCODABLE"
  }
}

/** The connection is gone (peer closed, reset, or never opened). */
export class SocketClosed extends Schema.TaggedError<SocketClosed>("noetic-effect/IpcError/SocketClosed")(
  "SocketClosed",
  {
    message: Schema.String,
    cause: Schema.Defect()
  }
) {
  /** The error code. */
  get code(): "SOCKET_CLOSED" {
    return "SOCKET_CLOSED"
  }
}

/** Another live server already listens on the socket path, or a non-socket file is in the way. */
export class AddressInUse extends Schema.TaggedError<AddressInUse>("noetic-effect/IpcError/AddressInUse")(
  "AddressInUse",
  { message: Schema.String }
) {
  /** The error code. */
  get code(): "ADDRESS_IN_USE" {
    return "ADDRESS_IN_USE"
  }
}

/** The operating system refused to create, bind or secure the socket. */
export class ListenFailed extends Schema.TaggedError<ListenFailed>("noetic-effect/IpcError/ListenFailed")(
  "ListenFailed",
  {
    message: Schema.String,
    cause: Schema.Defect()
  }
) {
  /** The error code. */
  get code(): "LISTEN_FAILED" {
    return "LISTEN_FAILED"
  }
}

/** Why an IPC operation failed. */
export const IpcErrorReason = Schema.Union([
  FrameTooLarge,
  MalformedFrame,
  UnknownFrameType,
  Unencodable,
  SocketClosed,
  AddressInUse,
  ListenFailed
])

/** Why an IPC operation failed. */
export type IpcErrorReason = typeof IpcErrorReason.Type

/** An IPC operation failed; `reason` says how, `socketPath` says where. */
export class IpcError extends Schema.TaggedError<IpcError>("noetic-effect/IpcError")("IpcError", {
  socketPath: Schema.String,
  reason: IpcErrorReason
}) {
  /** The error code: `IPC_` then the reason's code. */
  get code(): `IPC_${IpcErrorReason["code"]}` {
    return `IPC_${this.reason.code}`
  }
  override get message(): string {
    return `${this.socketPath}: ${this.reason._tag}: ${this.reason.message}`
  }
}
