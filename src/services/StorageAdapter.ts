/**
 * The key-value storage every durable surface is written on.
 *
 * Values are JSON values; a key that was never set (or was deleted) is absent, which
 * is not an error. Backends: `layerMemory` here, `FileStorage.layer` and
 * `PostgresStorage.layer` beside it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Conflict, Corrupt, Io, StorageError, Unserializable } from "../Errors.ts"
import { SortedKeys } from "../internal/sortedKeys.ts"

/**
 * What a fenced write is checked against: the record at `key` (an execution lease)
 * must be an object whose `token` field is `token`.
 */
export interface Fence {
  readonly key: string
  readonly token: number
}

/** One write of an atomic group (see `writeAll`): a `set` of `value` at `key`, or a `delete` of `key`. */
export type StorageWrite =
  | { readonly op: "set"; readonly key: string; readonly value: unknown }
  | { readonly op: "delete"; readonly key: string }

/**
 * The operations of a storage: the four basic ones, the bulk reads (`getMany`,
 * `scan`, always present: {@link make} derives them when a backend has none), and
 * the optional compare-and-set capability (execution leases).
 */
export interface StorageAdapterShape extends StoragePrimitives {
  /** The values of the keys that exist; missing keys are absent from the map. */
  readonly getMany: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, unknown>, StorageError>
  /** Every key that starts with `prefix` with its value, sorted by key. */
  readonly scan: (prefix: string) => Effect.Effect<ReadonlyArray<readonly [string, unknown]>, StorageError>
}

/**
 * What a backend implements: `get`, `set`, `delete`, `list`, and, when it can do them
 * in fewer round trips than the derived forms, `getMany` and `scan`. Compare-and-set
 * and fencing are a separate, optional capability.
 */
export interface StoragePrimitives {
  /** The value at `key`, or none when it is absent. */
  readonly get: (key: string) => Effect.Effect<Option.Option<unknown>, StorageError>
  /** Stores a JSON value at `key`, replacing what was there. */
  readonly set: (key: string, value: unknown) => Effect.Effect<void, StorageError>
  /**
   * True when the backend stores a {@link JsonText} value (given to `set`, `setFenced`,
   * `compareAndSet` or `writeAll`) as its text, unparsed: a writer that builds a large
   * record from JSON texts it already holds (a queue's batch of encoded frames) then
   * skips `JSON.stringify` escaping each of them into a string. A backend without it
   * may store a `JsonText` as anything, so writers give it plain values instead.
   */
  readonly takesJsonText?: boolean | undefined
  /** Removes `key`; removing an absent key succeeds. */
  readonly delete: (key: string) => Effect.Effect<void, StorageError>
  /** Every key that starts with `prefix`, sorted by code unit. */
  readonly list: (prefix: string) => Effect.Effect<ReadonlyArray<string>, StorageError>
  /** The values of the keys that exist, in one round trip; derived from `get` when absent. */
  readonly getMany?: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, unknown>, StorageError>
  /**
   * Every key that starts with `prefix` with its value, sorted by key, in one round
   * trip; derived from `list` and `getMany` when absent.
   */
  readonly scan?: (prefix: string) => Effect.Effect<ReadonlyArray<readonly [string, unknown]>, StorageError>
  /**
   * `scan` with each value as the JSON text stored, unparsed: for a reader that parses
   * only what it uses (a ledger restore reads every record and replays few outputs).
   * Optional, never derived: a backend offers it when it holds values as text. The
   * text is not checked: a value that is not JSON is the reader's to report.
   */
  readonly scanText?: (prefix: string) => Effect.Effect<ReadonlyArray<readonly [string, string]>, StorageError>
  /**
   * The keys under `prefix` from `from` (included) to `to` (excluded), both starting
   * with `prefix`, with their values, sorted by key, in one range read. Optional, never
   * derived: a reader of a run of numbered keys (a stream's chunks) uses `getMany` of
   * the keys without it.
   */
  readonly scanBetween?: (
    prefix: string,
    from: string,
    to: string
  ) => Effect.Effect<ReadonlyArray<readonly [string, unknown]>, StorageError>
  /**
   * Atomically stores `next` at `key` if the key holds `expected` (none: the key is
   * absent); succeeds with whether it did. Values match when their JSON texts are
   * equal. Optional: only what needs compare-and-set (execution leases) requires it.
   */
  readonly compareAndSet?: (
    key: string,
    expected: Option.Option<unknown>,
    next: unknown
  ) => Effect.Effect<boolean, StorageError>
  /**
   * Stores `value` at `key` only while the record at `fence.key` holds `fence.token`,
   * atomically against every `compareAndSet` of `fence.key`: a write checked against
   * a token never lands after the record moved on. Otherwise fails with reason
   * `Conflict` and writes nothing. Optional, with `compareAndSet` (execution leases).
   */
  readonly setFenced?: (key: string, value: unknown, fence: Fence) => Effect.Effect<void, StorageError>
  /** Removes `key` only while the record at `fence.key` holds `fence.token`; see `setFenced`. */
  readonly deleteFenced?: (key: string, fence: Fence) => Effect.Effect<void, StorageError>
  /**
   * Applies `writes` in order as one atomic step: once it succeeds all of them are
   * durable, and a failure or a crash leaves all or none of them. A refused key or an
   * unserializable value fails it before anything is written. Optional: a backend that
   * commits in transactions offers it (one commit for the lot); a caller without it
   * writes one by one, in the order it needs.
   */
  readonly writeAll?: (writes: ReadonlyArray<StorageWrite>) => Effect.Effect<void, StorageError>
}

/** The storage a durable surface writes to. */
export class StorageAdapter extends Context.Service<StorageAdapter, StorageAdapterShape>()(
  "noetic-effect/StorageAdapter"
) {}

/** How many `get`s the derived `getMany` runs at once. */
const GET_MANY_FALLBACK_CONCURRENCY = 32

/**
 * A storage from a backend's operations (as effect's `KeyValueStore.make`): `getMany`
 * and `scan` are the backend's own when it has them, else derived from `get` and
 * `list`, so no caller handles a missing method. `getMany` of no keys touches nothing.
 */
export const make = (primitives: StoragePrimitives): StorageAdapterShape => {
  const own = primitives.getMany
  const getMany = (keys: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, unknown>, StorageError> => {
    if (keys.length === 0) return Effect.succeed(new Map())
    if (own !== undefined) return own(keys)
    // Checked here, so a refused key is reported as getMany's, not as one of its gets.
    return validateKeys("getMany", keys).pipe(
      Effect.andThen(Effect.forEach(keys, (key) => Effect.map(primitives.get(key), (value) => [key, value] as const), {
        concurrency: GET_MANY_FALLBACK_CONCURRENCY
      })),
      Effect.map((pairs) => {
        const found = new Map<string, unknown>()
        for (const [key, value] of pairs) {
          if (Option.isSome(value)) found.set(key, value.value)
        }
        return found
      })
    )
  }
  const scan = primitives.scan ?? ((prefix: string) =>
    Effect.flatMap(primitives.list(prefix), (keys) =>
      Effect.map(getMany(keys), (found) =>
        keys.flatMap((key) => (found.has(key) ? [[key, found.get(key)] as const] : [])))))
  return { ...primitives, getMany, scan }
}


/**
 * `storage` as a reader sees it: reads pass through, writes do nothing. Opening a
 * durable queue repairs what a crash left (it deletes frames after a hole and at or
 * below the watermark); from a reader beside a live server (the CLI, the queue streams)
 * that repair could delete a frame the server is still writing, so it is only computed,
 * never applied.
 */
export const readOnly = (storage: StorageAdapterShape): StorageAdapterShape => ({
  get: storage.get,
  list: storage.list,
  getMany: storage.getMany,
  scan: storage.scan,
  set: () => Effect.void,
  delete: () => Effect.void
})

/**
 * `storage` with every operation and capability refusing once `isClosed()` answers true:
 * a `StorageError` reason `Io` ("the <kind> storage is closed") instead of a call into a
 * closed pool or database handle. What a storage closed under its users (the Promise
 * API's `close()`) is guarded with; a capability it lacks stays absent, one it has is
 * kept (dropping `writeAll` or `takesJsonText` would make queues and ledgers slower).
 */
export const whileOpen = (storage: StorageAdapterShape, kind: string, isClosed: () => boolean): StorageAdapterShape => {
  const guard = <A>(operation: string, key: string, effect: Effect.Effect<A, StorageError>) =>
    Effect.suspend(() => (isClosed() ? Effect.fail(closedError(kind, operation, key)) : effect))
  const { compareAndSet, deleteFenced, scanText, setFenced, writeAll } = storage
  return {
    ...(storage.takesJsonText === undefined ? {} : { takesJsonText: storage.takesJsonText }),
    get: (key) => guard("get", key, storage.get(key)),
    set: (key, value) => guard("set", key, storage.set(key, value)),
    delete: (key) => guard("delete", key, storage.delete(key)),
    list: (prefix) => guard("list", prefix, storage.list(prefix)),
    getMany: (keys) => guard("getMany", keys.join(","), storage.getMany(keys)),
    scan: (prefix) => guard("scan", prefix, storage.scan(prefix)),
    ...(scanText === undefined ? {} : { scanText: (prefix: string) => guard("scan", prefix, scanText(prefix)) }),
    ...(compareAndSet === undefined ? {} : {
      compareAndSet: (key: string, expected: Option.Option<unknown>, next: unknown) =>
        guard("compareAndSet", key, compareAndSet(key, expected, next))
    }),
    ...(setFenced === undefined ? {} : {
      setFenced: (key: string, value: unknown, fence: Fence) => guard("setFenced", key, setFenced(key, value, fence))
    }),
    ...(deleteFenced === undefined ? {} : {
      deleteFenced: (key: string, fence: Fence) => guard("deleteFenced", key, deleteFenced(key, fence))
    }),
    ...(writeAll === undefined ? {} : {
      writeAll: (writes: ReadonlyArray<StorageWrite>) => guard("writeAll", writes[0]?.key ?? "", writeAll(writes))
    })
  }
}

/** The failure of an operation on a closed storage (see {@link whileOpen}). */
export const closedError = (kind: string, operation: string, key: string): StorageError =>
  new StorageError({ operation, reason: new Io({ key, message: `the ${kind} storage is closed`, cause: null }) })

/**
 * Reads many keys at once (the storage's `getMany`). Missing keys are absent from the
 * result, falsy values (`0`, `""`, `false`, `null`) are kept, and an empty key list
 * touches nothing.
 */
export const getMany = (
  storage: StorageAdapterShape,
  keys: ReadonlyArray<string>
): Effect.Effect<ReadonlyMap<string, unknown>, StorageError> =>
  keys.length === 0 ? Effect.succeed(new Map()) : storage.getMany(keys)

/** Every key under `prefix` with its value, sorted by key (the storage's `scan`). */
export const scan = (
  storage: StorageAdapterShape,
  prefix: string
): Effect.Effect<ReadonlyArray<readonly [string, unknown]>, StorageError> => storage.scan(prefix)

/**
 * A JSON value given as its JSON text, for a storage that `takesJsonText`. The writer
 * guarantees the text is JSON; readers parse it like any stored value. `toJSON` gives
 * the value, so `JSON.stringify` of one, or of a record holding one, writes that JSON.
 */
export class JsonText {
  constructor(readonly text: string) {}
  /** The value, for `JSON.stringify`. */
  toJSON(): unknown {
    return JSON.parse(this.text)
  }
}

/**
 * Serialises a value for storage, failing with `Unserializable` for what JSON cannot
 * hold (a cycle, a bigint, `undefined` at the top level). A {@link JsonText} is its text.
 */
export const encodeJson = (
  operation: string,
  key: string,
  value: unknown
): Effect.Effect<string, StorageError> =>
  Effect.suspend(() => {
    const text = jsonText(operation, key, value)
    return typeof text === "string" ? Effect.succeed(text) : Effect.fail(text)
  })

/** {@link encodeJson} in plain code: the JSON text, or the `Unserializable` failure. */
export const jsonText = (operation: string, key: string, value: unknown): string | StorageError => {
  if (value instanceof JsonText) return value.text
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch (cause) {
    return new StorageError({
      operation,
      reason: new Unserializable({ key, message: cause instanceof Error ? cause.message : String(cause) })
    })
  }
  if (text === undefined) {
    return new StorageError({
      operation,
      reason: new Unserializable({ key, message: `a value of type ${typeof value} has no JSON form` })
    })
  }
  return text
}

/**
 * The JSON text a `compareAndSet` expects at `key`, or undefined for "absent". An
 * expected value that has no JSON form could never match, so it fails `Unserializable`.
 */
export const encodeExpected = (
  key: string,
  expected: Option.Option<unknown>
): Effect.Effect<string | undefined, StorageError> =>
  Option.isNone(expected) ? Effect.succeed(undefined) : encodeJson("compareAndSet", key, expected.value)

/**
 * Why `key` cannot name a record, or undefined when it can. Every backend refuses the
 * same keys: a non-string, the empty string (it would name the root or nothing at
 * all), and a string that is not well-formed Unicode (a lone surrogate has no UTF-8
 * form, so a file name or a database text column could not give it back).
 */
export const keyProblem = (key: unknown): string | undefined => {
  if (typeof key !== "string") return `a key must be a string, not ${key === null ? "null" : typeof key}`
  if (key.length === 0) return "the key is empty"
  if (!key.isWellFormed()) return "the key is not well-formed Unicode (a lone surrogate)"
  return undefined
}

/**
 * The one key check every backend runs before touching a key: fails with a
 * `StorageError` of reason `Unserializable` (naming the operation and the key) for a
 * key {@link keyProblem} refuses, so all backends refuse the same keys the same way.
 */
export const validateKey = (operation: string, key: string): Effect.Effect<void, StorageError> => {
  const error = keyError(operation, key)
  return error === undefined ? Effect.void : Effect.fail(error)
}

/** The error {@link validateKey} fails with for `key`, or undefined when the key is fine. */
export const keyError = (operation: string, key: string): StorageError | undefined => {
  const problem = keyProblem(key)
  return problem === undefined
    ? undefined
    : new StorageError({
      operation,
      reason: new Unserializable({ key: typeof key === "string" ? key : String(key), message: problem })
    })
}

/** {@link validateKey} over several keys, failing on the first refused one. */
export const validateKeys = (operation: string, keys: ReadonlyArray<string>): Effect.Effect<void, StorageError> =>
  Effect.suspend(() => {
    for (const key of keys) {
      const error = keyError(operation, key)
      if (error !== undefined) return Effect.fail(error)
    }
    return Effect.void
  })

/**
 * The JSON text each write of a `writeAll` group stores (undefined for a delete), or
 * the error of its first refused key or unserializable value: a backend checks the
 * whole group this way before it writes any of it.
 */
export const writeTexts = (writes: ReadonlyArray<StorageWrite>): Array<string | undefined> | StorageError => {
  const texts: Array<string | undefined> = []
  for (const write of writes) {
    const refused = keyError("writeAll", write.key)
    if (refused !== undefined) return refused
    if (write.op === "delete") {
      texts.push(undefined)
      continue
    }
    const text = jsonText("writeAll", write.key, write.value)
    if (typeof text !== "string") return text
    texts.push(text)
  }
  return texts
}

/** Whether a stored fence record holds `token`. */
export const fenceHolds = (record: unknown, token: number): boolean =>
  typeof record === "object" && record !== null && "token" in record && record.token === token

/** The `Conflict` a fenced write fails with when its fence moved on. */
export const fenceRefused = (operation: string, key: string, fence: Fence): StorageError =>
  new StorageError({
    operation,
    reason: new Conflict({
      key,
      message: `refused: ${JSON.stringify(fence.key)} no longer holds token ${fence.token}`
    })
  })

/** Parses stored JSON text, failing with `Corrupt` naming the key. */
export const decodeJson = (operation: string, key: string, text: string): Effect.Effect<unknown, StorageError> =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (cause) =>
      new StorageError({
        operation,
        reason: new Corrupt({ key, message: `not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}` })
      })
  })

/** Sorts keys by UTF-16 code unit, the order `list` promises on every backend. */
export const sortKeys = (keys: Array<string>): Array<string> => keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))

/** Checks a fence of the memory storage in plain code, so no other fiber runs before the write. */
const memoryFenceError = (
  entries: ReadonlyMap<string, string>,
  operation: string,
  key: string,
  fence: Fence
): StorageError | undefined => {
  const text = entries.get(fence.key)
  let record: unknown
  try {
    record = text === undefined ? undefined : JSON.parse(text)
  } catch (cause) {
    return new StorageError({
      operation,
      reason: new Corrupt({ key: fence.key, message: `not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}` })
    })
  }
  return fenceHolds(record, fence.token) ? undefined : fenceRefused(operation, key, fence)
}

/**
 * An in-memory storage. It keeps the JSON text of each value, so what it hands back
 * is a copy and a value that would not survive a disk round trip does not survive here.
 */
export const makeMemory: Effect.Effect<StorageAdapterShape> = Effect.sync(() => {
  const entries = new Map<string, string>()
  // The keys in order beside the map, so a listing finds its prefix without a scan.
  const index = new SortedKeys()
  const put = (key: string, text: string): void => {
    if (!entries.has(key)) index.add(key)
    entries.set(key, text)
  }
  const drop = (key: string): void => {
    if (entries.delete(key)) index.remove(key)
  }
  return make({
    takesJsonText: true,
    get: (key) =>
      Effect.suspend(() => {
        const refused = keyError("get", key)
        if (refused !== undefined) return Effect.fail(refused)
        const text = entries.get(key)
        return text === undefined ? Effect.succeedNone : Effect.asSome(decodeJson("get", key, text))
      }),
    set: (key, value) =>
      Effect.andThen(
        validateKey("set", key),
        Effect.map(encodeJson("set", key, value), (text) => put(key, text))
      ),
    delete: (key) => Effect.andThen(validateKey("delete", key), Effect.sync(() => drop(key))),
    list: (prefix) => Effect.sync(() => index.withPrefix(prefix)),
    scan: (prefix) =>
      Effect.suspend(() =>
        Effect.forEach(
          index.withPrefix(prefix),
          (key) => Effect.map(decodeJson("scan", key, entries.get(key)!), (value) => [key, value] as const)
        )
      ),
    scanText: (prefix) =>
      Effect.sync(() => index.withPrefix(prefix).map((key) => [key, entries.get(key)!] as const)),
    getMany: (keys) =>
      Effect.suspend(() => {
        for (const key of keys) {
          const refused = keyError("getMany", key)
          if (refused !== undefined) return Effect.fail(refused)
        }
        const found = new Map<string, unknown>()
        return Effect.as(
          Effect.forEach(keys, (key) => {
            const text = entries.get(key)
            return text === undefined
              ? Effect.void
              : Effect.map(decodeJson("getMany", key, text), (value) => void found.set(key, value))
          }, { discard: true }),
          found
        )
      }),
    // The check and the write run in one synchronous step, so nothing interleaves.
    compareAndSet: Effect.fnUntraced(function*(key, expected, next) {
      yield* validateKey("compareAndSet", key)
      const expectedText = yield* encodeExpected(key, expected)
      const nextText = yield* encodeJson("compareAndSet", key, next)
      if (entries.get(key) !== expectedText) return false
      put(key, nextText)
      return true
    }),
    // Every key and value is checked before the first write, then all are applied at once.
    writeAll: (writes) =>
      Effect.suspend(() => {
        const texts = writeTexts(writes)
        if (texts instanceof StorageError) return Effect.fail(texts)
        writes.forEach((write, i) => {
          const text = texts[i]
          if (text === undefined) drop(write.key)
          else put(write.key, text)
        })
        return Effect.void
      }),
    // Like compareAndSet, the check and the write are one synchronous step.
    setFenced: Effect.fnUntraced(function*(key, value, fence) {
      yield* validateKeys("setFenced", [key, fence.key])
      const text = yield* encodeJson("setFenced", key, value)
      const refused = memoryFenceError(entries, "setFenced", key, fence)
      if (refused !== undefined) return yield* refused
      put(key, text)
    }),
    deleteFenced: (key, fence) =>
      Effect.suspend(() => {
        const badKey = keyError("deleteFenced", key) ?? keyError("deleteFenced", fence.key)
        if (badKey !== undefined) return Effect.fail(badKey)
        const refused = memoryFenceError(entries, "deleteFenced", key, fence)
        if (refused !== undefined) return Effect.fail(refused)
        drop(key)
        return Effect.void
      })
  })
})

/** A fresh in-memory storage for the life of the layer. */
export const layerMemory: Layer.Layer<StorageAdapter> = Layer.effect(StorageAdapter, makeMemory)
