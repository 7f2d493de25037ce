/**
 * Queued messages survive a host crash (docs/runtime.md#durable-sessions): a host
 * queues three messages on a thread, its first turn mid-run, and is killed with
 * SIGKILL; the next host's `resumeSessions()` resumes the started turn (its recorded
 * child step replays) and runs the other two, in order, on the thread's history.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { sigkill, startHost } from "../hostProcesses.ts"

const hostScript = Path.join(import.meta.dirname, "..", "fixtures", "sessionHost.ts")

describe("durable sessions (real processes, kill -9)", () => {
  it.live("messages queued before a SIGKILL run after resumeSessions on the next host, the started turn resumed", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "nsess-"))
      const first = yield* startHost(hostScript, [dir, "enqueue"])
      const queued = yield* first.nextLine
      // execute resolved three times while the first turn still runs: two wait in the queue.
      assert.strictEqual(queued.receipts.length, 3)
      assert.strictEqual(queued.queueSize, 2)
      assert.strictEqual(queued.status, "generating")
      // The blocked turn has run its child step, and its record has landed, before the
      // kill (its body's log line alone comes before the record: a kill then re-runs it).
      while (!Fs.existsSync(Path.join(dir, "recorded"))) {
        yield* Effect.sleep("20 millis")
      }
      yield* sigkill(first.proc)
      Fs.writeFileSync(Path.join(dir, "release"), "go")

      const second = yield* startHost(hostScript, [dir, "resume"])
      const found = yield* second.nextLine
      assert.deepStrictEqual(found.threads, [{ threadId: "chat", messages: ["m-block", "m-second", "m-third"] }])
      const done = yield* second.nextLine
      assert.deepStrictEqual(done.outputs, [["block"], ["block", "second"], ["block", "second", "third"]])
      assert.deepStrictEqual(done.response, ["block", "second", "third"])
      // Nothing is left queued once the turns are done.
      assert.strictEqual(done.left, 0)
      // The started turn ran again from its ledger: its child step is not run twice.
      assert.deepStrictEqual(Fs.readFileSync(Path.join(dir, "ran.log"), "utf8").trim().split("\n"), [
        "run:block",
        "note:block",
        "run:block",
        "run:second",
        "note:second",
        "run:third",
        "note:third"
      ])
      Fs.rmSync(dir, { recursive: true, force: true })
    }), { timeout: 60_000 })
})
