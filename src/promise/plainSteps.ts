/**
 * noetic's plain step objects (`{ kind: 'runCode', id, execute }`, ...) as the steps
 * this library runs. The concept module of each kind registers its builder here when
 * it loads (`builders.ts`: runCode, spawn, loop, inParallel, conditional; `models.ts`:
 * callModel; `tools.ts`: invokeTool), so the contexts (`ctx.run`) and the composite
 * builders resolve nested plain steps without importing the modules above them.
 * See docs/architecture.md#layers.
 *
 * @since 0.1.0
 */
import * as Step from "../harness/Step.ts"

/** A step of the facade: bodies return values or Promises. */
export type AnyStep<I = any, O = any> = Step.Step<I, O, any, any>

/** The builder of one kind of plain step, given the object's fields as its options. */
type PlainBuilder = (options: any) => AnyStep

const plainBuilders = new Map<string, PlainBuilder>()

/** Makes `asStep` build plain objects of `kind` with `builder` (each concept module registers its own). */
export const registerPlainBuilder = (kind: string, builder: PlainBuilder): void => {
  plainBuilders.set(kind, builder)
}

const plainSteps = new WeakMap<object, AnyStep>()

/**
 * A step as this library runs it. noetic's `Step` is a plain object (`{ kind: 'runCode',
 * id, execute }`, ...), which noetic code may write without a builder: such an object is
 * built once with the builder of its kind (its fields are that builder's options) and
 * the same step is used every time it is seen. A built step is returned as it is.
 */
export const asStep = <I, O>(step: AnyStep<I, O>): AnyStep<I, O> => {
  if (Step.isStep(step) || typeof step !== "object" || step === null) return step
  const known = plainSteps.get(step)
  if (known !== undefined) return known as AnyStep<I, O>
  const { kind, ...options } = step as { readonly kind?: unknown }
  const builder = typeof kind === "string" ? plainBuilders.get(kind) : undefined
  if (builder === undefined) return step
  // The builder's caller here is this module: record no module (an object literal says
  // nothing of where it was written) unless the object names one.
  const built = builder({ module: null, ...options })
  plainSteps.set(step, built)
  return built as AnyStep<I, O>
}

/** `asStep` over a list, leaving anything that is not an array as it is (the builder refuses it). */
export const asSteps = <A>(steps: A): A => (Array.isArray(steps) ? steps.map(asStep) as A : steps)
