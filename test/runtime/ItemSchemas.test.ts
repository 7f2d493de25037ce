/**
 * The harness option `itemSchemas: { schemas?, strict? }` (docs/runtime.md#item-schemas):
 * the items a model answers and the tool results the tool loop makes are checked against
 * the harness's extension schemas; a refused one rejects `item_schema_mismatch`; `strict:
 * false` lets unknown item types through; a malformed option throws when the harness is built.
 */
import { afterEach, describe, expect, it } from "vitest"
import {
  callModel,
  createCheckpointStore,
  createInMemoryStorage,
  isNoeticConfigError,
  type LLMResponse,
  tool
} from "../../src/promise/index.ts"
import { harness } from "../promise/harnesses.ts"
import { runTurn } from "../promise/turns.ts"
import { type FakeOpenRouter, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const rejection = (promise: Promise<unknown>): Promise<any> =>
  promise.then(() => expect.fail("expected a rejection"), (error) => error)

/** A Standard Schema accepting objects for which `test` holds. */
const gate = (test: (value: any) => boolean) => ({
  "~standard": {
    version: 1,
    vendor: "test",
    validate: (value: unknown) => (test(value) ? { value } : { issues: [{ message: "refused" }] })
  }
})

const widget = gate((v) => v?.type === "custom_widget" && typeof v.payload === "number")

/** A scripted model answering one custom item and a text message. */
const answersWidget = async (): Promise<LLMResponse> => ({
  items: [
    { id: "w1", type: "custom_widget", payload: 3 },
    { id: "m1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "here" }] }
  ],
  usage: { inputTokens: 1, outputTokens: 1 }
})

describe("the harness option itemSchemas", () => {
  it("an item type its schemas accept is appended; strict: false lets an unknown type through", async () => {
    const step = callModel({ id: "llm", model: "m/x" })
    const extended = harness({
      name: "widgets",
      params: {},
      agentGraph: step,
      _testCallModel: answersWidget,
      itemSchemas: { schemas: { items: [widget] } }
    })
    const ctx = extended.createContext()
    expect(await extended.run(step, "show", ctx)).toBe("here")
    expect((ctx.itemLog.items as ReadonlyArray<any>).map((item) => item.type)).toContain("custom_widget")

    const lenient = harness({ name: "lenient", params: {}, agentGraph: step, _testCallModel: answersWidget, itemSchemas: { strict: false } })
    expect((await runTurn(lenient, "show")).output).toBe("here")

    // The same answer without the extension is refused, as noetic refuses it.
    const plain = harness({ name: "plain", params: {}, agentGraph: step, _testCallModel: answersWidget })
    const error = await rejection(runTurn(plain, "show"))
    expect(error.noeticError).toEqual({ kind: "item_schema_mismatch", category: "items", itemType: "custom_widget" })
  })

  it("tool results the tool loop makes are checked against schemas.toolResults", async () => {
    const lookup = tool({ name: "lookup", description: "Looks up", execute: async (args: { q: string }) => `found ${args.q}` })
    const script = () =>
      startFakeOpenRouter([
        { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"q\":\"x\"}" }] },
        { text: "done" }
      ]).then((server) => (servers.push(server), server))
    const step = callModel({ id: "llm", model: "m/x", tools: [lookup] })
    const accepting = await script()
    const accepted = harness({
      name: "results-ok",
      params: {},
      agentGraph: step,
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: accepting.baseUrl },
      itemSchemas: { schemas: { toolResults: [gate((v) => v?.type === "function_call_output" && String(v.output).startsWith("found"))] } }
    })
    expect((await runTurn(accepted, "go")).output).toBe("done")

    const refusing = await script()
    const refused = harness({
      name: "results-refused",
      params: {},
      agentGraph: step,
      callModelDefaults: { provider: "openrouter", apiKey: "k", baseUrl: refusing.baseUrl },
      itemSchemas: { schemas: { toolResults: [gate((v) => String(v?.output).startsWith("signed:"))] } }
    })
    const error = await rejection(runTurn(refused, "go"))
    expect(error.noeticError).toEqual({ kind: "item_schema_mismatch", category: "toolResults" })
    expect(error.message).toBe("Item did not match any registered toolResults extension schema.")
    // The round that asked for the tool was made; the refused result was never sent back.
    expect(refusing.requests).toHaveLength(1)
  })

  it("a malformed itemSchemas throws INVALID_ITEM_SCHEMAS when the harness is built", () => {
    const code = (itemSchemas: unknown) => {
      try {
        harness({ name: "bad", params: {}, itemSchemas } as never)
      } catch (error) {
        expect(isNoeticConfigError(error)).toBe(true)
        return (error as { code: string }).code
      }
      return "built"
    }
    expect(code([widget])).toBe("INVALID_ITEM_SCHEMAS")
    expect(code({ schemas: { widgets: [widget] } })).toBe("INVALID_ITEM_SCHEMAS")
    expect(code({ schemas: { items: [{}] } })).toBe("INVALID_ITEM_SCHEMAS")
    expect(code({ strict: "yes" })).toBe("INVALID_ITEM_SCHEMAS")
    expect(code({ schemas: { items: [widget] }, strict: true })).toBe("built")
  })
})

describe("restored snapshots and itemSchemas", () => {
  it("restore checks the snapshot's items as noetic's restore does: refused with item_schema_mismatch, accepted intact", async () => {
    const storage = createInMemoryStorage()
    const step = callModel({ id: "llm", model: "m/x" })
    const durable = (name: string, itemSchemas?: unknown) =>
      harness({
        name,
        params: {},
        agentGraph: step,
        _testCallModel: answersWidget,
        environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } },
        ...(itemSchemas === undefined ? {} : { itemSchemas })
      } as never)
    const writer = durable("writer", { schemas: { items: [widget] } })
    const ctx = writer.createContext({ id: "exec-widget", threadId: "t" })
    expect(await writer.run(step, "show", ctx)).toBe("here")
    await writer.checkpoint(ctx)

    // The same extensions: the log comes back whole.
    const same = await durable("same", { schemas: { items: [widget] } }).restore("exec-widget")
    expect((same!.itemLog.items as ReadonlyArray<any>).map((item) => item.type)).toEqual(["message", "custom_widget", "message"])
    expect((same!.itemLog.items as ReadonlyArray<any>)[1]).toEqual({ id: "w1", type: "custom_widget", payload: 3 })

    // A harness whose schemas refuse the custom item refuses the restore, with the typed error.
    const error = await rejection(durable("strict", { strict: true }).restore("exec-widget"))
    expect(error.noeticError).toEqual({ kind: "item_schema_mismatch", category: "items", itemType: "custom_widget" })
    expect(error.message).toBe("Item type 'custom_widget' did not match any registered item extension schema.")
    // Not strict: unknown types pass.
    const lenient = await durable("lenient", { strict: false }).restore("exec-widget")
    expect(lenient!.itemLog.items).toHaveLength(3)
    // A resume of the refused snapshot fails the same way rather than run on a log it refuses.
    const resumeError = await rejection(durable("strict-resume", { schemas: { items: [] } }).resume("exec-widget"))
    expect(resumeError.noeticError).toMatchObject({ kind: "item_schema_mismatch", itemType: "custom_widget" })
    // A harness given no item schemas restores what was appended, whatever its type:
    // its appends are not checked either, so nothing it wrote becomes unrestorable.
    const unconfigured = await durable("plain").restore("exec-widget")
    expect(unconfigured!.itemLog.items).toHaveLength(3)
  })
})
