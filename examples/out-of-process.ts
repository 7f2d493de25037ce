/**
 * Run an Agent Out-of-Process (seed page). The harness's default runs children in
 * this process; a local adapter passed as a per-call override runs one spawn in its
 * own OS child, in the working directory given by `cwdInit`, and the parent carries
 * on meanwhile. A `spawn` step built with `subprocess: localAdapter` runs its child out of process
 * on every dispatch, whatever the harness default.
 */
import assert from "node:assert/strict"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { AgentHarness, createFileStorage, createLocalSubprocessAdapter, spawn } from "noetic-effect/promise"
import { researchAgent } from "./steps/research.ts"

const home = mkdtempSync(join(tmpdir(), "noetic-oop-"))
const workspace = join(home, "research-workspace")
mkdirSync(workspace)

const localAdapter = createLocalSubprocessAdapter({
  storage: createFileStorage({ root: `${home}/.noetic/subprocess` }),
  // The module the child imports to find its step.
  registryEntry: fileURLToPath(new URL("./steps/research.ts", import.meta.url))
})

const harness = new AgentHarness({ name: "out-of-process", params: {} })
const parentCtx = harness.createContext()

const started = Date.now()
const handle = harness.detachedSpawn(researchAgent, "summarise the latest arXiv papers on RL", parentCtx, {
  subprocess: localAdapter,
  cwdInit: workspace
})
// The parent continues immediately.
console.log(`detachedSpawn returned at once (${Date.now() - started} ms): child ${handle.id}, status ${handle.status}`)
assert.equal(handle.status, "running")

const result = await handle.await(60_000)
console.log(`the child ran in pid ${result.pid} (this host is ${process.pid}), cwd ${result.cwd}`)
console.log(`  and answered: ${result.summary}`)
assert.notEqual(result.pid, process.pid)
assert.equal(result.cwd, workspace)
assert.equal(handle.status, "completed")
assert.deepEqual(handle.result, result)

// In-process by default: the same step without the override runs here.
const inProcess = await harness.detachedSpawn(researchAgent, "in-process", parentCtx).await(60_000)
console.log(`without the override the child ran in pid ${inProcess.pid}: this process`)
assert.equal(inProcess.pid, process.pid)

// Per-step override: every dispatch of this spawn step uses the local adapter.
const delegate = spawn({ id: "delegate-research", child: researchAgent, subprocess: localAdapter })
const viaStep = await harness.run(delegate, "per-step override", parentCtx)
console.log(`a spawn step built with subprocess: localAdapter ran its child in pid ${viaStep.pid}`)
assert.notEqual(viaStep.pid, process.pid)

await harness.close()
await localAdapter.close()
rmSync(home, { recursive: true, force: true })
