/**
 * Structured output (docs/runtime.md#structured-output): a `callModel` with an `output`
 * schema sends the provider its JSON Schema as OpenRouter's `response_format`
 * (`json_schema`, named `output`), found as noetic finds it (zod's own, else
 * `outputJsonSchema`, else the Standard JSON Schema); a validation-only schema without
 * `outputJsonSchema` rejects `MISSING_JSON_SCHEMA` before any request; a reply its
 * schema refuses rejects `model_parse_error`. Against the local fake provider server.
 */
import { afterEach, describe, expect, it } from "vitest"
import { callModel, isNoeticConfigError, type LLMResponse, runCode } from "../../src/promise/index.ts"
import { harness } from "../promise/harnesses.ts"
import { runTurn } from "../promise/turns.ts"
import { type FakeOpenRouter, objectSchema, type Reply, startFakeOpenRouter } from "./fakeOpenRouter.ts"

const servers: Array<FakeOpenRouter> = []
const serve = async (answer: ReadonlyArray<Reply>) => {
  const server = await startFakeOpenRouter(answer)
  servers.push(server)
  return server
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const rejection = (promise: Promise<unknown>): Promise<any> =>
  promise.then(() => expect.fail("expected a rejection"), (error) => error)

const onServer = (server: FakeOpenRouter) => ({ provider: "openrouter" as const, apiKey: "k", baseUrl: server.baseUrl })

/** A Standard Schema that only validates (no JSON Schema of its own). */
const validationOnly = {
  "~standard": {
    version: 1,
    vendor: "test",
    validate: (value: unknown) =>
      typeof (value as { score?: unknown })?.score === "number" ? { value } : { issues: [{ message: "score must be a number" }] }
  }
}

const scoreJson = { type: "object", properties: { score: { type: "number" } }, required: ["score"] }

/** Shaped as a zod 4 schema is (its `_zod` internals, Standard JSON Schema on both sides). */
const zodShaped = {
  _zod: { def: { type: "object" } },
  "~standard": {
    ...validationOnly["~standard"],
    vendor: "zod",
    jsonSchema: {
      input: () => ({ $schema: "http://json-schema.org/draft-07/schema#", ...scoreJson, "~input": true }),
      output: () => ({
        $schema: "http://json-schema.org/draft-07/schema#",
        ...scoreJson,
        additionalProperties: false,
        "~vendor": "dropped"
      })
    }
  }
}

describe("structured output", () => {
  it("sends the output schema's JSON Schema as response_format and resolves with the parsed value", async () => {
    const server = await serve([{ text: "{\"score\":7}" }])
    const step = callModel({ id: "grade", model: "m/x", output: zodShaped as never })
    const h = harness({ name: "structured", agentGraph: step, params: {}, callModelDefaults: onServer(server) })
    expect((await runTurn(h, "essay")).output).toEqual({ score: 7 })
    // zod's output side, its vendor keys (`~...`) dropped, not strict (as noetic sends it).
    expect(server.requests[0]!.body.response_format).toEqual({
      type: "json_schema",
      json_schema: {
        name: "output",
        schema: { $schema: "http://json-schema.org/draft-07/schema#", ...scoreJson, additionalProperties: false }
      }
    })
  })

  it("takes a Standard JSON Schema's input side, and outputJsonSchema for a schema that only validates", async () => {
    const server = await serve([{ text: "{\"score\":1}" }, { text: "{\"score\":2}" }, { text: "{\"score\":3}" }])
    const standard = callModel({ id: "standard", model: "m/x", output: objectSchema({ score: "number" }) as never })
    const explicit = callModel({ id: "explicit", model: "m/x", output: validationOnly as never, outputJsonSchema: scoreJson })
    // zod's own JSON Schema comes before an explicit one, as in noetic.
    const zodFirst = callModel({ id: "zod-first", model: "m/x", output: zodShaped as never, outputJsonSchema: { type: "object" } })
    expect(explicit.outputJsonSchema).toBe(scoreJson)
    const h = harness({ name: "structured-2", params: {}, callModelDefaults: onServer(server) })
    const ctx = h.createContext()
    expect(await h.run(standard, "a", ctx)).toEqual({ score: 1 })
    expect(await h.run(explicit, "b", ctx)).toEqual({ score: 2 })
    expect(await h.run(zodFirst, "c", ctx)).toEqual({ score: 3 })
    const sent = server.requests.map((r) => r.body.response_format.json_schema.schema)
    expect(sent[0]).toEqual({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      ...scoreJson
    })
    expect(sent[1]).toEqual(scoreJson)
    expect(sent[2]).toMatchObject({ additionalProperties: false, required: ["score"] })
    await h.close()
  })

  it("rejects MISSING_JSON_SCHEMA, before any request, for a validation-only schema without outputJsonSchema", async () => {
    const server = await serve([{ text: "{\"score\":1}" }])
    const step = callModel({ id: "unconstrained", model: "m/x", output: validationOnly as never })
    const h = harness({ name: "structured-3", agentGraph: step, params: {}, callModelDefaults: onServer(server) })
    const error = await rejection(runTurn(h, "essay"))
    expect(isNoeticConfigError(error)).toBe(true)
    expect(error.code).toBe("MISSING_JSON_SCHEMA")
    expect(server.requests).toHaveLength(0)
  })

  it("a reply the schema refuses rejects model_parse_error; a step without output sends no response_format", async () => {
    const server = await serve([{ text: "{\"score\":\"high\"}" }, { text: "plain" }])
    const h = harness({ name: "structured-4", params: {}, callModelDefaults: onServer(server) })
    const ctx = h.createContext()
    const error = await rejection(h.run(callModel({ id: "grade", model: "m/x", output: zodShaped as never }), "x", ctx))
    expect(error.noeticError).toMatchObject({ kind: "model_parse_error", stepId: "grade", raw: "{\"score\":\"high\"}" })
    expect(await h.run(callModel({ id: "free", model: "m/x" }), "y", ctx)).toBe("plain")
    expect(server.requests[1]!.body.response_format).toBeUndefined()
    await h.close()
  })

  it("harness.callModel sends outputSchema's JSON Schema; _testCallModel is asked with it", async () => {
    const server = await serve([{ text: "{\"score\":4}" }])
    let answer: LLMResponse | undefined
    const step = runCode({
      id: "raw",
      execute: async (_: string, ctx) => {
        answer = await ctx.harness.callModel({
          model: "m/direct",
          items: [{ id: "u1", type: "message", role: "user", status: "completed", content: [{ type: "input_text", text: "rate" }] }],
          outputSchema: validationOnly as never,
          outputJsonSchema: scoreJson
        })
        return "ok"
      }
    })
    const h = harness({ name: "structured-5", agentGraph: step, params: {}, callModelDefaults: onServer(server) })
    expect((await runTurn(h, "go")).output).toBe("ok")
    expect(answer!.items).toHaveLength(1)
    expect(server.requests[0]!.body.response_format.json_schema.schema).toEqual(scoreJson)

    const asked: Array<unknown> = []
    const seamStep = callModel({ id: "seam", model: "m/x", output: objectSchema({ score: "number" }) as never })
    const seam = harness({
      name: "structured-6",
      agentGraph: seamStep,
      params: {},
      _testCallModel: async (request) => {
        asked.push(request.outputJsonSchema)
        return {
          items: [{ id: "m1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "{\"score\":5}" }] }],
          usage: { inputTokens: 1, outputTokens: 1 }
        }
      }
    })
    expect((await runTurn(seam, "go")).output).toEqual({ score: 5 })
    expect(asked).toEqual([{ $schema: "https://json-schema.org/draft/2020-12/schema", ...scoreJson }])
  })
})
