/**
 * Durable IPC (seed page): a server that composes DurableOutboundQueue over a unix
 * socket, and a client that acks, drops its connection, and resumes. Frames emitted
 * while the client is away are replayed from the queue on `durableResume`; the
 * client drops any seq it already consumed, so the application sees every frame
 * exactly once, in order. The queue outlives the server too: a restarted server
 * numbers on from where it stopped.
 */
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { connect, createServer, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { createDurableOutboundQueue, createFileStorage, encodeFrame } from "noetic-effect/promise"

const home = mkdtempSync(join(tmpdir(), "noetic-ipc-"))
const storage = createFileStorage({ root: `${home}/.noetic/subprocess` })
const socketPath = join(home, "agent.sock")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const eventually = async (done: () => boolean) => {
  for (let waited = 0; !done(); waited += 20) {
    if (waited > 30_000) throw new Error("timed out")
    await sleep(20)
  }
}

// --- server --------------------------------------------------------------------
const startServer = async () => {
  const queue = await createDurableOutboundQueue({ storage, socketPath })
  const connections = new Set<Socket>()
  const resumed = new Set<Socket>() // clients that asked for durable delivery
  const handling = new Set<Promise<void>>() // messages being handled; stop() waits for them
  let stopping = false
  const handle = async (socket: Socket, message: { type: string; ackedThrough?: number; throughSeq?: number }) => {
    if (message.type === "durableResume") {
      resumed.add(socket) // live frames from now on; the client drops any overlap with the replay
      for (const entry of await queue.frameRange(message.ackedThrough! + 1)) {
        socket.write(encodeFrame({ type: "durable", seq: entry.seq, frame: JSON.parse(entry.frame) }))
      }
    }
    if (message.type === "durableAck") await queue.ackUpTo(message.throughSeq!)
  }
  const server = createServer((socket) => {
    connections.add(socket)
    const forget = () => {
      connections.delete(socket)
      resumed.delete(socket)
    }
    socket.on("error", forget)
    socket.on("close", forget)
    createInterface({ input: socket }).on("line", (line) => {
      if (stopping) return // a message that arrives while the server stops is the next server's to handle
      const handled = handle(socket, JSON.parse(line)).finally(() => handling.delete(handled))
      handling.add(handled)
    })
  })
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
  // On each outbound frame:
  const emit = async (frame: { type: "item"; item: unknown }) => {
    const { seq } = await queue.append(JSON.stringify(frame))
    for (const socket of resumed) socket.write(encodeFrame({ type: "durable", seq, frame }))
  }
  // Stop taking messages, close every connection, finish what is in hand, then close the queue.
  const stop = async () => {
    stopping = true
    for (const socket of connections) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
    await Promise.all(handling)
    await queue.close()
  }
  return { queue, emit, stop }
}

// --- client --------------------------------------------------------------------
const delivered: Array<string> = []
let highest = 0 // highest seq consumed
let acked = 0 // highest seq acked
let duplicatesDropped = 0
let socket: Socket | undefined

const connectClient = () => {
  socket = connect(socketPath)
  socket.on("error", () => {})
  createInterface({ input: socket }).on("line", (line) => {
    const message = JSON.parse(line)
    if (message.type !== "durable") return
    if (message.seq <= highest) {
      duplicatesDropped++
      return
    }
    highest = message.seq
    delivered.push(message.frame.item.text)
    if (highest % 3 === 0) {
      // Ack in batches, as a client that persists what it consumed would.
      acked = highest
      socket!.write(encodeFrame({ type: "durableAck", throughSeq: acked }))
    }
  })
  // On every (re)connect: resume after what was acked.
  socket.write(encodeFrame({ type: "durableResume", ackedThrough: acked }))
}

let server = await startServer()
connectClient()
await sleep(100)
for (let i = 1; i <= 5; i++) await server.emit({ type: "item", item: { text: `token ${i}` } })
await eventually(() => delivered.length === 5)
console.log(`connected: received seq 1-5, acked through ${acked}; queue holds ${await server.queue.queueSize()} unacked`)

socket!.destroy() // the connection drops
for (let i = 6; i <= 10; i++) await server.emit({ type: "item", item: { text: `token ${i}` } })
console.log(`disconnected: server emitted seq 6-10 into the queue (head ${server.queue.getHeadSeq()})`)

const resumeFrom = acked
connectClient()
await eventually(() => delivered.length === 10)
console.log(`reconnected with durableResume { ackedThrough: ${resumeFrom} }: replay re-sent 4-5 (dropped as duplicates: ${duplicatesDropped}), delivered 6-10`)
assert.equal(duplicatesDropped, 2)

// The server restarts: the queue reopens from storage and numbering continues.
socket!.destroy()
await server.stop()
server = await startServer()
console.log(`server restarted: head seq ${server.queue.getHeadSeq()}, last acked ${server.queue.getLastAckedSeq()}`)
connectClient()
await sleep(100)
for (let i = 11; i <= 12; i++) await server.emit({ type: "item", item: { text: `token ${i}` } })
await eventually(() => delivered.length === 12 && acked === 12)
await eventually(() => server.queue.getLastAckedSeq() === 12)

console.log(`delivered ${delivered.length} frames, each once, in order; queue now holds ${await server.queue.queueSize()}`)
assert.deepEqual(delivered, Array.from({ length: 12 }, (_, i) => `token ${i + 1}`))
assert.equal(await server.queue.queueSize(), 0)

socket!.destroy()
await server.stop()
rmSync(home, { recursive: true, force: true })
