/**
 * The inspector's executions list, kept cheap at 10,000 executions and more: rather
 * than reading every snapshot on every request (what `executions list` does once),
 * it keeps each execution's row and, per request, lists the execution index (keys
 * only) and re-reads
 * - executions new to the index;
 * - the executions on the page asked for, so what is shown is read now;
 * - executions that hold a lease (a renewal rewrites it in place);
 * - the next {@link SWEEP} executions in turn, so a row off the page is never staler
 *   than one sweep of the whole index (10,000 executions: 50 requests).
 * Filtering, searching, sorting and paging then run over the kept rows. Measured in
 * bench/inspector.ts; see docs/inspector.md#how-fast.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import type { StorageError } from "../Errors.ts"
import * as Executions from "../cli/Executions.ts"
import { silent } from "../cli/ReadModel.ts"
import { ledgerPrefix } from "../schema/LedgerEntry.ts"
import { INDEX_PREFIX } from "../services/CheckpointStore.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"

/** How many executions beyond the page each refresh reads again, in turn, so every kept row is re-read every so often. */
export const SWEEP = 50


/** The kept rows of every execution, refreshed on demand. */
export interface ExecutionIndex {
  /**
   * Lists the executions again, reads the new ones, the page `visible` picks from the
   * kept rows, every leased one and the next {@link SWEEP} in turn, and returns every
   * row, newest checkpoint first.
   */
  readonly refresh: (now: number, visible: (rows: ReadonlyArray<Executions.ExecutionRow>) => ReadonlyArray<string>) => Effect.Effect<
    ReadonlyArray<Executions.ExecutionRow>,
    StorageError
  >
}

/** An index over `storage`'s executions; nothing is read until the first refresh. */
export const make = (storage: StorageAdapterShape): Effect.Effect<ExecutionIndex> =>
  Effect.gen(function*() {
    const lock = yield* Semaphore.make(1)
    const kept = new Map<string, Executions.ExecutionRow>()
    let sorted: ReadonlyArray<Executions.ExecutionRow> = []
    let cursor = 0
    // What listing costs here: every execution key at once, or one execution's ledger keys
    // (a file storage reads its whole directory either way; a database reads a range).
    let wholeMs: number | undefined
    let eachMs: number | undefined
    const timed = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.map(Effect.timed(effect), ([duration, value]) => [Duration.toMillis(duration), value] as const)
    const ledgerKeys = (wanted: ReadonlyArray<string>): Effect.Effect<{
      readonly keys: ReadonlyArray<string>
      readonly listing: "every execution key" | "ledger keys"
    }, StorageError> =>
      Effect.gen(function*() {
        if (eachMs === undefined && wanted.length > 0) {
          const [ms, first] = yield* timed(storage.list(ledgerPrefix(wanted[0]!)))
          eachMs = ms
          if (wanted.length === 1) return { keys: first, listing: "ledger keys" as const }
        }
        if (wholeMs === undefined || (eachMs !== undefined && eachMs * wanted.length < wholeMs)) {
          if (wholeMs !== undefined || wanted.length === 1) {
            const keys = (yield* Effect.forEach(wanted, (id) => storage.list(ledgerPrefix(id)), { concurrency: 16 })).flat().sort()
            return { keys, listing: "ledger keys" as const }
          }
        }
        const [ms, all] = yield* timed(storage.list("execution:"))
        wholeMs = ms
        return { keys: all, listing: "every execution key" as const }
      })
    const refresh: ExecutionIndex["refresh"] = (now, visible) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const ids = (yield* storage.list(INDEX_PREFIX)).map((key) => key.slice(INDEX_PREFIX.length))
        const present = new Set(ids)
        for (const id of kept.keys()) if (!present.has(id)) kept.delete(id)
        const stale = new Set<string>()
        for (const id of ids) {
          const known = kept.get(id)
          if (known === undefined || known.lease !== null) stale.add(id)
        }
        for (const id of visible(sorted)) if (present.has(id)) stale.add(id)
        for (let i = 0; i < Math.min(SWEEP, ids.length); i++) stale.add(ids[(cursor + i) % ids.length]!)
        cursor = ids.length === 0 ? 0 : (cursor + SWEEP) % ids.length
        if (stale.size > 0) {
          const wanted = [...stale]
          const { keys, listing } = yield* ledgerKeys(wanted)
          for (const row of yield* Executions.rowsFor(storage, wanted, keys, silent, now, listing)) kept.set(row.executionId, row)
        }
        sorted = Executions.sortRows([...kept.values()])
        return sorted
      }))
    return { refresh }
  })
