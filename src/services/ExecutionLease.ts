/**
 * Execution leases: which host may write an execution's snapshots and ledger.
 *
 * The lease of an execution is one record at `execution:<id>:lease`:
 * `{ version: 1, executionId, owner, token, expiresAt }`, changed only by
 * compare-and-set. Acquiring bumps `token`; every write of a leased execution goes
 * through {@link fencedStorage}, which the storage checks against the token in the
 * same atomic step as the write (one statement on Postgres, the fence key's lock on
 * a file storage). A host paused past its lease's expiry whose lease was taken over
 * therefore cannot land a single write afterwards: the fence, not its clock, stops it.
 *
 * Release keeps the record (its expiry set to 0) rather than deleting it: the token
 * must only ever grow, or a paused holder of an old token could find it current again.
 * For the same reason `CheckpointStore.clear` leaves the lease record in place.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Corrupt, StorageError } from "../Errors.ts"
import { type Fence, make as makeStorage, StorageAdapter, type StorageAdapterShape } from "./StorageAdapter.ts"

/** The key of an execution's lease record. */
export const leaseKey = (executionId: string): string => `execution:${executionId}:lease`

/** The lease record as stored; `expiresAt` is epoch milliseconds, 0 once released. */
export const ExecutionLeaseRecord = Schema.Struct({
  version: Schema.Literal(1),
  executionId: Schema.String,
  owner: Schema.String,
  token: Schema.Int,
  expiresAt: Schema.Number
})

/** A lease as stored, and what `acquire` and `renew` hand back to the holder. */
export type ExecutionLeaseRecord = typeof ExecutionLeaseRecord.Type

/** Another live owner holds the lease of the execution. */
export class ExecutionLeaseHeld extends Schema.TaggedError<ExecutionLeaseHeld>("noetic-effect/ExecutionLeaseHeld")(
  "ExecutionLeaseHeld",
  {
    executionId: Schema.String,
    /** The owner holding it. */
    owner: Schema.String,
    /** When its lease expires unless renewed, epoch milliseconds. */
    expiresAt: Schema.Number
  }
) {
  /** The error code. */
  get code(): "EXECUTION_LEASE_HELD" {
    return "EXECUTION_LEASE_HELD"
  }
  override get message(): string {
    return `execution ${JSON.stringify(this.executionId)} is leased by ${JSON.stringify(this.owner)} until ${
      new Date(this.expiresAt).toISOString()
    }`
  }
}

/** The lease this holder had was taken over (or its record vanished); its writes are refused from now on. */
export class ExecutionLeaseLost extends Schema.TaggedError<ExecutionLeaseLost>("noetic-effect/ExecutionLeaseLost")(
  "ExecutionLeaseLost",
  {
    executionId: Schema.String,
    owner: Schema.String,
    /** The token this holder had. */
    token: Schema.Number
  }
) {
  /** The error code. */
  get code(): "EXECUTION_LEASE_LOST" {
    return "EXECUTION_LEASE_LOST"
  }
  override get message(): string {
    return `the lease of execution ${JSON.stringify(this.executionId)} held by ${
      JSON.stringify(this.owner)
    } (token ${this.token}) was taken over; this host must stop writing it`
  }
}

/** The storage cannot hold leases: it lacks compare-and-set or fenced writes. */
export class ExecutionLeaseUnsupported extends Schema.TaggedError<ExecutionLeaseUnsupported>(
  "noetic-effect/ExecutionLeaseUnsupported"
)("ExecutionLeaseUnsupported", { executionId: Schema.String }) {
  /** The error code. */
  get code(): "EXECUTION_LEASE_UNSUPPORTED" {
    return "EXECUTION_LEASE_UNSUPPORTED"
  }
  override get message(): string {
    return `cannot lease execution ${
      JSON.stringify(this.executionId)
    }: leases need a storage with compareAndSet, setFenced and deleteFenced (the memory, file and Postgres storages have them)`
  }
}

/** Any failure of taking, keeping or using a lease. */
export type ExecutionLeaseError = ExecutionLeaseHeld | ExecutionLeaseLost | ExecutionLeaseUnsupported

/** A storage that can hold leases and fence writes by them. */
export type FencingStorage = StorageAdapterShape & Required<
  Pick<StorageAdapterShape, "compareAndSet" | "setFenced" | "deleteFenced">
>

/** Whether `storage` can hold leases. */
export const supportsLeases = (storage: StorageAdapterShape): storage is FencingStorage =>
  storage.compareAndSet !== undefined && storage.setFenced !== undefined && storage.deleteFenced !== undefined

/** How a lease is taken. */
export interface AcquireOptions {
  /** Who takes it: a host incarnation. The same owner may take over its own live lease. */
  readonly owner: string
  /** How long the lease lasts unless renewed. */
  readonly ttl: Duration.Input
}

/** The operations on execution leases of one storage. */
export interface ExecutionLeaseShape {
  /**
   * Takes the lease of an execution: free, released, expired, or held by the same
   * owner. The token is one above the previous record's. Fails with
   * `ExecutionLeaseHeld` while another owner's lease is live.
   */
  readonly acquire: (
    executionId: string,
    options: AcquireOptions
  ) => Effect.Effect<ExecutionLeaseRecord, ExecutionLeaseHeld | ExecutionLeaseUnsupported | StorageError>
  /** Extends a held lease by `ttl` from now; `ExecutionLeaseLost` when its token is no longer current. */
  readonly renew: (
    lease: ExecutionLeaseRecord,
    ttl: Duration.Input
  ) => Effect.Effect<ExecutionLeaseRecord, ExecutionLeaseLost | StorageError>
  /** Gives a held lease up so the next owner can take it at once; `ExecutionLeaseLost` when it was taken over. */
  readonly release: (lease: ExecutionLeaseRecord) => Effect.Effect<void, ExecutionLeaseLost | StorageError>
  /** The lease record of an execution, if it ever had one. */
  readonly current: (executionId: string) => Effect.Effect<Option.Option<ExecutionLeaseRecord>, StorageError>
}

/** Execution leases over the storage in context. */
export class ExecutionLease extends Context.Service<ExecutionLease, ExecutionLeaseShape>()(
  "noetic-effect/ExecutionLease"
) {}

/** Lease writes always carry the fence of the holder's token. */
const fenceOf = (lease: { readonly executionId: string; readonly token: number }): Fence => ({
  key: leaseKey(lease.executionId),
  token: lease.token
})

/**
 * A view of `storage` whose writes land only while `lease` is current: `set` and
 * `delete` become fenced writes that fail with reason `Conflict` once the lease was
 * taken over. Reads pass through; compare-and-set is not offered.
 */
export const fencedStorage = (
  storage: FencingStorage,
  lease: { readonly executionId: string; readonly token: number }
): StorageAdapterShape => {
  const fence = fenceOf(lease)
  return makeStorage({
    get: storage.get,
    list: storage.list,
    // Reads need no fence; keeping scan keeps a leased ledger load one query on Postgres.
    getMany: storage.getMany,
    scan: storage.scan,
    ...(storage.scanText === undefined ? {} : { scanText: storage.scanText }),
    set: (key, value) => storage.setFenced(key, value, fence),
    delete: (key) => storage.deleteFenced(key, fence)
  })
}

const decodeRecord = Schema.decodeUnknownEffect(ExecutionLeaseRecord)

/** A ttl as milliseconds; a lease that never expires or is already over is a caller's bug. */
const ttlMillis = (ttl: Duration.Input): Effect.Effect<number> =>
  Effect.suspend(() => {
    const millis = Duration.toMillis(ttl)
    return Number.isFinite(millis) && millis > 0
      ? Effect.succeed(millis)
      : Effect.die(new RangeError(`an execution lease ttl must be finite and positive, got ${millis} ms`))
  })

/** Execution leases over `storage`; the dependency is explicit for the harness and the Promise facade. */
export const makeWith = (storage: StorageAdapterShape): Effect.Effect<ExecutionLeaseShape> =>
  Effect.sync(() => {
    /** The stored value (compare-and-set expects its exact JSON) and the record it decodes to. */
    const read = Effect.fnUntraced(function*(operation: string, executionId: string) {
      const key = leaseKey(executionId)
      const stored = yield* storage.get(key)
      if (Option.isNone(stored)) return Option.none<{ raw: unknown; record: ExecutionLeaseRecord }>()
      const record = yield* decodeRecord(stored.value).pipe(
        Effect.mapError((error) =>
          new StorageError({ operation, reason: new Corrupt({ key, message: `not a lease record: ${error.message}` }) })
        )
      )
      return Option.some({ raw: stored.value, record })
    })

    const acquire = Effect.fn("ExecutionLease.acquire")(function*(executionId: string, options: AcquireOptions) {
      if (!supportsLeases(storage)) return yield* new ExecutionLeaseUnsupported({ executionId })
      const ttl = yield* ttlMillis(options.ttl)
      // A lost compare-and-set means someone else changed the record: read it again
      // and decide anew (usually: it is now held).
      for (;;) {
        const current = yield* read("acquire", executionId)
        const now = yield* Clock.currentTimeMillis
        if (Option.isSome(current)) {
          const { record } = current.value
          if (record.owner !== options.owner && record.expiresAt > now) {
            return yield* new ExecutionLeaseHeld({ executionId, owner: record.owner, expiresAt: record.expiresAt })
          }
        }
        const next: ExecutionLeaseRecord = {
          version: 1,
          executionId,
          owner: options.owner,
          token: Option.isSome(current) ? current.value.record.token + 1 : 1,
          expiresAt: now + ttl
        }
        const expected = Option.map(current, ({ raw }) => raw)
        if (yield* storage.compareAndSet(leaseKey(executionId), expected, next)) return next
      }
    })

    /** Replaces a held lease's record by `change(current)` while its token is current. */
    const update = Effect.fnUntraced(function*(
      operation: string,
      lease: ExecutionLeaseRecord,
      change: (current: ExecutionLeaseRecord) => Effect.Effect<ExecutionLeaseRecord>
    ) {
      const lost = new ExecutionLeaseLost({ executionId: lease.executionId, owner: lease.owner, token: lease.token })
      if (storage.compareAndSet === undefined) return yield* lost
      // Compared by token, not by the last record this holder wrote: a renew that
      // landed but was interrupted before it returned must not look like a takeover.
      for (;;) {
        const current = yield* read(operation, lease.executionId)
        if (Option.isNone(current) || current.value.record.token !== lease.token) return yield* lost
        const next = yield* change(current.value.record)
        if (yield* storage.compareAndSet(leaseKey(lease.executionId), Option.some(current.value.raw), next)) {
          return next
        }
      }
    })

    const renew = Effect.fn("ExecutionLease.renew")(function*(lease: ExecutionLeaseRecord, ttl: Duration.Input) {
      const millis = yield* ttlMillis(ttl)
      return yield* update(
        "renew",
        lease,
        (current) => Effect.map(Clock.currentTimeMillis, (now) => ({ ...current, expiresAt: now + millis }))
      )
    })

    const release = Effect.fn("ExecutionLease.release")(function*(lease: ExecutionLeaseRecord) {
      yield* update("release", lease, (current) => Effect.succeed({ ...current, expiresAt: 0 }))
    })

    const current = (executionId: string) =>
      Effect.map(read("current", executionId), Option.map(({ record }) => record))

    return ExecutionLease.of({ acquire, renew, release, current })
  })

/** Execution leases over the `StorageAdapter` in context. */
export const make: Effect.Effect<ExecutionLeaseShape, never, StorageAdapter> = Effect.gen(function*() {
  return yield* makeWith(yield* StorageAdapter)
})

/** Execution leases over the `StorageAdapter` the layer is given. */
export const layer: Layer.Layer<ExecutionLease, never, StorageAdapter> = Layer.effect(ExecutionLease, make)
