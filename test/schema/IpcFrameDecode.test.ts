import * as Schema from "effect/Schema"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { decodeServerFrameSync, durableLine, ServerFrame } from "../../src/schema/IpcFrame.ts"

/** What the schema alone makes of a line: the reference the decoder must agree with. */
const bySchema = (line: string) => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return { ok: false, notJson: true }
  }
  const result = Schema.decodeUnknownResult(ServerFrame)(json)
  return result._tag === "Success" ? { ok: true, frame: result.success } : { ok: false }
}

const agreesWithSchema = (line: string) => {
  const decoded = decodeServerFrameSync(line)
  const expected = bySchema(line)
  expect({ line, ok: decoded._tag === "Success" }).toEqual({ line, ok: expected.ok })
  if (decoded._tag === "Success") expect(decoded.success).toEqual(expected.frame)
  // A frame of a type no peer knows is refused as such, not as malformed.
  else expect(["MalformedFrame", "UnknownFrameType"]).toContain(decoded.failure._tag)
}

const lines = [
  `{"type":"item","item":{"n":1}}`,
  `{"type":"item","item":null,"extra":true}`,
  `{"type":"item"}`,
  `{"type":"event","event":[1,2]}`,
  `{"type":"status","status":"busy"}`,
  `{"type":"status"}`,
  `{"type":"durable","seq":7,"frame":{"type":"item","item":"x"},"extra":1}`,
  `{"type":"durable","seq":1,"frame":{"type":"event","event":{"a":1},"more":2}}`,
  `{"type":"durable","seq":0,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":1.5,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":"1","frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":9007199254740993,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":2,"frame":{"type":"item"}}`,
  `{"type":"durable","seq":2,"frame":null}`,
  `{"type":"durable","seq":2,"frame":{"type":"durable","seq":1,"frame":{"type":"item","item":1}}}`,
  `{"type":"durable","seq":3,"frame":{"type":"bye"}}`,
  `{"type":"durable","seq":3,"frame":{"type":"ack","messageId":"m"}}`,
  `{"type":"bye","reason":"done"}`,
  // Envelopes close to the server's own form, which the decoder reads without parsing the envelope.
  `{"type":"durable","seq":07,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":123456789012345,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":1234567890123456,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":12,"frame":{"type":"item","item":1},"x":{}}`,
  `{"type":"durable","seq":12,"frame":{"type":"item","item":1}}}`,
  `{"type":"durable","seq":12,"frame":{"type":"item","item":1} }`,
  `{"type":"durable","seq":12,"frame":{"type":"item","item":1},"frame":{"type":"status","status":2}}`,
  `{"type":"durable","seq":12,"frame":[1]}`,
  `{"type":"durable","seq":12,"frame":"x"}`,
  `{"type":"durable","seq":12e0,"frame":{"type":"item","item":1}}`,
  `{"type":"durable","seq":12,"frame":{"type":"item","item":{"__proto__":1}}}`,
  `{"type":"durable","seq":12,"frame":{"type":"item","item":1,"type":"status"}}`,
  `{"type":"durable","seq":12,"frame":{"item":1}}`
]

describe("server frame decoding", () => {
  it("accepts and returns exactly what the schema does, for the bulk frames and the rest", () => {
    for (const line of lines) agreesWithSchema(line)
  })

  it("agrees with the schema on durable lines as the server writes them, and on every cut or edit of one", () => {
    const payloadFrame = fc.oneof(
      fc.record({ type: fc.constant("item"), item: fc.jsonValue() }),
      fc.record({ type: fc.constant("event"), event: fc.jsonValue() }),
      fc.record({ type: fc.constant("status"), status: fc.jsonValue() }),
      fc.record({ type: fc.constantFrom("item", "bye", "hello", "durable"), other: fc.jsonValue() }, { requiredKeys: [] })
    )
    const written = fc.tuple(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), payloadFrame)
      .map(([seq, frame]) => durableLine(seq, JSON.stringify(frame)).slice(0, -1))
    const edited = fc.tuple(written, fc.nat(), fc.nat({ max: 4 }), fc.string({ maxLength: 3 }))
      .map(([line, at, cut, insert]) => {
        const i = at % (line.length + 1)
        return line.slice(0, i) + insert + line.slice(i + cut)
      })
    fc.assert(fc.property(fc.oneof(written, edited), agreesWithSchema), { numRuns: 2000 })
  })

  it("keeps a typed error for a line that is no JSON or no known frame", () => {
    const notJson = decodeServerFrameSync(`{"type":"item",`)
    expect(notJson._tag === "Failure" && notJson.failure._tag).toBe("MalformedFrame")
    const unknown = decodeServerFrameSync(`{"type":"nope","item":1}`)
    expect(unknown._tag === "Failure" && unknown.failure._tag).toBe("UnknownFrameType")
  })
})
