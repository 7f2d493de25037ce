import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { AgentHarness, channel, createCheckpointStore, createSqliteStorage, runCode, scratchpad } from "../../src/promise/index.ts"

const durableHarness = (path: string) => {
  const storage = createSqliteStorage({ path })
  return new AgentHarness({
    name: "layers",
    params: {},
    contextLayers: [scratchpad()],
    environment: { storage: { adapter: storage, checkpointStore: createCheckpointStore({ storage }) } }
  })
}

describe("durable layer state and channels through the facade", () => {
  it("a thread's scratchpad written in one harness is rehydrated by the next harness on the same storage", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "layers-"))
    const path = Path.join(dir, "db.sqlite")
    const first = durableHarness(path)
    const write = runCode({
      id: "write",
      execute: async (goal: string, ctx) => {
        await ctx.context.scratchpad.update({ goal })
        return ctx.context.scratchpad.snapshot
      }
    })
    const ctx1 = first.createContext({ threadId: "thread-a" })
    expect(await first.run(write, "ship v2", ctx1)).toEqual({ goal: "ship v2" })
    await first.close()

    const second = durableHarness(path)
    const read = runCode({ id: "read", execute: async (_: string, ctx) => ctx.context.scratchpad.snapshot })
    expect(await second.run(read, "", second.createContext({ threadId: "thread-a" }))).toEqual({ goal: "ship v2" })
    // Another thread starts empty.
    expect(await second.run(read, "", second.createContext({ threadId: "thread-b" }))).toEqual("")
    await second.close()
  })

  it("a value sent through a handle while no host receives is delivered to the next host on the same storage", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "channels-"))
    const path = Path.join(dir, "db.sqlite")
    const approvals = channel("approval", { schema: undefined, mode: "queue", external: true })
    const sender = durableHarness(path)
    await sender.getChannelHandle(approvals, "exec-1").send("approve")
    await sender.close()

    const host = durableHarness(path)
    const wait = runCode({ id: "wait", execute: async (_: string, ctx) => ctx.recv(approvals, { timeout: 5_000 }) })
    expect(await host.run(wait, "", host.createContext({ id: "exec-1" }))).toBe("approve")
    await host.close()
  })
})
