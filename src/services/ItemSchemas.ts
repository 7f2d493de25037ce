/**
 * noetic's item schemas (docs/runtime.md#item-schemas): the items a model answers and
 * the tool results the tool loop makes are checked against extension schemas, and an
 * item of a type no schema knows is refused (`strict`, the default) with
 * `ItemSchemaMismatch` (noetic's `item_schema_mismatch`). A harness's `ItemSchemas`
 * reference holds its extensions; without any, only the base shape is checked (an
 * object with a non-empty `type`, of a type the providers answer).
 *
 * Extension schemas are Standard Schemas (or anything with zod's `safeParse`), checked
 * synchronously, as gates: an item one accepts passes as it is.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** The categories an extension schema may be registered for. */
export type ItemCategory = "items" | "developerMessages" | "toolCalls" | "toolResults"

/** A schema an extension is given as: a Standard Schema, or anything with zod's `safeParse`. */
export type ItemExtensionSchema =
  | { readonly "~standard": { readonly validate: (value: unknown) => unknown } }
  | { readonly safeParse: (value: unknown) => { readonly success: boolean } }

/** noetic's `ItemSchemaExtensions`. */
export interface ItemSchemaExtensions {
  readonly items?: ReadonlyArray<ItemExtensionSchema> | undefined
  readonly developerMessages?: ReadonlyArray<ItemExtensionSchema> | undefined
  readonly toolCalls?: ReadonlyArray<ItemExtensionSchema> | undefined
  readonly toolResults?: ReadonlyArray<ItemExtensionSchema> | undefined
}

/** noetic's `ItemSchemaConfig`: the extensions, and whether an unknown item type is refused (default true). */
export interface ItemSchemaConfig {
  readonly schemas?: ItemSchemaExtensions | undefined
  readonly strict?: boolean | undefined
}

/** An item failed extension-schema validation (noetic's `item_schema_mismatch`). */
export class ItemSchemaMismatch extends Schema.TaggedError<ItemSchemaMismatch>("noetic-effect/ItemSchemaMismatch")(
  "ItemSchemaMismatch",
  {
    category: Schema.Literals(["items", "developerMessages", "toolCalls", "toolResults"]),
    itemType: Schema.optionalKey(Schema.String)
  }
) {
  /** The error code. */
  get code(): "ITEM_SCHEMA_MISMATCH" {
    return "ITEM_SCHEMA_MISMATCH"
  }
  readonly noeticKind = "item_schema_mismatch"
  override get message(): string {
    // noetic's wording.
    return this.itemType !== undefined
      ? `Item type '${this.itemType}' did not match any registered item extension schema.`
      : `Item did not match any registered ${this.category} extension schema.`
  }
}

/** The item extensions of the running harness (noetic's harness option `itemSchemas`); none by default. */
export const ItemSchemas: Context.Reference<ItemSchemaConfig> = Context.Reference<ItemSchemaConfig>(
  "noetic-effect/ItemSchemas",
  { defaultValue: () => ({}) }
)

/** An item: an object with a non-empty string `type`. */
export const isItemShaped = (value: unknown): value is { readonly type: string; readonly [field: string]: unknown } =>
  typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string" &&
  (value as { type: string }).type.length > 0

/** What `isItemShaped` refuses, as noetic words it. */
export const ITEM_SHAPE_MESSAGE = "Expected an Item object with a non-empty string \"type\" discriminant."

/** Whether `schema` accepts `value` (a synchronous check, as noetic's `safeParse` is). */
const accepts = (schema: ItemExtensionSchema, value: unknown): boolean => {
  if ("safeParse" in schema && typeof schema.safeParse === "function") return schema.safeParse(value).success
  const result = (schema as { "~standard": { validate: (value: unknown) => unknown } })["~standard"].validate(value)
  if (typeof (result as { then?: unknown })?.then === "function") {
    throw new TypeError("an item extension schema must validate synchronously")
  }
  return (result as { issues?: unknown }).issues === undefined
}

const KNOWN_BASE_TYPES = new Set([
  "message",
  "function_call",
  "function_call_output",
  "reasoning",
  "web_search_call",
  "file_search_call",
  "image_generation_call"
])

const isKnownBaseType = (type: string) => KNOWN_BASE_TYPES.has(type) || type.startsWith("openrouter:")

const categoriesOf = (item: { readonly type: string; readonly role?: unknown }): Array<ItemCategory> => {
  const categories: Array<ItemCategory> = ["items"]
  if (item.type === "message" && item.role === "developer") categories.push("developerMessages")
  if (item.type === "function_call") categories.push("toolCalls")
  if (item.type === "function_call_output") categories.push("toolResults")
  return categories
}

/**
 * Checks one item (noetic's `ItemSchemaRegistry.parse`): one an extension schema of its
 * categories accepts passes; one of a type that is neither a base type nor accepted is
 * refused under `strict`. Throws `TypeError` for a value that is not item-shaped.
 */
export const check = (config: ItemSchemaConfig, value: unknown): ItemSchemaMismatch | undefined => {
  if (!isItemShaped(value)) throw new TypeError(ITEM_SHAPE_MESSAGE)
  const schemas = categoriesOf(value).flatMap((category) => config.schemas?.[category] ?? [])
  if (schemas.some((schema) => accepts(schema, value))) return undefined
  if ((config.strict ?? true) && !isKnownBaseType(value.type)) {
    return new ItemSchemaMismatch({ category: "items", itemType: value.type })
  }
  return undefined
}

/**
 * Checks one item against one category's schemas (noetic's `parseWithCategory`): with
 * none registered, as `check`; else one of them must accept it.
 */
export const checkCategory = (config: ItemSchemaConfig, value: unknown, category: ItemCategory): ItemSchemaMismatch | undefined => {
  const schemas = config.schemas?.[category] ?? []
  if (schemas.length === 0) return check(config, value)
  if (!isItemShaped(value)) throw new TypeError(ITEM_SHAPE_MESSAGE)
  return schemas.some((schema) => accepts(schema, value)) ? undefined : new ItemSchemaMismatch({ category })
}

/** Runs a check; a value that is not item-shaped fails with the `TypeError` the check throws. */
const checked = <A>(value: A, f: (config: ItemSchemaConfig) => ItemSchemaMismatch | undefined): Effect.Effect<A, unknown> =>
  ItemSchemas.use((config) =>
    Effect.flatMap(
      Effect.try({ try: () => f(config), catch: (thrown) => thrown }),
      (refused) => (refused === undefined ? Effect.succeed(value) : Effect.fail(refused))
    )
  )

/** The items of a model response, checked against the harness's `ItemSchemas`; the first refused fails. */
export const checkResponseItems = <A>(items: ReadonlyArray<A>): Effect.Effect<ReadonlyArray<A>, unknown> =>
  checked(items, (config) => {
    for (const item of items) {
      const refused = check(config, item)
      if (refused !== undefined) return refused
    }
    return undefined
  })

/** A tool result item the tool loop made, checked against the harness's `toolResults` schemas. */
export const checkToolResult = <A>(item: A): Effect.Effect<A, unknown> =>
  checked(item, (config) => checkCategory(config, item, "toolResults"))

/**
 * The items of a restored snapshot, checked as noetic's restore parses them
 * (`parseMany`): each against the harness's `ItemSchemas`, the first refused failing
 * with `ItemSchemaMismatch`. A value that is not item-shaped is refused as an item of no
 * known type (category `items`).
 *
 * Only on a harness given item schemas (`schemas` or `strict`): without them the engine
 * appends items of any type (`ctx.append`), so refusing them on restore would make a
 * snapshot the run wrote unrestorable.
 */
export const checkRestoredItems = (items: ReadonlyArray<unknown>): Effect.Effect<void, ItemSchemaMismatch> =>
  ItemSchemas.use((config) =>
    Effect.suspend(() => {
      if (config.schemas === undefined && config.strict === undefined) return Effect.void
      for (const item of items) {
        const refused = isItemShaped(item) ? check(config, item) : new ItemSchemaMismatch({ category: "items" })
        if (refused !== undefined) return Effect.fail(refused)
      }
      return Effect.void
    })
  )
