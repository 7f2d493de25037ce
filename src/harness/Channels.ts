/**
 * noetic's channels: typed, schema-checked message passing between steps, loop
 * iterations, and the host. A `value` channel holds the latest value, a `queue`
 * is a FIFO of `capacity` (senders park when it is full), a `topic` broadcasts to
 * the receivers waiting when a value is sent. An `external` channel of a harness
 * with durable storage also takes values from outside the running host: a handle's
 * `send` writes the value to storage first (`channels/<name>/<key>`), and the host
 * that receives on the channel reads what is stored, so a value sent by another
 * process, or while no host ran, is delivered after a restore. A stored value stays
 * stored until it was taken and the taker's context checkpointed (`flushTaken`): a
 * host killed before that hands it out again after the restore, never loses it
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
import { type Item, message, parseWith } from "../internal/contextShapes.ts"

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
  /** The error code. */
  get code(): "CHANNEL_INVALID" {
    return "CHANNEL_INVALID"
  }
  override get message(): string {
    return this.reason
  }
}

/** A `recv` (or a parked `send`) waited past its timeout (noetic's `channel_timeout`). */
export class ChannelTimeout extends Schema.TaggedError<ChannelTimeout>("noetic-effect/ChannelTimeout")("ChannelTimeout", {
  channel: Schema.String,
  timeoutMs: Schema.Number
}) {
  /** The error code. */
  get code(): "CHANNEL_TIMEOUT" {
    return "CHANNEL_TIMEOUT"
  }
  override get message(): string {
    return `channel '${this.channel}': nothing within ${this.timeoutMs} ms`
  }
}

/** A send through a handle of an execution that has ended (noetic's `channel_closed`). */
export class ChannelClosed extends Schema.TaggedError<ChannelClosed>("noetic-effect/ChannelClosed")("ChannelClosed", {
  channel: Schema.String,
  executionId: Schema.String
}) {
  /** The error code. */
  get code(): "CHANNEL_CLOSED" {
    return "CHANNEL_CLOSED"
  }
  override get message(): string {
    return `channel '${this.channel}': execution ${this.executionId} has ended`
  }
}

/** The receiving or sending context was aborted while it waited (noetic's `cancelled`). */
export class ChannelCancelled extends Schema.TaggedError<ChannelCancelled>("noetic-effect/ChannelCancelled")(
  "ChannelCancelled",
  { channel: Schema.String, reason: Schema.optionalKey(Schema.String) }
) {
  /** The error code. */
  get code(): "CHANNEL_CANCELLED" {
    return "CHANNEL_CANCELLED"
  }
  override get message(): string {
    return `channel '${this.channel}': cancelled${this.reason === undefined ? "" : `: ${this.reason}`}`
  }
}

/** A value its channel's schema refused; `cause` is the schema's error. */
export class ChannelValueInvalid extends Schema.TaggedError<ChannelValueInvalid>("noetic-effect/ChannelValueInvalid")(
  "ChannelValueInvalid",
  { channel: Schema.String, cause: Schema.Defect() }
) {
  /** The error code. */
  get code(): "CHANNEL_VALUE_INVALID" {
    return "CHANNEL_VALUE_INVALID"
  }
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

/** A value in a channel's buffer; `key`: the storage record it came from (a handle's durable send). */
interface Entry {
  readonly value: unknown
  readonly key?: string | undefined
}

interface ChannelState {
  readonly def: Channel<any>
  hasValue: boolean
  value: unknown
  /** The storage record of the value a `value` channel holds: kept until a newer one replaces it. */
  valueKey: string | undefined
  readonly queue: Array<Entry>
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
  /** Storage records read into this hub (so a later read skips them), until they are deleted. */
  readonly #seen = new Set<string>()
  /** Storage records taken by a receiver, to delete at the next `flushTaken`. */
  readonly #taken = new Set<string>()
  /** Records read by `refresh` for channels this hub has not met yet, by channel name. */
  readonly #unclaimed = new Map<string, Array<Entry>>()

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
      state = { def, hasValue: false, value: undefined, valueKey: undefined, queue: [], waiters: [], parked: [], subscribers: new Set() }
      this.#states.set(def.name, state)
      const unclaimed = this.#unclaimed.get(def.name)
      this.#unclaimed.delete(def.name)
      for (const entry of unclaimed ?? []) {
        if (def.external === true) this.#deliver(state, entry.value, entry.key)
        // Stored for a channel this host does not receive externally on: read again later, not taken.
        else if (entry.key !== undefined) this.#seen.delete(entry.key)
      }
    }
    return state
  }

  /** A stored record was taken (or dropped): it is deleted at the next `flushTaken`. */
  #consumed(key: string | undefined): void {
    if (key !== undefined) this.#taken.add(key)
  }

  #capacity(state: ChannelState): number {
    return state.def.capacity ?? DEFAULT_CAPACITY
  }

  /** Hands `value` to a waiter, the subscribers, or the buffer; `key`: the storage record it came from. */
  #deliver(state: ChannelState, value: unknown, key?: string): void {
    for (const sub of state.subscribers) {
      if (state.def.mode === "queue") continue
      if (state.def.mode === "value") sub.buffer.length = 0
      if (sub.buffer.length < DEFAULT_CAPACITY) sub.buffer.push(value)
      sub.wake?.()
    }
    switch (state.def.mode) {
      case "value": {
        // The latest value stays stored (a restore reads it again); the one it replaces goes.
        this.#consumed(state.valueKey)
        state.hasValue = true
        state.value = value
        state.valueKey = key
        for (const waiter of state.waiters.splice(0)) Deferred.doneUnsafe(waiter, Effect.succeed(value))
        return
      }
      case "topic": {
        this.#consumed(key)
        for (const waiter of state.waiters.splice(0)) Deferred.doneUnsafe(waiter, Effect.succeed(value))
        return
      }
      case "queue": {
        const waiter = state.waiters.shift()
        if (waiter !== undefined) {
          this.#consumed(key)
          Deferred.doneUnsafe(waiter, Effect.succeed(value))
          return
        }
        const queueSub = [...state.subscribers].find((sub) => sub.wake !== undefined && !sub.ended)
        if (queueSub !== undefined) {
          this.#consumed(key)
          queueSub.buffer.push(value)
          queueSub.wake?.()
          return
        }
        state.queue.push({ value, key })
      }
    }
  }

  /** Takes one queued value (admitting a parked sender into the freed slot). */
  #take(state: ChannelState): Option.Option<unknown> {
    const entry = state.queue.shift()
    if (entry === undefined) return Option.none()
    this.#consumed(entry.key)
    const parked = state.parked.shift()
    if (parked !== undefined) {
      state.queue.push({ value: parked.value })
      Deferred.doneUnsafe(parked.admitted, Effect.void)
    }
    return Option.some(entry.value)
  }

  /** Reads the records stored by handles (this process's or another's) that this hub has not read, oldest first. */
  #readStored(prefix: string): Effect.Effect<ReadonlyArray<{ readonly key: string; readonly value: unknown }>, StorageError> {
    const storage = this.#storage
    if (storage === undefined) return Effect.succeed([])
    return Effect.gen({ self: this }, function*() {
      const fresh = (yield* storage.list(prefix)).filter((key) => !this.#seen.has(key)).sort(byStamp)
      // Marked before the read: a concurrent read of the same prefix skips them.
      for (const key of fresh) this.#seen.add(key)
      const found = yield* Effect.onError(storage.getMany(fresh), () => Effect.sync(() => fresh.forEach((key) => this.#seen.delete(key))))
      return fresh.flatMap((key) => {
        const record = found.get(key) as { readonly value?: unknown } | undefined
        if (record === undefined) {
          this.#seen.delete(key)
          return []
        }
        return [{ key, value: record?.value }]
      })
    })
  }

  /** Delivers to `state` the values handles stored for its channel that this hub has not read yet. */
  #drainStored(state: ChannelState): Effect.Effect<void> {
    if (this.#storage === undefined || state.def.external !== true) return Effect.void
    return Effect.map(this.#readStored(`channels/${state.def.name}/`), (records) => {
      for (const record of records) this.#deliver(state, record.value, record.key)
    }).pipe(Effect.catch((error) => logWarning(`channel '${state.def.name}': reading stored values failed`, error)))
  }

  /**
   * Reads every external channel's stored values into this hub, so that `tryRecv`
   * (which cannot wait for storage) sees what other processes sent. The harness calls
   * it when a run starts and when it restores a context.
   */
  refresh(): Effect.Effect<void> {
    if (this.#storage === undefined) return Effect.void
    return Effect.map(this.#readStored("channels/"), (records) => {
      for (const record of records) {
        const name = record.key.slice("channels/".length, record.key.lastIndexOf("/"))
        const state = this.#states.get(name)
        if (state === undefined) {
          let unclaimed = this.#unclaimed.get(name)
          if (unclaimed === undefined) this.#unclaimed.set(name, unclaimed = [])
          unclaimed.push(record)
        } else if (state.def.external === true) {
          this.#deliver(state, record.value, record.key)
        } else {
          this.#seen.delete(record.key)
        }
      }
    }).pipe(Effect.catch((error) => logWarning("channels: reading stored values failed", error)))
  }

  /**
   * Deletes the stored records receivers have taken. A context calls it when it
   * checkpoints, so a record leaves storage only once what its taker did is recorded;
   * a failed delete is warned of and tried again next time.
   */
  flushTaken(): Effect.Effect<void> {
    const storage = this.#storage
    if (storage === undefined || this.#taken.size === 0) return Effect.void
    const keys = [...this.#taken]
    return Effect.forEach(keys, (key) =>
      Effect.matchEffect(storage.delete(key), {
        onSuccess: () =>
          Effect.sync(() => {
            this.#taken.delete(key)
            this.#seen.delete(key)
          }),
        onFailure: (error) => logWarning(`channels: deleting the taken record ${key} failed`, error)
      }), { discard: true })
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
            hub.#consumed(state.queue.shift()?.key)
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

/** Orders stored records by their stamp (send time, process, sequence), the oldest first. */
const byStamp = (a: string, b: string): number => {
  const stampA = a.slice(a.lastIndexOf("/") + 1)
  const stampB = b.slice(b.lastIndexOf("/") + 1)
  return stampA < stampB ? -1 : stampA > stampB ? 1 : 0
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
  ctx: {
    readonly store: { readonly channels?: ChannelHub | undefined }
    readonly aborted: boolean
    append(items: ReadonlyArray<Item>): Effect.Effect<unknown>
  }
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
