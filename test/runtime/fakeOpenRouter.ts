/**
 * A local HTTP server speaking OpenRouter's chat completions wire format (no network is
 * reachable in tests): `POST /api/v1/chat/completions`, answered from a script as
 * server-sent events (or one JSON body), with tool calls, reasoning, usage and cost,
 * errors and 429 rate limits. It records every request it was sent.
 */
import * as Http from "node:http"

/** One scripted answer. */
export interface Reply {
  readonly text?: string
  readonly reasoning?: string
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  /** An HTTP status other than 200 (429, 500...), answered with `errorBody`. */
  readonly status?: number
  readonly retryAfter?: string
  readonly errorBody?: string
  readonly refusal?: string
  /** A whole `chat.completion` JSON body instead of an event stream. */
  readonly json?: boolean
  readonly usage?: { readonly prompt: number; readonly completion: number; readonly cost?: number }
}

/** A request as the server received it. */
export interface Received {
  readonly path: string
  readonly authorization: string | undefined
  readonly body: any
}

export interface FakeOpenRouter {
  /** The API root to give as `baseUrl`. */
  readonly baseUrl: string
  readonly requests: Array<Received>
  close(): Promise<void>
}

const sse = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`

/** Splits `s` in two pieces, so a client must join deltas. */
const halves = (s: string): Array<string> => s.length < 2 ? [s] : [s.slice(0, s.length >> 1), s.slice(s.length >> 1)]

const streamOf = (id: string, model: string, reply: Reply): string => {
  const base = { id, object: "chat.completion.chunk", created: 1, model }
  let out = sse({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" } }] })
  for (const piece of halves(reply.reasoning ?? "")) {
    if (piece !== "") out += sse({ ...base, choices: [{ index: 0, delta: { reasoning: piece } }] })
  }
  for (const piece of halves(reply.text ?? "")) {
    if (piece !== "") out += sse({ ...base, choices: [{ index: 0, delta: { content: piece } }] })
  }
  if (reply.refusal !== undefined) out += sse({ ...base, choices: [{ index: 0, delta: { refusal: reply.refusal } }] })
  ;(reply.toolCalls ?? []).forEach((call, index) => {
    out += sse({
      ...base,
      choices: [{ index: 0, delta: { tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] } }]
    })
    for (const piece of halves(call.arguments)) {
      out += sse({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: piece } }] } }] })
    }
  })
  const finish = reply.toolCalls !== undefined && reply.toolCalls.length > 0 ? "tool_calls" : "stop"
  out += sse({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] })
  const usage = reply.usage ?? { prompt: 10, completion: 5 }
  out += sse({
    ...base,
    choices: [],
    usage: {
      prompt_tokens: usage.prompt,
      completion_tokens: usage.completion,
      total_tokens: usage.prompt + usage.completion,
      ...(usage.cost === undefined ? {} : { cost: usage.cost })
    }
  })
  return out + "data: [DONE]\n\n"
}

const jsonOf = (id: string, model: string, reply: Reply) => ({
  id,
  object: "chat.completion",
  model,
  choices: [{
    index: 0,
    finish_reason: reply.toolCalls !== undefined && reply.toolCalls.length > 0 ? "tool_calls" : "stop",
    message: {
      role: "assistant",
      content: reply.text ?? null,
      ...(reply.reasoning === undefined ? {} : { reasoning: reply.reasoning }),
      ...(reply.refusal === undefined ? {} : { refusal: reply.refusal }),
      ...(reply.toolCalls === undefined ? {} : {
        tool_calls: reply.toolCalls.map((call) => ({ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }))
      })
    }
  }],
  usage: { prompt_tokens: reply.usage?.prompt ?? 10, completion_tokens: reply.usage?.completion ?? 5, ...(reply.usage?.cost === undefined ? {} : { cost: reply.usage.cost }) }
})

/**
 * Starts the server on a free port. `answer(body, n)` picks the reply to request `n`
 * (0-based); a request past the script's end is answered 500 "script exhausted".
 */
export const startFakeOpenRouter = (
  answer: ReadonlyArray<Reply> | ((body: any, n: number) => Reply | undefined)
): Promise<FakeOpenRouter> => {
  const requests: Array<Received> = []
  const pick = typeof answer === "function" ? answer : (_: unknown, n: number) => answer[n]
  const server = Http.createServer((req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (chunk) => (raw += chunk))
    req.on("end", () => {
      const body = raw === "" ? undefined : JSON.parse(raw)
      const n = requests.length
      requests.push({ path: req.url ?? "", authorization: req.headers.authorization, body })
      if (req.method !== "POST" || req.url !== "/api/v1/chat/completions") {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not found" } }))
        return
      }
      const reply = pick(body, n)
      if (reply === undefined) {
        res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "script exhausted" } }))
        return
      }
      if (reply.status !== undefined) {
        res.writeHead(reply.status, {
          "content-type": "application/json",
          ...(reply.retryAfter === undefined ? {} : { "retry-after": reply.retryAfter })
        }).end(reply.errorBody ?? JSON.stringify({ error: { message: `status ${reply.status}` } }))
        return
      }
      const id = `gen-${n}`
      if (reply.json === true) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(jsonOf(id, body.model, reply)))
        return
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      res.end(streamOf(id, body.model, reply))
    })
  })
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const address = server.address() as { port: number }
      resolve({
        baseUrl: `http://127.0.0.1:${address.port}/api/v1`,
        requests,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}

/** A Standard Schema with the Standard JSON Schema trait, for a tool's input (what zod 4 gives). */
export const objectSchema = <T extends Record<string, "string" | "number">>(fields: T) => ({
  "~standard": {
    version: 1,
    vendor: "test",
    validate: (value: unknown) => {
      if (typeof value !== "object" || value === null) return { issues: [{ message: "expected an object" }] }
      for (const [key, type] of Object.entries(fields)) {
        if (typeof (value as Record<string, unknown>)[key] !== type) {
          return { issues: [{ message: `expected ${key} to be a ${type}`, path: [key] }] }
        }
      }
      return { value: value as { [K in keyof T]: T[K] extends "string" ? string : number } }
    },
    jsonSchema: {
      input: () => ({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: Object.fromEntries(Object.entries(fields).map(([key, type]) => [key, { type }])),
        required: Object.keys(fields)
      })
    }
  }
})
