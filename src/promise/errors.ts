/**
 * The error classes of the Promise facade, and the mapping from tagged failures.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import type { ConfigError } from "../Errors.ts"

/**
 * A configuration problem the caller must fix, thrown at construction or build time
 * (noetic's `NoeticConfigError`): a SCREAMING_SNAKE `code`, a message and a `hint`
 * saying what to do.
 */
export class NoeticConfigError extends Error {
  override readonly name = "NoeticConfigError"
  /** The code, e.g. `EMPTY_STEP_ID` or `CHECKPOINT_SCHEMA_MISMATCH`. */
  readonly code: string
  /** What to do about it, as a complete sentence. */
  readonly hint: string
  /** A page about it, when there is one. */
  readonly docsUrl?: string
  constructor(options: { code: string; message: string; hint: string; docsUrl?: string; cause?: unknown }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause })
    this.code = options.code
    this.hint = options.hint
    if (options.docsUrl !== undefined) this.docsUrl = options.docsUrl
  }
}

/** Whether `u` is a `NoeticConfigError` (also one made by another copy of this module). */
export const isNoeticConfigError = (u: unknown): u is NoeticConfigError =>
  u instanceof NoeticConfigError ||
  (u instanceof Error && u.name === "NoeticConfigError" && typeof (u as { code?: unknown }).code === "string" &&
    typeof (u as { hint?: unknown }).hint === "string")

/** noetic's structured run-time error payload; `kind` says which failure it is. */
export type NoeticErrorPayload =
  | { readonly kind: "step_failed"; readonly stepId: string; readonly cause: Error; readonly retriesExhausted: boolean }
  | { readonly kind: "cancelled"; readonly reason?: string }
  | { readonly kind: "handle_evicted"; readonly handleId: string; readonly stepId: string; readonly gracePeriod: number }
  | { readonly kind: string; readonly stepId?: string; readonly cause?: Error; readonly [field: string]: unknown }

/**
 * A run-time failure. `noeticError` is noetic's payload (`{ kind: 'step_failed',
 * stepId, cause }` for a failed step), `code` this library's code for it
 * (`STORAGE_CORRUPT`, `SPAWN_TIMEOUT`, ...) and `cause` the tagged error underneath.
 */
export class NoeticError extends Error {
  override readonly name = "NoeticError"
  /** A stable code, e.g. `STORAGE_CORRUPT` or `UNKNOWN_HANDLE`. */
  readonly code: string
  /** noetic's structured payload; `isNoeticError` recognises an error by it. */
  readonly noeticError: NoeticErrorPayload
  constructor(options: { code: string; message: string; cause?: unknown; noeticError?: NoeticErrorPayload }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause })
    this.code = options.code
    this.noeticError = options.noeticError ??
      { kind: options.code.toLowerCase(), cause: asError(options.cause ?? options.message) }
  }
}

/** noetic's message for a payload (its `formatMessage`). */
const formatPayload = (error: NoeticErrorPayload): string => {
  const e = error as Record<string, any>
  switch (error.kind) {
    case "step_failed":
      return `Step '${e.stepId}' failed: ${e.cause?.message ?? String(e.cause)}`
    case "model_refused":
      return `Model refused at step '${e.stepId}': ${e.refusal}`
    case "model_parse_error":
      return `Model parse error at step '${e.stepId}': failed to parse output`
    case "model_rate_limit":
      return `Model rate limited at step '${e.stepId}'${e.retryAfter ? ` (retry after ${e.retryAfter}ms)` : ""}`
    case "cancelled":
      return `Cancelled${e.reason ? `: ${e.reason}` : ""}`
    case "item_schema_mismatch":
      return e.itemType
        ? `Item type '${e.itemType}' did not match any registered item extension schema.`
        : `Item did not match any registered ${e.category} extension schema.`
    case "handle_evicted":
      return `Subprocess handle '${e.handleId}' evicted (step '${e.stepId}'): adapter returned null for ${e.gracePeriod}ms`
    default:
      return typeof e.message === "string" ? e.message : `NoeticError: ${error.kind}`
  }
}

/**
 * noetic's `NoeticErrorImpl`, with its constructor: `new NoeticErrorImpl({ kind:
 * 'model_rate_limit', stepId, retryAfter })`. A `NoeticError` whose code is the kind
 * in capitals.
 */
export class NoeticErrorImpl extends NoeticError {
  constructor(error: NoeticErrorPayload) {
    const cause = (error as { readonly cause?: unknown }).cause
    super({
      code: error.kind.toUpperCase(),
      message: formatPayload(error),
      ...(cause === undefined ? {} : { cause }),
      noeticError: error
    })
  }
}

/** Whether `u` is a run-time `NoeticError`: an Error carrying a `noeticError { kind }` (noetic's check). */
export const isNoeticError = (u: unknown): u is NoeticError => {
  if (u instanceof NoeticError) return true
  if (!(u instanceof Error) || !("noeticError" in u)) return false
  const inner = (u as { noeticError: unknown }).noeticError
  return typeof inner === "object" && inner !== null && "kind" in inner && typeof inner.kind === "string"
}

/** An Error for a thrown value of any kind (noetic's payloads carry Errors). */
export const asError = (u: unknown): Error => {
  if (u instanceof Error) return u
  // The value itself stays reachable as the Error's cause.
  if (typeof u === "object" && u !== null && "message" in u && typeof u.message === "string") {
    return new Error(u.message, { cause: u })
  }
  let text: string
  try {
    text = typeof u === "string" ? u : JSON.stringify(u) ?? String(u)
  } catch {
    text = String(u)
  }
  return new Error(text, { cause: u })
}

/** The error a failed step rejects with: noetic's `step_failed` for `stepId`, caused by `cause`. */
export const stepFailed = (stepId: string, cause: unknown, retriesExhausted = false): NoeticError => {
  const error = asError(cause)
  return new NoeticError({
    code: "STEP_FAILED",
    message: `Step '${stepId}' failed: ${error.message}`,
    cause,
    noeticError: { kind: "step_failed", stepId, cause: error, retriesExhausted }
  })
}

/** The reason of the engine `SubprocessError` that `u` is, or that the facade error `u` wraps. */
const subprocessReason = (u: unknown): { readonly _tag?: unknown; readonly [field: string]: unknown } | undefined => {
  const engine = u instanceof Error && !("_tag" in u) ? u.cause : u
  if (typeof engine !== "object" || engine === null || !("_tag" in engine) || engine._tag !== "SubprocessError") {
    return undefined
  }
  const reason = (engine as { readonly reason?: unknown }).reason
  return typeof reason === "object" && reason !== null ? reason as { readonly [field: string]: unknown } : undefined
}

/** The `HandleEvicted` reason under a facade error (or an engine `SubprocessError`), if that is what `u` is. */
export const handleEvictedOf = (
  u: unknown
): { readonly handleId: string; readonly gracePeriodMs: number } | undefined => {
  const reason = subprocessReason(u)
  return reason?._tag === "HandleEvicted" && typeof reason.handleId === "string" && typeof reason.gracePeriodMs === "number"
    ? { handleId: reason.handleId, gracePeriodMs: reason.gracePeriodMs }
    : undefined
}

/** noetic's `handle_evicted`: the adapter kept answering null for a child of step `stepId` that had not settled. */
export const handleEvicted = (handleId: string, stepId: string, gracePeriod: number): NoeticError =>
  new NoeticError({
    code: "HANDLE_EVICTED",
    message: `Subprocess handle '${handleId}' evicted (step '${stepId}'): adapter returned null for ${gracePeriod}ms`,
    noeticError: { kind: "handle_evicted", handleId, stepId, gracePeriod }
  })

/** The `ChildFailed` reason under a facade error (or an engine `SubprocessError`), if that is what `u` is. */
export const childFailedReason = (u: unknown): { readonly error: unknown } | undefined => {
  const reason = subprocessReason(u)
  return reason?._tag === "ChildFailed" ? { error: reason.error } : undefined
}

/**
 * Whether a child's recorded error is a plain `{ message, name?, stack? }` (no
 * `noeticError` payload, no tag of this library's): noetic rehydrates it as a plain Error.
 */
export const isPlainRecordedError = (recorded: unknown): boolean =>
  typeof recorded === "object" && recorded !== null && typeof (recorded as { message?: unknown }).message === "string" &&
  !("noeticError" in recorded) && !("_tag" in recorded)

/**
 * The error a child failed with, rebuilt from the form an adapter keeps (JSON, or the
 * host's `metadata.error`) as noetic rehydrates it: a `noeticError` payload becomes
 * that `NoeticError` again (a `step_failed` one with its cause, which crossed as a
 * message when it crossed as JSON), anything else an Error with the message, name
 * and stack recorded.
 */
export const childError = (recorded: unknown): unknown => {
  if (typeof recorded !== "object" || recorded === null) return asError(recorded)
  const fields = recorded as {
    readonly message?: unknown
    readonly name?: unknown
    readonly stack?: unknown
    readonly noeticError?: unknown
  }
  const message = typeof fields.message === "string" ? fields.message : undefined
  const payload = fields.noeticError as
    | { readonly kind?: unknown; readonly stepId?: unknown; readonly cause?: unknown; readonly retriesExhausted?: unknown }
    | undefined
  if (typeof payload === "object" && payload !== null && typeof payload.kind === "string") {
    if (payload.kind === "step_failed" && typeof payload.stepId === "string") {
      const prefix = `Step '${payload.stepId}' failed: `
      const cause = payload.cause instanceof Error
        ? payload.cause
        : isPlainRecordedError(payload.cause)
        // The cause crossed as JSON with its name and message: a TypeError stays one by name.
        ? plainError(payload.cause as PlainRecordedError, payload.cause)
        : new Error(message === undefined ? "the child failed" : message.startsWith(prefix) ? message.slice(prefix.length) : message, {
          cause: recorded
        })
      return stepFailed(payload.stepId, cause, payload.retriesExhausted === true)
    }
    return new NoeticError({
      code: payload.kind.toUpperCase(),
      message: message ?? payload.kind,
      cause: recorded,
      noeticError: {
        ...(payload as { readonly kind: string }),
        ...(payload.cause === undefined ? {} : { cause: asError(payload.cause) })
      }
    })
  }
  return plainError(fields, recorded)
}

/** A recorded `{ message, name?, stack? }`. */
interface PlainRecordedError {
  readonly message?: unknown
  readonly name?: unknown
  readonly stack?: unknown
}

/** An Error of a recorded error's message, name and stack; `recorded` is its cause. */
const plainError = (fields: PlainRecordedError, recorded: unknown): Error => {
  const error = new Error(typeof fields.message === "string" ? fields.message : JSON.stringify(recorded), { cause: recorded })
  if (typeof fields.name === "string") error.name = fields.name
  if (typeof fields.stack === "string") error.stack = fields.stack
  return error
}

/**
 * What every configuration error of the engine carries, wherever it is raised
 * (`Errors.ts`, the harness's lease options...): a tag, a documented code, a message
 * and a hint. Run-time errors never carry a hint.
 */
const ConfigErrorFields = Schema.Struct({
  _tag: Schema.String,
  code: Schema.String,
  message: Schema.String,
  hint: Schema.String
})

/** The fields of an engine configuration error. */
export type EngineConfigError = typeof ConfigErrorFields.Type

const isConfigErrorFields = Schema.is(ConfigErrorFields)

/** Whether `error` is a configuration error of the engine (each becomes a `NoeticConfigError`), by its schema. */
export const isConfigError = (error: unknown): error is EngineConfigError | ConfigError =>
  isConfigErrorFields(error)

/**
 * SCREAMING_SNAKE from PascalCase (a trailing `Error` dropped when asked): `UnknownHandle` to
 * `UNKNOWN_HANDLE`. Only for a tagged error that carries no `code` of its own (one of
 * Effect's, a provider's): every error of this library carries its code.
 */
const codeOfTag = (tag: string, dropError: boolean): string => {
  const name = dropError && tag.endsWith("Error") ? tag.slice(0, -"Error".length) : tag
  let code = ""
  for (let i = 0; i < name.length; i++) {
    const char = name[i]!
    const previous = i === 0 ? "" : name[i - 1]!
    const boundary = char >= "A" && char <= "Z" && ((previous >= "a" && previous <= "z") || (previous >= "0" && previous <= "9"))
    code += boundary ? `_${char}` : char.toUpperCase()
  }
  return code
}

/** The code of an engine failure: the one it carries, else its tag's (and its tagged reason's). */
const codeOf = (error: { readonly _tag: string; readonly code?: unknown; readonly reason?: unknown }): string => {
  if (typeof error.code === "string") return error.code
  const reason = error.reason
  const reasonTag = typeof reason === "object" && reason !== null && "_tag" in reason && typeof reason._tag === "string"
    ? reason._tag
    : undefined
  const code = codeOfTag(error._tag, true)
  return reasonTag === undefined ? code : `${code}_${codeOfTag(reasonTag, false)}`
}

/** The facade error for a typed failure of the engine. */
export const toFacadeError = (error: unknown): Error => {
  if (isConfigError(error)) {
    return new NoeticConfigError({ code: error.code, message: error.message, hint: error.hint, cause: error })
  }
  if (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string") {
    const code = codeOf(error as { readonly _tag: string })
    const message = error instanceof Error ? error.message : String(error._tag)
    const fields = error as { readonly stepId?: unknown; readonly reason?: unknown }
    if (error._tag === "StepCancelled") {
      const reason = typeof fields.reason === "string" ? fields.reason : undefined
      return new NoeticError({
        code,
        // noetic's wording for a cancellation.
        message: reason === undefined ? "Cancelled" : `Cancelled: ${reason}`,
        cause: error,
        noeticError: reason === undefined ? { kind: "cancelled" } : { kind: "cancelled", reason }
      })
    }
    if (error._tag === "ForkPartial" && typeof fields.stepId === "string") {
      const partial = error as unknown as {
        readonly succeeded: ReadonlyArray<{ readonly stepId: string; readonly value: unknown }>
        readonly failed: ReadonlyArray<{ readonly stepId: string; readonly error: unknown }>
      }
      return new NoeticError({
        code,
        message,
        cause: error,
        noeticError: {
          kind: "fork_partial",
          stepId: fields.stepId,
          succeeded: partial.succeeded.map(({ stepId, value }) => ({ stepId, value })),
          failed: partial.failed.map(({ error: failure, stepId }) => ({ stepId, error: payloadOf(failure, stepId) }))
        }
      })
    }
    if (error._tag === "ToolFailed" && typeof fields.stepId === "string") {
      // noetic: a tool that threw a NoeticError rejects with it; anything else is the step's failure.
      const cause = (error as { readonly cause?: unknown }).cause
      return isNoeticError(cause) ? cause : stepFailed(fields.stepId, cause)
    }
    const noeticKind = (error as { readonly noeticKind?: unknown }).noeticKind
    if (typeof noeticKind === "string") {
      return new NoeticError({ code, message, cause: error, noeticError: modelPayload(noeticKind, error) })
    }
    if (typeof fields.stepId === "string") {
      const cause = asError(error)
      return new NoeticError({
        code,
        message: `Step '${fields.stepId}' failed: ${cause.message}`,
        cause: error,
        noeticError: { kind: "step_failed", stepId: fields.stepId, cause, retriesExhausted: false }
      })
    }
    return new NoeticError({ code, message, cause: error })
  }
  return error instanceof Error ? error : new NoeticError({ code: "UNKNOWN", message: String(error), cause: error })
}

/** noetic's payload of a model failure (`model_rate_limit`, `model_refused`, `model_parse_error`). */
const modelPayload = (kind: string, error: object): NoeticErrorPayload => {
  const e = error as Record<string, unknown>
  const stepId = typeof e.stepId === "string" ? { stepId: e.stepId } : {}
  switch (kind) {
    case "model_rate_limit":
      return { kind, ...stepId, ...(typeof e.retryAfterMs === "number" ? { retryAfter: e.retryAfterMs } : {}) }
    case "model_refused":
      return { kind, ...stepId, refusal: String(e.refusal) }
    case "model_parse_error": {
      const issues = Array.isArray(e.issues) ? e.issues.map(String) : [String(e.detail ?? "failed to parse output")]
      return {
        kind,
        ...stepId,
        raw: typeof e.raw === "string" ? e.raw : "",
        zodError: { issues: issues.map((message) => ({ code: "custom", message, path: [] })) }
      }
    }
    case "steering_denied":
      return { kind, guidance: String(e.guidance) } as NoeticErrorPayload
    case "item_schema_mismatch":
      return { kind, category: e.category, ...(typeof e.itemType === "string" ? { itemType: e.itemType } : {}) } as NoeticErrorPayload
    default:
      return { kind, ...stepId, cause: asError(error) }
  }
}

/** noetic's payload for what the step `stepId` failed with (a settled path, a loop's `onError`, a failed `inParallel`). */
export const payloadOf = (error: unknown, stepId: string): NoeticErrorPayload => {
  if (isNoeticError(error)) return error.noeticError
  const facade = typeof error === "object" && error !== null && "_tag" in error ? toFacadeError(error) : error
  if (isNoeticError(facade)) return facade.noeticError
  return { kind: "step_failed", stepId, cause: asError(facade), retriesExhausted: false }
}

// Objects a host's step body threw. They are not the engine's failures, whatever their
// shape (an error with a `_tag` of its own), so they are never mapped.
const thrownByHost = new WeakSet<object>()

/**
 * What a step body's throw becomes, as noetic's interpreter makes it: anything the
 * body threw is `step_failed` for `stepId` with the thrown value as its cause. A
 * NoeticError that is not a step's failure (a cancellation, a replay divergence, an
 * at-most-once outcome unknown, storage or lease trouble) is the run's, not the
 * step's: it travels up unchanged, given back to the engine as its own tagged error
 * so the engine treats it as such (a retry policy never re-runs a cancellation).
 */
export const bodyFailure = (stepId: string, thrown: unknown, retriesExhausted: boolean): unknown => {
  if (isNoeticError(thrown) && thrown.noeticError.kind !== "step_failed") {
    const engine = thrown.cause
    return typeof engine === "object" && engine !== null && "_tag" in engine ? engine : hostThrown(thrown)
  }
  return hostThrown(stepFailed(stepId, thrown, retriesExhausted))
}

/** Marks what a host's step body threw, so `unwrapExit` rethrows it exactly as it was thrown. */
export const hostThrown = (error: unknown): unknown => {
  if (typeof error === "object" && error !== null) thrownByHost.add(error)
  return error
}

/**
 * What a call of a harness that `close()` interrupted rejects with: `HARNESS_CLOSED`,
 * as the engine's `HarnessClosed` (an outcome learned after the close is not recorded).
 */
export const harnessClosed = (harness: string): NoeticError =>
  new NoeticError({
    code: "HARNESS_CLOSED",
    message: `harness ${harness} was closed while this call ran: it stopped, and what it had not recorded by then is not recorded`
  })

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
