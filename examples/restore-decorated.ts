/**
 * Restoring a decorated context (seed page). A snapshot recovers data, not the live
 * objects the host attached: here a session's message queue (in `state`) and an
 * event listener assigned onto the context. Restored without them, the steps after
 * the crash would run but nobody would hear them. Passing `{ state }` to restore() hands the
 * wiring back; post-construction decoration is re-applied on the context restore()
 * returns, whose id is the original execution id. Snapshot-owned fields (threadId,
 * items, cwd) always come from the record.
 */
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AgentHarness, createCheckpointStore, createFileStorage, runCode } from "noetic-effect/promise"

const home = mkdtempSync(join(tmpdir(), "noetic-decorated-"))
const checkpointStore = createCheckpointStore({ storage: createFileStorage({ root: `${home}/.noetic/checkpoints` }) })

interface SessionState {
  readonly queue: Array<string>
}
/** What the host hangs on a context after building it. */
type Decorated = { onEvent?: (event: string) => void }

let hostDies = true
const notify = (ctx: { state: unknown }, message: string) => {
  ;(ctx.state as SessionState | undefined)?.queue.push(message)
  ;(ctx as Decorated).onEvent?.(message)
}
const draft = runCode({
  id: "draft",
  execute: async (topic: string, ctx) => {
    notify(ctx, `drafted ${topic}`)
    return `draft on ${topic}`
  }
})
const review = runCode({
  id: "review",
  execute: async (text: string, ctx) => {
    if (hostDies) throw new Error("the host died during review")
    notify(ctx, "reviewed")
    return `${text}, reviewed`
  }
})
const agent = runCode({
  id: "writer",
  execute: async (topic: string, ctx) => {
    const text = await ctx.harness.run(draft, topic, ctx)
    await ctx.checkpoint()
    return ctx.harness.run(review, text, ctx)
  }
})
const makeHarness = () =>
  new AgentHarness({ name: "writer", agentGraph: agent, params: {}, environment: { storage: { checkpointStore } } })

// First boot: the host wires a session queue and a listener, and dies mid-run.
const first = makeHarness()
const session: SessionState = { queue: [] }
const ctx = first.createContext({ threadId: "thread-42", state: session })
;(ctx as Decorated).onEvent = (event) => console.log(`  listener: ${event}`)
await first.run(agent, "tides", ctx).catch((error: Error) => console.log(`first boot: ${error.message}`))
await first.close()

// Second boot, the wrong way: a bare restore. Nothing throws, but the context has no
// queue and no listener, so whatever the resumed steps report would go nowhere.
hostDies = false
const careless = makeHarness()
const bare = await careless.restore(ctx.id)
assert.ok(bare !== null)
console.log(`bare restore: state ${JSON.stringify(bare.state)}, listener ${typeof (bare as Decorated).onEvent}`)
// A fresh, empty state (as noetic gives): the session's queue is gone.
assert.deepEqual(bare.state, {})
await careless.close()

// Second boot, the right way: hand the wiring back, then re-decorate.
const harness = makeHarness()
const newSession: SessionState = { queue: [] }
const restored = await harness.restore(ctx.id, { state: newSession })
assert.ok(restored !== null)
;(restored as Decorated).onEvent = (event) => console.log(`  listener: ${event}`)
console.log(`restored ${restored.id === ctx.id ? "under the original execution id" : "UNDER A NEW ID"}, thread ${restored.threadId}`)
assert.equal(restored.id, ctx.id)
assert.equal(restored.threadId, "thread-42") // from the record
assert.equal(restored.state, newSession)
const output = await harness.run(agent, "tides", restored)
console.log(`decorated restore: queue ${JSON.stringify(newSession.queue)}, output "${output}"`)
assert.deepEqual(newSession.queue, ["reviewed"]) // draft replayed: its body, and its event, did not run again

await harness.close()
rmSync(home, { recursive: true, force: true })
