/**
 * The memory storage's key index answers a prefix listing exactly as a scan of every
 * key followed by a sort would, through any sequence of adds and removes.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { SortedKeys } from "../../src/internal/sortedKeys.ts"

type Op = { readonly add: boolean; readonly key: string }

// A small alphabet, so prefixes, repeats and removals of present keys are common.
const key = fc.string({ unit: fc.constantFrom("a", "b", "/", ":", "é", "0", "9"), maxLength: 5 })
const op: fc.Arbitrary<Op> = fc.record({ add: fc.boolean(), key })

const scanned = (keys: ReadonlySet<string>, prefix: string): Array<string> =>
  [...keys].filter((k) => k.startsWith(prefix)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))

describe("SortedKeys", () => {
  it("lists a prefix as a full scan and sort would, after any adds and removes", () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 80 }),
        fc.array(key, { minLength: 1, maxLength: 6 }),
        // Small blocks, so splitting and emptying blocks happen; 256 is the default.
        fc.constantFrom(1, 2, 3, 256),
        (ops, prefixes, blockSize) => {
          const index = new SortedKeys(blockSize)
          const model = new Set<string>()
          for (const { add, key } of ops) {
            if (add) {
              index.add(key)
              model.add(key)
            } else {
              index.remove(key)
              model.delete(key)
            }
          }
          for (const prefix of ["", ...prefixes]) expect(index.withPrefix(prefix)).toEqual(scanned(model, prefix))
        }
      ),
      { numRuns: 600 }
    )
  })

  it("hands out a fresh array each time", () => {
    const index = new SortedKeys()
    index.add("a/1")
    const first = index.withPrefix("a/")
    first.push("mutated")
    expect(index.withPrefix("a/")).toEqual(["a/1"])
  })
})
