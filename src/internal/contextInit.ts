/**
 * How a new context is set up from its options and its parent, in one place for both
 * doors (docs/architecture.md#promise-facade): the engine's `createContext`
 * (`harness/AgentHarness.ts`) and the Promise facade's synchronous one, which builds the
 * context before the engine harness exists, both call these. What a child inherits: its
 * parent's thread, resource and working directory, each unless given. Which layers it
 * gets: the ones given, else the harness's, with noetic's `extraContextLayers` after them.
 *
 * @internal
 */

/** What a context inherits from its parent when its options leave it out. */
export interface InheritedFields {
  readonly threadId: string | undefined
  readonly resourceId: string | undefined
  readonly cwd: string | undefined
}

/** The parts of a parent context inheritance reads (the engine's `AgentContext`). */
export interface ParentFields {
  readonly threadId?: string | undefined
  readonly resourceId?: string | undefined
  readonly cwd?: { readonly current: string | null } | null | undefined
}

/**
 * A child context's thread, resource and working directory: the given ones, else its
 * parent's. A root context's undefined thread is the caller's to make (a random one).
 */
export const inheritFields = (
  given: { readonly threadId?: string | undefined; readonly resourceId?: string | undefined; readonly cwd?: string | undefined },
  parent: ParentFields | undefined
): InheritedFields => ({
  threadId: given.threadId ?? parent?.threadId,
  resourceId: given.resourceId ?? parent?.resourceId,
  cwd: given.cwd ?? parent?.cwd?.current ?? undefined
})

/**
 * The layers of a new (or restored) context: `context` when given, else `defaults`,
 * then `extra` (noetic's `extraContextLayers`) after them. Undefined when neither is
 * given: the caller's default applies (the harness's layers, or a restored snapshot's).
 */
export const selectLayers = <L>(
  context: ReadonlyArray<L> | undefined,
  extra: ReadonlyArray<L> | undefined,
  defaults: ReadonlyArray<L>
): ReadonlyArray<L> | undefined => (extra === undefined ? context : [...(context ?? defaults), ...extra])
