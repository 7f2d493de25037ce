/**
 * The fast check a restore runs on each ledger record accepts only what the schema
 * accepts, and accepts every record as this library writes it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import fc from "fast-check"
import {
  asWrittenLedgerEntry,
  LEDGER_ENTRY_VERSION,
  LedgerEntry,
  readStepRecordedHead,
  recordedValueOf
} from "../../src/schema/LedgerEntry.ts"

const decode = Schema.decodeUnknownExit(LedgerEntry)

/** Records as the ledger writes them (after the JSON round trip storage gives them). */
const written = fc.oneof(
  fc.record({
    _tag: fc.constant("StepRecorded"),
    version: fc.constant(LEDGER_ENTRY_VERSION),
    path: fc.string(),
    stepId: fc.string(),
    kind: fc.string(),
    output: fc.oneof(
      fc.record({ _tag: fc.constant("Json"), value: fc.jsonValue({ maxDepth: 2 }) }),
      fc.constant({ _tag: "Undefined" })
    ),
    at: fc.nat(),
    position: fc.nat()
  }, { requiredKeys: ["_tag", "version", "path", "stepId", "kind", "output"] }),
  fc.record({
    _tag: fc.constant("SubtreeDiscarded"),
    version: fc.constant(LEDGER_ENTRY_VERSION),
    path: fc.string(),
    at: fc.nat()
  }, { requiredKeys: ["_tag", "version", "path"] }),
  fc.record({
    _tag: fc.constant("IntentRecorded"),
    version: fc.constant(LEDGER_ENTRY_VERSION),
    path: fc.string(),
    stepId: fc.string(),
    kind: fc.string(),
    position: fc.nat()
  }, { requiredKeys: ["_tag", "version", "path", "stepId", "kind"] })
).map((record) => JSON.parse(JSON.stringify(record)) as unknown)

const FIELDS = ["_tag", "version", "path", "stepId", "kind", "output", "at", "position", "value"] as const
const odd = fc.oneof(
  fc.jsonValue({ maxDepth: 1 }),
  fc.constantFrom<unknown>(undefined, NaN, Infinity, -0, 2, "1", "Json", "Undefined", "StepRecorded", [], {}, null)
)

/** One change to a record or to its output: a field replaced, deleted or added. */
const Mutation = fc.record({
  inOutput: fc.boolean(),
  field: fc.constantFrom(...FIELDS),
  op: fc.constantFrom("replace", "delete"),
  value: odd
})

const mutate = (record: unknown, mutations: ReadonlyArray<typeof Mutation extends fc.Arbitrary<infer M> ? M : never>) => {
  const root = structuredClone(record) as Record<string, unknown>
  for (const m of mutations) {
    const target = m.inOutput && typeof root.output === "object" && root.output !== null
      ? root.output as Record<string, unknown>
      : root
    if (m.op === "delete") delete target[m.field]
    // A copy: the arbitrary hands out shared constants ({}, []), which a later
    // mutation could otherwise change, across records too.
    else target[m.field] = structuredClone(m.value)
  }
  return root
}

describe("asWrittenLedgerEntry", () => {
  it("accepts every record as the ledger writes it, as the schema decodes it", () =>
    fc.assert(
      fc.property(written, (record) => {
        const fast = asWrittenLedgerEntry(record)
        assert.strictEqual(fast, record)
        const decoded = decode(record)
        assert.isTrue(Exit.isSuccess(decoded))
        if (Exit.isSuccess(decoded)) assert.deepStrictEqual(fast, decoded.value)
      }),
      { numRuns: 1000 }
    ))

  it("accepts nothing the schema rejects, mutated records and other values alike", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(written, fc.array(Mutation, { minLength: 1, maxLength: 3 })).map(([record, ms]) => mutate(record, ms)),
          odd
        ),
        (value) => {
          if (asWrittenLedgerEntry(value) === undefined) return
          const decoded = decode(value)
          assert.isTrue(Exit.isSuccess(decoded), JSON.stringify(value))
          if (Exit.isSuccess(decoded)) {
            // What a restore reads of the record is what the decoder gives (the decoder
            // also drops fields it does not know, which a restore never reads).
            const read = (entry: any) =>
              entry._tag === "SubtreeDiscarded"
                ? [entry._tag, entry.version, entry.path, entry.at]
                : entry._tag === "IntentRecorded"
                ? [entry._tag, entry.version, entry.path, entry.stepId, entry.kind, entry.position]
                : [
                  ...[entry._tag, entry.version, entry.path, entry.stepId, entry.kind, entry.position, entry.at],
                  entry.output._tag,
                  entry.output._tag === "Json" ? entry.output.value : undefined
                ]
            assert.deepStrictEqual(read(value), read(decoded.value))
          }
        }
      ),
      { numRuns: 5000 }
    )
    // Records a restore must not take as they are: each goes to the decoder.
    assert.strictEqual(asWrittenLedgerEntry(sample as unknown), sample as unknown)
    for (const value of [null, [], { ...sample, version: 2 }, { ...sample, output: { _tag: "Json" } }, { ...sample, at: "1" }]) {
      assert.isUndefined(asWrittenLedgerEntry(value as unknown), JSON.stringify(value))
    }
  })
})

const sample = {
  _tag: "StepRecorded",
  version: LEDGER_ENTRY_VERSION,
  path: "/a#0",
  stepId: "a",
  kind: "runCode",
  output: { _tag: "Json", value: 1 }
}

/** The identity and output the schema decodes from a record's whole text, or undefined when it rejects it. */
const decodedWhole = (text: string) => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  const decoded = decode(parsed)
  if (Exit.isFailure(decoded) || decoded.value._tag !== "StepRecorded") return undefined
  const entry = decoded.value
  return {
    identity: [entry.path, entry.stepId, entry.kind, entry.position],
    value: entry.output._tag === "Json" ? entry.output.value : undefined
  }
}

/** Strings the ledger writes without an escape: the head of their records is read without parsing them. */
const plain = fc.string({ unit: fc.constantFrom("a", "/", "#", "[", "]", "0", "9", "é", " ", "\u{1F600}", "'") })

/** A completed step's record as the ledger writes it, its output last, as text. */
const writtenText = (text: fc.Arbitrary<string>) =>
  fc.record({
    _tag: fc.constant("StepRecorded"),
    version: fc.constant(LEDGER_ENTRY_VERSION),
    path: text,
    stepId: text,
    kind: text,
    at: fc.nat(),
    position: fc.nat(),
    output: fc.oneof(
      fc.record({ _tag: fc.constant("Json"), value: fc.jsonValue({ maxDepth: 2 }) }),
      fc.constant({ _tag: "Undefined" })
    )
  }, { requiredKeys: ["_tag", "version", "path", "stepId", "kind", "output"] }).map((record) => JSON.stringify(record))

/** One change to a record's text: characters inserted, deleted or replaced at a place. */
const TextEdit = fc.record({
  at: fc.nat(),
  remove: fc.nat({ max: 3 }),
  insert: fc.oneof(
    fc.constantFrom("", "}", "}}", "\"", "\\", ",", ":", "{", "]", "\n", "\u0001", " ", "1", "-", ".5", "e9", "null"),
    fc.string({ maxLength: 3 })
  )
})

const edit = (text: string, edits: ReadonlyArray<typeof TextEdit extends fc.Arbitrary<infer E> ? E : never>) =>
  edits.reduce((current, e) => {
    const at = e.at % (current.length + 1)
    return current.slice(0, at) + e.insert + current.slice(at + e.remove)
  }, text)

describe("readStepRecordedHead and recordedValueOf", () => {
  it("read every record as the ledger writes it, as the schema decodes the whole text", () =>
    fc.assert(
      fc.property(writtenText(plain), (text) => {
        const head = readStepRecordedHead(text)
        assert.isDefined(head, text)
        const whole = decodedWhole(text)!
        assert.deepStrictEqual([head!.path, head!.stepId, head!.kind, head!.position], whole.identity)
        assert.deepStrictEqual(recordedValueOf(text, head!), { _tag: "Read", value: whole.value })
      }),
      { numRuns: 1000 }
    ))

  it("replay nothing the schema rejects, and read the identity the schema decodes, edited texts and others alike", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(writtenText(plain), fc.array(TextEdit, { minLength: 1, maxLength: 3 })).map(([text, es]) => edit(text, es)),
          fc.tuple(writtenText(fc.string()), fc.array(TextEdit, { maxLength: 2 })).map(([text, es]) => edit(text, es)),
          // Records mutated as values, written back in the ledger's order.
          fc.tuple(written, fc.array(Mutation, { minLength: 1, maxLength: 3 })).map(([record, ms]) => {
            const { output, ...rest } = mutate(record, ms)
            return JSON.stringify({ ...rest, output })
          })
        ),
        (text) => {
          const head = readStepRecordedHead(text)
          if (head === undefined) return
          const whole = decodedWhole(text)
          const read = recordedValueOf(text, head)
          if (whole === undefined) {
            assert.strictEqual(read._tag, "Unreadable", text)
            return
          }
          assert.deepStrictEqual([head.path, head.stepId, head.kind, head.position], whole.identity, text)
          assert.deepStrictEqual(read, { _tag: "Read", value: whole.value }, text)
        }
      ),
      { numRuns: 5000 }
    )
    // Texts in any other form are not read here: JSON.parse and the schema judge them.
    const text = JSON.stringify({ ...sample, at: 1 })
    for (
      const other of [
        text,
        text.replace("\"/a#0\"", "\"/a\\u0023\""),
        JSON.stringify({ ...sample, at: 1.5, output: undefined, position: undefined }),
        JSON.stringify({ ...sample, version: 2, output: undefined, at: 1, position: 1 }),
        `${JSON.stringify({ ...sample, output: undefined })} `
      ]
    ) assert.isUndefined(readStepRecordedHead(other), other)
  })

  it("replay nothing from a record cut short: no part of a record's text is read as one with an output", () =>
    fc.assert(
      fc.property(writtenText(plain), (text) => {
        for (let length = 0; length < text.length; length++) {
          const cut = text.slice(0, length)
          const head = readStepRecordedHead(cut)
          if (head !== undefined) assert.strictEqual(recordedValueOf(cut, head)._tag, "Unreadable", cut)
        }
      }),
      { numRuns: 300 }
    ))

  it("a record cut off just after its output's value key is not read as an undefined output", () => {
    const text = JSON.stringify({ ...sample, output: undefined, at: 1 }).slice(0, -1) + ",\"output\":{\"_tag\":\"Json\",\"value\":"
    assert.isUndefined(readStepRecordedHead(text), text)
  })

  it("an output that is not JSON is Unreadable, with the parser's reason", () => {
    const text = JSON.stringify({ ...sample, output: undefined, at: 1, position: 0 }).slice(0, -1) +
      ",\"output\":{\"_tag\":\"Json\",\"value\":{\"x\":}}"
    const head = readStepRecordedHead(text)
    assert.deepStrictEqual(head && [head.path, head.stepId, head.kind, head.position], ["/a#0", "a", "runCode", 0])
    const read = recordedValueOf(text, head!)
    assert.strictEqual(read._tag, "Unreadable")
    if (read._tag === "Unreadable") assert.include(read.message, "not valid JSON")
  })
})
