/**
 * The IPC wire protocol: newline-delimited JSON frames, validated by Schema at both
 * ends. Protocol v2 adds `durable { seq, frame }` (server to client) and
 * `durableResume { ackedThrough }` / `durableAck { throughSeq }` (client to server);
 * a peer that never opts in speaks plain v1.
 *
 * @since 0.1.0
 */
import { Buffer } from "node:buffer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { FrameTooLarge, MalformedFrame, Unencodable, UnknownFrameType } from "../IpcError.ts"

/** The protocol version this module speaks. */
export const PROTOCOL_VERSION = 2

/** The default limit on one encoded frame, in UTF-8 bytes without the newline. */
export const DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024

/** The frame size limit in force where a server or client does not pass its own. */
export const MaxFrameBytes = Context.Reference<number>("noetic-effect/schema/IpcFrame/MaxFrameBytes", {
  defaultValue: () => DEFAULT_MAX_FRAME_BYTES
})

const Seq = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
const Watermark = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

// ---------------------------------------------------------------------------
// Client to server
// ---------------------------------------------------------------------------

/** Start receiving the server's live frames (v1). */
export const Subscribe = Schema.Struct({ type: Schema.Literal("subscribe") })
/** Ask for the item history; answered with `history`. */
export const GetHistory = Schema.Struct({ type: Schema.Literal("getHistory") })
/** A user message for the agent; answered with `ack`. */
export const Send = Schema.Struct({ type: Schema.Literal("send"), messageId: Schema.String, text: Schema.String })
/** Ask for the run status; answered with `status`. */
export const GetStatus = Schema.Struct({ type: Schema.Literal("getStatus") })
/** Abort the run. */
export const Abort = Schema.Struct({ type: Schema.Literal("abort"), reason: Schema.optionalKey(Schema.String) })
/** Answer a pending ask-user prompt. */
export const AskUserResolve = Schema.Struct({
  type: Schema.Literal("askUserResolve"),
  id: Schema.String,
  output: Schema.Unknown
})
/** Withdraw a pending ask-user prompt. */
export const AskUserCancel = Schema.Struct({
  type: Schema.Literal("askUserCancel"),
  id: Schema.String,
  reason: Schema.optionalKey(Schema.String)
})
/** v2: deliver every durable frame after `ackedThrough`, then live ones. Implies an ack. */
export const DurableResume = Schema.Struct({ type: Schema.Literal("durableResume"), ackedThrough: Watermark })
/** v2: the client has durably handled every frame up to `throughSeq`. */
export const DurableAck = Schema.Struct({ type: Schema.Literal("durableAck"), throughSeq: Watermark })

/** Any frame a client sends. */
export const ClientFrame = Schema.Union([
  Subscribe,
  GetHistory,
  Send,
  GetStatus,
  Abort,
  AskUserResolve,
  AskUserCancel,
  DurableResume,
  DurableAck
])

/** Any frame a client sends. */
export type ClientFrame = typeof ClientFrame.Type

// ---------------------------------------------------------------------------
// Server to client
// ---------------------------------------------------------------------------

/** The first frame on every connection. */
export const Hello = Schema.Struct({
  type: Schema.Literal("hello"),
  protocolVersion: Schema.Int,
  /** `"durable"` when the server keeps a durable outbound queue. */
  capabilities: Schema.optionalKey(Schema.Array(Schema.String)),
  maxFrameBytes: Schema.optionalKey(Schema.Int),
  /** noetic's v1 hello names the agent behind the socket; its client requires all four. */
  taskId: Schema.optionalKey(Schema.String),
  role: Schema.optionalKey(Schema.String),
  runnerId: Schema.optionalKey(Schema.String),
  threadId: Schema.optionalKey(Schema.String)
})
/** The first frame on every connection. */
export type Hello = typeof Hello.Type

/** The item history, in answer to `getHistory`. */
export const History = Schema.Struct({ type: Schema.Literal("history"), items: Schema.Array(Schema.Unknown) })
/** One item appended to the log. */
export const Item = Schema.Struct({ type: Schema.Literal("item"), item: Schema.Unknown })
/** A harness event. */
export const Event = Schema.Struct({ type: Schema.Literal("event"), event: Schema.Unknown })
/** The run status, in answer to `getStatus` or on change. */
export const Status = Schema.Struct({ type: Schema.Literal("status"), status: Schema.Unknown })
/** A `send` was accepted. */
export const Ack = Schema.Struct({ type: Schema.Literal("ack"), messageId: Schema.optionalKey(Schema.String) })
/** noetic's form of an error's details: `error { error: { kind, message } }`. */
const ErrorDetails = Schema.Struct({ kind: Schema.String, message: Schema.String })
/**
 * The server refused a frame; `kind` is an `IpcError` reason tag or an application kind.
 * noetic's peers send and expect `{ error: { kind, message } }`: the decoders accept
 * that form too, and `toWireForm` sends both.
 */
export const ErrorFrame = Schema.Struct({
  type: Schema.Literal("error"),
  kind: Schema.String,
  message: Schema.String,
  error: Schema.optionalKey(ErrorDetails)
})
/** The server is closing the connection on purpose. */
export const Bye = Schema.Struct({ type: Schema.Literal("bye"), reason: Schema.optionalKey(Schema.String) })
/** noetic's pending ask-user request: `askUserRequest { request: { id, input, createdAt } }`. */
const AskUserPending = Schema.Struct({ id: Schema.String, input: Schema.Unknown, createdAt: Schema.Number })
/**
 * An ask-user prompt waits for an answer. noetic's peers carry it as `{ request }`:
 * the decoders accept that form too, and `toWireForm` sends both.
 */
export const AskUserRequest = Schema.Struct({
  type: Schema.Literal("askUserRequest"),
  id: Schema.String,
  input: Schema.Unknown,
  createdAt: Schema.Number,
  request: Schema.optionalKey(AskUserPending)
})
/** An ask-user prompt is settled (answered, cancelled or timed out). */
export const AskUserCleared = Schema.Struct({ type: Schema.Literal("askUserCleared"), id: Schema.String })

/** Any v1 server frame: what a durable envelope carries. */
export const V1ServerFrame = Schema.Union([
  Hello,
  History,
  Item,
  Event,
  Status,
  Ack,
  ErrorFrame,
  Bye,
  AskUserRequest,
  AskUserCleared
])

/** Any v1 server frame: what a durable envelope carries. */
export type V1ServerFrame = typeof V1ServerFrame.Type

/** v2: a server frame numbered by the durable outbound queue. */
export const Durable = Schema.Struct({ type: Schema.Literal("durable"), seq: Seq, frame: V1ServerFrame })

/** Any frame a server sends. */
export const ServerFrame = Schema.Union([V1ServerFrame, Durable])

/** Any frame a server sends. */
export type ServerFrame = typeof ServerFrame.Type

const CLIENT_TYPES: ReadonlySet<string> = new Set(ClientFrame.members.map((member) => member.fields.type.literal))
const SERVER_TYPES: ReadonlySet<string> = new Set([
  "hello",
  "history",
  "item",
  "event",
  "status",
  "ack",
  "error",
  "bye",
  "askUserRequest",
  "askUserCleared",
  "durable"
])

/**
 * A frame in the form every peer understands: an `error` carries both `kind`/`message`
 * and noetic's `error { kind, message }`; an `askUserRequest` both `id`/`input`/`createdAt`
 * and noetic's `request`. Other frames are returned as they are.
 */
export const toWireForm = (frame: V1ServerFrame): V1ServerFrame => {
  if (frame.type === "error") {
    return { type: "error", kind: frame.kind, message: frame.message, error: { kind: frame.kind, message: frame.message } }
  }
  if (frame.type === "askUserRequest") {
    const pending = { id: frame.id, input: frame.input, createdAt: frame.createdAt }
    return { type: "askUserRequest", ...pending, request: pending }
  }
  return frame
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

/** Fills the flat fields of a frame in noetic's nested form, so one schema reads both. */
const fromNoeticForm = (json: unknown): unknown => {
  if (!isObject(json)) return json
  if (json.type === "error" && json.kind === undefined && isObject(json.error)) {
    return { ...json, kind: json.error.kind, message: json.error.message }
  }
  if (json.type === "askUserRequest" && json.id === undefined && isObject(json.request)) {
    return { ...json, id: json.request.id, input: json.request.input, createdAt: json.request.createdAt }
  }
  if (json.type === "durable") return { ...json, frame: fromNoeticForm(json.frame) }
  return json
}

// ---------------------------------------------------------------------------
// One line
// ---------------------------------------------------------------------------

const EXCERPT_CHARS = 120

const excerpt = (line: string) => (line.length > EXCERPT_CHARS ? `${line.slice(0, EXCERPT_CHARS)}…` : line)

/** Serialises a frame to one line (with its newline), refusing what exceeds `maxFrameBytes`. */
export const encodeFrame = (
  frame: ServerFrame | ClientFrame,
  maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES
): Effect.Effect<string, FrameTooLarge | Unencodable> =>
  Effect.suspend((): Effect.Effect<string, FrameTooLarge | Unencodable> => {
    let text: string | undefined
    try {
      text = JSON.stringify(frame)
    } catch (cause) {
      return Effect.fail(new Unencodable({ message: cause instanceof Error ? cause.message : String(cause) }))
    }
    if (text === undefined) return Effect.fail(new Unencodable({ message: "the frame has no JSON form" }))
    return checkSize(text, maxFrameBytes).pipe(Effect.as(text + "\n"))
  })

/**
 * A frame's JSON text (without newline), synchronously: the text, or why it has none.
 * The hot path of `publish`, where building an effect per frame would cost more than the JSON.
 */
export const encodeFrameText = (
  frame: ServerFrame | ClientFrame,
  maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES
): string | FrameTooLarge | Unencodable => {
  let text: string | undefined
  try {
    text = JSON.stringify(frame)
  } catch (cause) {
    return new Unencodable({ message: cause instanceof Error ? cause.message : String(cause) })
  }
  if (text === undefined) return new Unencodable({ message: "the frame has no JSON form" })
  if (text.length * 3 <= maxFrameBytes) return text
  const bytes = Buffer.byteLength(text, "utf8")
  return bytes <= maxFrameBytes
    ? text
    : new FrameTooLarge({ bytes, limit: maxFrameBytes, message: `a frame of ${bytes} bytes exceeds ${maxFrameBytes}` })
}

/** Fails with `FrameTooLarge` when `text` is longer than `maxFrameBytes` in UTF-8. */
export const checkSize = (text: string, maxFrameBytes: number): Effect.Effect<void, FrameTooLarge> => {
  // A UTF-16 code unit is at most 3 UTF-8 bytes, so short strings skip the count.
  if (text.length * 3 <= maxFrameBytes) return Effect.void
  const bytes = Buffer.byteLength(text, "utf8")
  return bytes <= maxFrameBytes
    ? Effect.void
    : Effect.fail(
      new FrameTooLarge({ bytes, limit: maxFrameBytes, message: `a frame of ${bytes} bytes exceeds ${maxFrameBytes}` })
    )
}

/** The bytes a durable envelope adds around a frame, rounded up: a frame stored for one must leave room for it. */
export const DURABLE_ENVELOPE_BYTES = 64

/**
 * The line of a durable envelope around an already-encoded v1 frame, spliced
 * without re-parsing: the queue stores frames as their JSON text.
 */
export const durableLine = (seq: number, frameJson: string): string =>
  `{"type":"durable","seq":${seq},"frame":${frameJson}}\n`

/** One line decoded synchronously: the frame, or why it is not one. */
export type Decoded<A> = { readonly _tag: "Success"; readonly success: A } | {
  readonly _tag: "Failure"
  readonly failure: MalformedFrame | UnknownFrameType
}

/** The v1 frames whose one field besides `type` is any JSON value: the bulk of a stream. */
const PAYLOAD_FIELDS: Readonly<Record<string, "item" | "event" | "status">> = { item: "item", event: "event", status: "status" }

/**
 * The frame `json` is, checked by hand, when it is one of the frames a stream carries
 * in bulk (`item`, `event`, `status`, bare or in a `durable` envelope); undefined for
 * anything else, which the schema then decodes (and explains, when it is no frame).
 * It accepts exactly what the schema accepts for these shapes and returns what the
 * schema returns (known keys only), at a fraction of the cost of a union decode.
 */
const payloadFrame = (json: Record<string, unknown>): V1ServerFrame | undefined => {
  const type = json.type
  if (typeof type !== "string") return undefined
  const field = PAYLOAD_FIELDS[type]
  if (field === undefined || !Object.hasOwn(json, field)) return undefined
  return field === "item"
    ? { type: "item", item: json.item }
    : field === "event"
    ? { type: "event", event: json.event }
    : { type: "status", status: json.status }
}

const fastServerFrame = (json: unknown): ServerFrame | undefined => {
  if (!isObject(json)) return undefined
  if (json.type !== "durable") return payloadFrame(json)
  const seq = json.seq
  const frame = json.frame
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 1 || !isObject(frame)) return undefined
  const inner = payloadFrame(frame)
  return inner === undefined ? undefined : { type: "durable", seq, frame: inner }
}

const DURABLE_PREFIX = `{"type":"durable","seq":`
const FRAME_FIELD = `,"frame":`
const DIGIT_0 = 0x30
const DIGIT_9 = 0x39
const CLOSE_BRACE = 0x7d
/** At most 15 digits: every such number is a safe integer. */
const MAX_SEQ_DIGITS = 15

/**
 * A durable envelope as this library's server writes it, `{"type":"durable","seq":N,"frame":F}`
 * with `F` a payload frame, read without parsing the envelope: the seq from its digits,
 * then `F` alone. Any other line (another key order, spaces, a leading zero, a frame `F`
 * that is not valid JSON or not a payload frame) is undefined and goes the general way.
 * A line this accepts is valid JSON with exactly those three keys, so the result is what
 * the general decoder returns for it.
 */
const fastDurableLine = (line: string): ServerFrame | undefined => {
  if (!line.startsWith(DURABLE_PREFIX) || line.charCodeAt(line.length - 1) !== CLOSE_BRACE) return undefined
  let at = DURABLE_PREFIX.length
  const first = line.charCodeAt(at)
  if (first <= DIGIT_0 || first > DIGIT_9) return undefined
  let seq = 0
  for (; at < line.length && at - DURABLE_PREFIX.length <= MAX_SEQ_DIGITS; at++) {
    const code = line.charCodeAt(at)
    if (code < DIGIT_0 || code > DIGIT_9) break
    seq = seq * 10 + (code - DIGIT_0)
  }
  if (at - DURABLE_PREFIX.length > MAX_SEQ_DIGITS || !line.startsWith(FRAME_FIELD, at)) return undefined
  let json: unknown
  try {
    json = JSON.parse(line.slice(at + FRAME_FIELD.length, line.length - 1))
  } catch {
    return undefined
  }
  const frame = isObject(json) ? payloadFrame(json) : undefined
  return frame === undefined ? undefined : { type: "durable", seq, frame }
}

const makeDecoder = <A>(
  schema: Schema.Decoder<A>,
  known: ReadonlySet<string>,
  fast: (json: unknown) => A | undefined = () => undefined,
  fastLine: (line: string) => A | undefined = () => undefined
) => {
  // Synchronous: a line is decoded without building an effect, which matters at
  // hundreds of thousands of frames a second.
  const decode = Schema.decodeUnknownResult(schema)
  return (line: string): Decoded<A> => {
    const read = fastLine(line)
    if (read !== undefined) return { _tag: "Success", success: read }
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch (cause) {
      return {
        _tag: "Failure",
        failure: new MalformedFrame({
          message: `not JSON: ${cause instanceof Error ? cause.message : String(cause)}`,
          excerpt: excerpt(line)
        })
      }
    }
    const type = typeof json === "object" && json !== null && "type" in json ? json.type : undefined
    if (typeof type === "string" && !known.has(type)) {
      return {
        _tag: "Failure",
        failure: new UnknownFrameType({ frameType: type, message: `unknown frame type ${JSON.stringify(type)}` })
      }
    }
    const checked = fast(json)
    if (checked !== undefined) return { _tag: "Success", success: checked }
    const result = decode(fromNoeticForm(json))
    return result._tag === "Success"
      ? { _tag: "Success", success: result.success }
      : { _tag: "Failure", failure: new MalformedFrame({ message: result.failure.message, excerpt: excerpt(line) }) }
  }
}

const asEffect = <A>(decoded: Decoded<A>): Effect.Effect<A, MalformedFrame | UnknownFrameType> =>
  decoded._tag === "Success" ? Effect.succeed(decoded.success) : Effect.fail(decoded.failure)

const decodeClientLine = makeDecoder(ClientFrame, CLIENT_TYPES)
const decodeServerLine = makeDecoder(ServerFrame, SERVER_TYPES, fastServerFrame, fastDurableLine)

/** Decodes one line (without its newline) sent by a client. */
export const decodeClientFrame = (line: string): Effect.Effect<ClientFrame, MalformedFrame | UnknownFrameType> =>
  Effect.suspend(() => asEffect(decodeClientLine(line)))

/** Decodes one line (without its newline) sent by a server. */
export const decodeServerFrame = (line: string): Effect.Effect<ServerFrame, MalformedFrame | UnknownFrameType> =>
  Effect.suspend(() => asEffect(decodeServerLine(line)))

/** Decodes one line sent by a server, synchronously. */
export const decodeServerFrameSync: (line: string) => Decoded<ServerFrame> = decodeServerLine

/** Decodes one line sent by a client, synchronously. */
export const decodeClientFrameSync: (line: string) => Decoded<ClientFrame> = decodeClientLine
