/**
 * The tagged failures every noetic-effect service speaks in.
 *
 * Config errors carry the stable `code` of the documented API (the Promise facade
 * rethrows them as `NoeticConfigError { code, message, hint }`). Storage failures are
 * one `StorageError` with a tagged `reason`, in the manner of `effect/sql/SqlError`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** The codes of the documented configuration errors (noetic's; `NoeticConfigError.code` is any string). */
export type ConfigErrorCode =
  | "CHECKPOINT_SCHEMA_MISMATCH"
  | "STEP_LEDGER_RETENTION_INVALID"
  | "NO_STEP_CONFIGURED"
  | "EMPTY_STEP_ID"
  | "MISSING_EXECUTE_FUNCTION"
  | "MISSING_CHILD_STEP"
  | "MISSING_LOOP_BODY"
  | "MISSING_UNTIL_PREDICATE"
  | "MISSING_MERGE_FUNCTION"
  | "MISSING_ROUTE_FUNCTION"
  | "MISSING_MODEL"
  | "MISSING_TOOL"
  | "AT_MOST_ONCE_RETRY_CONFLICT"
  | "STEP_LEDGER_DURABILITY_INVALID"
  | "SUBPROCESS_ADAPTER_UNSUPPORTED"
  | "SUBPROCESS_STORAGE_UNSUPPORTED"

/** A persisted snapshot has an unknown `schemaVersion` or does not match the v2 schema. */
export class CheckpointSchemaMismatch extends Schema.TaggedError<CheckpointSchemaMismatch>(
  "noetic-effect/CheckpointSchemaMismatch"
)("CheckpointSchemaMismatch", {
  executionId: Schema.String,
  /** The `schemaVersion` found in the record, or null when it had none. */
  seenVersion: Schema.NullOr(Schema.Unknown),
  message: Schema.String,
  hint: Schema.String
}) {
  /** The documented error code. */
  get code(): "CHECKPOINT_SCHEMA_MISMATCH" {
    return "CHECKPOINT_SCHEMA_MISMATCH"
  }
}

/** A step-ledger retention cap is below 1 (a fraction included) or NaN. */
export class StepLedgerRetentionInvalid extends Schema.TaggedError<StepLedgerRetentionInvalid>(
  "noetic-effect/StepLedgerRetentionInvalid"
)("StepLedgerRetentionInvalid", {
  field: Schema.Literals(["maxEntryBytes", "maxEntries"]),
  value: Schema.Number,
  message: Schema.String,
  hint: Schema.String
}) {
  /** The documented error code. */
  get code(): "STEP_LEDGER_RETENTION_INVALID" {
    return "STEP_LEDGER_RETENTION_INVALID"
  }
}

/** A harness's `stepLedgerDurability` is neither `"best-effort"` nor `"strict"`. */
export class StepLedgerDurabilityInvalid extends Schema.TaggedError<StepLedgerDurabilityInvalid>(
  "noetic-effect/StepLedgerDurabilityInvalid"
)("StepLedgerDurabilityInvalid", {
  message: Schema.String,
  hint: Schema.String
}) {
  /** The documented error code. */
  get code(): "STEP_LEDGER_DURABILITY_INVALID" {
    return "STEP_LEDGER_DURABILITY_INVALID"
  }
}

/** `execute()` was called on a harness that has no agent graph. */
export class NoStepConfigured extends Schema.TaggedError<NoStepConfigured>(
  "noetic-effect/NoStepConfigured"
)("NoStepConfigured", {
  harness: Schema.String,
  message: Schema.String,
  hint: Schema.String
}) {
  /** The documented error code. */
  get code(): "NO_STEP_CONFIGURED" {
    return "NO_STEP_CONFIGURED"
  }
}

/** A step was built (or dispatched, as a plain object) with an empty or blank id. */
export class EmptyStepId extends Schema.TaggedError<EmptyStepId>("noetic-effect/EmptyStepId")("EmptyStepId", {
  kind: Schema.String,
  message: Schema.String,
  hint: Schema.String
}) {
  /** The documented error code. */
  get code(): "EMPTY_STEP_ID" {
    return "EMPTY_STEP_ID"
  }
}

/**
 * A step builder was given options it cannot build from: noetic's build-time codes
 * (`MISSING_EXECUTE_FUNCTION`, `MISSING_CHILD_STEP`, `MISSING_LOOP_BODY`,
 * `MISSING_UNTIL_PREDICATE`, `MISSING_MERGE_FUNCTION`, `MISSING_ROUTE_FUNCTION`,
 * `MISSING_MODEL`, `MISSING_TOOL`) and this library's checks of numeric options.
 * Builders throw it, as noetic's throw `NoeticConfigError`.
 */
export class StepConfigInvalid extends Schema.TaggedError<StepConfigInvalid>("noetic-effect/StepConfigInvalid")(
  "StepConfigInvalid",
  {
    kind: Schema.String,
    code: Schema.String,
    message: Schema.String,
    hint: Schema.String
  }
) {}

/** Any of the documented configuration errors. */
export type ConfigError =
  | CheckpointSchemaMismatch
  | StepLedgerRetentionInvalid
  | StepLedgerDurabilityInvalid
  | NoStepConfigured
  | EmptyStepId
  | StepConfigInvalid

// ---------------------------------------------------------------------------
// StorageError
// ---------------------------------------------------------------------------

const ReasonFields = {
  key: Schema.String,
  message: Schema.String
}

/** A stored record exists but cannot be decoded (torn write, foreign file, bad JSON). */
export class Corrupt extends Schema.TaggedError<Corrupt>("noetic-effect/StorageError/Corrupt")(
  "Corrupt",
  ReasonFields
) {
  /** The error code. */
  get code(): "CORRUPT" {
    return "CORRUPT"
  }
}

/** The backend failed to read or write (disk, network, database). */
export class Io extends Schema.TaggedError<Io>("noetic-effect/StorageError/Io")("Io", {
  ...ReasonFields,
  cause: Schema.Defect()
}) {
  /** The error code. */
  get code(): "IO" {
    return "IO"
  }
}

/** The backend refused access (file mode, ownership, database grants). */
export class Permission extends Schema.TaggedError<Permission>("noetic-effect/StorageError/Permission")(
  "Permission",
  { ...ReasonFields, cause: Schema.Defect() }
) {
  /** The error code. */
  get code(): "PERMISSION" {
    return "PERMISSION"
  }
}

/**
 * The value cannot be stored as JSON (a cycle, a bigint, a function), or the key cannot
 * name a record (empty, or not well-formed Unicode: see `keyProblem` in StorageAdapter).
 */
export class Unserializable extends Schema.TaggedError<Unserializable>(
  "noetic-effect/StorageError/Unserializable"
)("Unserializable", ReasonFields) {
  /** The error code. */
  get code(): "UNSERIALIZABLE" {
    return "UNSERIALIZABLE"
  }
}

/** A compare-and-set found a different value than the caller expected. */
export class Conflict extends Schema.TaggedError<Conflict>("noetic-effect/StorageError/Conflict")(
  "Conflict",
  ReasonFields
) {
  /** The error code. */
  get code(): "CONFLICT" {
    return "CONFLICT"
  }
}

/** Why a storage operation failed. */
export const StorageErrorReason = Schema.Union([Corrupt, Io, Permission, Unserializable, Conflict])

/** Why a storage operation failed. */
export type StorageErrorReason = typeof StorageErrorReason.Type

/** A storage operation failed; `reason` says how. A missing key is not an error. */
export class StorageError extends Schema.TaggedError<StorageError>("noetic-effect/StorageError")("StorageError", {
  operation: Schema.String,
  reason: StorageErrorReason
}) {
  /** The error code: `STORAGE_` then the reason's code. */
  get code(): `STORAGE_${StorageErrorReason["code"]}` {
    return `STORAGE_${this.reason.code}`
  }
  override get message(): string {
    return `${this.operation} ${JSON.stringify(this.reason.key)}: ${this.reason._tag}: ${this.reason.message}`
  }
}
