/**
 * Retention (seed page): the step ledger is capped on two axes, the bytes of one
 * recorded output and the entries kept per execution. A step with no entry re-runs on
 * resume; nothing replays a value that disagrees with the recorded run. A cap that is
 * NaN or below 1 throws STEP_LEDGER_RETENTION_INVALID at construction; Infinity
 * disables a cap.
 */
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  AgentHarness,
  createCheckpointStore,
  createFileStorage,
  DEFAULT_STEP_LEDGER_RETENTION,
  isNoeticConfigError,
  runCode
} from "noetic-effect/promise"

console.log(
  `defaults: maxEntryBytes ${DEFAULT_STEP_LEDGER_RETENTION.maxEntryBytes}, maxEntries ${DEFAULT_STEP_LEDGER_RETENTION.maxEntries}`
)

const home = mkdtempSync(join(tmpdir(), "noetic-retention-"))
const storage = createFileStorage({ root: `${home}/.noetic/checkpoints` })
const checkpointStore = createCheckpointStore({ storage })

const ran: Array<string> = []
let hostDies = true
const small = (id: string) =>
  runCode({
    id,
    execute: async (n: number) => {
      ran.push(id)
      if (id === "s4" && hostDies) throw new Error("the host died at s4")
      return n + 1
    }
  })
const big = runCode({
  id: "big-output",
  execute: async (n: number) => {
    ran.push("big-output")
    return { n, blob: "x".repeat(4096) } // larger than maxEntryBytes: not recorded
  }
})
const steps = [small("s1"), small("s2"), big, small("s3"), small("s4")] as const
const agent = runCode({
  id: "pipeline",
  execute: async (n: number, ctx) => {
    const a = await ctx.harness.run(steps[0], n, ctx)
    const b = await ctx.harness.run(steps[1], a, ctx)
    const { n: c } = await ctx.harness.run(steps[2], b, ctx)
    const d = await ctx.harness.run(steps[3], c, ctx)
    return ctx.harness.run(steps[4], d, ctx)
  }
})

const makeHarness = () =>
  new AgentHarness({
    name: "durable-agent",
    agentGraph: agent,
    params: {},
    environment: {
      storage: {
        checkpointStore,
        stepLedgerRetention: {
          maxEntryBytes: 1024, // the 4 KiB output is not recorded
          maxEntries: 2 //        only the 2 newest entries are kept
        }
      }
    }
  })

// First boot: s1, s2, big-output and s3 complete, then the host dies at s4.
const first = makeHarness()
const ctx = first.createContext()
await ctx.checkpoint()
await first.run(agent, 0, ctx).catch((error: Error) => console.log(`first run: ran ${ran.join(" ")}; ${error.message}`))
const kept = await storage.list(`execution:${ctx.id}:ledger:`)
console.log(`  the ledger kept ${kept.length} entries (the 2 newest; big-output was too large to record)`)
assert.ok(kept.length <= 2)
await first.close()

// Second boot: s1 (evicted) and big-output (never recorded) have no entry and re-run,
// and so does s4; whatever replays agrees with the first run.
hostDies = false
ran.length = 0
const second = makeHarness()
const restored = await second.restore(ctx.id)
assert.ok(restored !== null)
const output = await second.run(agent, 0, restored)
const replayed = ["s1", "s2", "big-output", "s3"].filter((id) => !ran.includes(id))
console.log(`resume: output ${output}; re-ran ${ran.join(" ")}; replayed ${replayed.join(" ") || "nothing"}`)
assert.equal(output, 4)
for (const id of ["s1", "big-output", "s4"]) assert.ok(ran.includes(id), `${id} has no entry, so it re-runs`)
await second.close()

for (const bad of [{ maxEntries: 0 }, { maxEntryBytes: Number.NaN }]) {
  try {
    new AgentHarness({ name: "bad", params: {}, environment: { storage: { checkpointStore, stepLedgerRetention: bad } } })
    assert.fail("an invalid cap must throw")
  } catch (error) {
    assert.ok(isNoeticConfigError(error))
    assert.equal(error.code, "STEP_LEDGER_RETENTION_INVALID")
    console.log(`stepLedgerRetention ${JSON.stringify(bad, (_, v) => (Number.isNaN(v) ? "NaN" : v))}: ${error.code}`)
  }
}
const unbounded = new AgentHarness({
  name: "unbounded",
  params: {},
  environment: { storage: { checkpointStore, stepLedgerRetention: { maxEntries: Infinity, maxEntryBytes: Infinity } } }
})
console.log("Infinity on both axes: accepted (no cap)")
await unbounded.close()

rmSync(home, { recursive: true, force: true })
