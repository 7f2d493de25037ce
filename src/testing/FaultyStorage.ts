/**
 * Fault injection for tests: a storage that records every operation and injects the
 * failures a plan picks (typed I/O errors on chosen writes or reads, a simulated host
 * crash after a number of writes: every later operation dies, as if the process were
 * gone), and crash points for step bodies.
 *
 * @since 0.1.0
 */
import { Effect, Exit, Option, Schema } from "effect"
import { Io, StorageError } from "../Errors.ts"
import { make as makeStorage, type StorageAdapterShape } from "../services/StorageAdapter.ts"

/** The defect a simulated crash dies with: the host is gone. */
export class HostCrashed extends Schema.TaggedError<HostCrashed>("noetic-effect/testing/HostCrashed")(
  "HostCrashed",
  { message: Schema.String }
) {}

/** Whether an exit is a simulated host crash (a `HostCrashed` defect anywhere in its cause). */
export const isHostCrash = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) &&
  exit.cause.reasons.some((reason) => reason._tag === "Die" && reason.defect instanceof HostCrashed)

/**
 * A crash point for step bodies: `tick` dies with `HostCrashed` on its `n`th run
 * (counting from 1) and does nothing otherwise, so a graph crashes at a chosen step.
 */
export const crashOnTick = (n: number): { readonly tick: Effect.Effect<void>; readonly ticks: () => number } => {
  let ticks = 0
  return {
    tick: Effect.suspend(() =>
      ++ticks === n ? Effect.die(new HostCrashed({ message: `simulated host crash at tick ${n}` })) : Effect.void
    ),
    ticks: () => ticks
  }
}

/** One operation the storage was asked for, in order. */
export interface Operation {
  readonly op: "get" | "getMany" | "scan" | "set" | "delete" | "list" | "compareAndSet"
  /** The key, the prefix of a `list`, or the keys of a `getMany` joined by commas. */
  readonly key: string
  /** Whether the operation failed by the plan (or by the crash). */
  readonly injected: boolean
}

/** Which operations fail. Writes are `set`, `delete` and `compareAndSet`, counted from 0. */
export interface FaultPlan {
  /** Fails the write with a typed `Io` error when it returns true. */
  readonly failWrite?: (key: string, index: number) => boolean
  /** Fails the read (`get`, `getMany`, `scan`, `list`) with a typed `Io` error when it returns true. */
  readonly failRead?: (key: string) => boolean
  /** After this many successful writes, every operation dies with `HostCrashed`. */
  readonly crashAfterWrites?: number
}

/** A faulty storage and what it saw. */
export interface FaultyStorage {
  readonly storage: StorageAdapterShape
  /** Every operation so far. */
  readonly operations: ReadonlyArray<Operation>
  /** Successful writes so far. */
  readonly writes: () => number
  /** Whether the simulated crash has happened. */
  readonly crashed: () => boolean
}

/**
 * Wraps `storage` with the failures of `plan`. The wrapped storage holds what landed
 * before a crash, so a test can "restart" by building a new harness over `storage`.
 */
export const make = (storage: StorageAdapterShape, plan: FaultPlan = {}): FaultyStorage => {
  const operations: Array<Operation> = []
  let writes = 0
  let writeIndex = 0
  let crashed = false

  const injectedIo = (operation: string, key: string) =>
    new StorageError({ operation, reason: new Io({ key, message: "injected failure", cause: null }) })

  const guard = <A>(
    op: Operation["op"],
    key: string,
    write: boolean,
    run: Effect.Effect<A, StorageError>
  ): Effect.Effect<A, StorageError> =>
    Effect.suspend(() => {
      if (crashed) {
        operations.push({ op, key, injected: true })
        return Effect.die(new HostCrashed({ message: `simulated host crash after ${writes} writes` }))
      }
      const fail = write
        ? plan.failWrite?.(key, writeIndex++) === true
        : plan.failRead?.(key) === true
      operations.push({ op, key, injected: fail })
      if (fail) return Effect.fail(injectedIo(op, key))
      if (!write) return run
      return Effect.tap(run, () =>
        Effect.sync(() => {
          writes++
          if (plan.crashAfterWrites !== undefined && writes >= plan.crashAfterWrites) crashed = true
        }))
    })

  const wrapped: StorageAdapterShape = makeStorage({
    get: (key) => guard("get", key, false, storage.get(key)),
    set: (key, value) => guard("set", key, true, storage.set(key, value)),
    delete: (key) => guard("delete", key, true, storage.delete(key)),
    list: (prefix) => guard("list", prefix, false, storage.list(prefix)),
    getMany: (keys) => guard("getMany", keys.join(","), false, storage.getMany(keys)),
    scan: (prefix) => guard("scan", prefix, false, storage.scan(prefix)),
    ...(storage.compareAndSet === undefined ? {} : {
      compareAndSet: (key: string, expected: Option.Option<unknown>, next: unknown) =>
        guard("compareAndSet", key, true, storage.compareAndSet!(key, expected, next))
    })
  })
  return { storage: wrapped, operations, writes: () => writes, crashed: () => crashed }
}
