/**
 * noetic's `traceExporter` (docs/runtime.md#tracing): the harness option taking a
 * `TraceExporter` (`export(spans): Promise<void>`), with noetic's `NoopExporter` and
 * `InMemoryExporter`, and the GenAI attribute names. The spans are the engine's, made
 * by Effect's tracer (`src/layers/SpanExport.ts`); each is exported as it ends, as a
 * noetic `SpanImpl` (`name`, `traceId`, `spanId`, `parentSpanId`, `startTime`,
 * `endTime`, `attributes`, `events`, `duration`).
 *
 * @since 0.2.0
 */
import type * as Layer from "effect/Layer"
import * as Tracer from "effect/Tracer"
import * as SpanExport from "../layers/SpanExport.ts"
import { NoeticConfigError } from "./errors.ts"

type AttributeValue = string | number | boolean

/** A completed span, as noetic's `SpanImpl` shows it. Ended: `setAttribute`, `addEvent` and `end` do nothing. */
export class ExportedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | null
  readonly startTime: number
  readonly endTime: number | undefined
  readonly attributes: Map<string, AttributeValue>
  readonly events: Array<{ name: string; timestamp: number; attributes?: Record<string, AttributeValue> }>
  /** `'ok'`, or `'error'` when the span's work failed (this library's field). */
  readonly status: "ok" | "error"

  constructor(record: SpanExport.SpanRecord) {
    this.name = NOETIC_SPAN_NAMES[record.name] ?? record.name
    this.traceId = record.traceId
    this.spanId = record.spanId
    this.parentSpanId = record.parentSpanId
    this.startTime = record.startTime
    this.endTime = record.endTime
    this.attributes = new Map(
      [...record.attributes].map(([key, value]) => [key, isAttribute(value) ? value : String(value)] as const)
    )
    this.events = record.events.map((event) => ({ ...event })) as ExportedSpan["events"]
    this.status = record.status
  }
  /** `endTime - startTime`. */
  get duration(): number {
    return (this.endTime ?? Date.now()) - this.startTime
  }
  setAttribute(_key: string, _value: AttributeValue): void {}
  addEvent(_name: string, _attributes?: Record<string, AttributeValue>): void {}
  end(): void {}
}

/**
 * The engine's spans that noetic makes under its own names: a model round is noetic's
 * `llm.call`, a tool call its `tool.call` (docs/runtime.md#tracing), so an exporter
 * written for noetic finds them by name.
 */
const NOETIC_SPAN_NAMES: Readonly<Record<string, string>> = {
  "runCode model-round": "llm.call",
  "runCode tool-call": "tool.call"
}

const isAttribute = (value: unknown): value is AttributeValue =>
  typeof value === "string" || typeof value === "number" || typeof value === "boolean"

/** noetic's `TraceExporter`: receives completed spans. */
export interface TraceExporter {
  export(spans: Array<ExportedSpan>): Promise<void>
}

/** noetic's `NoopExporter`: discards every span (what a harness without `traceExporter` does). */
export class NoopExporter implements TraceExporter {
  async export(_spans: Array<ExportedSpan>): Promise<void> {}
}

/** noetic's `InMemoryExporter`: collects spans, for tests and debugging. */
export class InMemoryExporter implements TraceExporter {
  spans: Array<ExportedSpan> = []
  async export(spans: Array<ExportedSpan>): Promise<void> {
    this.spans.push(...spans)
  }
  getSpansByName(name: string): Array<ExportedSpan> {
    return this.spans.filter((span) => span.name === name)
  }
  getChildSpans(parentSpanId: string): Array<ExportedSpan> {
    return this.spans.filter((span) => span.parentSpanId === parentSpanId)
  }
  getTraceTree(traceId: string): Array<ExportedSpan> {
    return this.spans.filter((span) => span.traceId === traceId)
  }
  clear(): void {
    this.spans = []
  }
}

/** noetic's GenAI semantic attribute names, as the tool loop sets them on a model round's span. */
export const GenAI = {
  SYSTEM: "gen_ai.system",
  REQUEST_MODEL: "gen_ai.request.model",
  USAGE_INPUT_TOKENS: "gen_ai.usage.input_tokens",
  USAGE_OUTPUT_TOKENS: "gen_ai.usage.output_tokens",
  USAGE_CACHED_INPUT_TOKENS: "gen_ai.usage.cached_input_tokens",
  USAGE_CACHE_WRITE_TOKENS: "gen_ai.usage.cache_write_tokens",
  COST: "gen_ai.cost"
} as const

/** noetic's tool attribute names; this library sets `tool.name` on a tool call's span. */
export const ToolAttr = {
  NAME: "tool.name",
  NEEDS_APPROVAL: "tool.needs_approval"
} as const

/**
 * The tracer layer of the harness option `traceExporter`: every span of the harness's
 * runtime is exported, one per `export` call, as it ends; closing the harness waits
 * for the exports in flight. Throws `NoeticConfigError` `INVALID_TRACE_EXPORTER` for
 * a value without an `export` method.
 */
export const traceExporterLayer = (exporter: unknown): Layer.Layer<never> => {
  if (typeof (exporter as { export?: unknown } | null)?.export !== "function") {
    throw new NoeticConfigError({
      code: "INVALID_TRACE_EXPORTER",
      message: "traceExporter has no export(spans) method",
      hint: "Pass an object with export(spans: Span[]): Promise<void>, such as new InMemoryExporter()."
    })
  }
  return SpanExport.layer(exporterFor(exporter as TraceExporter))
}

const exporters = new WeakMap<TraceExporter, SpanExport.SpanExporter>()

/** One exporting tracer per exporter, so `createSpan` and the runtime's spans share it. */
const exporterFor = (target: TraceExporter): SpanExport.SpanExporter => {
  let made = exporters.get(target)
  if (made === undefined) {
    made = SpanExport.make((record) => target.export([new ExportedSpan(record)]))
    exporters.set(target, made)
  }
  return made
}

/** The tracer of spans exported to `exporter` (Effect's native tracer without one): `createSpan` makes its spans with it. */
export const tracerFor = (exporter: TraceExporter | undefined): Tracer.Tracer =>
  exporter === undefined ? Tracer.nativeTracer : exporterFor(exporter).tracer
