/**
 * noetic's steps are plain data (docs/runtime.md#step-objects): each builder's step
 * carries the fields it was given as noetic shows them (`invokeTool(...).tool` the tool
 * object, `inParallel(...).paths(input, ctx)` the array its function returns), and still
 * runs as the engine step behind it, also when copied field by field into a plain object.
 */
import { describe, expect, it } from "vitest"
import {
  type AnyStep,
  callModel,
  conditional,
  inParallel,
  invokeTool,
  loop,
  runCode,
  spawn,
  until
} from "../../src/promise/index.ts"
import { harness } from "./harnesses.ts"
import { runTurn } from "./turns.ts"

const runStep = <I, O>(step: AnyStep<I, O>, input: I): Promise<O> =>
  runTurn(harness({ name: "plain-steps", params: {}, agentGraph: step }), input).then((r) => r.output as O)

/** A step written by hand as noetic's plain object, from a built step's own fields. */
const copied = <S extends object>(step: S, id: string): any => ({ ...step, id })

describe("noetic's step objects are plain data", () => {
  it("runCode shows execute and retry as given, and runs", async () => {
    const execute = async (input: string) => input.length
    const step = runCode({ id: "len", execute, retry: { maxAttempts: 3, backoff: "exponential", initialDelay: 100 } })
    expect(step.kind).toBe("runCode")
    expect(step.execute).toBe(execute)
    expect(step.retry).toEqual({ maxAttempts: 3, backoff: "exponential", initialDelay: 100 })
    expect(runCode({ id: "bare", execute }).retry).toBeUndefined()
    expect(await runStep(step, "hello")).toBe(5)
    expect(await runStep(copied(step, "len-copy"), "hey")).toBe(3)
  })

  it("invokeTool shows the tool object and args, and runs it", async () => {
    const calculator = {
      name: "calculator",
      description: "Calculate",
      execute: async (args: { a: number; b: number }) => args.a + args.b
    }
    const step = invokeTool({ id: "calc", tool: calculator, args: { b: 2 } })
    expect(step.tool).toBe(calculator)
    expect(step.tool.name).toBe("calculator")
    expect(step.args).toEqual({ b: 2 })
    expect(Object.keys(step).sort()).toEqual(["args", "id", "kind", "tool"])
    expect(await runStep(step, { a: 40, b: 0 })).toBe(42)
    expect(await runStep(copied(step, "calc-copy"), { a: 1, b: 0 })).toBe(3)
  })

  it("inParallel shows paths, mode, merge and concurrency; paths(input, ctx) returns the array", async () => {
    const paths = (n: number) => [runCode({ id: `path-${n}`, execute: async (x: number) => x + 1 })]
    const merge = (results: Array<number>) => results.reduce((a, b) => a + b, 0)
    const step = inParallel({ id: "fan", mode: "all", paths, merge, concurrency: 2 })
    expect(step.mode).toBe("all")
    expect(step.paths).toBe(paths)
    expect(step.merge).toBe(merge)
    expect(step.concurrency).toBe(2)
    const built = step.paths(5, undefined as never)
    expect(Array.isArray(built)).toBe(true)
    expect(built).toHaveLength(1)
    expect(built[0]!.kind).toBe("runCode")
    expect(built[0]!.id).toBe("path-5")
    expect(step.merge!([1, 2, 3], undefined as never)).toBe(6)
    expect(await runStep(step, 5)).toBe(6)
    expect(await runStep(copied(step, "fan-copy"), 1)).toBe(2)
  })

  it("conditional shows route; the step still routes", async () => {
    const double = runCode({ id: "double", execute: async (n: number) => n * 2 })
    const route = (n: number) => (n > 0 ? double : null)
    const step = conditional({ id: "maybe", route })
    expect(step.route).toBe(route)
    expect(await runStep(step, 4)).toBe(8)
    expect(await runStep(step, -1)).toBe(-1)
  })

  it("loop shows steps, until and its options as given", async () => {
    const body = runCode({ id: "inc", execute: async (n: number) => n + 1 })
    const stop = until.maxSteps(3)
    const prepareNext = (output: number) => output * 10
    const onError = () => "abort" as const
    const step = loop({
      id: "count",
      steps: [body],
      until: stop,
      maxIterations: 50,
      maxHistorySize: 10,
      parkTimeout: 3000,
      prepareNext,
      onError
    })
    expect(step.steps).toEqual([body])
    expect(step.until).toBe(stop)
    expect(step.maxIterations).toBe(50)
    expect(step.maxHistorySize).toBe(10)
    expect(step.parkTimeout).toBe(3000)
    expect(step.prepareNext).toBe(prepareNext)
    expect(step.onError).toBe(onError)
    // 1 -> 2 -> 20 -> 21 -> 210 -> 211: three iterations, prepareNext between them.
    expect(await runStep(step, 1)).toBe(211)
    expect(loop({ id: "bare", steps: [body], until: stop }).maxIterations).toBeUndefined()
  })

  it("spawn shows child, context and timeout as given", async () => {
    const child = { kind: "runCode" as const, id: "child", execute: async (s: string) => s.toUpperCase() }
    const step = spawn({ id: "sub", child: child as never, timeout: 5000 })
    expect(step.child).toBe(child)
    expect(step.timeout).toBe(5000)
    expect(step.context).toBeUndefined()
    expect(await runStep(step, "hi")).toBe("HI")
  })

  it("callModel shows model, instructions, tools and output as given", () => {
    const search = { name: "search", description: "Search", execute: async () => [] }
    const model = () => "openai/gpt-4o"
    const output = { "~standard": { version: 1, vendor: "test", validate: (value: unknown) => ({ value }) } } as const
    const step = callModel({ id: "llm", model, instructions: "Be brief", tools: [search], output: output as never })
    expect(step.kind).toBe("callModel")
    expect(step.model).toBe(model)
    expect(step.instructions).toBe("Be brief")
    expect(step.tools).toEqual([search])
    expect((step.tools as ReadonlyArray<unknown>)[0]).toBe(search)
    expect(step.output).toBe(output)
  })
})
