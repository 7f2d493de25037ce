/**
 * Host Restart (seed page), with a real host kill. A host process spawns two
 * detached children through the local adapter (each its own OS process) and is then
 * killed with SIGKILL. A second host process builds the same harness and calls
 * reattachLiveChildren(harness): the long job is still running and comes back
 * with its parent context rebuilt; the short one finished while no host was up
 * and comes back completed, with its result.
 */
import assert from "node:assert/strict"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
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
  type SubprocessHandle
} from "noetic-effect/promise"
import { backgroundWorker } from "./steps/research.ts"

const say = (event: object) => process.stdout.write(JSON.stringify(event) + "\n")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The same construction on every boot. */
const buildHarness = (home: string) => {
  const subprocess = createLocalSubprocessAdapter({
    storage: createFileStorage({ root: `${home}/.noetic/subprocess` }),
    registryEntry: fileURLToPath(new URL("./steps/research.ts", import.meta.url))
  })
  const harness = new AgentHarness({
    name: "host-restart",
    params: {},
    environment: {
      subprocess,
      storage: {
        checkpointStore: createCheckpointStore({ storage: createFileStorage({ root: `${home}/.noetic/checkpoints` }) })
      }
    }
  })
  return { harness, subprocess }
}

/** First boot: start two children, checkpoint the parent, then wait to be killed. */
const firstBoot = async (home: string) => {
  const { harness } = buildHarness(home)
  const parentCtx = harness.createContext({ cwdInit: home })
  const long = harness.detachedSpawn(backgroundWorker, { name: "index the archive", until: `${home}/release` }, parentCtx)
  const short = harness.detachedSpawn(backgroundWorker, { name: "send the digest", seconds: 1, doneFile: `${home}/digest-sent` }, parentCtx)
  await parentCtx.checkpoint()
  // listLive waits for spawns in flight: both manifests are on disk once it answers.
  const live = await harness.subprocess.listLive()
  say({ event: "spawned", parent: parentCtx.id, long: long.id, short: short.id, live: live.length })
  setInterval(() => {}, 1_000) // a host with work to do; it will not get to finish it
}

const terminal = new Set(["completed", "failed", "stopped", "stale"])

/** Second boot: same harness, then the recovery step. */
const secondBoot = async (home: string) => {
  const { harness, subprocess } = buildHarness(home)
  const { handles, contexts } = await reattachLiveChildren(harness)
  const described = handles.map((handle) => ({
    id: handle.id,
    executionId: handle.metadata?.executionId,
    status: handle.status,
    parent: contexts.get(handle.id)?.id,
    cwd: contexts.get(handle.id)?.cwdState.cwd
  }))
  say({ event: "reattached", handles: described })
  // Follow each child to its end through the adapter.
  const results = []
  for (const handle of handles) {
    let latest: SubprocessHandle | null = handle
    while (latest !== null && !terminal.has(latest.status)) {
      await sleep(200)
      latest = await harness.subprocess.get(handle.id)
    }
    results.push({ executionId: handle.metadata?.executionId, status: latest?.status, result: latest?.metadata?.result })
  }
  say({ event: "settled", results })
  await harness.close()
  await subprocess.close()
}

/** Runs a host process, handing each line it prints to `onEvent`. */
const runHost = (mode: string, home: string, onEvent: (event: any, kill: () => void) => void) =>
  new Promise<void>((resolve, reject) => {
    const host = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), mode, home], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    createInterface({ input: host.stdout! }).on("line", (line) => {
      try {
        onEvent(JSON.parse(line), () => host.kill("SIGKILL"))
      } catch {
        console.log(`  host: ${line}`)
      }
    })
    host.on("exit", (code, signal) =>
      code === 0 || signal === "SIGKILL" ? resolve() : reject(new Error(`host exited with ${code ?? signal}`))
    )
  })

const main = async () => {
  const home = mkdtempSync(join(tmpdir(), "noetic-host-restart-"))
  let spawned: any
  await runHost("first-boot", home, (event, kill) => {
    spawned = event
    console.log(`host 1 spawned ${event.live} children under parent ${event.parent}; kill -9 host 1`)
    kill()
  })
  // The short job finishes while no host is up.
  for (let waited = 0; !existsSync(`${home}/digest-sent`); waited += 100) {
    if (waited > 60_000) throw new Error("the short job did not finish")
    await sleep(100)
  }
  await sleep(2_000) // and has recorded its result
  console.log("while no host was up, the short job finished")

  let reattached: any
  let settled: any
  await runHost("second-boot", home, (event) => {
    if (event.event === "reattached") {
      reattached = event
      writeFileSync(`${home}/release`, "") // let the long job finish now
    }
    if (event.event === "settled") settled = event
  })
  for (const h of reattached.handles) {
    const which = h.executionId === spawned.long ? "long job " : "short job"
    console.log(`host 2 reattached the ${which}: status ${h.status}, parent context ${h.parent} (cwd ${h.cwd})`)
  }
  for (const r of settled.results) {
    console.log(`  ${r.executionId === spawned.long ? "long job " : "short job"} -> ${r.status}: ${JSON.stringify(r.result)}`)
  }
  assert.equal(reattached.handles.length, 2)
  for (const h of reattached.handles) assert.equal(h.parent, spawned.parent)
  const long = reattached.handles.find((h: any) => h.executionId === spawned.long)
  const short = reattached.handles.find((h: any) => h.executionId === spawned.short)
  assert.equal(long?.status, "running")
  assert.equal(short?.status, "completed")
  for (const r of settled.results) {
    assert.equal(r.status, "completed")
    assert.equal(r.result?.pid > 0, true, "a settled handle carries its result in metadata.result")
  }
  rmSync(home, { recursive: true, force: true })
}

const [mode, home] = process.argv.slice(2)
if (mode === "first-boot") await firstBoot(home!)
else if (mode === "second-boot") await secondBoot(home!)
else await main()
