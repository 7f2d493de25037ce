/**
 * `ctx.span` as noetic's observability page documents it (`traceId`, `spanId`,
 * `parentSpanId`, `setAttribute`, `addEvent`, `end`), over Effect's tracer: in a step
 * body it is the step's own span, outside a step the context's.
 */
import { describe, expect, it } from "vitest"
import { AgentHarness, runCode } from "../../src/promise/index.ts"

describe("ctx.span", () => {
  it("in a step body is the step's span: attributes land on it, a child step's span is below it in the same trace", async () => {
    const harness = new AgentHarness({ name: "spans", params: {} })
    const inner = runCode({
      id: "inner",
      execute: async (_: string, ctx) => ({ name: ctx.span.name, traceId: ctx.span.traceId, spanId: ctx.span.spanId, parentSpanId: ctx.span.parentSpanId })
    })
    const outer = runCode({
      id: "outer",
      execute: async (input: string, ctx) => {
        ctx.span.setAttribute("input.length", input.length)
        ctx.span.addEvent("processing_started", { at: 1 })
        // A step's span ends with its dispatch, not here.
        ctx.span.end()
        const child = await ctx.run(inner, input)
        const span = ctx.span
        return { name: span.name, traceId: span.traceId, spanId: span.spanId, attributes: Object.fromEntries(span.attributes), status: span.effectSpan.status._tag, child }
      }
    })
    const got = await harness.run(outer, "hello", harness.createContext({ id: "exec-span" }))
    expect(got.name).toBe("runCode outer")
    expect(got.status).toBe("Started")
    expect(got.attributes).toMatchObject({ "input.length": 5, executionId: "exec-span", replay: "miss" })
    expect(got.child.name).toBe("runCode inner")
    expect(got.child.parentSpanId).toBe(got.spanId)
    expect(got.child.traceId).toBe(got.traceId)
    expect(got.child.spanId).not.toBe(got.spanId)
    await harness.close()
  })

  it("outside a step is the context's span, under its parent context's; end() ends it once", async () => {
    const harness = new AgentHarness({ name: "spans", params: {} })
    const root = harness.createContext({ id: "root-ctx" })
    const child = harness.createContext({ id: "child-ctx", parent: root })
    expect(root.span.name).toBe("context root-ctx")
    expect(root.span.parentSpanId).toBeNull()
    expect(root.span).toBe(root.span)
    expect(child.span.parentSpanId).toBe(root.span.spanId)
    expect(child.span.traceId).toBe(root.span.traceId)
    root.span.setAttribute("tenant", "acme")
    expect(root.span.attributes.get("tenant")).toBe("acme")
    expect(root.span.effectSpan.status._tag).toBe("Started")
    root.span.end()
    root.span.end()
    expect(root.span.effectSpan.status._tag).toBe("Ended")
    await harness.close()
  })
})
