/**
 * The library's diagnostics: warnings go to the host's Effect loggers, and the
 * built-in default logger writes them to stderr instead of stdout (its default), so
 * stdout carries only what the host prints. A host that installs loggers of its own
 * (`Logger.layer`) gets every warning through them, as before.
 *
 * @since 0.1.0
 * @internal
 */
import * as Effect from "effect/Effect"
import * as References from "effect/References"

/** Runs `self` with the default logger writing to stderr (a host's own loggers are untouched). */
export const toStderr = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(self, References.LogToStderr, true)

/** `Effect.logWarning`, on stderr when the default logger prints it. */
export const logWarning = (...message: ReadonlyArray<any>): Effect.Effect<void> =>
  toStderr(Effect.logWarning(...message))

/** `Effect.logInfo`, on stderr when the default logger prints it. */
export const logInfo = (...message: ReadonlyArray<any>): Effect.Effect<void> => toStderr(Effect.logInfo(...message))

/** `Effect.logDebug`, on stderr when the default logger prints it. */
export const logDebug = (...message: ReadonlyArray<any>): Effect.Effect<void> => toStderr(Effect.logDebug(...message))

/** `Effect.logError`, on stderr when the default logger prints it. */
export const logError = (...message: ReadonlyArray<any>): Effect.Effect<void> => toStderr(Effect.logError(...message))
