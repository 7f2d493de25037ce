/**
 * Implement getMany on a networked adapter (seed page). A host-written
 * StorageAdapter over HTTP (a small key-value service started here) backs the
 * checkpoint store. Restoring an execution reads every ledger key: with `getMany`
 * that is one request; without it the framework falls back to one `get` per key.
 * Missing keys are absent from the map getMany returns, never mapped to null.
 */
import assert from "node:assert/strict"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { AgentHarness, createCheckpointStore, runCode, type StorageAdapter } from "noetic-effect/promise"

// --- a key-value service, standing in for D1 or any HTTP store ----------------
const table = new Map<string, string>()
const requests = { get: 0, getMany: 0, other: 0 }
const server = createServer(async (req, res) => {
  let body = ""
  for await (const chunk of req) body += chunk
  const { op, key, keys, value, prefix } = JSON.parse(body || "{}")
  let reply: unknown = null
  if (op === "get") {
    requests.get++
    reply = table.has(key) ? JSON.parse(table.get(key)!) : null
  } else if (op === "getMany") {
    requests.getMany++
    reply = (keys as Array<string>).filter((k) => table.has(k)).map((k) => [k, JSON.parse(table.get(k)!)])
  } else {
    requests.other++
    if (op === "set") table.set(key, JSON.stringify(value))
    if (op === "delete") table.delete(key)
    if (op === "list") reply = [...table.keys()].filter((k) => k.startsWith(prefix)).sort()
  }
  res.setHeader("content-type", "application/json")
  res.end(JSON.stringify(reply))
})
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

// --- the host's adapter --------------------------------------------------------
const call = async (payload: object): Promise<any> => {
  const res = await fetch(url, { method: "POST", body: JSON.stringify(payload) })
  if (!res.ok) throw new Error(`storage service answered ${res.status}`)
  return res.json()
}

/** A networked StorageAdapter; `batch: false` leaves out the optional getMany. */
const createHttpStorage = (options: { readonly batch: boolean }): StorageAdapter => {
  const adapter: StorageAdapter = {
    get: async (key) => call({ op: "get", key }),
    set: async (key, value) => call({ op: "set", key, value }),
    delete: async (key) => call({ op: "delete", key }),
    list: async (prefix) => call({ op: "list", prefix })
  }
  if (options.batch) {
    // One round trip; keys the store lacks are absent from the map, not null.
    adapter.getMany = async <T>(keys: Array<string>) => new Map<string, T>(await call({ op: "getMany", keys }))
  }
  return adapter
}

// --- a 20-step agent -----------------------------------------------------------
const STEPS = 20
const stepRuns = { count: 0 }
const step = (i: number) =>
  runCode({
    id: `step-${i}`,
    execute: async (acc: number) => {
      stepRuns.count++
      return acc + i
    }
  })
const steps = Array.from({ length: STEPS }, (_, i) => step(i))
const agent = runCode({
  id: "summing-agent",
  execute: async (start: number, ctx) => {
    let acc = start
    for (const s of steps) acc = await ctx.harness.run(s, acc, ctx)
    return acc
  }
})

const harnessOn = (storage: StorageAdapter) =>
  new AgentHarness({
    name: "networked",
    agentGraph: agent,
    params: {},
    environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
  })

const first = harnessOn(createHttpStorage({ batch: true }))
const ctx = first.createContext()
const total = await first.run(agent, 0, ctx)
await ctx.checkpoint()
await first.close()
console.log(`ran ${STEPS} steps over HTTP (total ${total}); ${table.size} keys stored`)

const restoreWith = async (batch: boolean) => {
  requests.get = 0
  requests.getMany = 0
  stepRuns.count = 0
  const harness = harnessOn(createHttpStorage({ batch }))
  const restored = await harness.restore(ctx.id)
  assert.ok(restored !== null)
  const replayed = await harness.run(agent, 0, restored)
  await harness.close()
  assert.equal(replayed, total)
  assert.equal(stepRuns.count, 0, "every step replays")
  return { ...requests }
}

const withBatch = await restoreWith(true)
const withoutBatch = await restoreWith(false)
console.log(`restore + replay with getMany:    ${withBatch.getMany} getMany, ${withBatch.get} single gets`)
console.log(`restore + replay without getMany: ${withoutBatch.get} single gets (one round trip per key)`)
assert.ok(withBatch.getMany >= 1)
assert.ok(withoutBatch.get > STEPS, "the fallback reads each ledger key on its own")
assert.ok(withBatch.get < withoutBatch.get)

const present = [...table.keys()][0]!
const probe = await createHttpStorage({ batch: true }).getMany!(["summing-agent:nope", present])
console.log(`getMany of one missing and one present key: ${probe.size} entry, missing key absent: ${!probe.has("summing-agent:nope")}`)
assert.equal(probe.has("summing-agent:nope"), false)

server.close()
