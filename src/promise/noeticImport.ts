/**
 * `importNoeticData`: brings a directory written by noetic's `createFileStorage` (its
 * checkpoints, step ledgers and subprocess manifests) into noetic-effect storages.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { roots } from "../NoeticHome.ts"
import { importNoeticDirectory } from "../NoeticImport.ts"
import { createFileStorage, runForFacade, type StorageAdapter, toEngineStorage } from "./storage.ts"

/** Where `importNoeticData` writes. */
export interface ImportNoeticOptions {
  /** The storage behind your checkpoint store. Default: `createFileStorage()` ($NOETIC_HOME/checkpoints). */
  readonly storage?: StorageAdapter
  /** Where subprocess manifests go. Default: files under $NOETIC_HOME/subprocess (the local adapter's root). */
  readonly subprocessStorage?: StorageAdapter
  /** The largest file read, in bytes (default 64 MiB); a larger one is reported in `failures`, not read. */
  readonly maxFileBytes?: number
  /** The deepest nesting of arrays and objects in a record (default 512); a deeper one is reported, not read. */
  readonly maxDepth?: number
}

/** A record the import could not read or convert; the others were imported. */
export interface NoeticImportFailure {
  /** The decoded key, or the file name when it does not decode. */
  readonly key: string
  readonly file: string
  readonly kind: "snapshot" | "ledger" | "manifest" | "file"
  readonly message: string
}

/** What `importNoeticData` brought over. */
export interface NoeticImportResult {
  readonly snapshots: number
  readonly ledgerEntries: number
  readonly manifests: number
  readonly executionIds: ReadonlyArray<string>
  /** noetic's auxiliary keys, which carry nothing noetic-effect reads. */
  readonly skipped: ReadonlyArray<string>
  readonly failures: ReadonlyArray<NoeticImportFailure>
  /** Entries that are not regular files (symbolic links, FIFOs, devices...), with what they are: never opened. */
  readonly notRead: ReadonlyArray<{ readonly file: string; readonly type: string }>
}

/**
 * Reads `directory` in noetic's on-disk format (one `<encoded key>.json` per key) and
 * writes every snapshot, ledger entry and manifest into `options.storage` (manifests
 * into `options.subprocessStorage`). Resolves with counts, every record it could
 * not read and every entry it did not open (only regular files inside `directory` are read); rejects only when the directory cannot be listed or a write fails. After
 * it, `harness.resume(executionId)` replays the imported execution's recorded steps.
 */
export const importNoeticData = (directory: string, options: ImportNoeticOptions = {}): Promise<NoeticImportResult> =>
  runForFacade(Effect.gen(function*() {
    const checkpoints = yield* toEngineStorage(options.storage ?? createFileStorage())
    const subprocess = yield* toEngineStorage(options.subprocessStorage ?? createFileStorage({ root: roots().subprocess }))
    const report = yield* importNoeticDirectory(directory, { checkpoints, subprocess }, {
      maxFileBytes: options.maxFileBytes,
      maxDepth: options.maxDepth
    })
    return {
      ...report,
      failures: report.failures.map(({ file, key, kind, message }) => ({ key, file, kind, message }))
    }
  }))
