/** The steps the subprocess benchmark runs in its children; no top-level side effects. */
import { Effect } from "effect"
import * as Fs from "node:fs"
import { runCode } from "../src/harness/Step.ts"

/** Waits until the file `release` exists, then returns `n`. */
export const idle = runCode("idle", (input: { readonly release: string; readonly n: number }) =>
  Effect.gen(function*() {
    while (!Fs.existsSync(input.release)) yield* Effect.sleep("50 millis")
    return input.n
  }))

/** Returns its input at once: a child's cold start is all there is to time. */
export const echo = runCode("echo", (n: number) => Effect.succeed(n))
