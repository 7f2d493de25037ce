import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as NodeNet from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  AgentHarness,
  AgentIpcClient,
  AgentIpcServer,
  createDurableOutboundQueue,
  createFileStorage,
  createInMemoryStorage,
  createLocalFsAdapter,
  encodeFrame,
  runCode,
  NoeticError
} from "../src/promise/index.ts"
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
      assert.deepStrictEqual(await reopened.append("x"), { seq: 5, frame: "x" })
    }))

  it("encodeFrame throws a NoeticError for a value JSON cannot hold", () => {
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    assert.throws(() => encodeFrame({ type: "item", item: cyclic }), NoeticError)
    assert.strictEqual(encodeFrame({ type: "getStatus" }), `{"type":"getStatus"}\n`)
  })
})

describe("promise facade: the queue API noetic documents", () => {
  it.live("append resolves { seq, frame }; clear keeps numbering; queueSize; synchronous getHeadSeq and getLastAckedSeq; bad seqs reject", () =>
    Effect.promise(async () => {
      const storage = createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-q-")) })
      await using queue = await createDurableOutboundQueue({ storage, socketPath: socketPathFor() })
      assert.strictEqual(queue.getHeadSeq(), 0)
      assert.deepStrictEqual(await queue.append("a"), { seq: 1, frame: "a" })
      await queue.append("b")
      await queue.append("c")
      assert.strictEqual(queue.getHeadSeq(), 3)
      assert.strictEqual(await queue.queueSize(), 3)
      await queue.ackUpTo(1)
      assert.strictEqual(queue.getLastAckedSeq(), 1)
      assert.strictEqual(await queue.queueSize(), 2)
      await queue.clear()
      assert.strictEqual(await queue.queueSize(), 0)
      assert.deepStrictEqual(await queue.frameRange(0), [])
      assert.deepStrictEqual(await queue.append("d"), { seq: 4, frame: "d" })
      for (const bad of [NaN, 1.5, -2]) {
        await queue.frameRange(bad).then(
          () => assert.fail(`frameRange(${bad}) resolved`),
          (error) => {
            assert.instanceOf(error, NoeticError)
            assert.strictEqual(error.code, "INVALID_QUEUE_INPUT")
          }
        )
      }
    }))

  it.live("append refuses a frame that is not a string, and the queue goes on numbering and keeping frames", () =>
    Effect.promise(async () => {
      for (const storage of [createInMemoryStorage(), createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-q-")) })]) {
        await using queue = await createDurableOutboundQueue({ storage, socketPath: socketPathFor() })
        await queue.append("a")
        for (const bad of [{ a: 1 }, 42, null, undefined]) {
          await (queue.append as (frame: unknown) => Promise<unknown>)(bad).then(
            () => assert.fail(`append(${String(bad)}) resolved`),
            (error) => {
              assert.instanceOf(error, NoeticError)
              assert.strictEqual(error.code, "INVALID_QUEUE_INPUT")
            }
          )
        }
        assert.deepStrictEqual(await queue.append("b"), { seq: 2, frame: "b" })
        assert.deepStrictEqual(await queue.frameRange(0), [{ seq: 1, frame: "a" }, { seq: 2, frame: "b" }])
      }
    }))
})

describe("promise facade: getHeadSeq after a crash", () => {
  it.live("a queue reopened without close reports the last frame's seq, and numbers on at head + 1 (its records are intact)", () =>
    Effect.promise(async () => {
      const storages = [
        createInMemoryStorage(),
        createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-q-")) })
      ]
      for (const storage of storages) {
        const socketPath = socketPathFor()
        // Never closed: what a host that crashed leaves behind.
        const before = await createDurableOutboundQueue({ storage, socketPath })
        await before.append("a")
        await before.append("b")
        await using after = await createDurableOutboundQueue({ storage, socketPath })
        assert.strictEqual(after.getHeadSeq(), 2)
        assert.strictEqual(after.headSeq, 2)
        assert.strictEqual(after.getLastAckedSeq(), 0)
        assert.deepStrictEqual(await after.frameRange(1), [{ seq: 1, frame: "a" }, { seq: 2, frame: "b" }])
        const next = await after.append("c")
        assert.strictEqual(next.seq, 3)
        assert.strictEqual(after.getHeadSeq(), next.seq)
        await after.ackUpTo(next.seq)
        assert.strictEqual(after.getHeadSeq(), next.seq)
        assert.strictEqual(await after.queueSize(), 0)
      }
    }))
})

describe("promise facade: AgentIpcServer and AgentIpcClient", () => {
  const makeServer = (socketPath: string, storage: ReturnType<typeof createFileStorage> | undefined) => {
    const history: Array<unknown> = [{ role: "user", text: "earlier" }]
    const resolved: Array<[string, unknown]> = []
    const items: Array<(value: unknown) => void> = []
    const itemStream: AsyncIterable<unknown> = {
      [Symbol.asyncIterator]: () => ({ next: () => new Promise((resolve) => items.push((value) => resolve({ value, done: false }))) })
    }
    const server = new AgentIpcServer({
      harness: {
        execute: async (text) => void history.push({ role: "user", text }),
        getItemStream: () => itemStream,
        getStatus: () => "idle",
        abort: async () => undefined
      },
      chatHistoryStore: {
        readChatHistory: async () => [...history],
        appendChatItem: async (_taskId, item) => void history.push(item)
      },
      logger: async () => undefined,
      taskId: "task-1",
      role: "worker",
      runnerId: "runner-1",
      threadId: "thread-1",
      socketPath,
      askUserService: {
        peek: () => null,
        handleResolve: (id, output) => void resolved.push([id, output]),
        handleCancel: () => undefined,
        cancelAll: () => undefined
      },
      fs: createLocalFsAdapter(),
      ...(storage === undefined ? {} : { storage })
    })
    const pushItem = (value: unknown) => {
      const next = items.shift()
      if (next !== undefined) next(value)
    }
    return { server, resolved, pushItem }
  }

  it.live("hello, history, send, status, a durable stream with acks and resume, ask-user prompts, close", () =>
    Effect.promise(async () => {
      const socketPath = socketPathFor()
      const storage = createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-srv-")) })
      const { server, resolved } = makeServer(socketPath, storage)
      await server.listen()
      assert.isNotNull(server.getDurableQueue())
      for (const n of [1, 2, 3]) await server.appendAndBroadcastDurable({ type: "item", item: n })
      assert.strictEqual(await server.queueSize(), 3)

      const client = new AgentIpcClient({ socketPath })
      assert.deepStrictEqual(await client.connect(), {
        protocolVersion: 2,
        taskId: "task-1",
        role: "worker",
        runnerId: "runner-1",
        threadId: "thread-1"
      })
      assert.deepStrictEqual(await client.getHistory(), [{ role: "user", text: "earlier" }])
      await client.send({ messageId: "m1", text: "hello" })
      assert.strictEqual(await client.getStatus(), "idle")
      const streams = client.subscribe()
      client.sendDurableResume(0)
      const iterator = streams.items[Symbol.asyncIterator]()
      const got: Array<unknown> = []
      while (got.length < 3) got.push((await iterator.next()).value)
      assert.deepStrictEqual(got, [1, 2, 3])
      assert.strictEqual(client.getHighestDeliveredDurableSeq(), 3)
      client.acknowledgeDurableFrames(2)
      assert.strictEqual(client.getLastAckedDurableSeq(), 2)
      while ((await server.queueSize()) !== 1) await new Promise((resolve) => setTimeout(resolve, 5))
      // An ack past what was delivered is sent as it is (noetic's client); the server
      // refuses it (it never sent seq 9) and acknowledges nothing.
      client.acknowledgeDurableFrames(9)
      assert.strictEqual(client.getLastAckedDurableSeq(), 9)
      while (client.getLastError() === null) await new Promise((resolve) => setTimeout(resolve, 5))
      assert.include(client.getLastError()!.message, "AckAboveSent")
      assert.strictEqual(await server.queueSize(), 1)
      // A later ack of the frames delivered still goes through.
      client.acknowledgeDurableFrames(3)
      while ((await server.queueSize()) !== 0) await new Promise((resolve) => setTimeout(resolve, 5))

      server.broadcastAskUserRequest({ id: "q1", input: { question: "ok?" }, createdAt: 7 })
      const prompts = streams.askUser[Symbol.asyncIterator]()
      assert.deepStrictEqual((await prompts.next()).value, { kind: "pending", request: { id: "q1", input: { question: "ok?" }, createdAt: 7 } })
      client.resolveAskUser("q1", { answer: "yes" })
      while (resolved.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      assert.deepStrictEqual(resolved, [["q1", { answer: "yes" }]])
      client.close()
      await server.close()
      assert.isFalse(Fs.existsSync(socketPath))
    }))

  it.live("a client restarted with its persisted watermark gets each frame once", () =>
    Effect.promise(async () => {
      const socketPath = socketPathFor()
      const storage = createFileStorage({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-facade-srv-")) })
      const { server } = makeServer(socketPath, storage)
      await server.listen()
      for (const n of [1, 2, 3, 4]) await server.appendAndBroadcastDurable({ type: "item", item: n })
      const first = new AgentIpcClient({ socketPath })
      await first.connect()
      const firstItems = first.subscribe().items[Symbol.asyncIterator]()
      first.sendDurableResume(0)
      assert.deepStrictEqual([(await firstItems.next()).value, (await firstItems.next()).value], [1, 2])
      first.acknowledgeDurableFrames(2)
      while ((await server.queueSize()) !== 2) await new Promise((resolve) => setTimeout(resolve, 5))
      const watermark = first.getLastAckedDurableSeq()
      first.close()

      await using second = new AgentIpcClient({ socketPath })
      await second.connect()
      const items = second.subscribe().items[Symbol.asyncIterator]()
      second.sendDurableResume(watermark)
      await server.appendAndBroadcastDurable({ type: "item", item: 5 })
      const got: Array<unknown> = []
      while (got.length < 3) got.push((await items.next()).value)
      assert.deepStrictEqual(got, [3, 4, 5])
      await server.close()
    }))

  it.live("acknowledgeDurableFrames emits a durableAck frame and is idempotent (noetic's client test)", () =>
    Effect.promise(async () => {
      const socketPath = socketPathFor()
      const received: Array<string> = []
      const server = NodeNet.createServer((socket) => {
        socket.setEncoding("utf8")
        socket.on("data", (chunk: string) => void received.push(chunk))
        socket.write(encodeFrame({ type: "hello", protocolVersion: 2, taskId: "t", role: "worker", runnerId: "r", threadId: "th" }))
      })
      await new Promise<void>((resolve) => server.listen(socketPath, resolve))
      const client = new AgentIpcClient({ socketPath })
      await client.connect()
      client.acknowledgeDurableFrames(5)
      client.acknowledgeDurableFrames(3) // below the last ack: a no-op
      client.acknowledgeDurableFrames(5) // at it: a no-op
      client.acknowledgeDurableFrames(9) // above: sent
      await new Promise((resolve) => setTimeout(resolve, 50))
      const joined = received.join("")
      assert.strictEqual(joined.match(/"type":"durableAck"/g)?.length ?? 0, 2)
      assert.include(joined, `"throughSeq":5`)
      assert.include(joined, `"throughSeq":9`)
      assert.strictEqual(client.getLastAckedDurableSeq(), 9)
      client.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }))

  it("createLocalFsAdapter reads and writes the local disk", async () => {
    const fs = createLocalFsAdapter()
    const dir = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-fs-")), "a", "b")
    await fs.mkdir(dir)
    await fs.writeFile(Path.join(dir, "f.txt"), "one")
    await fs.appendFile(Path.join(dir, "f.txt"), " two")
    assert.strictEqual(await fs.readFileText(Path.join(dir, "f.txt")), "one two")
    assert.isTrue((await fs.stat(dir)).isDirectory())
    assert.deepStrictEqual(await fs.readdir(dir), ["f.txt"])
    await fs.rm(dir, { recursive: true, force: true })
    await fs.access(Path.dirname(dir))
  })
})

describe("promise facade: an AgentHarness served over IPC", () => {
  it.live("AgentIpcServer takes this library's AgentHarness: a sent message runs the graph, status reads the thread's turn", () =>
    Effect.promise(async () => {
      const socketPath = socketPathFor()
      const seen: Array<string> = []
      const harness = new AgentHarness({
        name: "served",
        params: {},
        agentGraph: runCode({ id: "reply", execute: async (text: string) => void seen.push(text) })
      })
      const server = new AgentIpcServer({
        harness,
        chatHistoryStore: { readChatHistory: async () => [], appendChatItem: async () => undefined },
        logger: async () => undefined,
        taskId: "task-h",
        role: "worker",
        runnerId: "runner-h",
        threadId: "thread-h",
        socketPath,
        askUserService: { peek: () => null, handleResolve: () => undefined, handleCancel: () => undefined, cancelAll: () => undefined },
        fs: createLocalFsAdapter()
      })
      await server.listen()
      const client = new AgentIpcClient({ socketPath })
      await client.connect()
      await client.send({ messageId: "m1", text: "hello" })
      while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      assert.deepStrictEqual(seen, ["hello"])
      assert.deepStrictEqual(await client.getStatus(), { kind: "idle" })
      client.close()
      await server.close()
      await harness.close()
    }))
})
