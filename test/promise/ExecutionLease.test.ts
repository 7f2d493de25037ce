import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import {
  AgentHarness,
  createCheckpointStore,
  createFileStorage,
  NoeticError,
  runCode
} from "../../src/promise/index.ts"
import { runTurn } from "./turns.ts"

const harnesses: Array<AgentHarness> = []
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((harness) => harness.close()))
})

describe("Promise facade: execution leases", () => {
  it("a second host running a leased execution rejects with EXECUTION_LEASE_HELD; the first finishes", async () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-lease-"))
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const graph = runCode("root", async (n: number) => {
      started()
      await gate
      return n + 1
    })
    const hostOf = (owner: string) => {
      const harness = new AgentHarness({
        name: owner,
        agentGraph: graph,
        environment: {
          storage: {
            checkpointStore: createCheckpointStore({ storage: createFileStorage({ root }) }),
            lease: { owner, ttlMs: 60_000 }
          }
        }
      })
      harnesses.push(harness)
      return harness
    }
    const a = hostOf("host-a")
    const b = hostOf("host-b")
    const first = runTurn(a, 1, { executionId: "shared" })
    await running
    const refused = await runTurn(b, 1, { executionId: "shared" }).then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(NoeticError)
    expect((refused as NoeticError).code).toBe("EXECUTION_LEASE_HELD")
    open()
    expect(await first).toEqual({ executionId: "shared", output: 2 })
    // Released: host B takes the execution over at once, and the root replays.
    expect(await b.resume("shared")).toEqual({ executionId: "shared", output: 2 })
  })
})
