/**
 * noetic's channels: typed, schema-checked message passing between steps, loop
 * iterations, and the host. A `value` channel holds the latest value, a `queue`
 * is a FIFO of `capacity` (senders park when it is full), a `topic` broadcasts to
 * the receivers waiting when a value is sent. An `external` channel of a harness
 * with durable storage also takes values from outside the running host: a handle's
 * `send` writes the value to storage first (`channels/<name>/<key>`), and the host
 * that receives on the channel drains what is stored, so a value sent by another
 * process, or while no host ran, is delivered after a restore
 * (docs/layers-and-channels.md#channels).
 *
 * @since 0.2.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type { StorageError } from "../Errors.ts"
import { logWarning } from "../internal/diagnostics.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"
import type { AgentContext } from "./AgentContext.ts"
import { message, parseWith } from "./LayerLifecycle.ts"

/** A channel definition (noetic's `Channel`). */
export interface Channel<T = unknown> {
  readonly name: string
  /** Checks every value sent: a zod schema (`parse`) or a Standard Schema; none: any value. */
  readonly schema?: unknown
  readonly mode: "value" | "queue" | "topic"
  readonly capacity?: number
  readonly external?: boolean
  /** Phantom: the value type. */
  readonly _T?: T
}

/** Builds a channel; refuses a bad name, mode or capacity. */
export const channel = <T = unknown>(
  name: string,
  options: { readonly schema?: unknown; readonly mode: "value" | "queue" | "topic"; readonly capacity?: number; readonly external?: boolean }
): Channel<T> => {
  if (typeof name !== "string" || name.trim() === "") throw new ChannelInvalid({ reason: "a channel needs a non-empty name" })
  if (!["value", "queue", "topic"].includes(options?.mode)) {
    throw new ChannelInvalid({ reason: `channel '${name}' has mode ${JSON.stringify(options?.mode)}; use 'value', 'queue' or 'topic'` })
  }
  if (options.capacity !== undefined && !(Number.isInteger(options.capacity) && options.capacity > 0)) {
    throw new ChannelInvalid({ reason: `channel '${name}' has capacity ${options.capacity}; use an integer > 0` })
  }
  return {
    name,
    mode: options.mode,
    ...(options.schema === undefined ? {} : { schema: options.schema }),
    ...(options.capacity === undefined ? {} : { capacity: options.capacity }),
    ...(options.external === true ? { external: true } : {})
  }
}

/** A channel definition that cannot work (empty name, unknown mode, bad capacity). */
export class ChannelInvalid extends Schema.TaggedError<ChannelInvalid>("noetic-effect/ChannelInvalid")("ChannelInvalid", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** A `recv` (or a parked `send`) waited past its timeout (noetic's `channel_timeout`). */
export class ChannelTimeout extends Schema.TaggedError<ChannelTimeout>("noetic-effect/ChannelTimeout")("ChannelTimeout", {
  channel: Schema.String,
  timeoutMs: Schema.Number
}) {
  override get message(): string {
    return `channel '${this.channel}': nothing within ${this.timeoutMs} ms`
  }
}

/** A send through a handle of an execution that has ended (noetic's `channel_closed`). */
export class ChannelClosed extends Schema.TaggedError<ChannelClosed>("noetic-effect/ChannelClosed")("ChannelClosed", {
  channel: Schema.String,
  executionId: Schema.String
}) {
  override get message(): string {
    return `channel '${this.channel}': execution ${this.executionId} has ended`
  }
}

/** The receiving or sending context was aborted while it waited (noetic's `cancelled`). */
export class ChannelCancelled extends Schema.TaggedError<ChannelCancelled>("noetic-effect/ChannelCancelled")(
  "ChannelCancelled",
  { channel: Schema.String, reason: Schema.optionalKey(Schema.String) }
) {
  override get message(): string {
    return `channel '${this.channel}': cancelled${this.reason === undefined ? "" : `: ${this.reason}`}`
  }
}

/** A value its channel's schema refused; `cause` is the schema's error. */
export class ChannelValueInvalid extends Schema.TaggedError<ChannelValueInvalid>("noetic-effect/ChannelValueInvalid")(
  "ChannelValueInvalid",
  { channel: Schema.String, cause: Schema.Defect() }
) {
  override get message(): string {
    return `channel '${this.channel}': the value does not match its schema`
  }
}

/** The default wait of `recv` and of a parked `send` (noetic's 30 s). */
export const DEFAULT_CHANNEL_TIMEOUT = 30_000
const DEFAULT_CAPACITY = 1000
const POLL_MS = 50

interface Subscriber {
  readonly executionId: string
  readonly buffer: Array<unknown>
  wake: (() => void) | undefined
  ended: boolean
}

interface ChannelState {
  readonly def: Channel<any>
  hasValue: boolean
  value: unknown
  readonly queue: Array<unknown>
  readonly waiters: Array<Deferred.Deferred<unknown>>
  readonly parked: Array<{ readonly value: unknown; readonly admitted: Deferred.Deferred<void> }>
  readonly subscribers: Set<Subscriber>
}

/** What a waiting `recv` / `send` checks for cancellation. */
export interface Waiter {
  readonly aborted: () => boolean
  readonly abortReason?: () => string | undefined
}

/** A handle outside code sends through (noetic's `ChannelHandle`). */
export interface ChannelHandleShape<T> {
  /** Pushes a value; with durable storage the Effect succeeds once it is stored. */
  readonly send: (value: T) => Effect.Effect<void, ChannelClosed | ChannelValueInvalid | StorageError>
  readonly closed: boolean
  readonly channel: Channel<T>
}

/**
 * The channels of one harness. `storage` (the harness's durable storage) backs
 * external channels' handle sends.
 */
export class ChannelHub {
  readonly #states = new Map<string, ChannelState>()
  readonly #closed = new Set<string>()
  readonly #subs = new Map<string, Set<Subscriber>>()
  #storage: StorageAdapterShape | undefined
  #seq = 0

  constructor(storage?: StorageAdapterShape) {
    this.#storage = storage
  }

  /** Backs external channels' handle sends with `storage` (a durable harness's); the first one given stays. */
  attachStorage(storage: StorageAdapterShape): void {
    this.#storage ??= storage
  }

  #state(def: Channel<any>): ChannelState {
    let state = this.#states.get(def.name)
    if (state === undefined) {
      state = { def, hasValue: false, value: undefined, queue: [], waiters: [], parked: [], subscribers: new Set() }
      this.#states.set(def.name, state)
    }
    return state
  }

  #capacity(state: ChannelState): number {
    return state.def.capacity ?? DEFAULT_CAPACITY
  }

  /** Hands `value` to a waiter, the subscribers, or the buffer; true when the queue took it. */
  #deliver(state: ChannelState, value: unknown): void {
    for (const sub of state.subscribers) {
      if (state.def.mode === "queue") continue
      if (state.def.mode === "value") sub.buffer.length = 0
      if (sub.buffer.length < DEFAULT_CAPACITY) sub.buffer.push(value)
      sub.wake?.()
    }
    switch (state.def.mode) {
      case "value": {
        state.hasValue = true
        state.value = value
        for (const waiter of state.waiters.splice(0)) Deferred.doneUnsafe(waiter, Effect.succeed(value))
        return
      }
      case "topic": {
        for (const waiter of state.waiters.splice(0)) Deferred.doneUnsafe(waiter, Effect.succeed(value))
        return
      }
      case "queue": {
        const waiter = state.waiters.shift()
        if (waiter !== undefined) {
          Deferred.doneUnsafe(waiter, Effect.succeed(value))
          return
        }
        const queueSub = [...state.subscribers].find((sub) => sub.wake !== undefined && !sub.ended)
        if (queueSub !== undefined) {
          queueSub.buffer.push(value)
          queueSub.wake?.()
          return
        }
        state.queue.push(value)
      }
    }
  }

  /** Takes one queued value (admitting a parked sender into the freed slot). */
  #take(state: ChannelState): Option.Option<unknown> {
    if (state.queue.length === 0) return Option.none()
    const value = state.queue.shift()
    const parked = state.parked.shift()
    if (parked !== undefined) {
      state.queue.push(parked.value)
      Deferred.doneUnsafe(parked.admitted, Effect.void)
    }
    return Option.some(value)
  }

  /** Moves values stored by handles (this process's or another's) into the queue, oldest first. */
  #drainStored(state: ChannelState): Effect.Effect<void> {
    const storage = this.#storage
    if (storage === undefined || state.def.external !== true) return Effect.void
    const prefix = `channels/${state.def.name}/`
    return Effect.gen({ self: this }, function*() {
      const keys = yield* storage.list(prefix)
      for (const key of keys) {
        const found = yield* storage.get(key)
        yield* storage.delete(key)
        if (Option.isSome(found)) {
          const record = found.value as { readonly value?: unknown }
          this.#deliver(state, record?.value)
        }
      }
    }).pipe(Effect.catch((error) => logWarning(`channel '${state.def.name}': reading stored values failed`, error)))
  }

  /** Sends from inside an execution: parks while a queue is full. */
  send<T>(def: Channel<T>, value: T, waiter?: Waiter): Effect.Effect<void, ChannelTimeout | ChannelCancelled | ChannelValueInvalid> {
    return Effect.gen({ self: this }, function*() {
      const parsed = yield* Effect.mapError(parseWith(def.schema, value), (cause) => new ChannelValueInvalid({ channel: def.name, cause }))
      const state = this.#state(def)
      if (def.mode !== "queue" || state.queue.length < this.#capacity(state)) {
        this.#deliver(state, parsed)
        return
      }
      const admitted = Deferred.makeUnsafe<void>()
      const entry = { value: parsed, admitted }
      state.parked.push(entry)
      yield* this.#wait(def.name, Deferred.await(admitted), DEFAULT_CHANNEL_TIMEOUT, waiter, () => {
        const at = state.parked.indexOf(entry)
        if (at >= 0) state.parked.splice(at, 1)
      })
    })
  }

  /** Waits for a value (`timeoutMs`, default 30 s; 0: only what is there now, then a timeout). */
  recv<T>(def: Channel<T>, options: { readonly timeoutMs?: number | undefined; readonly waiter?: Waiter | undefined } = {}): Effect.Effect<T, ChannelTimeout | ChannelCancelled> {
    return Effect.gen({ self: this }, function*() {
      const state = this.#state(def)
      if (options.waiter?.aborted() === true) {
        return yield* new ChannelCancelled({ channel: def.name, ...reasonOf(options.waiter) })
      }
      yield* this.#drainStored(state)
      const now = this.#now(state)
      if (Option.isSome(now)) return now.value as T
      const deferred = Deferred.makeUnsafe<unknown>()
      state.waiters.push(deferred)
      const timeoutMs = options.timeoutMs ?? DEFAULT_CHANNEL_TIMEOUT
      // A durable external channel also takes what other processes store while this waits.
      const poll = this.#storage !== undefined && def.external === true
        ? Effect.forever(Effect.andThen(Effect.sleep(POLL_MS * 2), this.#drainStored(state)))
        : Effect.never
      const got = yield* this.#wait(def.name, Effect.raceFirst(Deferred.await(deferred), poll), timeoutMs, options.waiter, () => {
        const at = state.waiters.indexOf(deferred)
        if (at >= 0) state.waiters.splice(at, 1)
      })
      return got as T
    })
  }

  #now(state: ChannelState): Option.Option<unknown> {
    if (state.def.mode === "value") return state.hasValue ? Option.some(state.value) : Option.none()
    if (state.def.mode === "queue") return this.#take(state)
    return Option.none()
  }

  /** A value available now, else null (always null for a topic). */
  tryRecv<T>(def: Channel<T>): T | null {
    const state = this.#state(def)
    const now = this.#now(state)
    return Option.isSome(now) ? now.value as T : null
  }

  /** `tryRecv` that first takes what handles stored (a durable external channel). */
  tryRecvStored<T>(def: Channel<T>): Effect.Effect<T | null> {
    return Effect.map(this.#drainStored(this.#state(def)), () => this.tryRecv(def))
  }

  #wait<A>(
    name: string,
    effect: Effect.Effect<A>,
    timeoutMs: number,
    waiter: Waiter | undefined,
    cleanup: () => void
  ): Effect.Effect<A, ChannelTimeout | ChannelCancelled> {
    const aborted = waiter === undefined ? Effect.never : Effect.repeat(
      Effect.suspend(() => waiter.aborted() ? Effect.fail(new ChannelCancelled({ channel: name, ...reasonOf(waiter) })) : Effect.void),
      Schedule.spaced(POLL_MS)
    ).pipe(Effect.andThen(Effect.never))
    const raced = Effect.raceFirst(effect, aborted)
    return Effect.timeoutOrElse(raced, {
      duration: Math.max(0, timeoutMs),
      orElse: () => Effect.fail(new ChannelTimeout({ channel: name, timeoutMs }))
    }).pipe(Effect.onExit((exit) => exit._tag === "Success" ? Effect.void : Effect.sync(cleanup)))
  }

  /**
   * A handle for outside code. Its `send` never parks: at capacity a queue drops its
   * oldest value (with a warning). On a durable harness an external channel's value
   * is stored first, so it survives this host and reaches a host that restores later.
   */
  handle<T>(def: Channel<T>, executionId: string): ChannelHandleShape<T> {
    const hub = this
    return {
      channel: def,
      get closed() {
        return hub.#closed.has(executionId)
      },
      send: (value) =>
        Effect.gen(function*() {
          if (hub.#closed.has(executionId)) return yield* new ChannelClosed({ channel: def.name, executionId })
          const parsed = yield* Effect.mapError(parseWith(def.schema, value), (cause) => new ChannelValueInvalid({ channel: def.name, cause }))
          if (hub.#storage !== undefined && def.external === true) {
            const key = `channels/${def.name}/${Date.now().toString().padStart(15, "0")}-${process.pid}-${String(hub.#seq++).padStart(8, "0")}`
            // Stored only: a receiver (of this process or another) takes it from storage.
            yield* hub.#storage.set(key, { value: parsed, executionId })
            return
          }
          const state = hub.#state(def)
          if (def.mode === "queue" && state.queue.length >= hub.#capacity(state)) {
            state.queue.shift()
            yield* logWarning(`channel '${def.name}': full; a handle send dropped the oldest value`)
          }
          hub.#deliver(state, parsed)
        })
    }
  }

  /**
   * Values sent on a channel, as they come, until `executionId` ends (buffered values
   * first): a queue's subscriber competes with `recv`; topic and value subscribers tap.
   */
  subscribe<T>(def: Channel<T>, executionId: string): {
    readonly next: () => Effect.Effect<Option.Option<T>>
    readonly close: () => void
    readonly subscriber: Subscriber
  } {
    const state = this.#state(def)
    const subscriber: Subscriber = { executionId, buffer: [], wake: undefined, ended: this.#closed.has(executionId) }
    let bound = this.#subs.get(executionId)
    if (bound === undefined) this.#subs.set(executionId, bound = new Set())
    bound.add(subscriber)
    if (def.mode === "value" && state.hasValue) subscriber.buffer.push(state.value)
    state.subscribers.add(subscriber)
    const next = (): Effect.Effect<Option.Option<T>> =>
      Effect.gen({ self: this }, function*() {
        while (true) {
          yield* this.#drainStored(state)
          if (subscriber.buffer.length > 0) return Option.some(subscriber.buffer.shift() as T)
          if (def.mode === "queue") {
            const taken = this.#take(state)
            if (Option.isSome(taken)) return taken as Option.Option<T>
          }
          if (subscriber.ended) return Option.none()
          const woken = Deferred.makeUnsafe<void>()
          subscriber.wake = () => Deferred.doneUnsafe(woken, Effect.void)
          const poll = this.#storage !== undefined && def.external === true ? Effect.sleep(POLL_MS * 2) : Effect.never
          yield* Effect.raceFirst(Deferred.await(woken), poll)
          subscriber.wake = undefined
        }
      })
    return {
      next,
      subscriber,
      close: () => {
        subscriber.ended = true
        state.subscribers.delete(subscriber)
        this.#subs.get(executionId)?.delete(subscriber)
        subscriber.wake?.()
      }
    }
  }

  /** Ends subscriptions bound to `executionId` and closes its handles. */
  closeExecution(executionId: string): void {
    this.#closed.add(executionId)
    const subscribers = this.#subs.get(executionId) ?? new Set()
    this.#subs.delete(executionId)
    for (const sub of subscribers) {
      sub.ended = true
      sub.wake?.()
    }
  }

  /** Whether handles of `executionId` are closed. */
  isClosed(executionId: string): boolean {
    return this.#closed.has(executionId)
  }
}

const reasonOf = (waiter: Waiter): { reason?: string } => {
  const reason = waiter.abortReason?.()
  return reason === undefined ? {} : { reason }
}

/**
 * A loop's inbox (noetic's `inbox` / `parkTimeout`), asked when `until` says stop:
 * a message waiting (or arriving within `parkTimeout` ms) is appended to the log as
 * a developer message and the loop goes on (true); none: the loop stops (false).
 */
export const inboxWakes = (
  loop: { readonly inbox?: Channel<any> | undefined; readonly parkTimeout?: number | undefined },
  ctx: AgentContext
): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    const hub = ctx.store.channels
    if (loop.inbox === undefined || hub === undefined) return Effect.succeed(false)
    const inbox = loop.inbox
    const parkTimeout = loop.parkTimeout ?? 0
    const got: Effect.Effect<Option.Option<unknown>> = parkTimeout > 0
      ? Effect.match(hub.recv(inbox, { timeoutMs: parkTimeout, waiter: { aborted: () => ctx.aborted } }), {
        onFailure: () => Option.none(),
        onSuccess: Option.some
      })
      : Effect.map(hub.tryRecvStored(inbox), Option.fromNullishOr)
    return Effect.flatMap(got, (value) =>
      Option.isNone(value)
        ? Effect.succeed(false)
        : Effect.as(
          ctx.append([message(typeof value.value === "string" ? value.value : JSON.stringify(value.value), "developer")]),
          true
        ))
  })
