/**
 * The raw baseline of a local child's cold start: the same Node and loader start, load
 * Effect and the same step module, run the step's body and print its output. What a
 * child process running a TypeScript step cannot avoid.
 */
import { Effect } from "effect"
import { echo } from "./subprocessSteps.ts"

const output = await Effect.runPromise(echo.body(Number(process.argv[2] ?? 0), undefined as never))
process.stdout.write(JSON.stringify(output) + "\n")
