/**
 * noetic's channels for plain TypeScript: `channel()`, the handles and streams of
 * `harness.getChannelHandle` / `getChannelStream`, and the translation of the
 * engine's channel failures to noetic's errors (`channel_timeout`,
 * `channel_closed`, `cancelled`; a schema's own error for a value it refuses).
 * Behaviour is the engine's `ChannelHub` (docs/layers-and-channels.md#channels).
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Channels from "../harness/Channels.ts"
import { NoeticConfigError, NoeticError } from "./errors.ts"

/** A channel definition (noetic's `Channel`). */
export interface Channel<T> {
  readonly name: string
  readonly schema?: unknown
  readonly mode: "value" | "queue" | "topic"
  readonly capacity?: number
  readonly external?: boolean
  readonly _T?: T
}

/** A channel outside code may write to and read from (noetic's `ExternalChannel`). */
export interface ExternalChannel<T> extends Channel<T> {
  readonly external: true
}

/** A handle outside code sends through (noetic's `ChannelHandle`). */
export interface ChannelHandle<T> {
  /**
   * Pushes a value (never parks: a full queue drops its oldest). Throws
   * `channel_closed` once the execution ended. On a durable harness the value is
   * stored first; the returned promise settles when it is (noetic's `send` returns
   * nothing, so code that ignores the promise still compiles and works).
   */
  send(value: T): Promise<void>
  readonly closed: boolean
  readonly channel: Channel<T>
}

type SchemaOf<S> = S extends { _output: infer O } ? O : S extends { "~standard": { types?: { output: infer O } } } ? O : unknown

/** noetic's `channel(name, { schema, mode, capacity?, external? })`. */
export function channel<S, E extends boolean | undefined = undefined>(
  name: string,
  options: { schema: S; mode: "value" | "queue" | "topic"; capacity?: number; external?: E }
): E extends true ? ExternalChannel<SchemaOf<S>> : Channel<SchemaOf<S>>
export function channel(
  name: string,
  options: { schema?: unknown; mode: "value" | "queue" | "topic"; capacity?: number; external?: boolean }
): Channel<unknown> {
  try {
    return Channels.channel(name, options)
  } catch (error) {
    throw new NoeticConfigError({
      code: "INVALID_CHANNEL",
      message: error instanceof Error ? error.message : String(error),
      hint: "A channel needs a non-empty name, mode 'value' | 'queue' | 'topic', and a positive integer capacity."
    })
  }
}

/** noetic's error for an engine channel failure; a schema's refusal is the schema's own error. */
export const channelError = (error: unknown): unknown => {
  const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
  switch (tag) {
    case "ChannelTimeout": {
      const e = error as Channels.ChannelTimeout
      return new NoeticError({ code: "CHANNEL_TIMEOUT", message: e.message, cause: e, noeticError: { kind: "channel_timeout", channel: e.channel, timeoutMs: e.timeoutMs } as never })
    }
    case "ChannelClosed": {
      const e = error as Channels.ChannelClosed
      return new NoeticError({ code: "CHANNEL_CLOSED", message: e.message, cause: e, noeticError: { kind: "channel_closed", channel: e.channel } as never })
    }
    case "ChannelCancelled": {
      const e = error as Channels.ChannelCancelled
      return new NoeticError({ code: "CANCELLED", message: e.message, cause: e, noeticError: { kind: "cancelled", reason: e.reason ?? "context aborted" } as never })
    }
    case "ChannelValueInvalid":
      return (error as Channels.ChannelValueInvalid).cause
    default:
      return error
  }
}

/** Runs a channel Effect as a Promise with noetic's errors. */
export const runChannel = <A>(effect: Effect.Effect<A, unknown>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    throw failure !== undefined ? channelError((failure as { error: unknown }).error) : exit.cause
  })

/** noetic's `ChannelHandle` over the engine's. */
export const handleOf = <T>(hub: Channels.ChannelHub, def: Channel<T>, executionId: string): ChannelHandle<T> => {
  const handle = hub.handle(def as Channels.Channel<T>, executionId)
  return {
    channel: def,
    get closed() {
      return handle.closed
    },
    send: (value) => {
      if (handle.closed) throw channelError(new Channels.ChannelClosed({ channel: def.name, executionId }))
      return runChannel(handle.send(value))
    }
  }
}

/** noetic's `getChannelStream`: values as they come until `executionId` ends (its buffered values first). */
export const streamOf = <T>(hub: Channels.ChannelHub, def: Channel<T>, executionId: string): AsyncIterable<T> => {
  let taken = false
  return {
    [Symbol.asyncIterator]: () => {
      if (taken) throw new Error("getChannelStream: this iterable has one iterator; subscribe again for another consumer")
      taken = true
      const sub = hub.subscribe(def as Channels.Channel<T>, executionId)
      return {
        next: async () => {
          const next = await Effect.runPromise(sub.next())
          if (Option.isNone(next)) {
            sub.close()
            return { done: true, value: undefined }
          }
          return { done: false, value: next.value }
        },
        return: async () => {
          sub.close()
          return { done: true, value: undefined }
        }
      }
    }
  }
}
