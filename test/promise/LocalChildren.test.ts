import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { AgentHarness, createFileStorage, createLocalSubprocessAdapter } from "../../src/promise/index.ts"
import type { V1ServerFrame } from "../../src/schema/IpcFrame.ts"
import { askThenModel } from "../fixtures/subprocessModelSteps.ts"
import { askUntraced } from "../fixtures/untracedAskSteps.ts"

describe("Promise facade: local children", () => {
  it("a host sees a child's ask-user prompt through onFrame and answers it through the adapter", async () => {
    const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nfl-"))
    const frames: Array<V1ServerFrame> = []
    const adapter = createLocalSubprocessAdapter({
      storage: createFileStorage({ root: Path.join(base, "subprocess") }),
      pollMs: 20,
      onFrame: async (handle, frame) => {
        frames.push(frame)
        if (frame.type === "askUserRequest") await adapter.answerAskUser(handle.handleId, frame.id, "approved")
      }
    })
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    try {
      const parent = await harness.createContext()
      const handle = harness.detachedSpawn(askThenModel, "bandits", parent)
      expect(await handle.await()).toEqual({ approval: "approved", text: "answer from the child's model" })
      expect(frames.some((frame) => frame.type === "askUserRequest")).toBe(true)
      await expect(adapter.answerAskUser("no-such-handle", "p", 1)).rejects.toMatchObject({ name: "NoeticError" })
    } finally {
      await harness.close()
      await adapter.close()
    }
  }, 30_000)

  it("a child whose module turns tracing off still serves its socket: the host answers its prompt", async () => {
    // The child starts its server once the harness tells it the step is dispatched, not
    // through the tracer: with tracing off the prompt still reaches the host (a server
    // that waited for the step's end would never see the answer that ends it).
    const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nfl-"))
    const adapter = createLocalSubprocessAdapter({
      storage: createFileStorage({ root: Path.join(base, "subprocess") }),
      pollMs: 20,
      onFrame: async (handle, frame) => {
        if (frame.type === "askUserRequest") await adapter.answerAskUser(handle.handleId, frame.id, "approved")
      }
    })
    const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
    try {
      const parent = await harness.createContext()
      const handle = harness.detachedSpawn(askUntraced, "bandits", parent)
      expect(await handle.await()).toEqual({ approval: "approved", tracerEnabled: false })
    } finally {
      await harness.close()
      await adapter.close()
    }
  }, 30_000)
})
