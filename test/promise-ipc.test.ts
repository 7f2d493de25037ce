import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as NodeNet from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { createDurableOutboundQueue, createFileStorage, encodeFrame, NoeticError } from "../src/promise/index.ts"
import { socketPathFor } from "./ipcHelpers.ts"

describe("promise facade: createDurableOutboundQueue", () => {
  it.live("the documented usage works as written, over a plain socket", () =>
    Effect.promise(async () => {
      const storage = createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-ipc-")) })
      const socketPath = socketPathFor()
      const queue = await createDurableOutboundQueue({ storage, socketPath })
      const received: Array<string> = []
      const server = NodeNet.createServer((socket) => {
        socket.setEncoding("utf8")
        let buffer = ""
        socket.on("data", async (chunk: string) => {
          buffer += chunk
          const lines = buffer.split("\n")
          buffer = lines.pop()!
          for (const line of lines) {
            const message = JSON.parse(line)
            if (message.type === "durableAck") await queue.ackUpTo(message.throughSeq)
            if (message.type === "durableResume") {
              for (const entry of await queue.frameRange(message.ackedThrough + 1)) {
                socket.write(encodeFrame({ type: "durable", seq: entry.seq, frame: JSON.parse(entry.frame) }))
              }
              const { seq } = await queue.append(JSON.stringify({ type: "item", item: "live" }))
              socket.write(encodeFrame({ type: "durable", seq, frame: { type: "item", item: "live" } }))
            }
          }
        })
      })
      await new Promise<void>((resolve) => server.listen(socketPath, resolve))
      for (const item of ["a", "b", "c"]) await queue.append(JSON.stringify({ type: "item", item }))
      await queue.ackUpTo(1)
      assert.strictEqual(queue.ackedSeq, 1)
      assert.strictEqual(queue.headSeq, 3)

      const client = NodeNet.connect(socketPath)
      client.setEncoding("utf8")
      client.write(encodeFrame({ type: "durableResume", ackedThrough: 1 }))
      await new Promise<void>((resolve) => {
        let buffer = ""
        client.on("data", (chunk: string) => {
          buffer += chunk
          const lines = buffer.split("\n")
          buffer = lines.pop()!
          received.push(...lines)
          if (received.length === 3) resolve()
        })
      })
      assert.deepStrictEqual(received.map((line) => JSON.parse(line)), [
        { type: "durable", seq: 2, frame: { type: "item", item: "b" } },
        { type: "durable", seq: 3, frame: { type: "item", item: "c" } },
        { type: "durable", seq: 4, frame: { type: "item", item: "live" } }
      ])
      client.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await queue.close()

      // Reopened over the same storage: the unacked frames are still there, seqs carry on.
      const reopened = await createDurableOutboundQueue({ storage, socketPath })
      assert.deepStrictEqual((await reopened.frameRange(0)).map((e) => e.seq), [2, 3, 4])
      assert.deepStrictEqual(await reopened.append("x"), { seq: 5 })
    }))

  it("encodeFrame throws a NoeticError for a value JSON cannot hold", () => {
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    assert.throws(() => encodeFrame({ type: "item", item: cyclic }), NoeticError)
    assert.strictEqual(encodeFrame({ type: "getStatus" }), `{"type":"getStatus"}\n`)
  })
})
