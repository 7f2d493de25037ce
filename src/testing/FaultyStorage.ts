/**
 * Fault injection for tests: a storage that records every operation and injects the
 * failures a plan picks: typed I/O errors on chosen writes or reads, a typed failure
 * or a simulated host crash before or after its k-th operation (every later operation
 * dies, as if the process were gone), optionally leaving a torn temp file behind as a
 * file storage writer killed mid-write would, and crash points for step bodies.
 *
 * @since 0.1.0
 */
import { spawnSync } from "node:child_process"
import * as NodePath from "node:path"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Io, StorageError } from "../Errors.ts"
import { nodeFs as Fs } from "../internal/builtins.ts"
import { type Fence, make as makeStorage, type StorageAdapterShape } from "../services/StorageAdapter.ts"

/** The defect a simulated crash dies with: the host is gone. */
export class HostCrashed extends Schema.TaggedError<HostCrashed>("noetic-effect/testing/HostCrashed")(
  "HostCrashed",
  { message: Schema.String }
) {
  /** The error code. */
  get code(): "HOST_CRASHED" {
    return "HOST_CRASHED"
  }
}

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

/** The operations a storage can be asked for. */
export type OperationName =
  | "get"
  | "getMany"
  | "scan"
  | "set"
  | "delete"
  | "list"
  | "compareAndSet"
  | "setFenced"
  | "deleteFenced"

/** One operation the storage was asked for, in order. */
export interface Operation {
  readonly op: OperationName
  /** The key, the prefix of a `list`, or the keys of a `getMany` joined by commas. */
  readonly key: string
  /** Whether the operation failed by the plan (or by the crash). */
  readonly injected: boolean
}

/**
 * An operation of the storage, counted from 0 over every operation (reads and writes)
 * in the order they were asked for, and whether the fault strikes before it runs (it
 * never reaches the backend) or after (it landed, but its caller never learns so).
 */
export interface FaultPoint {
  readonly index: number
  readonly when: "before" | "after"
}

/** Which operations fail. Writes are `set`, `delete`, `compareAndSet` and the fenced ones, counted from 0. */
export interface FaultPlan {
  /** Fails the write with a typed `Io` error when it returns true. */
  readonly failWrite?: (key: string, index: number) => boolean
  /** Fails the read (`get`, `getMany`, `scan`, `list`) with a typed `Io` error when it returns true. */
  readonly failRead?: (key: string) => boolean
  /** After this many successful writes, every operation dies with `HostCrashed`. */
  readonly crashAfterWrites?: number
  /** The host crashes at this operation: it and every later one die with `HostCrashed`. */
  readonly crashAt?: FaultPoint
  /**
   * This one operation fails with a typed `Io` error; with `when: "after"` the write
   * landed anyway (a timeout after the commit), the case retries must survive.
   */
  readonly failAt?: FaultPoint
  /**
   * With a crash at a write, leaves a half-written temp file in this file storage root,
   * named as `FileStorage` names them, by a writer process that is gone: what a writer
   * killed between its write and its rename leaves. A restarted storage must ignore it.
   */
  readonly tornTempFileIn?: string
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
  /**
   * Waits for the simulated crash, then dies with `HostCrashed`: race a run against
   * it so the whole "process" stops at the crash, not only its next storage call.
   */
  readonly awaitCrash: Effect.Effect<never>
}

const WRITES: ReadonlySet<OperationName> = new Set(["set", "delete", "compareAndSet", "setFenced", "deleteFenced"])

let deadPidCache: number | undefined
/** The pid of a process that has exited: a torn temp file's writer is gone. */
const deadPid = (): number => {
  if (deadPidCache === undefined) deadPidCache = spawnSync(process.execPath, ["-e", ""]).pid ?? 2 ** 22 - 1
  return deadPidCache
}

/** Writes a half of `value`'s record, as a `FileStorage` temp file of a dead writer, into `root`. */
const leaveTornTempFile = (root: string, key: string, value: unknown, index: number): void => {
  let text: string
  try {
    text = JSON.stringify({ version: 1, key, value }) ?? "{"
  } catch {
    text = "{\"version\":1"
  }
  const name = `.tmp-${deadPid()}-${index}-torn`
  try {
    Fs.writeFileSync(NodePath.join(root, name), text.slice(0, Math.max(1, Math.floor(text.length / 2))), { mode: 0o600 })
  } catch {
    // The root may not exist yet; a torn file is a best-effort extra.
  }
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
  const crash = Deferred.makeUnsafe<never>()

  const injectedIo = (operation: string, key: string) =>
    new StorageError({ operation, reason: new Io({ key, message: "injected failure", cause: null }) })

  const crashNow = (why: string) => {
    crashed = true
    const defect = new HostCrashed({ message: `simulated host crash ${why}` })
    Deferred.doneUnsafe(crash, Exit.die(defect))
    return Effect.die(defect)
  }

  const guard = <A>(
    op: OperationName,
    key: string,
    run: Effect.Effect<A, StorageError>,
    torn?: () => void
  ): Effect.Effect<A, StorageError> =>
    Effect.suspend(() => {
      const index = operations.length
      if (crashed) {
        operations.push({ op, key, injected: true })
        return Effect.die(new HostCrashed({ message: `simulated host crash: operation ${index} after the crash` }))
      }
      const write = WRITES.has(op)
      const fail = write ? plan.failWrite?.(key, writeIndex++) === true : plan.failRead?.(key) === true
      const crashHere = plan.crashAt?.index === index ? plan.crashAt.when : undefined
      const failHere = plan.failAt?.index === index ? plan.failAt.when : undefined
      operations.push({ op, key, injected: fail || crashHere !== undefined || failHere !== undefined })
      if (fail) return Effect.fail(injectedIo(op, key))
      if (crashHere === "before") {
        if (write && plan.tornTempFileIn !== undefined) torn?.()
        return crashNow(`before operation ${index} (${op} ${key})`)
      }
      if (failHere === "before") return Effect.fail(injectedIo(op, key))
      return run.pipe(
        Effect.tap(() =>
          Effect.suspend(() => {
            if (write) {
              writes++
              if (plan.crashAfterWrites !== undefined && writes >= plan.crashAfterWrites && !crashed) {
                crashed = true
                Deferred.doneUnsafe(crash, Exit.die(new HostCrashed({ message: `simulated host crash after ${writes} writes` })))
              }
            }
            if (crashHere === "after") return crashNow(`after operation ${index} (${op} ${key})`)
            if (failHere === "after") return Effect.fail(injectedIo(op, key))
            return Effect.void
          })
        )
      )
    })

  const tornFor = (key: string, value: unknown) => () =>
    leaveTornTempFile(plan.tornTempFileIn!, key, value, operations.length)

  const wrapped: StorageAdapterShape = makeStorage({
    get: (key) => guard("get", key, storage.get(key)),
    set: (key, value) => guard("set", key, storage.set(key, value), tornFor(key, value)),
    delete: (key) => guard("delete", key, storage.delete(key)),
    list: (prefix) => guard("list", prefix, storage.list(prefix)),
    getMany: (keys) => guard("getMany", keys.join(","), storage.getMany(keys)),
    scan: (prefix) => guard("scan", prefix, storage.scan(prefix)),
    ...(storage.scanText === undefined ? {} : {
      scanText: (prefix: string) => guard("scan", prefix, storage.scanText!(prefix))
    }),
    ...(storage.compareAndSet === undefined ? {} : {
      compareAndSet: (key: string, expected: Option.Option<unknown>, next: unknown) =>
        guard("compareAndSet", key, storage.compareAndSet!(key, expected, next), tornFor(key, next))
    }),
    ...(storage.setFenced === undefined ? {} : {
      setFenced: (key: string, value: unknown, fence: Fence) =>
        guard("setFenced", key, storage.setFenced!(key, value, fence), tornFor(key, value))
    }),
    ...(storage.deleteFenced === undefined ? {} : {
      deleteFenced: (key: string, fence: Fence) => guard("deleteFenced", key, storage.deleteFenced!(key, fence))
    })
  })
  return {
    storage: wrapped,
    operations,
    writes: () => writes,
    crashed: () => crashed,
    awaitCrash: Deferred.await(crash)
  }
}
