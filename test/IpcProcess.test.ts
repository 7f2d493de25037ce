import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as IpcClient from "../src/layers/IpcClient.ts"
import { makeMemory } from "../src/services/StorageAdapter.ts"
import { socketPathFor } from "./ipcHelpers.ts"

const fixture = Path.join(import.meta.dirname, "fixtures", "ipcServerProcess.ts")

/** Starts the server process; resolves once it listens. The scope SIGKILLs it if it is still alive. */
const startServer = (root: string, socketPath: string, total: number) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess>((resume) => {
      const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", fixture, root, socketPath, String(total)], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      // Passed on, and kept for the failure: a server that dies says why.
      let stderr = ""
      child.stderr!.setEncoding("utf8")
      child.stderr!.on("data", (text: string) => {
        stderr += text
        process.stderr.write(text)
      })
      child.stdout!.setEncoding("utf8")
      child.stdout!.once("data", () => resume(Effect.succeed(child)))
      child.once("exit", (code, signal) =>
        resume(Effect.die(new Error(`the server process exited early (${code ?? signal}): ${stderr}`))))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

const kill = (child: ChildProcess.ChildProcess) =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

describe("IPC across a real process crash", () => {
  it.live("a server SIGKILLed mid-stream and restarted delivers every frame once", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-ipc-crash-"))
      const socketPath = socketPathFor()
      const total = 200
      const watermark = IpcClient.storageWatermark(yield* makeMemory, "wm")
      const client = yield* IpcClient.connect({ socketPath, watermark, reconnect: Schedule.spaced("10 millis") })
      const received: Array<number> = []
      const takeAndAck = Effect.gen(function*() {
        const delivery = yield* client.take
        received.push((delivery.frame as { readonly item: number }).item)
        // Ack every few frames, so the restart replays some that were delivered.
        if (received.length % 7 === 0) yield* client.ack(delivery.seq!)
      })

      for (const stopAt of [50, 130]) {
        const child = yield* startServer(root, socketPath, total)
        while (received.length < stopAt) yield* takeAndAck
        yield* kill(child)
      }
      yield* startServer(root, socketPath, total)
      while (received.length < total) yield* takeAndAck
      assert.deepStrictEqual(received, Array.from({ length: total }, (_, i) => i + 1))
    }), { timeout: 120_000 }) // Three server processes start (tsx compiles each): slow on a loaded machine.
})
