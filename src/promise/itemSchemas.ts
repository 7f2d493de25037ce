/**
 * noetic's item schemas (docs/runtime.md#item-schemas): `ItemSchema` (an object with a
 * non-empty string `type`) and `ItemSchemaRegistry`, which checks items against
 * extension schemas and refuses an item of a type no schema knows with a
 * `NoeticErrorImpl` of kind `item_schema_mismatch`. Extension schemas are Standard
 * Schemas (zod's work: they are checked through `~standard.validate`, or `safeParse`).
 * The check itself is the engine's (`src/services/ItemSchemas.ts`), which the tool loop
 * runs with the harness option `itemSchemas`.
 *
 * @since 0.1.0
 */
import * as Engine from "../services/ItemSchemas.ts"
import { NoeticErrorImpl } from "./errors.ts"

/** An item in noetic's shape: an object with a `type`. */
export interface ItemLike {
  readonly type: string
  readonly [field: string]: unknown
}

/** A schema an extension is given as: a Standard Schema, or anything with zod's `safeParse`. */
export type ItemExtensionSchema = Engine.ItemExtensionSchema

/** noetic's `ItemSchemaExtensions`. */
export type ItemSchemaExtensions = Engine.ItemSchemaExtensions

type Category = Engine.ItemCategory

/** noetic's `ItemSchema`: a Standard Schema (and `parse` / `safeParse`) of an object with a non-empty string `type`. */
export const ItemSchema = {
  "~standard": {
    version: 1 as const,
    vendor: "noetic-effect",
    validate: (value: unknown) =>
      Engine.isItemShaped(value) ? { value } : { issues: [{ message: Engine.ITEM_SHAPE_MESSAGE }] }
  },
  safeParse: (value: unknown): { success: true; data: ItemLike } | { success: false; error: Error } =>
    Engine.isItemShaped(value)
      ? { success: true, data: value }
      : { success: false, error: new TypeError(Engine.ITEM_SHAPE_MESSAGE) },
  parse: (value: unknown): ItemLike => {
    if (!Engine.isItemShaped(value)) throw new TypeError(Engine.ITEM_SHAPE_MESSAGE)
    return value
  }
}

const merge = (a: ItemSchemaExtensions | undefined, b: ItemSchemaExtensions | undefined): Required<{
  readonly [K in Category]: ReadonlyArray<ItemExtensionSchema>
}> => ({
  items: [...(a?.items ?? []), ...(b?.items ?? [])],
  developerMessages: [...(a?.developerMessages ?? []), ...(b?.developerMessages ?? [])],
  toolCalls: [...(a?.toolCalls ?? []), ...(b?.toolCalls ?? [])],
  toolResults: [...(a?.toolResults ?? []), ...(b?.toolResults ?? [])]
})

/** A refusal of the engine's check as noetic's error. */
const refuse = (refused: Engine.ItemSchemaMismatch | undefined): void => {
  if (refused === undefined) return
  throw new NoeticErrorImpl({
    kind: "item_schema_mismatch",
    category: refused.category,
    ...(refused.itemType === undefined ? {} : { itemType: refused.itemType })
  })
}

/** noetic's `ItemSchemaRegistry`: extension schemas, and whether an unknown item type is refused. */
export class ItemSchemaRegistry {
  readonly extensions: Required<{ readonly [K in Category]: ReadonlyArray<ItemExtensionSchema> }>
  readonly strictUnknownExtensions: boolean

  constructor(extensions?: ItemSchemaExtensions, options?: { readonly strictUnknownExtensions?: boolean }) {
    this.extensions = merge(undefined, extensions)
    this.strictUnknownExtensions = options?.strictUnknownExtensions ?? true
  }

  /** The check's configuration, as the harness option `itemSchemas` gives it to the engine. */
  get config(): Engine.ItemSchemaConfig {
    return { schemas: this.extensions, strict: this.strictUnknownExtensions }
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
    refuse(Engine.check(this.config, value))
    return value as ItemLike
  }

  parseMany(values: Iterable<unknown>): Array<ItemLike> {
    return Array.from(values, (value) => this.parse(value))
  }

  /** The item checked against one category's schemas; none accepting it rejects `item_schema_mismatch`. */
  parseWithCategory(value: unknown, category: Category): ItemLike {
    refuse(Engine.checkCategory(this.config, value, category))
    return value as ItemLike
  }
}

/** The registry with no extensions, refusing unknown item types. */
export const defaultItemSchemaRegistry = new ItemSchemaRegistry(undefined, { strictUnknownExtensions: true })
