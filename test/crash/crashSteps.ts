/**
 * The child step of the detached-spawn crash workflow. A restarted host re-runs it
 * from this module (no top-level side effects); the bodies report to a log the test
 * installs on `globalThis`, since the re-run may import this module afresh.
 */
import { Effect } from "effect"
import { runCode } from "../../src/harness/Step.ts"

/** Where the bodies report: set by the test. */
export interface CrashChildLog {
  readonly note: (key: string) => void
}

const report = (key: string) => {
  const log = (globalThis as { __noeticCrashChildLog?: CrashChildLog }).__noeticCrashChildLog
  log?.note(key)
}

const gather = runCode("gather", (input: string, ctx) => Effect.sync(() => (report(ctx.path), `${input}:gathered`)))
const polish = runCode("polish", (input: string, ctx) => Effect.sync(() => (report(ctx.path), `${input}:polished`)))

/** Two recorded steps in a row. */
export const crashChild = runCode("crashChild", (input: string, ctx) =>
  Effect.gen(function*() {
    const gathered = yield* ctx.run(gather, input)
    return yield* ctx.run(polish, gathered)
  }))
