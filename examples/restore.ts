/**
 * Restore (seed page): a run stops half-way; a new harness on the same storage
 * rebuilds its context with `harness.restore(executionId)` and re-runs the agent on
 * it, so the steps that completed replay their recorded outputs. Then the schema
 * rule: a snapshot of an unknown schemaVersion is a NoeticConfigError with code
 * CHECKPOINT_SCHEMA_MISMATCH, which the host discards with clearCheckpoint.
 */
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  AgentHarness,
  createCheckpointStore,
  createFileStorage,
  isNoeticConfigError,
  runCode
} from "noetic-effect/promise"

const home = mkdtempSync(join(tmpdir(), "noetic-restore-"))
const storage = createFileStorage({ root: `${home}/.noetic/checkpoints` })
const checkpointStore = createCheckpointStore({ storage })

// Counts how often each step body really ran, across both harnesses.
const ran: Record<string, number> = {}
let crash = true

const step = <I, O>(id: string, execute: (input: I) => Promise<O>) =>
  runCode({
    id,
    execute: async (input: I) => {
      ran[id] = (ran[id] ?? 0) + 1
      return execute(input)
    }
  })
const fetchSources = step("fetch-sources", async (topic: string) => [`${topic}/a`, `${topic}/b`, `${topic}/c`])
const rank = step("rank", async (sources: Array<string>) => sources.toReversed())
const write = step("write", async (sources: Array<string>) => {
  if (crash) throw new Error("the host died while writing")
  return `report citing ${sources.join(", ")}`
})
const agent = runCode({
  id: "report-agent",
  execute: async (topic: string, ctx) => {
    const sources = await ctx.harness.run(fetchSources, topic, ctx)
    const ranked = await ctx.harness.run(rank, sources, ctx)
    await ctx.checkpoint()
    return ctx.harness.run(write, ranked, ctx)
  }
})

const makeHarness = () =>
  new AgentHarness({ name: "report-agent", agentGraph: agent, params: {}, environment: { storage: { checkpointStore } } })

// First boot: the run gets through two steps, then fails.
const first = makeHarness()
const ctx = first.createContext({ cwdInit: "/srv/reports" })
const executionId = ctx.id
await first.run(agent, "durability", ctx).catch((error: Error) => console.log(`first run stopped: ${error.message}`))
await first.close()

// Second boot: a new harness on the same storage.
crash = false
const harness = makeHarness()
const restored = await harness.restore(executionId)
assert.ok(restored !== null)
assert.equal(restored.id, executionId)
const snapshot = await checkpointStore.load(executionId)
console.log(`restored ${restored.id}: cwd ${restored.cwdState.cwd}, frontier ${snapshot?.frontier.map((f) => f.stepId).join(" > ")}`)
assert.equal(restored.cwdState.cwd, "/srv/reports")

const report = await harness.run(agent, "durability", restored)
console.log(`resumed: ${report}`)
console.log(`bodies run: fetch-sources ${ran["fetch-sources"]}x, rank ${ran["rank"]}x (replayed), write ${ran["write"]}x`)
assert.equal(ran["fetch-sources"], 1)
assert.equal(ran["rank"], 1)

// Nothing recorded: null, not an error.
assert.equal(await harness.restore("never-ran"), null)
console.log("restore of an unknown execution: null")

// A snapshot of another schema version (here a v1 record) is a typed error, never a partial restore.
await storage.set("execution:legacy:snapshot", {
  schemaVersion: 1,
  executionId: "legacy",
  frontier: [],
  layers: { "working-context": {} },
  cwd: null,
  askUser: [],
  itemLog: { items: [] },
  capturedAt: new Date().toISOString()
})
try {
  await harness.restore("legacy")
  assert.fail("a v1 snapshot must not restore")
} catch (error) {
  assert.ok(isNoeticConfigError(error))
  console.log(`restore of a v1 snapshot: NoeticConfigError ${error.code}`)
  assert.equal(error.code, "CHECKPOINT_SCHEMA_MISMATCH")
  await harness.clearCheckpoint("legacy")
  assert.equal(await harness.restore("legacy"), null)
  console.log("after clearCheckpoint: restore returns null, so the host starts fresh")
}

await harness.close()
rmSync(home, { recursive: true, force: true })
