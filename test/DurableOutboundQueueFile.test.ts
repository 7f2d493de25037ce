import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { batchKey, makeWith } from "../src/services/DurableOutboundQueue.ts"
import { suite } from "./DurableOutboundQueueSuite.ts"

suite("file", Effect.suspend(() => FileStorage.make({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-queue-")) })))

describe("DurableOutboundQueue on file storage: a damaged record in the queue's log", () => {
  it.effect("fails only its own seqs: the frames before it are read with the damage named, the frames after it still read", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-queue-damage-"))
      const queue = yield* makeWith(yield* FileStorage.make({ root }), { socketId: "d" })
      for (const frame of ["frame-one", "frame-two", "frame-three"]) yield* queue.append(frame)
      yield* queue.close
      // Flip one byte of the second record's value: its checksum no longer matches.
      const logDir = Path.join(root, Fs.readdirSync(root).find((name) => name.startsWith(".log-"))!)
      const segment = Path.join(logDir, Fs.readdirSync(logDir).find((name) => name.endsWith(".seg"))!)
      const bytes = Fs.readFileSync(segment)
      const at = bytes.indexOf("frame-two")
      assert.isAbove(at, 0)
      bytes[at] = "F".charCodeAt(0)
      Fs.writeFileSync(segment, bytes)

      const reopened = yield* makeWith(yield* FileStorage.make({ root }), { socketId: "d" })
      const read = yield* reopened.readRange(0)
      assert.deepStrictEqual(read.entries, [{ seq: 1, frame: "frame-one" }])
      assert.isDefined(read.damage)
      assert.strictEqual(read.damage!.error.reason._tag, "Corrupt")
      assert.strictEqual((read.damage!.error.reason as { key: string }).key, batchKey("d", 2, 2))
      assert.strictEqual(read.damage!.through, 2)
      assert.deepStrictEqual(yield* reopened.frameRange(3), [{ seq: 3, frame: "frame-three" }])
    }).pipe(Effect.scoped))
})
