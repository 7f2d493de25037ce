/**
 * A tool's input checked against the tool's schema, as noetic checks it: a Standard
 * Schema (`~standard.validate`, what Effect's `Schema.toStandardSchemaV1`, Zod, Valibot
 * and ArkType offer) or a Zod schema through `safeParse`; the schema's output is what
 * the tool gets. Anything else is no schema: the arguments pass as they are. The Promise
 * API's `tool` and `invokeTool` (`src/promise/tools.ts`, `src/promise/modelTools.ts`)
 * call it before a tool runs.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** One problem a schema found, its path as keys. */
export const ToolInputIssue = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  path: Schema.Array(Schema.Union([Schema.String, Schema.Number, Schema.Symbol]))
})

/** One problem a schema found, its path as keys. */
export type ToolInputIssue = typeof ToolInputIssue.Type

/** A tool's arguments did not pass its input schema; `issues` lists what the schema said. */
export class ToolInputInvalid extends Schema.TaggedError<ToolInputInvalid>("noetic-effect/ToolInputInvalid")(
  "ToolInputInvalid",
  { tool: Schema.String, issues: Schema.Array(ToolInputIssue) }
) {
  /** The error code. */
  get code(): "TOOL_INPUT_INVALID" {
    return "TOOL_INPUT_INVALID"
  }
  override get message(): string {
    return `Tool input validation failed: ${JSON.stringify(this.issues, null, 2)}`
  }
}

/** An issue as a Standard Schema or Zod reports it. */
interface ReportedIssue {
  readonly message: string
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
}

const invalid = (tool: string, issues: ReadonlyArray<ReportedIssue>) =>
  new ToolInputInvalid({
    tool,
    issues: issues.map((issue) => ({
      code: "custom",
      message: issue.message,
      path: (issue.path ?? []).map((segment) => typeof segment === "object" && segment !== null ? segment.key : segment)
    }))
  })

/**
 * `args` checked against `schema` for the tool named `tool`: the schema's output, or
 * `ToolInputInvalid` naming each issue. A schema that throws fails with what it threw
 * (a defect); without a schema `args` pass as they are.
 */
export const validate = (schema: unknown, args: unknown, tool: string): Effect.Effect<unknown, ToolInputInvalid> =>
  Effect.suspend(() => {
    // A schema may be a function object (Effect's are).
    if ((typeof schema !== "object" && typeof schema !== "function") || schema === null) return Effect.succeed(args)
    const zod = schema as { readonly safeParse?: unknown }
    if (typeof zod.safeParse === "function") {
      const result = (zod.safeParse as (u: unknown) => {
        success: boolean
        data?: unknown
        error?: { issues: Array<ReportedIssue> }
      })(args)
      return result.success
        ? Effect.succeed(result.data)
        : Effect.fail(invalid(tool, result.error?.issues ?? [{ message: "invalid input" }]))
    }
    const standard = (schema as { readonly "~standard"?: { readonly validate?: unknown } })["~standard"]
    if (typeof standard?.validate !== "function") return Effect.succeed(args)
    type Result = { readonly value?: unknown; readonly issues?: ReadonlyArray<ReportedIssue> }
    const answered = (standard.validate as (u: unknown) => Result | Promise<Result>)(args)
    return Effect.flatMap(
      answered instanceof Promise ? Effect.promise(() => answered) : Effect.succeed(answered),
      (result) => (result.issues !== undefined ? Effect.fail(invalid(tool, result.issues)) : Effect.succeed(result.value))
    )
  })
