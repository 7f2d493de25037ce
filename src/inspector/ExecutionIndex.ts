/**
 * The inspector's executions list, kept cheap at 10,000 executions and more: rather
 * than reading every snapshot on every request (what `executions list` does once),
 * it keeps each execution's row and re-reads only
 * - executions whose keys moved since the last listing (a new ledger record, a first
 *   snapshot, a lease), found by comparing two key listings (no values read);
 * - the executions on the page asked for (a snapshot rewritten in place moves no key);
 * - executions that hold a lease (a renewal rewrites it in place).
 * Filtering, searching, sorting and paging then run over the kept rows. Measured in
 * bench/inspector.ts; see docs/inspector.md#how-fast.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import type { StorageError } from "../Errors.ts"
import * as Executions from "../cli/Executions.ts"
import { silent } from "../cli/ReadModel.ts"
import { INDEX_PREFIX } from "../services/CheckpointStore.ts"
import type { StorageAdapterShape } from "../services/StorageAdapter.ts"

/** What a key listing says of one execution: changed when any part changes. */
const signature = (keys: ReadonlyArray<string>, keySet: ReadonlySet<string>, id: string): string => {
  const seqs = Executions.ledgerSeqsOf(keys, id)
  const snapshot = keySet.has(`execution:${id}:snapshot`) ? "s" : "-"
  const lease = keySet.has(`execution:${id}:lease`) ? "l" : "-"
  return `${seqs.length}:${seqs.length === 0 ? -1 : seqs[seqs.length - 1]}:${snapshot}${lease}`
}

/** The kept rows of every execution, refreshed on demand. */
export interface ExecutionIndex {
  /**
   * Lists the keys again, re-reads what moved plus `visible` (and every leased
   * execution), and returns every row, newest checkpoint first.
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
    const kept = new Map<string, { readonly row: Executions.ExecutionRow; readonly signature: string }>()
    let sorted: ReadonlyArray<Executions.ExecutionRow> = []
    const refresh: ExecutionIndex["refresh"] = (now, visible) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const ids = (yield* storage.list(INDEX_PREFIX)).map((key) => key.slice(INDEX_PREFIX.length))
        const keys = ids.length === 0 ? [] : yield* storage.list("execution:")
        const keySet = new Set(keys)
        const present = new Set(ids)
        for (const id of kept.keys()) if (!present.has(id)) kept.delete(id)
        const signatures = new Map(ids.map((id) => [id, signature(keys, keySet, id)]))
        const stale = new Set<string>()
        for (const id of ids) {
          const known = kept.get(id)
          if (known === undefined || known.signature !== signatures.get(id) || known.row.lease !== null) stale.add(id)
        }
        // The page asked for, as the rows kept so far order it.
        for (const id of visible(sorted)) if (present.has(id)) stale.add(id)
        if (stale.size > 0) {
          const rows = yield* Executions.rowsFor(storage, [...stale], keys, silent, now)
          for (const row of rows) kept.set(row.executionId, { row, signature: signatures.get(row.executionId)! })
        }
        sorted = Executions.sortRows([...kept.values()].map((entry) => entry.row))
        return sorted
      }))
    return { refresh }
  })
