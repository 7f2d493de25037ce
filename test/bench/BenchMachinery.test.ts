/**
 * The benchmark's own machinery: summaries, interleaving, paired ratios, the wire
 * counter of Postgres round trips (on a real server when NOETIC_PG_URL is set) and the
 * chart renderer. No timings are asserted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { interleave, pairedRatio, ratioOf, sizedVariants, summarize, targetOf, withCaseScope } from "../../bench/harness.ts"
import * as Pg from "../../bench/postgres.ts"
import { chart } from "../../bench/render.ts"
import { HEADLINE_LABELS, markdownHeadline, markdownReport, type Results } from "../../bench/report.ts"

/** A frontend message: type byte, then int32 length (itself included), then the body. */
const message = (type: string, body: Buffer) => {
  const header = Buffer.alloc(5)
  header.write(type, 0, "latin1")
  header.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([header, body])
}

/** An untyped startup-phase message: int32 length, int32 code, body. */
const untyped = (code: number, body: Buffer = Buffer.alloc(0)) => {
  const header = Buffer.alloc(8)
  header.writeInt32BE(body.length + 8, 0)
  header.writeInt32BE(code, 4)
  return Buffer.concat([header, body])
}

const cstring = (text: string) => Buffer.from(text + "\0", "utf8")

describe("bench machinery", () => {
  it("summarize gives the median and quartiles by interpolation", () => {
    const s = summarize([5, 1, 4, 2, 3])
    assert.deepStrictEqual(s, { n: 5, median: 3, p25: 2, p75: 4, min: 1, max: 5 })
    assert.strictEqual(summarize([1, 2, 3, 4]).median, 2.5)
  })

  it("interleave runs every variant once a round, rotating the first, and drops the warm-up rounds", async () => {
    const order: Array<string> = []
    let calls = 0
    const samples = await interleave({
      a: async () => {
        order.push("a")
        return ++calls
      },
      b: async () => {
        order.push("b")
        return ++calls
      },
      c: async () => {
        order.push("c")
        return ++calls
      }
    }, { rounds: 2, warmup: 1 })
    assert.deepStrictEqual(order, ["a", "b", "c", "b", "c", "a", "c", "a", "b"])
    assert.deepStrictEqual(samples, { a: [6, 8], b: [4, 9], c: [5, 7] })
  })

  it("a ratio pairs the samples of one round and checks its target", () => {
    assert.deepStrictEqual(pairedRatio([2, 9, 4], [1, 3, 4]).median, 2)
    const figures = [
      { id: "x", label: "x", kind: "this" as const, unit: "ms", summary: summarize([2, 9, 4]) },
      { id: "y", label: "y", kind: "baseline" as const, unit: "ms", summary: summarize([1, 3, 4]) }
    ]
    const ratio = ratioOf(figures, { x: [2, 9, 4], y: [1, 3, 4] }, "x / y", "x", "y", 1.5)
    assert.strictEqual(ratio?.met, false)
    assert.isUndefined(ratioOf(figures, { x: [1] }, "x / z", "x", "z"))
    // A rate's target is a floor.
    const rate = ratioOf(figures, { x: [2, 9, 4], y: [1, 3, 4] }, "x / y", "x", "y", { atLeast: 1.5 })
    assert.deepStrictEqual([rate?.targetAtLeast, rate?.targetAtMost, rate?.met], [1.5, undefined, true])
    assert.deepStrictEqual(targetOf(summarize([900, 1100, 1200]), { atMost: 1000 }), { targetAtMost: 1000, met: false })
  })

  it("sized variants register one variant per size and label their figures with it", async () => {
    const set = sizedVariants([10, 100])
    set.add("ours", "this library", "this", (n) => async () => n * 2)
    set.add("raw", "raw", "baseline", (n) => async () => n)
    assert.deepStrictEqual(Object.keys(set.variants).sort(), ["ours@10", "ours@100", "raw@10", "raw@100"])
    const samples = await interleave(set.variants, { rounds: 2, warmup: 0 })
    const figures = set.figures(samples, "ms", (label, n) => `${label}, N = ${n}`)
    const ours = figures.find((f) => f.id === "ours@100")!
    assert.deepStrictEqual([ours.label, ours.kind, ours.summary.median], ["this library, N = 100", "this", 200])
    assert.strictEqual(ratioOf(figures, samples, "r", "ours@10", "raw@10")?.summary.median, 2)
  })

  it("a case scope closes what was registered, last first, even when the case fails", async () => {
    const closed: Array<string> = []
    const failed = await withCaseScope(async (scope) => {
      scope.onClose(async () => void closed.push("first"))
      scope.onClose(async () => {
        closed.push("second")
        throw new Error("a failing close does not stop the others")
      })
      throw new Error("the case failed")
    }).then(() => undefined, (error: Error) => error.message)
    assert.strictEqual(failed, "the case failed")
    assert.deepStrictEqual(closed, ["second", "first"])
  })

  it("the README tables count ratio targets and absolute targets of figures, floors and ceilings", () => {
    const summary = summarize([1, 2, 3])
    const results: Results = {
      schema: 1,
      startedAt: "2026-01-01T00:00:00.000Z",
      finishedAt: "2026-01-01T00:01:00.000Z",
      quick: false,
      machine: { node: "v24", platform: "linux", cpus: 2, cpuModel: "cpu", loadAverageAtStart: [0, 0, 0], loadAverageAtEnd: [0, 0, 0] },
      cases: [{
        id: "c",
        title: "C",
        figures: [{ id: "f", label: "reattach", kind: "this", unit: "ms", summary, targetAtMost: 1000, met: true }],
        ratios: [
          { label: "rate", of: "f", to: "f", summary, targetAtLeast: 0.5, met: true },
          { label: "cost", of: "f", to: "f", summary, targetAtMost: 1.5, met: false },
          { label: "informative", of: "f", to: "f", summary }
        ],
        skipped: [],
        notes: []
      }],
      failed: []
    }
    const text = markdownReport(results)
    assert.include(text, "**Targets: 2 of 3 met**")
    assert.include(text, "| rate | 2.00 (1.50–2.50) | ≥ 0.50 met |")
    assert.include(text, "| cost | 2.00 (1.50–2.50) | ≤ 1.50 MISSED |")
    assert.include(text, "| reattach | 2.00 (1.50–2.50) ms | ≤ 1,000 ms met |")
    assert.include(text, "| informative | 2.00 (1.50–2.50) |")
  })

  it("the README's headline shows the chosen comparisons, met and missed alike, and counts every target", () => {
    const summary = summarize([1, 2, 3])
    const [picked, missed] = [HEADLINE_LABELS[0]!, HEADLINE_LABELS[1]!]
    const results: Results = {
      schema: 1,
      startedAt: "2026-01-01T00:00:00.000Z",
      finishedAt: "2026-01-01T00:01:00.000Z",
      quick: false,
      machine: { node: "v24", platform: "linux", cpus: 2, cpuModel: "cpu", loadAverageAtStart: [0, 0, 0], loadAverageAtEnd: [0, 0, 0] },
      cases: [{
        id: "c",
        title: "C",
        figures: [{ id: "f", label: "not in the headline", kind: "this", unit: "ms", summary, targetAtMost: 1000, met: true }],
        ratios: [
          { label: missed, of: "f", to: "f", summary, targetAtMost: 1.5, met: false },
          { label: picked, of: "f", to: "f", summary, targetAtLeast: 0.5, met: true }
        ],
        skipped: [],
        notes: []
      }],
      failed: []
    }
    const text = markdownHeadline(results)
    assert.include(text, "2 of 3 targets met")
    assert.include(text, "(bench/README.md)")
    assert.notInclude(text, "not in the headline")
    // In the headline's order, not the results' order.
    assert.isBelow(text.indexOf(`| ${picked} | 2.00 (1.50–2.50) | ≥ 0.50 met |`), text.indexOf(`| ${missed} | 2.00 (1.50–2.50) | ≤ 1.50 MISSED |`))
    assert.isAbove(text.indexOf(`| ${picked} |`), 0)
  })

  it("the wire counter counts Query and Sync messages, across any split of the stream", () => {
    const stream = Buffer.concat([
      untyped(80877103), // SSLRequest, answered N
      untyped(196608, cstring("user") ), // startup
      message("p", cstring("password")),
      message("Q", cstring("SELECT 1")),
      message("P", Buffer.concat([cstring("s1"), cstring("SELECT value FROM t WHERE key = $1"), Buffer.alloc(2)])),
      message("B", Buffer.concat([cstring(""), cstring("s1"), Buffer.alloc(6)])),
      message("E", Buffer.concat([cstring(""), Buffer.alloc(4)])),
      message("S", Buffer.alloc(0)),
      message("B", Buffer.concat([cstring(""), cstring("s1"), Buffer.alloc(6)])),
      message("E", Buffer.concat([cstring(""), Buffer.alloc(4)])),
      message("S", Buffer.alloc(0))
    ])
    for (const split of [1, 3, 7, stream.length]) {
      let trips = 0
      const statements: Array<string> = []
      const feed = Pg.frontendCounter(() => trips++, (text) => statements.push(text))
      for (let i = 0; i < stream.length; i += split) feed(stream.subarray(i, i + split))
      assert.strictEqual(trips, 3, `split ${split}`)
      assert.deepStrictEqual(statements, [
        "SELECT 1",
        "SELECT value FROM t WHERE key = $1",
        "SELECT value FROM t WHERE key = $1"
      ])
    }
  })

  it("a chart draws one line per series on log axes, with a labelled legend", () => {
    const figure = (median: number) => ({ n: 3, median, p25: median * 0.9, p75: median * 1.1, min: median, max: median })
    const figures: Record<string, ReturnType<typeof figure>> = { "a@10": figure(5), "a@100": figure(50), "b@10": figure(2), "b@100": figure(3) }
    const svg = chart({
      file: "x.svg",
      title: "T",
      subtitle: "S",
      xLabel: "N",
      yLabel: "µs",
      series: [
        { name: "ours", kind: "this", points: [{ x: 10, figure: "a@10" }, { x: 100, figure: "a@100" }] },
        { name: "peer", kind: "peer", points: [{ x: 10, figure: "b@10" }, { x: 100, figure: "b@100" }] },
        { name: "missing", kind: "peer", points: [{ x: 10, figure: "none" }] }
      ],
      figure: (id) => figures[id]
    })
    assert.strictEqual(svg.match(/<path /g)?.length, 2)
    assert.include(svg, "ours: 50.0 at 100")
    assert.include(svg, "peer: 3.00 at 100")
    assert.notInclude(svg, "missing")
    assert.include(svg, "(log scale)")
  })
})

const url = process.env["NOETIC_PG_URL"]

describe.skipIf(url === undefined)("bench round-trip proxy on Postgres", () => {
  it("counts one round trip per statement of the raw client and of the storage", async () => {
    const proxy = await Pg.countingProxy(url!)
    const table = Pg.freshName("noetic_test_bench")
    try {
      const raw = await Pg.raw(proxy.url, table)
      proxy.reset()
      await raw.value.upsert("k", JSON.stringify({ version: 1, key: "k", value: 1 }))
      assert.strictEqual(proxy.roundTrips(), 1)
      proxy.reset()
      assert.strictEqual(await raw.value.selectAny(["k", "absent"]), 1)
      assert.strictEqual(proxy.roundTrips(), 1)
      assert.match(proxy.statements()[0]!, /^SELECT key, value FROM/)
      const storage = await Pg.storage(proxy.url, table)
      proxy.reset()
      await Effect.runPromise(storage.value.get("k"))
      assert.strictEqual(proxy.roundTrips(), 1)
      await storage.close()
      await raw.value.dropTables([table])
      await raw.close()
    } finally {
      await proxy.close()
    }
  })
})
