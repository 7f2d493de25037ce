/**
 * The JSON Schema a `callModel` with an `output` schema sends its provider as the
 * structured-output constraint (docs/runtime.md#structured-output), found as noetic
 * finds it: a zod schema's own JSON Schema, else the step's explicit
 * `outputJsonSchema`, else the schema's Standard JSON Schema (`~standard.jsonSchema`).
 * A schema that gives none, without `outputJsonSchema`, fails `MISSING_JSON_SCHEMA`
 * rather than call the model unconstrained.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { StepConfigInvalid } from "../Errors.ts"

type JsonSchema = Readonly<Record<string, unknown>>

interface StandardJsonSchemaish {
  readonly "~standard"?: {
    readonly jsonSchema?: {
      readonly input?: (options: { readonly target: string }) => unknown
      readonly output?: (options: { readonly target: string }) => unknown
    }
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** `value` without the keys a Standard Schema vendor marks as its own (`~standard`...), at every depth. */
const sanitize = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sanitize)
  if (!isRecord(value)) return value
  return Object.fromEntries(Object.entries(value).filter(([key]) => !key.startsWith("~")).map(([key, v]) => [key, sanitize(v)]))
}

/** A conversion that throws (a schema that cannot be expressed) gives none. */
const attempt = (convert: (() => unknown) | undefined): JsonSchema | undefined => {
  if (convert === undefined) return undefined
  try {
    const json = convert()
    return isRecord(json) ? sanitize(json) as JsonSchema : undefined
  } catch {
    return undefined
  }
}

/** Whether `schema` is a zod 4 schema (zod keeps its internals under `_zod`). */
const isZod = (schema: unknown): boolean => isRecord(schema) && "_zod" in schema

/**
 * The JSON Schema of a structured output: zod's (the output side, draft-07, as noetic
 * converts it), else `explicit`, else the Standard JSON Schema's input side. Undefined
 * when none can be had.
 */
export const wireJsonSchema = (schema: unknown, explicit: JsonSchema | undefined): JsonSchema | undefined => {
  const standard = (schema as StandardJsonSchemaish | undefined)?.["~standard"]?.jsonSchema
  if (isZod(schema)) {
    const zod = attempt(standard?.output === undefined ? undefined : () => standard.output!({ target: "draft-07" }))
    if (zod !== undefined) return zod
  }
  if (explicit !== undefined) return sanitize(explicit) as JsonSchema
  return attempt(standard?.input === undefined ? undefined : () => standard.input!({ target: "draft-07" }))
}

/**
 * The constraint of step `stepId` for its `output` schema, or a `StepConfigInvalid`
 * `MISSING_JSON_SCHEMA` (a `NoeticConfigError` in the Promise facade) when the schema
 * validates only and no `outputJsonSchema` is given.
 */
export const outputConstraint = (
  stepId: string,
  schema: unknown,
  explicit: JsonSchema | undefined
): Effect.Effect<JsonSchema, StepConfigInvalid> => {
  const json = wireJsonSchema(schema, explicit)
  if (json !== undefined) return Effect.succeed(json)
  return Effect.fail(
    new StepConfigInvalid({
      kind: "callModel",
      code: "MISSING_JSON_SCHEMA",
      message: `callModel '${stepId}': the structured output schema cannot be converted to JSON Schema.`,
      hint: "Use a schema implementing StandardJSONSchemaV1 (zod 4 does), or pass outputJsonSchema on the callModel step."
    })
  )
}
