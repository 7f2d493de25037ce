import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import * as Resource from "@effect/opentelemetry/Resource"
import { assert, describe, it } from "@effect/vitest"
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"

describe("tracing through @effect/opentelemetry", () => {
  it.effect("an exporter receives a resumed run's step spans, replayed ones marked hit", () =>
    Effect.gen(function*() {
      const exporter = new InMemorySpanExporter()
      const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
      // What the README shows: the harness's spans go wherever the OpenTelemetry provider exports.
      const Tracing = OtelTracer.layer.pipe(
        Layer.provide(Layer.succeed(OtelTracer.OtelTracerProvider, provider)),
        Layer.provide(Resource.layer({ serviceName: "agent-host" }))
      )
      const storage = yield* makeMemory
      let crash = true
      const graph = runCode("agent", (_: void, ctx) =>
        Effect.gen(function*() {
          const plan = yield* ctx.run(runCode("plan", () => Effect.succeed("plan")), undefined)
          return yield* ctx.run(runCode("act", (p: string) => crash ? Effect.die("host crashed") : Effect.succeed(`${p} done`)), plan)
        }))
      const host = Effect.gen(function*() {
        const store = yield* CheckpointStore.makeWith(storage)
        return yield* AgentHarness.make({ name: "traced", agentGraph: graph }).pipe(
          Effect.provideService(CheckpointStore.CheckpointStore, store)
        )
      })
      yield* Effect.exit((yield* host).execute(undefined, { executionId: "otel-1" }).pipe(Effect.provide(Tracing)))
      crash = false
      exporter.reset()
      const resumed = yield* (yield* host).resume("otel-1").pipe(Effect.provide(Tracing))
      assert.deepStrictEqual(Option.map(resumed, (r) => r.output), Option.some("plan done"))
      yield* Effect.promise(() => provider.forceFlush())
      const spans = exporter.getFinishedSpans()
      const byName = (name: string) => spans.find((span) => span.name === name)
      assert.strictEqual(byName("runCode plan")?.attributes["replay"], "hit")
      assert.strictEqual(byName("runCode act")?.attributes["replay"], "miss")
      assert.strictEqual(byName("runCode act")?.attributes["path"], "/agent#0/act#0")
      assert.strictEqual(byName("runCode act")?.attributes["executionId"], "otel-1")
      const resume = byName("AgentHarness.resume")
      assert.isDefined(resume)
      // The step spans belong to the resume's trace.
      assert.strictEqual(byName("runCode act")?.spanContext().traceId, resume!.spanContext().traceId)
    }))
})
