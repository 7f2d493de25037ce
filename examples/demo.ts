/**
 * Survive a host crash, for real.
 *
 * `npm run demo` starts a host process that runs a five-step research agent on a
 * durable harness (the default SQLite storage, `checkpoints/checkpoints.db`, under a
 * temp home). After the third step completes,
 * the demo kills the host with SIGKILL. A second host process builds the same harness
 * and calls `resume(executionId)`: the three completed steps replay their recorded
 * outputs (including a random number and a model answer), the last two run, and the
 * final output agrees with everything recorded before the crash.
 *
 * Uses only the documented Promise API (`noetic-effect/promise`).
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import { AgentHarness, callModel, createCheckpointStore, createHomeStorage, runCode } from "noetic-effect/promise"

const EXECUTION_ID = "demo-execution"

/** One line of what a host did, for the orchestrating process to read. */
const report = (event: Record<string, unknown>) => process.stdout.write(JSON.stringify(event) + "\n")

const slow = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const buildHarness = (root: string, storage = createHomeStorage("checkpoints", { home: root })) => {
  const step = <I, O>(id: string, body: (input: I) => Promise<O>) =>
    runCode(id, async (input: I) => {
      report({ event: "step-started", step: id })
      await slow(150)
      const output = await body(input)
      report({ event: "step-completed", step: id, output })
      return output
    })
  const agent = runCode("research-agent", async (topic: string, ctx) => {
    const seed = await ctx.run(step("pick-seed", async () => Math.floor(Math.random() * 1_000_000)), undefined)
    const plan = await ctx.run(step("plan", async (s: number) => `survey ${topic} (seed ${s})`), seed)
    const answer = await ctx.run(callModel("ask-model"), plan)
    report({ event: "step-completed", step: "ask-model", output: answer.text })
    const summary = await ctx.run(step("summarise", async (text: string) => `summary of: ${text}`), answer.text)
    return ctx.run(step("publish", async (s: string) => ({ seed, summary: s })), summary)
  })
  return new AgentHarness({
    name: "durable-agent",
    agentGraph: agent,
    params: {},
    model: {
      // A stand-in model: its answers differ on every call, so a re-run would show.
      generate: async (request) => {
        await slow(150)
        const last = request.messages[request.messages.length - 1]
        return { id: `resp-${Math.random().toString(36).slice(2)}`, text: `findings for "${String(last?.content)}"` }
      }
    },
    environment: {
      storage: {
        checkpointStore: createCheckpointStore({ storage })
      }
    }
  })
}

/** A host process: `run` starts the execution, `resume` continues it. */
const host = async (mode: "run" | "resume", root: string) => {
  const storage = createHomeStorage("checkpoints", { home: root })
  const harness = buildHarness(root, storage)
  const result = mode === "run"
    ? await (await harness.execute("reinforcement learning", { executionId: EXECUTION_ID })).result()
    : await harness.resume(EXECUTION_ID)
  report({ event: "finished", output: result?.output ?? null })
  await harness.close()
  await storage.close()
}

/** Runs a host process and hands each reported event to `onEvent`. */
const runHost = (mode: "run" | "resume", root: string, onEvent: (event: any, kill: () => void) => void) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), mode, root], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    const lines = Readline.createInterface({ input: child.stdout! })
    lines.on("line", (line) => {
      try {
        onEvent(JSON.parse(line), () => child.kill("SIGKILL"))
      } catch {
        process.stdout.write(`  host: ${line}\n`)
      }
    })
    child.on("exit", (code, signal) =>
      signal === "SIGKILL" || code === 0 ? resolve() : reject(new Error(`host exited with ${code ?? signal}`))
    )
  })

const main = async () => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-demo-"))
  console.log(`durable state under ${root}\n`)

  console.log("host 1: running the agent; it will be killed with SIGKILL after three steps")
  const beforeCrash = new Map<string, unknown>()
  await runHost("run", root, (event, kill) => {
    if (event.event === "step-started") console.log(`  ▶ ${event.step}`)
    if (event.event === "step-completed") {
      beforeCrash.set(event.step, event.output)
      console.log(`  ✔ ${event.step} → ${JSON.stringify(event.output)}`)
      if (beforeCrash.size === 3) {
        console.log("  ✖ kill -9 the host")
        kill()
      }
    }
  })

  console.log("\nhost 2: a new process builds the same harness and calls resume()")
  const rerun: Array<string> = []
  let output: any
  await runHost("resume", root, (event) => {
    if (event.event === "step-started") {
      rerun.push(event.step)
      console.log(`  ▶ ${event.step}`)
    }
    if (event.event === "step-completed") console.log(`  ✔ ${event.step} → ${JSON.stringify(event.output)}`)
    if (event.event === "finished") output = event.output
  })

  const replayed = [...beforeCrash.keys()].filter((step) => !rerun.includes(step))
  console.log(`\nreplayed from the ledger, not re-run: ${replayed.join(", ")}`)
  console.log(`ran after the restart: ${rerun.join(", ")}`)
  console.log(`final output: ${JSON.stringify(output)}`)
  const consistent = output?.seed === beforeCrash.get("pick-seed")
  console.log(consistent ? "the recorded seed flowed downstream: ✔" : "MISMATCH: the seed was not replayed")
  Fs.rmSync(root, { recursive: true, force: true })
  if (!consistent || replayed.length !== 3) process.exitCode = 1
}

const [mode, root] = process.argv.slice(2)
if (mode === "run" || mode === "resume") {
  await host(mode, root!)
} else {
  await main()
}
