/**
 * Completed spans handed to an exporter (noetic's `traceExporter`,
 * docs/runtime.md#tracing): a `Tracer` that wraps another (Effect's native tracer
 * unless given one, an OpenTelemetry tracer say) and, as each span ends, gives a
 * plain record of it to the exporter. Every span the engine makes goes through it: a
 * step's dispatch (`<kind> <id>`, its `ctx.span`), the tool loop's model rounds
 * (`runCode model-round`, with noetic's GenAI attributes `gen_ai.system`,
 * `gen_ai.request.model`, `gen_ai.usage.*`, `gen_ai.cost`) and tool calls
 * (`runCode tool-call`, `tool.name`), `AgentHarness.execute`, `.restore`,
 * `.checkpoint`.
 *
 * The exporter is called as the span ends, with that one span, so an in-memory
 * exporter holds it at once; a failing or rejecting export is logged, never thrown
 * into the run. `pending` settles once every export started so far has.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { logWarning } from "../internal/diagnostics.ts"

/** One completed span, as an exporter receives it. Times in epoch milliseconds. */
export interface SpanRecord {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  /** The enclosing span's id; null for a root span. */
  readonly parentSpanId: string | null
  readonly startTime: number
  readonly endTime: number
  readonly attributes: ReadonlyMap<string, unknown>
  readonly events: ReadonlyArray<{ readonly name: string; readonly timestamp: number; readonly attributes?: Readonly<Record<string, unknown>> }>
  /** Whether the span's effect succeeded. */
  readonly status: "ok" | "error"
}

/** Where completed spans go: a function given each one (its Promise, if any, is tracked, not awaited by the run). */
export type SpanSink = (span: SpanRecord) => void | PromiseLike<void>

const millis = (nanos: bigint): number => Number(nanos / 1_000_000n)

/** A span that records its events and hands itself to `onEnd` once, when it ends. */
class ExportedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly #inner: Tracer.Span
  readonly #events: Array<{ readonly name: string; readonly timestamp: number; readonly attributes?: Readonly<Record<string, unknown>> }> = []
  readonly #onEnd: (span: SpanRecord) => void
  #ended = false

  constructor(inner: Tracer.Span, onEnd: (span: SpanRecord) => void) {
    this.#inner = inner
    this.#onEnd = onEnd
  }
  get name() {
    return this.#inner.name
  }
  get spanId() {
    return this.#inner.spanId
  }
  get traceId() {
    return this.#inner.traceId
  }
  get parent() {
    return this.#inner.parent
  }
  get annotations() {
    return this.#inner.annotations
  }
  get status() {
    return this.#inner.status
  }
  get attributes() {
    return this.#inner.attributes
  }
  get links() {
    return this.#inner.links
  }
  get sampled() {
    return this.#inner.sampled
  }
  get kind() {
    return this.#inner.kind
  }
  attribute(key: string, value: unknown): void {
    this.#inner.attribute(key, value)
  }
  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    if (this.#ended) return
    this.#events.push({ name, timestamp: millis(startTime), ...(attributes === undefined ? {} : { attributes: { ...attributes } }) })
    this.#inner.event(name, startTime, attributes)
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.#inner.addLinks(links)
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.#ended) return
    this.#ended = true
    const startTime = this.#inner.status._tag === "Started" ? this.#inner.status.startTime : endTime
    this.#inner.end(endTime, exit)
    this.#onEnd({
      name: this.name,
      traceId: this.traceId,
      spanId: this.spanId,
      parentSpanId: Option.getOrNull(Option.map(this.parent, (parent) => parent.spanId)),
      startTime: millis(startTime),
      endTime: millis(endTime),
      attributes: new Map(this.attributes),
      events: [...this.#events],
      status: Exit.isSuccess(exit) ? "ok" : "error"
    })
  }
}

/** An exporting tracer: `tracer` with every span it makes handed to `sink` as it ends. */
export interface SpanExporter {
  readonly tracer: Tracer.Tracer
  /** Settles once every export started so far has. */
  readonly pending: () => Promise<void>
}

/** Wraps `inner` (Effect's native tracer when absent) so every span ends into `sink`. */
export const make = (sink: SpanSink, inner: Tracer.Tracer = Tracer.nativeTracer): SpanExporter => {
  const inFlight = new Set<Promise<void>>()
  const failed = (error: unknown) =>
    Effect.runFork(logWarning("traceExporter: exporting a span failed", error))
  const onEnd = (span: SpanRecord) => {
    try {
      const result = sink(span)
      if (result !== undefined && typeof (result as PromiseLike<void>).then === "function") {
        const tracked: Promise<void> = Promise.resolve(result).catch(failed).then(() => void inFlight.delete(tracked))
        inFlight.add(tracked)
      }
    } catch (error) {
      failed(error)
    }
  }
  return {
    tracer: Tracer.make({
      span: (options) => new ExportedSpan(inner.span(options), onEnd),
      ...(inner.context === undefined ? {} : { context: inner.context })
    }),
    pending: () => Promise.all([...inFlight]).then(() => undefined)
  }
}

/**
 * The layer setting `exporter.tracer` as the tracer of everything it is provided to;
 * when its scope closes (a harness closing) it waits for the exports in flight.
 */
export const layer = (exporter: SpanExporter): Layer.Layer<never> =>
  Layer.mergeAll(
    Layer.succeed(Tracer.Tracer, exporter.tracer),
    Layer.effectDiscard(Effect.addFinalizer(() => Effect.promise(exporter.pending)))
  )
