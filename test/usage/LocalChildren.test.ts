/**
 * A user's program: children in their own `node` processes through
 * `LocalSubprocessAdapter.layer`, composed at the edge, with the host answering a
 * child's ask-user prompt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { AgentHarness, LocalSubprocessAdapter } from "../../src/index.ts"
import { ScriptedModel } from "../../src/testing/index.ts"
import { askThenModel } from "../fixtures/subprocessModelSteps.ts"

describe("usage: local subprocess children", () => {
  it.live("with the layer, the host answers a child's ask-user prompt through LocalSubprocessAdapter", () =>
    Effect.gen(function*() {
      const root = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "nlc-")), "subprocess")
      const asks = yield* Queue.unbounded<{ readonly handleId: string; readonly promptId: string }>()
      const output = yield* Effect.gen(function*() {
        const local = yield* LocalSubprocessAdapter.LocalSubprocessAdapter
        const harness = yield* AgentHarness.make({ name: "host" })
        assert.strictEqual(harness.subprocess, local)
        // The child's module provides its model; the parent's script is empty.
        const handle = yield* harness.detachedSpawn(askThenModel, "bandits", yield* harness.createContext()).pipe(
          Effect.provide(ScriptedModel.layer([]))
        )
        const ask = yield* Queue.take(asks)
        yield* local.answerAskUser(ask.handleId, ask.promptId, "approved")
        return yield* handle.await
      }).pipe(
        Effect.provide(LocalSubprocessAdapter.layer({
          root,
          pollMs: 20,
          onFrame: (handle, frame) =>
            frame.type === "askUserRequest"
              ? Effect.asVoid(Queue.offer(asks, { handleId: handle.handleId, promptId: frame.id }))
              : Effect.void
        }))
      )
      assert.deepStrictEqual(output, { approval: "approved", text: "answer from the child's model" })
    }), { timeout: 30_000 })
})
