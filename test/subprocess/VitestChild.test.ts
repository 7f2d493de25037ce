import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { expect, it } from "vitest"
import { AgentHarness, createLocalSubprocessAdapter } from "../../src/promise/index.ts"
import { triple } from "./fixtures/siblingSteps.mjs"

it("a local child started from a vitest test runs a step of a sibling .mjs module", async () => {
  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nvc-"))
  const before = process.env.NOETIC_HOME
  process.env.NOETIC_HOME = home
  const adapter = createLocalSubprocessAdapter()
  const harness = new AgentHarness({ name: "host", params: {}, environment: { subprocess: adapter } })
  try {
    const parent = await harness.createContext()
    const handle = harness.detachedSpawn(triple, 7, parent)
    expect(await handle.await()).toBe(21)
  } finally {
    await harness.close()
    await adapter.close()
    if (before === undefined) delete process.env.NOETIC_HOME
    else process.env.NOETIC_HOME = before
  }
}, 60_000)
