/**
 * Facade harnesses a test file builds through `harness(options)`: each is closed
 * after the test that built it, so no test leaves a host running.
 */
import { afterEach } from "vitest"
import { AgentHarness, type AgentHarnessOptions } from "../../src/promise/index.ts"

const open: Array<AgentHarness> = []

/** A new facade harness, closed after the current test. */
export const harness = (options: AgentHarnessOptions): AgentHarness => {
  const built = new AgentHarness(options)
  open.push(built)
  return built
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((h) => h.close()))
})
