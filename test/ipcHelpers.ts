/** Shared helpers of the IPC tests: short socket paths and a raw line-level peer. */
import { Effect, Queue } from "effect"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "effect/socket/Socket"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { makeLineSplitter } from "../src/internal/lineSplitter.ts"

/** A fresh socket path, short enough for the unix socket limit. */
export const socketPathFor = (name = "s.sock"): string =>
  Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "nipc-")), name)

/** A peer that writes raw text and reads parsed lines; `lines` ends (fails) when the server closes. */
export const rawPeer = Effect.fnUntraced(function*(socketPath: string) {
  const socket = yield* NodeSocket.makeNet({ path: socketPath })
  const pull = yield* Socket.readerBytes(socket)
  const writer = yield* socket.writer
  const lines = yield* Queue.unbounded<any, "closed">()
  const splitter = makeLineSplitter(64 * 1024 * 1024)
  yield* pull.pipe(
    Effect.flatMap((chunks) =>
      Effect.forEach(chunks, (chunk) => Queue.offerAll(lines, splitter.push(chunk).lines.map((l) => JSON.parse(l))))
    ),
    Effect.forever,
    Effect.catchCause(() => Queue.fail(lines, "closed" as const)),
    Effect.forkScoped
  )
  return {
    write: (text: string) => Effect.orDie(writer.write(text)),
    next: Queue.take(lines),
    /** The next line that is not the connection's `hello`. */
    nextReply: Effect.suspend(function loop(): Effect.Effect<any, "closed"> {
      return Effect.flatMap(Queue.take(lines), (line) => (line.type === "hello" ? loop() : Effect.succeed(line)))
    })
  }
})
