import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as Render from "../../src/cli/Render.ts"

/** Runs `f` with stderr looking like a terminal (or not), returning what was written to it. */
const capturingStderr = <A, E>(tty: boolean, f: Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const written: Array<string> = []
      const saved = { isTTY: process.stderr.isTTY, write: process.stderr.write }
      Object.defineProperty(process.stderr, "isTTY", { value: tty, configurable: true, writable: true })
      process.stderr.write = ((chunk: string | Uint8Array) => {
        written.push(String(chunk))
        return true
      }) as typeof process.stderr.write
      return { written, saved }
    }),
    ({ written }) => Effect.map(f, () => written.join("")),
    ({ saved }) =>
      Effect.sync(() => {
        Object.defineProperty(process.stderr, "isTTY", { value: saved.isTTY, configurable: true, writable: true })
        process.stderr.write = saved.write
      })
  )

describe("CLI rendering", () => {
  it("table aligns columns and leaves no trailing spaces", () => {
    assert.strictEqual(
      Render.table(["A", "LONGER"], [["xyz", "1"], ["q", ""]]),
      "A    LONGER\nxyz  1\nq"
    )
  })

  it("sizes and spans for people", () => {
    assert.strictEqual(Render.bytes(812), "812 B")
    assert.strictEqual(Render.bytes(4300), "4.2 KiB")
    assert.strictEqual(Render.span(45_000), "45s")
    assert.strictEqual(Render.span(3 * 3_600_000 + 5 * 60_000), "3h 5m")
    assert.strictEqual(Render.span(50 * 3_600_000), "2d 2h")
  })

  it.effect("durations: units, combinations, and one-line failures for anything else", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Render.parseDuration("--x", "90s"), 90_000)
      assert.strictEqual(yield* Render.parseDuration("--x", "1h30m"), 5_400_000)
      assert.strictEqual(yield* Render.parseDuration("--x", "7d"), 7 * 86_400_000)
      assert.strictEqual(yield* Render.parseDuration("--x", "0s"), 0)
      for (const bad of ["", "soon", "5", "5 parsecs", "-1h"]) {
        const exit = yield* Effect.exit(Render.parseDuration("--older-than", bad))
        assert.isTrue(Exit.isFailure(exit), bad)
      }
      assert.strictEqual(yield* Render.parseSince("2h", 10_000_000), 10_000_000 - 7_200_000)
      assert.strictEqual(yield* Render.parseSince("2026-01-01T00:00:00Z", 0), Date.parse("2026-01-01T00:00:00Z"))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(Render.parseSince("2026-13-45", 0))))
    }))

  it.live("progress: a line on a terminal once a scan outlasts a moment, erased at the end", () =>
    Effect.gen(function*() {
      const slow = yield* capturingStderr(
        true,
        Render.withProgress((progress) =>
          Effect.gen(function*() {
            progress.update("reading snapshots", 3, 10)
            yield* Effect.sleep("1 second")
          })
        )
      )
      assert.include(slow, "reading snapshots 3/10")
      assert.isTrue(slow.endsWith("\r\x1b[2K"), JSON.stringify(slow))

      // A quick scan prints nothing, and nor does a scan whose stderr is not a terminal.
      assert.strictEqual(yield* capturingStderr(true, Render.withProgress(() => Effect.void)), "")
      const piped = yield* capturingStderr(
        false,
        Render.withProgress((progress) => Effect.andThen(Effect.sync(() => progress.update("x")), Effect.sleep("500 millis")))
      )
      assert.strictEqual(piped, "")
    }), { timeout: 30_000 })
})
