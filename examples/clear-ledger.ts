/**
 * When to Clear a Ledger (seed page). A composite step that finished replays
 * wholesale, so an edit to one of its children is invisible to a resume: the old
 * output wins. A host that edited the workflow clears the execution
 * (`harness.clearCheckpoint`), which discards the snapshot and every ledger key, and
 * then runs fresh.
 */
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AgentHarness, createCheckpointStore, createFileStorage, runCode } from "noetic-effect/promise"

const home = mkdtempSync(join(tmpdir(), "noetic-clear-"))
const storage = createFileStorage({ root: `${home}/.noetic/checkpoints` })
const checkpointStore = createCheckpointStore({ storage })

/** The workflow, in two versions: v2 edits the greeting step inside the composite. */
const workflow = (version: 1 | 2) => {
  const greet = runCode({
    id: "greet",
    execute: async (name: string) => (version === 1 ? `Hello, ${name}.` : `Good evening, ${name}!`)
  })
  const letter = runCode({
    id: "letter",
    execute: async (name: string, ctx) => `${await ctx.harness.run(greet, name, ctx)} Your order has shipped.`
  })
  return letter
}

const harnessFor = (version: 1 | 2) =>
  new AgentHarness({ name: "mailer", agentGraph: workflow(version), params: {}, environment: { storage: { checkpointStore } } })

const v1 = harnessFor(1)
const ctx = v1.createContext()
const executionId = ctx.id
console.log(`v1 run:             ${await v1.run(workflow(1), "Ada", ctx)}`)
await ctx.checkpoint()
await v1.close()

// The workflow changed (v2), but the execution is resumed onto the old ledger.
const v2 = harnessFor(2)
const stale = await v2.run(workflow(2), "Ada", (await v2.restore(executionId))!)
console.log(`v2 resumed, no clear: ${stale}   <- the recorded v1 output wins`)
assert.match(stale, /^Hello/)

const keysBefore = (await storage.list(`execution:${executionId}:`)).length
await v2.clearCheckpoint(executionId)
const keysAfter = (await storage.list(`execution:${executionId}:`)).length
console.log(`clearCheckpoint: ${keysBefore} keys (snapshot and ledger) -> ${keysAfter}`)
assert.equal(keysAfter, 0)
assert.equal(await v2.restore(executionId), null)

const fresh = v2.createContext()
const current = await v2.run(workflow(2), "Ada", fresh)
console.log(`v2 after the clear:  ${current}`)
assert.match(current, /^Good evening/)

// Done with an execution: clear it too, or its ledger keys stay behind.
await v2.clearCheckpoint(fresh.id)
assert.equal((await storage.list(`execution:${fresh.id}:`)).length, 0)
console.log("finished execution cleared: no keys left behind")

await v2.close()
rmSync(home, { recursive: true, force: true })
