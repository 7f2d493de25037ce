/**
 * The durable agent in the Effect API, composed from layers: file storage, the
 * checkpoint store and step ledger over it, a `LanguageModel` (the scripted model
 * here; any `effect/ai` provider layer fits the same slot), and OpenTelemetry
 * tracing through `@effect/opentelemetry` with a console exporter.
 *
 * The first run fails at its last step with a typed error. `resume` then replays the
 * completed steps: the scripted model has exactly one answer, so the resume only
 * succeeds because the model turn is replayed from the ledger rather than re-issued.
 * The spans of the resume are printed as a tree.
 */
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import type { ExportResult } from "@opentelemetry/core"
import { BasicTracerProvider, type ReadableSpan, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option, Schema } from "effect"
import assert from "node:assert/strict"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AgentHarness, callModel, CheckpointStore, FileStorage, runCode, ScriptedModel, StepLedger } from "noetic-effect"

/** Collects finished spans; printed as a tree per run. */
class ConsoleTreeExporter implements SpanExporter {
  spans: Array<ReadableSpan> = []
  export(spans: Array<ReadableSpan>, done: (result: ExportResult) => void): void {
    this.spans.push(...spans)
    done({ code: 0 })
  }
  async shutdown(): Promise<void> {}
  print(title: string): void {
    console.log(title)
    const byParent = new Map<string | undefined, Array<ReadableSpan>>()
    const ids = new Set(this.spans.map((span) => span.spanContext().spanId))
    for (const span of this.spans) {
      const parent = span.parentSpanContext?.spanId
      const key = parent !== undefined && ids.has(parent) ? parent : undefined
      byParent.set(key, [...(byParent.get(key) ?? []), span])
    }
    const walk = (parent: string | undefined, depth: number) => {
      const children = (byParent.get(parent) ?? []).toSorted((a, b) => a.startTime[1] - b.startTime[1] + (a.startTime[0] - b.startTime[0]) * 1e9)
      for (const span of children) {
        const ms = span.duration[0] * 1e3 + span.duration[1] / 1e6
        const attributes = Object.entries(span.attributes)
          .filter(([key]) => !key.startsWith("code."))
          .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
          .join(" ")
        console.log(`  ${"  ".repeat(depth)}${span.name} ${ms.toFixed(1)} ms${attributes ? ` ${attributes}` : ""}`)
        walk(span.spanContext().spanId, depth + 1)
      }
    }
    walk(undefined, 0)
    this.spans = []
  }
}

class PublishFailed extends Schema.TaggedError<PublishFailed>()("PublishFailed", { reason: Schema.String }) {}

const exporter = new ConsoleTreeExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
const Tracing = OtelTracer.layer.pipe(Layer.provide(Layer.succeed(OtelTracer.OtelTracerProvider, provider)))

const home = mkdtempSync(join(tmpdir(), "noetic-effect-agent-"))

// Storage, checkpoints and the ledger: a durable harness is one with these in context.
const Durable = StepLedger.layer({ retention: { maxEntries: 1000 } }).pipe(
  Layer.provideMerge(CheckpointStore.layer),
  Layer.provideMerge(FileStorage.layer({ root: join(home, "checkpoints") }))
)
// One answer only: a second model call would fail.
const Model = ScriptedModel.layer([{ id: "resp-1", text: "three findings on tidal energy" }])

let publishAttempts = 0
const agent = runCode("research-agent", (topic: string, ctx) =>
  Effect.gen(function*() {
    const plan = yield* ctx.run(runCode("plan", (t: string) => Effect.succeed(`survey ${t}`)), topic)
    const answer = yield* ctx.run(callModel("ask-model"), plan)
    return yield* ctx.run(
      runCode("publish", (text: string) =>
        Effect.suspend(() =>
          ++publishAttempts === 1
            ? Effect.fail(new PublishFailed({ reason: "the wiki was down" }))
            : Effect.succeed(`published: ${text}`)
        )),
      answer.text
    )
  }))

const program = Effect.gen(function*() {
  const harness = yield* AgentHarness.make({ name: "durable-agent", agentGraph: agent })
  const failed = yield* Effect.flip(harness.execute("tidal energy", { executionId: "exec-tidal" }))
  console.log(`first run failed with ${failed._tag}: ${"reason" in failed ? failed.reason : failed.message}`)
  exporter.print("spans of the first run:")

  const resumed = yield* harness.resume("exec-tidal")
  const log = yield* ScriptedModel.ScriptedModelLog
  console.log(`resume: ${Option.getOrThrow(resumed).output}`)
  console.log(`model requests across both runs: ${log.requests.length} (the answer replayed from the ledger)`)
  assert.equal(log.requests.length, 1)
  assert.equal(publishAttempts, 2)
  exporter.print("spans of the resume:")
})

await Effect.runPromise(
  program.pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Durable, Model, Tracing)))
)
await provider.shutdown()
rmSync(home, { recursive: true, force: true })
