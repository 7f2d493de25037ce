import * as Schema from "effect/Schema"
import { describe, expect, it } from "vitest"
import { decodeServerFrameSync, ServerFrame } from "../../src/schema/IpcFrame.ts"

/** What the schema alone makes of a line: the reference the decoder must agree with. */
const bySchema = (line: string) => {
  const result = Schema.decodeUnknownResult(ServerFrame)(JSON.parse(line))
  return result._tag === "Success" ? { ok: true, frame: result.success } : { ok: false }
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
  `{"type":"bye","reason":"done"}`
]

describe("server frame decoding", () => {
  it("accepts and returns exactly what the schema does, for the bulk frames and the rest", () => {
    for (const line of lines) {
      const decoded = decodeServerFrameSync(line)
      const expected = bySchema(line)
      expect({ line, ok: decoded._tag === "Success" }).toEqual({ line, ok: expected.ok })
      if (decoded._tag === "Success") expect(decoded.success).toEqual(expected.frame)
      else expect(decoded.failure._tag).toBe("MalformedFrame")
    }
  })

  it("keeps a typed error for a line that is no JSON or no known frame", () => {
    const notJson = decodeServerFrameSync(`{"type":"item",`)
    expect(notJson._tag === "Failure" && notJson.failure._tag).toBe("MalformedFrame")
    const unknown = decodeServerFrameSync(`{"type":"nope","item":1}`)
    expect(unknown._tag === "Failure" && unknown.failure._tag).toBe("UnknownFrameType")
  })
})
