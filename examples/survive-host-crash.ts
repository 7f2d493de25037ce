/**
 * Survive a Host Crash (seed page). First boot: a harness configured with durable
 * storage plans a job, launches a long-lived background worker with detachedSpawn,
 * and then the host process crashes (it SIGKILLs itself: no cleanup runs). Second
 * boot, in a new process: the same harness construction, then
 * reattachLiveChildren(harness). `handles` holds the still-running worker,
 * `contexts` its rebuilt parent context; the host continues from there: the plan
 * replays from the ledger and the worker's result is collected.
 */
import assert from "node:assert/strict"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import {
  AgentHarness,
  createCheckpointStore,
  createFileStorage,
  createLocalSubprocessAdapter,
  reattachLiveChildren,
  runCode,
  type SubprocessHandle
} from "noetic-effect/promise"
import { backgroundWorker } from "./steps/research.ts"

const say = (event: object) => process.stdout.write(JSON.stringify(event) + "\n")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let planRuns = 0
const planJob = runCode({
  id: "plan-job",
  execute: async (job: { readonly name: string; readonly doneWhen: string }) => {
    planRuns++
    // The worker runs until the file `until` appears, so it is surely still running at the restart.
    return { name: job.name, until: job.doneWhen, plannedAt: new Date().toISOString() }
  }
})

/** Configure durable storage; the same construction on every boot. */
const boot = (home: string) => {
  const subprocess = createLocalSubprocessAdapter({
    storage: createFileStorage({ root: `${home}/.noetic/subprocess` }),
    registryEntry: fileURLToPath(new URL("./steps/research.ts", import.meta.url))
  })
  const harness = new AgentHarness({
    name: "crash-proof",
    agentGraph: planJob,
    params: {},
    environment: {
      subprocess,
      storage: {
        checkpointStore: createCheckpointStore({
          storage: createFileStorage({ root: `${home}/.noetic/checkpoints` })
        })
      }
    }
  })
  return { harness, subprocess }
}

const firstBoot = async (home: string) => {
  const { harness } = boot(home)
  const parentCtx = harness.createContext({ cwdInit: home })
  const jobSpec = await harness.run(planJob, { name: "rebuild the search index", doneWhen: `${home}/done` }, parentCtx)
  // Launch a long-lived child.
  const handle = harness.detachedSpawn(backgroundWorker, jobSpec, parentCtx)
  await parentCtx.checkpoint()
  // listLive waits for spawns in flight, so the manifest is on disk before the crash.
  await harness.subprocess.listLive()
  say({ event: "launched", parent: parentCtx.id, worker: handle.id, plannedAt: jobSpec.plannedAt })
  // ... process crashes ...
  process.kill(process.pid, "SIGKILL")
}

const secondBoot = async (home: string) => {
  // Second boot: same harness construction, then:
  const { harness, subprocess } = boot(home)
  const { handles, contexts } = await reattachLiveChildren(harness)
  const worker = handles[0]!
  const parentCtx = contexts.get(worker.id)!
  say({ event: "reattached", count: handles.length, status: worker.status, parent: parentCtx.id, cwd: parentCtx.cwdState.cwd })

  // Continue where the parent was: its completed plan replays instead of running again.
  const jobSpec = await harness.run(planJob, { name: "rebuild the search index", doneWhen: `${home}/done` }, parentCtx)
  say({ event: "replayed", planRuns, plannedAt: jobSpec.plannedAt })
  writeFileSync(`${home}/done`, "") // the job may finish now

  let latest: SubprocessHandle | null = worker
  while (latest !== null && (latest.status === "running" || latest.status === "starting")) {
    await sleep(200)
    latest = await harness.subprocess.get(worker.id)
  }
  say({ event: "finished", status: latest?.status, result: latest?.metadata?.result })
  await harness.close()
  await subprocess.close()
}

const runHost = (mode: string, home: string, events: Array<any>) =>
  new Promise<void>((resolve, reject) => {
    const host = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), mode, home], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    createInterface({ input: host.stdout! }).on("line", (line) => {
      try {
        events.push(JSON.parse(line))
      } catch {
        console.log(`  host: ${line}`)
      }
    })
    host.on("exit", (code, signal) => (code === 0 || signal === "SIGKILL" ? resolve() : reject(new Error(`host exited with ${code ?? signal}`))))
  })

const main = async () => {
  const home = mkdtempSync(join(tmpdir(), "noetic-crash-"))
  const first: Array<any> = []
  await runHost("first-boot", home, first)
  const launched = first.find((e) => e.event === "launched")
  console.log(`first boot: planned the job, launched worker ${launched.worker}, then crashed (SIGKILL)`)

  const second: Array<any> = []
  await runHost("second-boot", home, second)
  const reattached = second.find((e) => e.event === "reattached")
  const replayed = second.find((e) => e.event === "replayed")
  const finished = second.find((e) => e.event === "finished")
  console.log(`second boot: reattachLiveChildren found ${reattached.count} child, ${reattached.status}; parent ${reattached.parent} rebuilt (cwd ${reattached.cwd})`)
  console.log(`  the plan replayed from the ledger (body runs in this boot: ${replayed.planRuns}, plannedAt unchanged: ${replayed.plannedAt === launched.plannedAt})`)
  console.log(`  the worker ${finished.status}: ${JSON.stringify(finished.result)}`)
  assert.equal(reattached.status, "running")
  assert.equal(reattached.parent, launched.parent)
  assert.equal(replayed.planRuns, 0)
  assert.equal(replayed.plannedAt, launched.plannedAt)
  assert.equal(finished.status, "completed")
  assert.equal(finished.result?.job, "rebuild the search index", "a settled handle carries its result in metadata.result")
  rmSync(home, { recursive: true, force: true })
}

const [mode, home] = process.argv.slice(2)
if (mode === "first-boot") await firstBoot(home!)
else if (mode === "second-boot") await secondBoot(home!)
else await main()
