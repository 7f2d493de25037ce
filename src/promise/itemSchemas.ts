/**
 * noetic's item schemas (docs/runtime.md#item-schemas): `ItemSchema` (an object with a
 * non-empty string `type`) and `ItemSchemaRegistry`, which checks items against
 * extension schemas and refuses an item of a type no schema knows with a
 * `NoeticErrorImpl` of kind `item_schema_mismatch`. Extension schemas are Standard
 * Schemas (zod's work: they are checked through `~standard.validate`, or `safeParse`).
 *
 * @since 0.1.0
 */
import { NoeticErrorImpl } from "./errors.ts"

/** An item in noetic's shape: an object with a `type`. */
export interface ItemLike {
  readonly type: string
  readonly [field: string]: unknown
}

/** A schema an extension is given as: a Standard Schema, or anything with zod's `safeParse`. */
export type ItemExtensionSchema =
  | { readonly "~standard": { readonly validate: (value: unknown) => unknown } }
  | { readonly safeParse: (value: unknown) => { readonly success: boolean } }

/** noetic's `ItemSchemaExtensions`. */
export interface ItemSchemaExtensions {
  readonly items?: ReadonlyArray<ItemExtensionSchema>
  readonly developerMessages?: ReadonlyArray<ItemExtensionSchema>
  readonly toolCalls?: ReadonlyArray<ItemExtensionSchema>
  readonly toolResults?: ReadonlyArray<ItemExtensionSchema>
}

type Category = keyof ItemSchemaExtensions

const isItemLike = (value: unknown): value is ItemLike =>
  typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string" &&
  (value as { type: string }).type.length > 0

const ITEM_MESSAGE = "Expected an Item object with a non-empty string \"type\" discriminant."

/** noetic's `ItemSchema`: a Standard Schema (and `parse` / `safeParse`) of an object with a non-empty string `type`. */
export const ItemSchema = {
  "~standard": {
    version: 1 as const,
    vendor: "noetic-effect",
    validate: (value: unknown) => isItemLike(value) ? { value } : { issues: [{ message: ITEM_MESSAGE }] }
  },
  safeParse: (value: unknown): { success: true; data: ItemLike } | { success: false; error: Error } =>
    isItemLike(value) ? { success: true, data: value } : { success: false, error: new TypeError(ITEM_MESSAGE) },
  parse: (value: unknown): ItemLike => {
    if (!isItemLike(value)) throw new TypeError(ITEM_MESSAGE)
    return value
  }
}

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

const merge = (a: ItemSchemaExtensions | undefined, b: ItemSchemaExtensions | undefined): Required<ItemSchemaExtensions> => ({
  items: [...(a?.items ?? []), ...(b?.items ?? [])],
  developerMessages: [...(a?.developerMessages ?? []), ...(b?.developerMessages ?? [])],
  toolCalls: [...(a?.toolCalls ?? []), ...(b?.toolCalls ?? [])],
  toolResults: [...(a?.toolResults ?? []), ...(b?.toolResults ?? [])]
})

const categoriesOf = (item: ItemLike): Array<Category> => {
  const categories: Array<Category> = ["items"]
  if (item.type === "message" && item.role === "developer") categories.push("developerMessages")
  if (item.type === "function_call") categories.push("toolCalls")
  if (item.type === "function_call_output") categories.push("toolResults")
  return categories
}

/** noetic's `ItemSchemaRegistry`: extension schemas, and whether an unknown item type is refused. */
export class ItemSchemaRegistry {
  readonly extensions: Required<ItemSchemaExtensions>
  readonly strictUnknownExtensions: boolean

  constructor(extensions?: ItemSchemaExtensions, options?: { readonly strictUnknownExtensions?: boolean }) {
    this.extensions = merge(undefined, extensions)
    this.strictUnknownExtensions = options?.strictUnknownExtensions ?? true
  }

  /** A registry with `extensions` added (this one when they add none). */
  extend(extensions?: ItemSchemaExtensions): ItemSchemaRegistry {
    const added = merge(undefined, extensions)
    if (Object.values(added).every((list) => list.length === 0)) return this
    return new ItemSchemaRegistry(merge(this.extensions, added), { strictUnknownExtensions: this.strictUnknownExtensions })
  }

  /**
   * The item, checked: an item an extension schema accepts passes as it is; an item of a
   * type that is neither a base type nor accepted rejects `item_schema_mismatch` (strict).
   */
  parse(value: unknown): ItemLike {
    const base = ItemSchema.parse(value)
    const schemas = categoriesOf(base).flatMap((category) => this.extensions[category])
    if (schemas.some((schema) => accepts(schema, value))) return base
    if (this.strictUnknownExtensions && !isKnownBaseType(base.type)) {
      throw new NoeticErrorImpl({ kind: "item_schema_mismatch", category: "items", itemType: base.type })
    }
    return base
  }

  parseMany(values: Iterable<unknown>): Array<ItemLike> {
    return Array.from(values, (value) => this.parse(value))
  }

  /** The item checked against one category's schemas; none accepting it rejects `item_schema_mismatch`. */
  parseWithCategory(value: unknown, category: Category): ItemLike {
    const schemas = this.extensions[category]
    if (schemas.length === 0) return this.parse(value)
    if (schemas.some((schema) => accepts(schema, value))) return ItemSchema.parse(value)
    throw new NoeticErrorImpl({ kind: "item_schema_mismatch", category })
  }
}

/** The registry with no extensions, refusing unknown item types. */
export const defaultItemSchemaRegistry = new ItemSchemaRegistry(undefined, { strictUnknownExtensions: true })
