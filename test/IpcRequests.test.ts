/**
 * The engine's request correlation over an IPC client (`layers/IpcRequests.ts`), what
 * the Promise API's `AgentIpcClient` sends, reads history and status through.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import type { IpcClientShape } from "../src/layers/IpcClient.ts"
import * as IpcRequests from "../src/layers/IpcRequests.ts"

/** A client whose `send` records the frames; nothing else of it is used. */
const fakeClient = () => {
  const sent: Array<unknown> = []
  const client = { send: (frame: unknown) => Effect.sync(() => void sent.push(frame)) } as unknown as IpcClientShape
  return { client, sent }
}

const failureOf = (exit: Exit.Exit<unknown, unknown>) => {
  assert.isTrue(Exit.isFailure(exit))
  const reason = (exit as Exit.Failure<unknown, unknown>).cause.reasons[0] as { readonly error: IpcRequests.IpcRequestFailed }
  return reason.error
}

describe("IpcRequests", () => {
  it.effect("a send completes on its ack; a second send of the same messageId in flight is refused", () =>
    Effect.gen(function*() {
      const { client, sent } = fakeClient()
      const requests = IpcRequests.make(client)
      const first = yield* Effect.forkChild(requests.send("m1", "hello"))
      yield* Effect.yieldNow
      assert.deepStrictEqual(sent, [{ type: "send", messageId: "m1", text: "hello" }])
      const again = failureOf(yield* Effect.exit(requests.send("m1", "again")))
      assert.strictEqual(again.reason, "InFlight")
      assert.strictEqual(again.message, "messageId already in flight: m1")
      assert.isTrue(requests.route({ type: "ack", messageId: "m1" } as never))
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(first)))
    }))

  it.effect("history and status settle with their answer frames; other frames are not routed", () =>
    Effect.gen(function*() {
      const { client } = fakeClient()
      const requests = IpcRequests.make(client)
      const history = yield* Effect.forkChild(requests.history)
      const status = yield* Effect.forkChild(requests.status)
      yield* Effect.yieldNow
      assert.isFalse(requests.route({ type: "item", item: {} } as never))
      requests.route({ type: "history", items: ["a"] } as never)
      requests.route({ type: "status", status: { kind: "idle" } } as never)
      assert.deepStrictEqual(yield* Fiber.join(history), ["a"])
      assert.deepStrictEqual(yield* Fiber.join(status), { kind: "idle" })
    }))

  it.effect("a server error fails the sends in flight, except AckAboveSent; close fails the rest and later ones", () =>
    Effect.gen(function*() {
      const { client } = fakeClient()
      const requests = IpcRequests.make(client)
      const send = yield* Effect.forkChild(requests.send("m1", "x"))
      yield* Effect.yieldNow
      requests.route({ type: "error", kind: "AckAboveSent", message: "too far" } as never)
      requests.route({ type: "error", kind: "Refused", message: "no" } as never)
      const refused = failureOf(yield* Fiber.await(send))
      assert.deepStrictEqual([refused.reason, refused.kind, refused.message], ["ServerError", "Refused", "no"])
      const history = yield* Effect.forkChild(requests.history)
      yield* Effect.yieldNow
      requests.close("closed")
      assert.strictEqual(failureOf(yield* Fiber.await(history)).reason, "Closed")
      assert.strictEqual(failureOf(yield* Effect.exit(requests.status)).reason, "Closed")
    }))
})
