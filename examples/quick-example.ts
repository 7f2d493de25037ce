/**
 * Quick Example (seed page): a harness wired with a durable subprocess adapter and a
 * checkpoint store. An execute() turn lands a checkpoint; a detachedSpawn lands a
 * manifest entry.
 *
 * Two on-disk roots, as the seed page has them, under a temporary directory instead
 * of ~/.noetic.
 */
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import {
  AgentHarness,
  createCheckpointStore,
  createFileStorage,
  createLocalSubprocessAdapter,
  runCode
} from "noetic-effect/promise"
import { researchAgent } from "./steps/research.ts"

const home = mkdtempSync(join(tmpdir(), "noetic-quick-"))

// Two distinct on-disk roots: subprocess manifests vs checkpoint snapshots.
const subprocessStorage = createFileStorage({ root: `${home}/.noetic/subprocess` })
const checkpointStorage = createFileStorage({ root: `${home}/.noetic/checkpoints` })
const checkpointStore = createCheckpointStore({ storage: checkpointStorage })

const outline = runCode({
  id: "outline",
  execute: async (topic: string) => [`what ${topic} is`, `why ${topic} matters`]
})
const agent = runCode({
  id: "durable-agent",
  execute: async (topic: string, ctx) => {
    const sections = await ctx.harness.run(outline, topic, ctx)
    return `an article on ${topic} in ${sections.length} sections`
  }
})

// registryEntry: the module a child process imports to find its step.
const subprocess = createLocalSubprocessAdapter({
  storage: subprocessStorage,
  registryEntry: fileURLToPath(new URL("./steps/research.ts", import.meta.url))
})

const harness = new AgentHarness({
  name: "durable-agent",
  agentGraph: agent,
  params: {},
  environment: {
    subprocess,
    storage: { checkpointStore }
  }
})

// Any execute() turn lands a checkpoint. execute() resolves once the input is queued;
// getAgentResponse() resolves once the session has run it.
await harness.execute("durable execution")
await harness.getAgentResponse()
const executions = await checkpointStore.list()
assert.equal(executions.length, 1)
const { executionId } = executions[0]!
const snapshot = await checkpointStore.load(executionId)
const ledger = await checkpointStorage.list(`execution:${executionId}:ledger:`)
console.log(`execute() landed a checkpoint: execution ${executionId}, schema v${snapshot?.schemaVersion}`)
console.log(`  and ${ledger.length} step-ledger entries (the agent and its outline step)`)
assert.equal(snapshot?.schemaVersion, 2)
assert.ok(ledger.length >= 2)

// Any detachedSpawn through this harness lands a manifest entry.
const parentCtx = harness.createContext()
const handle = harness.detachedSpawn(researchAgent, "durable execution", parentCtx)
const live = await harness.subprocess.listLive()
const manifests = await subprocessStorage.list("")
console.log(`detachedSpawn() landed a manifest: ${manifests.length} key(s) in the subprocess root, ${live.length} live child`)
assert.ok(manifests.length >= 1)
assert.ok(live.some((child) => child.metadata?.executionId === handle.id))

const result = await handle.await(60_000)
console.log(`the child (pid ${result.pid}, not this host's ${process.pid}) answered: ${result.summary}`)
assert.notEqual(result.pid, process.pid)

await harness.close()
await subprocess.close()
rmSync(home, { recursive: true, force: true })
