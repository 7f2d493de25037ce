/**
 * Runs the examples: `npm run example <name>` runs one, `npm run examples` runs all.
 *
 * Each example is its own process, started with this process's Node flags (the tsx
 * loader and the `noetic-effect-source` condition, under which `noetic-effect/promise`
 * resolves to this repository's source). The condition also goes into NODE_OPTIONS,
 * so processes an example starts itself (a host it kills, a detached child) resolve
 * the package the same way.
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))

/** Every example, in the order of the seed page, then the Effect API ones. */
const examples: ReadonlyArray<readonly [name: string, what: string]> = [
  ["quick-example", "Quick Example: a durable harness; a turn lands a checkpoint, a detached spawn a manifest"],
  ["restore", "Restore: rebuild a context from its snapshot; a schema mismatch is a typed error"],
  ["retention", "Retention: ledger caps, what a resume re-runs, an invalid cap"],
  ["clear-ledger", "When to Clear a Ledger: an edited workflow replays the old output until cleared"],
  ["networked-getmany", "A networked storage adapter with getMany: a restore is one round trip"],
  ["restore-decorated", "Restoring a decorated context: hand the host wiring back to restore()"],
  ["host-restart", "Host Restart: reattachLiveChildren after a real kill -9 of the host"],
  ["durable-ipc", "Durable IPC: server, client, a disconnect and a resume with no loss or duplicate"],
  ["out-of-process", "Run an Agent Out-of-Process: a per-call and a per-step local adapter"],
  ["survive-host-crash", "Survive a Host Crash: a background worker outlives the host and is reattached"],
  ["browser-stream", "Agent streams: tokens in a browser (EventSource), resumed across a host restart"],
  ["demo", "Crash and resume: a five-step agent killed after three steps resumes in a new process"],
  ["effect-durable-agent", "Effect API: the durable agent from layers, with spans on the console"],
  ["effect-postgres-leases", "Effect API: two hosts on Postgres with execution leases (needs NOETIC_PG_URL)"]
]

const TIMEOUT_MS = 180_000

const all = process.argv.includes("--all")

const runOne = (name: string): Promise<boolean> =>
  new Promise((resolve) => {
    const file = Path.join(here, `${name}.ts`)
    const nodeOptions = [process.env.NODE_OPTIONS ?? "", "--conditions=noetic-effect-source"].join(" ").trim()
    const child = spawn(process.execPath, [...process.execArgv, file], {
      stdio: "inherit",
      // Under --all an example that runs until stopped runs a short bounded version.
      env: { ...process.env, NODE_OPTIONS: nodeOptions, ...(all ? { NOETIC_EXAMPLES_ALL: "1" } : {}) }
    })
    const timer = setTimeout(() => {
      console.error(`${name}: still running after ${TIMEOUT_MS / 1000} s, stopping it`)
      child.kill("SIGKILL")
    }, TIMEOUT_MS)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      resolve(code === 0 && signal === null)
    })
  })

const listing = () => examples.map(([name, what]) => `  ${name.padEnd(24)} ${what}`).join("\n")

const main = async () => {
  const args = process.argv.slice(2)
  const names = args.includes("--all") ? examples.map(([name]) => name) : args
  if (names.length === 0) {
    console.log(`usage: npm run example <name>   (npm run examples runs them all)\n\n${listing()}`)
    process.exitCode = 1
    return
  }
  const unknown = names.filter((name) => !examples.some(([known]) => known === name))
  if (unknown.length > 0) {
    console.error(`no example named ${unknown.join(", ")}; the examples are:\n${listing()}`)
    process.exitCode = 1
    return
  }
  const failed: Array<string> = []
  for (const name of names) {
    if (!Fs.existsSync(Path.join(here, `${name}.ts`))) {
      failed.push(name)
      continue
    }
    if (names.length > 1) console.log(`\n=== ${name}`)
    if (!(await runOne(name))) failed.push(name)
  }
  if (names.length > 1) {
    console.log(`\n${names.length - failed.length}/${names.length} examples ran`)
  }
  if (failed.length > 0) {
    console.error(`failed: ${failed.join(", ")}`)
    process.exitCode = 1
  }
}

await main()
