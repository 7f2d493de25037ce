/**
 * The facade's sessions (docs/runtime.md#sessions): execute resolves once its input is
 * queued, turns run one after another per thread, the response and the streams span
 * the session's turns, getQueueSize, seedSessionHistory, refused modes.
 */
import { describe, expect, it } from "vitest"
import { AgentHarness, runCode, type StreamEvent } from "../../src/promise/index.ts"

const gate = () => {
  let open: () => void = () => {}
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

/** A root step that records its input and the user texts of its log, waiting on `hold` for "slow". */
const echo = (hold: Promise<void>, seen: Array<string>) =>
  runCode({
    id: "echo",
    execute: async (text: string, ctx) => {
      seen.push(text)
      if (text === "slow") await hold
      const users = ctx.itemLog.items
        .filter((item: any) => item.type === "message" && item.role === "user")
        .map((item: any) => item.content[0].text)
      return `${text} after ${users.length - 1}`
    }
  })

describe("sessions (Promise API)", () => {
  it("execute resolves before its turn finishes; turns of a thread run in order; the streams span both turns", async () => {
    const hold = gate()
    const seen: Array<string> = []
    await using harness = new AgentHarness({ name: "chat", params: {}, agentGraph: echo(hold.opened, seen) })
    // Taken before the first execute: it replays the session from its start.
    const full = harness.getFullStream({ threadId: "t" })
    const items = harness.getItemStream({ threadId: "t" })
    const first = await harness.execute("slow", { threadId: "t", messageId: "m1" })
    const second = await harness.execute("fast", { threadId: "t", messageId: "m2" })
    expect(first.threadId).toBe("t")
    expect(second.messageId).toBe("m2")
    // Both accepted; the first turn waits on the gate, the second in the queue.
    await expect.poll(() => seen).toEqual(["slow"])
    expect(harness.getQueueSize({ threadId: "t" })).toBe(1)
    expect(harness.getStatus({ threadId: "t" })).toMatchObject({ kind: "generating", turnId: first.executionId })
    hold.open()
    const response = await harness.getAgentResponse({ threadId: "t" })
    expect(response.text).toBe("fast after 1")
    expect(response.executionId).toBe(second.executionId)
    expect((await first.result()).output).toBe("slow after 0")
    expect(seen).toEqual(["slow", "fast"])
    expect(harness.getQueueSize({ threadId: "t" })).toBe(0)

    const events: Array<StreamEvent> = []
    let completed = 0
    for await (const event of full) {
      events.push(event)
      if (event.type === "chat:turn_completed" && ++completed === 2) break
    }
    const started = events.filter((e) => e.type === "chat:turn_started")
    expect(started.map((e) => e.data)).toEqual([
      { turnId: first.executionId, messageIds: ["m1"] },
      { turnId: second.executionId, messageIds: ["m2"] }
    ])
    expect(events.filter((e) => e.type === "chat:step_started").map((e) => e.data)).toEqual([
      { stepId: "echo", kind: "runCode" },
      { stepId: "echo", kind: "runCode" }
    ])
    const inputs: Array<unknown> = []
    for await (const item of items) {
      inputs.push({ text: (item as any).content[0].text, isComplete: item.isComplete })
      if (inputs.length === 2) break
    }
    expect(inputs).toEqual([{ text: "slow", isComplete: true }, { text: "fast", isComplete: true }])
  })

  it("seedSessionHistory sets what the thread's next turn starts from; other threads start empty", async () => {
    const seen: Array<string> = []
    await using harness = new AgentHarness({ name: "seeded", params: {}, agentGraph: echo(Promise.resolve(), seen) })
    harness.seedSessionHistory("a", [
      { type: "message", id: "s1", role: "user", status: "completed", content: [{ type: "input_text", text: "before" }] },
      { type: "message", id: "s2", role: "user", status: "completed", content: [{ type: "input_text", text: "and" }] }
    ])
    await harness.execute("now", { threadId: "a" })
    await harness.execute("now", { threadId: "b" })
    expect((await harness.getAgentResponse({ threadId: "a" })).text).toBe("now after 2")
    expect((await harness.getAgentResponse({ threadId: "b" })).text).toBe("now after 0")
  })

  it("a failed turn rejects its result and getAgentResponse; the next message runs", async () => {
    await using harness = new AgentHarness({
      name: "failing",
      params: {},
      agentGraph: runCode({
        id: "maybe",
        execute: async (text: string) => {
          if (text === "boom") throw new Error("broke")
          return text
        }
      })
    })
    const bad = await harness.execute("boom")
    await expect(bad.result()).rejects.toThrow("broke")
    await expect(harness.getAgentResponse()).rejects.toThrow("broke")
    await harness.execute("fine")
    expect((await harness.getAgentResponse()).text).toBe("fine")
  })

  it("refuses an unknown deliveryMode (DELIVERY_MODE_INVALID) and execute without a graph (NO_STEP_CONFIGURED)", async () => {
    await using harness = new AgentHarness({ name: "modes", params: {}, agentGraph: runCode({ id: "r", execute: async () => 1 }) })
    await expect(harness.execute("x", { deliveryMode: "soon" as never })).rejects.toMatchObject({
      code: "DELIVERY_MODE_INVALID"
    })
    expect(() => new AgentHarness({ name: "bad", params: {}, defaultDeliveryMode: "soon" as never })).toThrow(
      expect.objectContaining({ code: "DELIVERY_MODE_INVALID" })
    )
    await using empty = new AgentHarness({ name: "empty", params: {} })
    await expect(empty.execute("x")).rejects.toMatchObject({ code: "NO_STEP_CONFIGURED" })
  })
})
