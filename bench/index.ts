/**
 * Runs every benchmark and prints one JSON document of figures.
 * `npm run bench` runs all; `npm run bench -- storage` runs the named ones.
 */
import * as Checkpoint from "./checkpoint.ts"
import * as Ipc from "./ipc.ts"
import * as Steps from "./steps.ts"
import * as Storage from "./storage.ts"
import * as Subprocess from "./subprocess.ts"

const benchmarks: Record<string, () => Promise<unknown>> = {
  storage: Storage.run,
  checkpoint: Checkpoint.run,
  steps: Steps.run,
  ipc: Ipc.run,
  subprocess: Subprocess.run
}

const selected = process.argv.slice(2)
const names = selected.length > 0 ? selected : Object.keys(benchmarks)
const figures: Record<string, unknown> = {}
for (const name of names) {
  const bench = benchmarks[name]
  if (bench === undefined) {
    process.stderr.write(`unknown benchmark ${name}; known: ${Object.keys(benchmarks).join(", ")}\n`)
    process.exit(2)
  }
  figures[name] = await bench()
}
process.stdout.write(JSON.stringify(figures, null, 2) + "\n")
