/**
 * Spans a durable step opens once per step, paid for only when someone can see them.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { constUndefined } from "effect/Function"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"

/** What a traced body may do to its span: set an attribute (a no-op without one). */
export interface SpanMarks {
  readonly attribute: (key: string, value: unknown) => void
}

const noMarks: SpanMarks = { attribute: () => {} }

/**
 * `body` in a span named `name` that is the parent of the spans below it, as
 * `Effect.useSpan` with `Effect.withParentSpan` make one, when a tracer is installed.
 * Without one (Effect's native tracer, whose spans are exported nowhere) it opens no
 * span, only the stack frame the span would have added, so a failure's cause still
 * names the step it failed in: a span costs ~2 us per step, several times that right
 * after a commit's fsync, for nothing anyone can read.
 */
export const spanned = <A, E, R>(
  name: string,
  options: Tracer.SpanOptions,
  body: (span: SpanMarks) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) =>
    fiber.getRef(Tracer.Tracer) === Tracer.nativeTracer
      ? Effect.updateService(
        body(noMarks),
        References.CurrentStackFrame,
        (parent) => ({ name, stack: constUndefined, parent })
      )
      : Effect.useSpan(name, options, (span) => Effect.withParentSpan(body(span), span, options))
  )
