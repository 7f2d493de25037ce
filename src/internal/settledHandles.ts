/**
 * How an adapter keeps its map of children bounded: settled children stay reachable by
 * `get` for a while, the oldest are forgotten past a limit, so a long-lived host that
 * spawns without end does not grow without end.
 *
 * @internal
 */

/** How many settled children an adapter keeps answering `get` for. */
export const SETTLED_HANDLES_KEPT = 1024

/** Returns `settled(handleId)`: call it once a child settles; the oldest settled ones leave `children`. */
export const settledRetention = (children: Map<string, unknown>, kept = SETTLED_HANDLES_KEPT) => {
  const settled: Array<{ readonly handleId: string; readonly entry: unknown }> = []
  return (handleId: string): void => {
    settled.push({ handleId, entry: children.get(handleId) })
    while (settled.length > kept) {
      const oldest = settled.shift()!
      // A handle id spawned again since holds a newer child: that one is not the settled one.
      if (children.get(oldest.handleId) === oldest.entry) children.delete(oldest.handleId)
    }
  }
}
