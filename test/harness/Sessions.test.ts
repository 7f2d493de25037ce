/**
 * Sessions of the engine (docs/runtime.md#sessions): turns one after another per
 * thread, the streams across turns, the between-rounds inbox of the tool loop,
 * interrupt, queue size and seeded history, against a scripted round provider.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Stream } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { Item } from "../../src/harness/AgentContext.ts"
import * as Sessions from "../../src/harness/Sessions.ts"
import { callModel, runCode } from "../../src/harness/Step.ts"
import type { ModelTool } from "../../src/harness/ToolLoop.ts"
import { ModelProvider, type ModelRequest, type ModelResponse } from "../../src/services/ModelProvider.ts"

const message = (id: string, text: string): Item => ({
  type: "message",
  id,
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text }]
})

const textOf = (item: Item): string =>
  Array.isArray(item.content) ? item.content.map((part: { text?: string }) => part.text ?? "").join("") : ""

/**
 * A round provider answering from `script`, one answer per request, streaming each
 * text in two deltas. It records every request; an answer may wait on a Deferred.
 */
const scripted = (script: ReadonlyArray<(request: ModelRequest) => Effect.Effect<ModelResponse>>) => {
  const requests: Array<ModelRequest> = []
  const layer = Layer.succeed(ModelProvider, {
    name: "scripted",
    mode: "round",
    call: (request, emit) =>
      Effect.gen(function*() {
        const answer = script[requests.length]
        // A copy: the log goes on growing after the request.
        requests.push({ ...request, items: [...request.items] })
        if (answer === undefined) return yield* Effect.die(new Error(`no answer for request ${requests.length}`))
        const response = yield* answer(request)
        for (const item of response.items) {
          if (item.type !== "message") continue
          const text = textOf(item)
          const half = Math.ceil(text.length / 2)
          yield* emit({ type: "text_delta", itemId: String(item.id), delta: text.slice(0, half) })
          yield* emit({ type: "text_delta", itemId: String(item.id), delta: text.slice(half) })
        }
        return response
      })
  })
  return { requests, layer }
}

const say = (id: string, text: string) => () =>
  Effect.succeed<ModelResponse>({ items: [message(id, text)], usage: { inputTokens: 3, outputTokens: 2 } })

const agent = callModel({ id: "agent", model: "test/model" })

describe("Sessions", () => {
  it.effect("turns of one thread run one after another; the streams carry both turns; history carries over", () =>
    Effect.gen(function*() {
      const called = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const model = scripted([
        () =>
          Effect.andThen(Deferred.succeed(called, undefined), Effect.andThen(Deferred.await(gate), say("m1", "one")())),
        say("m2", "two")
      ])
      const harness = yield* AgentHarness.make({ name: "chat", agentGraph: agent })
      const sessions = yield* Sessions.make(harness).pipe(Effect.provide(model.layer))
      // Subscribed before the first turn: the stream spans every turn of the session.
      let completed = 0
      const text = yield* Effect.forkChild(Stream.runCollect(Stream.take((yield* sessions.textStream("t")), 4)))
      const items = yield* Effect.forkChild(Stream.runCollect(
        Stream.take(Stream.filter((yield* sessions.itemStream("t")), (item) => item.isComplete), 4)
      ))
      const events = yield* Effect.forkChild(Stream.runCollect(
        Stream.takeUntil((yield* sessions.events("t")), (event) => event.type === "chat:turn_completed" && ++completed === 2)
      ))
      const first = yield* sessions.enqueue("hello", { threadId: "t", messageId: "u1" })
      yield* Deferred.await(called)
      // The first turn is running: the second message waits in the queue.
      const second = yield* sessions.enqueue("again", { threadId: "t", messageId: "u2" })
      assert.strictEqual(sessions.queueSize("t"), 1)
      assert.strictEqual(sessions.status("t").kind, "generating")
      yield* Deferred.succeed(gate, undefined)
      const response = yield* sessions.response("t")
      assert.strictEqual(response.text, "two")
      assert.strictEqual(response.executionId, second.executionId)
      assert.deepStrictEqual(response.usage, { inputTokens: 3, outputTokens: 2 })
      assert.deepStrictEqual((yield* first.completion).output, "one")
      assert.deepStrictEqual(yield* Fiber.join(text), ["on", "e", "tw", "o"])
      const complete = yield* Fiber.join(items)
      assert.deepStrictEqual(complete.map((item) => [item.role, textOf(item)]), [
        ["user", "hello"],
        ["assistant", "one"],
        ["user", "again"],
        ["assistant", "two"]
      ])
      // The second request holds the first turn: the session's history.
      assert.deepStrictEqual(model.requests[1]!.items.map(textOf), ["hello", "one", "again"])
      const types = (yield* Fiber.join(events)).filter((e) => e.source === "framework").map((e) => e.type)
      assert.deepStrictEqual(types.filter((t) => t === "chat:turn_started").length, 2)
      assert.includeMembers(types, ["chat:step_started", "chat:model_call_started", "chat:model_call_completed", "chat:step_completed"])
      const started = (yield* Stream.runCollect(
        Stream.take(Stream.filter((yield* sessions.events("t")), (e) => e.type === "chat:turn_started"), 2)
      ))
      assert.deepStrictEqual(started.map((e) => e.data.messageIds), [["u1"], ["u2"]])
    }))

  it.effect("between-rounds: a message queued during a tool round joins the next model round of the running turn", () =>
    Effect.gen(function*() {
      const toolRunning = yield* Deferred.make<void>()
      const injected = yield* Deferred.make<void>()
      const lookup: ModelTool = {
        name: "lookup",
        parameters: { type: "object", properties: {} },
        execute: () => Effect.andThen(Deferred.succeed(toolRunning, undefined), Effect.as(Deferred.await(injected), "found"))
      }
      const model = scripted([
        () =>
          Effect.succeed({
            items: [{ type: "function_call", id: "fc1", callId: "c1", name: "lookup", arguments: "{}", status: "completed" }],
            usage: { inputTokens: 1, outputTokens: 1 }
          }),
        say("m2", "done")
      ])
      const harness = yield* AgentHarness.make({
        name: "inbox",
        agentGraph: callModel({ id: "agent", model: "test/model", tools: [lookup] })
      })
      const sessions = yield* Sessions.make(harness).pipe(Effect.provide(model.layer))
      const turn = yield* sessions.enqueue("start")
      yield* Deferred.await(toolRunning)
      const note = yield* sessions.enqueue("also check the weather", { deliveryMode: "between-rounds", messageId: "note" })
      yield* Deferred.succeed(injected, undefined)
      const response = yield* sessions.response()
      assert.strictEqual(response.text, "done")
      // The second round's request ends with the tool result, then the injected message.
      const second = model.requests[1]!.items
      assert.deepStrictEqual(second.map((item) => item.type), ["message", "function_call", "function_call_output", "message"])
      assert.strictEqual(textOf(second[3]!), "also check the weather")
      assert.strictEqual(model.requests.length, 2)
      // The injected message ran in the turn it joined: no turn of its own.
      assert.strictEqual((yield* note.completion).executionId, turn.executionId)
      assert.strictEqual(sessions.queueSize(), 0)
      const inbox = (yield* Stream.runCollect(
        Stream.take(Stream.filter((yield* sessions.events()), (e) => e.type === "inbox:inbox_injected"), 1)
      ))
      assert.deepStrictEqual(inbox[0]!.data, { round: 1, count: 1, messageIds: ["note"] })
    }))

  it.effect("interrupt: aborts the running turn, runs first, and the queued next-turn message runs after it", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const order: Array<string> = []
      const graph = runCode("turn", (input: string, ctx) =>
        Effect.gen(function*() {
          order.push(input)
          if (input !== "first") return `did ${input}`
          yield* Deferred.succeed(started, undefined)
          // Steps until the context is aborted: the next step boundary fails cancelled.
          for (;;) yield* ctx.run(runCode("tick", () => Deferred.await(gate)), undefined)
        }))
      const harness = yield* AgentHarness.make({ name: "irq", agentGraph: graph })
      const sessions = yield* Sessions.make(harness)
      const first = yield* sessions.enqueue("first")
      yield* Deferred.await(started)
      yield* sessions.enqueue("later")
      assert.strictEqual(sessions.queueSize(), 1)
      yield* sessions.enqueue("now", { deliveryMode: "interrupt" })
      assert.strictEqual(sessions.queueSize(), 2)
      assert.strictEqual(sessions.status().kind, "aborting")
      yield* Deferred.succeed(gate, undefined)
      const failed = yield* Effect.exit(first.completion)
      assert.isTrue(Exit.isFailure(failed))
      const error = Exit.isFailure(failed) ? Exit.findErrorOption(failed) : undefined
      assert.deepInclude(error?._tag === "Some" ? error.value : {}, { _tag: "StepCancelled", reason: "interrupt" })
      const response = yield* sessions.response()
      assert.strictEqual(response.text, "did later")
      assert.deepStrictEqual(order, ["first", "now", "later"])
      assert.deepStrictEqual(sessions.status(), { kind: "idle" })
    }))

  it.effect("seeded history is what the next turn starts from; threads are separate", () =>
    Effect.gen(function*() {
      const model = scripted([say("a1", "for a"), say("b1", "for b")])
      const harness = yield* AgentHarness.make({ name: "seeded", agentGraph: agent })
      const sessions = yield* Sessions.make(harness).pipe(Effect.provide(model.layer))
      sessions.seedHistory("a", [
        { type: "message", id: "old-1", role: "user", status: "completed", content: [{ type: "input_text", text: "earlier" }] },
        message("old-2", "earlier answer")
      ])
      yield* sessions.enqueue("go", { threadId: "a" })
      assert.strictEqual((yield* sessions.response("a")).text, "for a")
      yield* sessions.enqueue("go", { threadId: "b" })
      assert.strictEqual((yield* sessions.response("b")).text, "for b")
      assert.deepStrictEqual(model.requests[0]!.items.slice(0, 2).map((item) => item.id), ["old-1", "old-2"])
      assert.deepStrictEqual(model.requests[0]!.items.map(textOf), ["earlier", "earlier answer", "go"])
      assert.deepStrictEqual(model.requests[1]!.items.map(textOf), ["go"])
    }))

  it.effect("refuses an unknown delivery mode and a harness without a graph", () =>
    Effect.gen(function*() {
      const harness = yield* AgentHarness.make({ name: "modes", agentGraph: agent })
      const sessions = yield* Sessions.make(harness)
      const bad = yield* Effect.flip(sessions.enqueue("x", { deliveryMode: "later" as never }))
      assert.strictEqual(bad._tag, "DeliveryModeInvalid")
      const empty = yield* Sessions.make(yield* AgentHarness.make({ name: "empty" }))
      assert.strictEqual((yield* Effect.flip(empty.enqueue("x")))._tag, "NoStepConfigured")
      const badDefault = yield* Effect.flip(Sessions.make(harness, { defaultDeliveryMode: "soon" as never }))
      assert.strictEqual(badDefault.code, "DELIVERY_MODE_INVALID")
    }))
})
