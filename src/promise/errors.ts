/**
 * The error classes of the Promise facade, and the mapping from tagged failures.
 *
 * @since 0.1.0
 */
import { Cause, Exit } from "effect"
import type { ConfigError, ConfigErrorCode } from "../Errors.ts"

/** A configuration problem the caller must fix: one of the documented codes, with a hint. */
export class NoeticConfigError extends Error {
  override readonly name = "NoeticConfigError"
  /** The documented code, e.g. `CHECKPOINT_SCHEMA_MISMATCH`. */
  readonly code: ConfigErrorCode
  /** What to do about it. */
  readonly hint: string
  constructor(options: { code: ConfigErrorCode; message: string; hint: string; cause?: unknown }) {
    super(options.message, { cause: options.cause })
    this.code = options.code
    this.hint = options.hint
  }
}

/** A runtime failure; `code` names what failed and `cause` holds the tagged error. */
export class NoeticError extends Error {
  override readonly name = "NoeticError"
  /** A stable code, e.g. `STORAGE_CORRUPT` or `UNKNOWN_HANDLE`. */
  readonly code: string
  constructor(options: { code: string; message: string; cause?: unknown }) {
    super(options.message, { cause: options.cause })
    this.code = options.code
  }
}

const CONFIG_TAGS = new Set([
  "CheckpointSchemaMismatch",
  "StepLedgerRetentionInvalid",
  "NoStepConfigured",
  "EmptyStepId"
])

const isConfigError = (error: unknown): error is ConfigError =>
  typeof error === "object" && error !== null && "_tag" in error && CONFIG_TAGS.has(String(error._tag))

/** SCREAMING_SNAKE from PascalCase: `UnknownHandle` to `UNKNOWN_HANDLE`. */
const screamingSnake = (tag: string): string => tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()

/** The facade error for a typed failure of the engine. */
export const toFacadeError = (error: unknown): Error => {
  if (isConfigError(error)) {
    return new NoeticConfigError({ code: error.code, message: error.message, hint: error.hint, cause: error })
  }
  if (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string") {
    const reason = "reason" in error && typeof error.reason === "object" && error.reason !== null &&
        "_tag" in error.reason && typeof error.reason._tag === "string"
      ? `_${screamingSnake(error.reason._tag)}`
      : ""
    const code = screamingSnake(error._tag.replace(/Error$/, "")) + reason
    const message = error instanceof Error ? error.message : String(error._tag)
    return new NoeticError({ code, message, cause: error })
  }
  return error instanceof Error ? error : new NoeticError({ code: "UNKNOWN", message: String(error), cause: error })
}

// Objects a host's step body threw. They are not the engine's failures, whatever their
// shape (an error with a `_tag` of its own), so they are never mapped.
const thrownByHost = new WeakSet<object>()

/** Marks what a host's step body threw, so `unwrapExit` rethrows it exactly as it was thrown. */
export const hostThrown = (error: unknown): unknown => {
  if (typeof error === "object" && error !== null) thrownByHost.add(error)
  return error
}

/** Unwraps an exit for a Promise caller: the value, or the facade error thrown. */
export const unwrapExit = <A, E>(exit: Exit.Exit<A, E>): A => {
  if (Exit.isSuccess(exit)) return exit.value
  const failure = exit.cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) {
    // The engine fails only with tagged objects: anything else is what a body threw.
    const error = failure.error
    if (typeof error !== "object" || error === null || thrownByHost.has(error)) throw error
    throw toFacadeError(error)
  }
  throw Cause.squash(exit.cause)
}
