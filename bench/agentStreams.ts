/**
 * Agent streams (issue 33's figure): chunks per second from a step's awaited
 * `ctx.stream().write` to a `readStream` reader's iterator over HTTP, on SQLite, against
 * awaited durable appends alone (the `DurableStreams` service, no harness, no reader) in
 * the same interleaved rounds. Target: at least 0.5x.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import { readStream } from "../src/client/index.ts"
import * as AgentHarness from "../src/harness/AgentHarness.ts"
import { runCode } from "../src/harness/Step.ts"
import { ServedUrl } from "../src/http/HttpServe.ts"
import * as StreamServer from "../src/http/StreamServer.ts"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import * as CheckpointStore from "../src/services/CheckpointStore.ts"
import * as DurableStreams from "../src/services/DurableStreams.ts"
import { StorageAdapter } from "../src/services/StorageAdapter.ts"
import {
  type BenchCase,
  type BenchContext,
  type CaseResult,
  figureOf,
  interleave,
  now,
  present,
  ratioOf,
  tempRoot,
  withCaseScope
} from "./harness.ts"

const rate = (count: number, ms: number) => (count / ms) * 1000
const chunk = (i: number) => ({ token: i, text: "x".repeat(40) })

const agentCase: BenchCase = {
  id: "agentStreams:write-to-reader",
  title: "Agent streams: a step's write to a reader's iterator on SQLite against awaited durable appends alone (chunks/s)",
  run: (context: BenchContext): Promise<CaseResult> =>
    withCaseScope(async (scope) => {
      const count = context.quick ? 30 : 300
      const rounds = context.quick ? 2 : 7
      const runScope = Effect.runSync(Scope.make())
      scope.onClose(() => Effect.runPromise(Scope.close(runScope, Exit.void)))
      const storage = await Effect.runPromise(Effect.orDie(Scope.provide(
        SqliteStorage.make({ path: Path.join(tempRoot("agent-streams"), "agent.db") }),
        runScope
      )))
      const built = await Effect.runPromise(Effect.orDie(Layer.buildWithScope(
        StreamServer.layerWithService().pipe(Layer.provide(Layer.succeed(StorageAdapter, storage))),
        runScope
      )))
      const url = (built.mapUnsafe.get(ServedUrl.key) as ServedUrl["Service"]).url
      const streams = await Effect.runPromise(DurableStreams.forStorage(storage))
      const writer = runCode("writer", (n: number, ctx) =>
        Effect.gen(function*() {
          const out = yield* ctx.stream()
          for (let i = 0; i < n; i++) yield* out.write(chunk(i))
          yield* out.close()
        }))
      const harness = await Effect.runPromise(Effect.orDie(Effect.gen(function*() {
        const store = yield* CheckpointStore.makeWith(storage)
        return yield* AgentHarness.make({ name: "bench-agent-streams", agentGraph: writer }).pipe(
          Effect.provideService(CheckpointStore.CheckpointStore, store),
          Effect.provideService(Scope.Scope, runScope)
        )
      })))
      let run = 0
      const variants: Record<string, () => Promise<number>> = {
        appends: async () => {
          const path = `/bench/appends-${run++}`
          await Effect.runPromise(streams.create({ path, contentType: "application/json" }))
          const start = now()
          for (let i = 0; i < count; i++) {
            await Effect.runPromise(streams.append({
              path,
              contentType: "application/json",
              body: new TextEncoder().encode(JSON.stringify([chunk(i)]))
            }))
          }
          return rate(count, now() - start)
        },
        writes: async () => {
          const executionId = `bench-${run++}`
          const start = now()
          await Effect.runPromise(harness.execute(count, { executionId }))
          return rate(count, now() - start)
        },
        agent: async () => {
          const executionId = `bench-${run++}`
          const start = now()
          const executing = Effect.runPromise(harness.execute(count, { executionId }))
          // The reader starts once the stream exists, and reads until the final event.
          let read = 0
          for (;;) {
            try {
              for await (const item of readStream(`${url}/executions/${executionId}/output`)) {
                if ((item.data as { $end?: string }).$end === undefined) read++
              }
              break
            } catch {
              await new Promise((resolve) => setTimeout(resolve, 1))
            }
          }
          await executing
          if (read !== count) throw new Error(`the reader saw ${read} chunks, not ${count}`)
          return rate(count, now() - start)
        }
      }
      context.log(`agentStreams: ${rounds} rounds of ${count} chunks`)
      const samples = await interleave(variants, { rounds, warmup: 1 })
      const detail = { chunks: count, bytes: JSON.stringify(chunk(1)).length }
      const figures = [
        figureOf(samples, "appends", "awaited durable appends alone (DurableStreams service, SQLite)", "baseline", "/s", detail),
        figureOf(samples, "writes", "a step's awaited write with no reader (the run alone), SQLite", "this", "/s", detail),
        figureOf(samples, "agent", "a step's awaited write to a readStream reader's iterator over HTTP, SQLite", "this", "/s", detail)
      ]
      return {
        id: "agentStreams:write-to-reader",
        title: agentCase.title,
        figures,
        ratios: present([
          ratioOf(figures, samples, "agent stream write to reader / awaited durable appends (chunks/s)", "agent", "appends", {
            atLeast: 0.5
          })
        ]),
        skipped: [],
        notes: [
          "Each write is one idempotent-producer append (a compare-and-set commit); the reader catches up, then follows the stream over one SSE response from the server, which shares the harness's DurableStreams service: the append wakes the response, whose read takes the chunk from the service's cache of committed chunks (the stream's record and the next chunk key are still read from SQLite)."
        ]
      }
    })
}

export const cases: ReadonlyArray<BenchCase> = [agentCase]
