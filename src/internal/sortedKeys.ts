/**
 * A set of strings kept in code-unit order, so the keys under a prefix are found by
 * binary search instead of a scan of every key. The memory storage indexes its keys with
 * it (docs/architecture.md#storage-adapter): a listing costs the keys it returns plus a
 * logarithm, whatever else is stored.
 *
 * The keys lie in sorted blocks of at most `2 * blockSize`, so an add or a remove moves
 * at most one block's keys, not every key after it (one sorted array made each add into
 * the middle of a large store cost a copy of the whole index).
 *
 * @internal
 */
export class SortedKeys {
  /** Sorted, non-empty blocks, in order: the last key of one is below the first of the next. */
  readonly #blocks: Array<Array<string>> = []
  readonly #blockSize: number

  constructor(blockSize = 256) {
    this.#blockSize = Math.max(1, Math.floor(blockSize))
  }

  /** The index of the block `key` belongs in: the last block whose first key is not above it (0 if none). */
  #blockOf(key: string): number {
    let low = 0
    let high = this.#blocks.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (this.#blocks[middle]![0]! <= key) low = middle + 1
      else high = middle
    }
    return low === 0 ? 0 : low - 1
  }

  /** The position in `block` of the first key not below `key`. */
  static #lowerBound(block: ReadonlyArray<string>, key: string): number {
    let low = 0
    let high = block.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (block[middle]! < key) low = middle + 1
      else high = middle
    }
    return low
  }

  /** Adds `key`; adding a key already present changes nothing. */
  add(key: string): void {
    if (this.#blocks.length === 0) {
      this.#blocks.push([key])
      return
    }
    const b = this.#blockOf(key)
    const block = this.#blocks[b]!
    const at = SortedKeys.#lowerBound(block, key)
    if (block[at] === key) return
    if (at === block.length) block.push(key)
    else block.splice(at, 0, key)
    if (block.length > 2 * this.#blockSize) this.#blocks.splice(b + 1, 0, block.splice(this.#blockSize))
  }

  /** Removes `key` if present. */
  remove(key: string): void {
    if (this.#blocks.length === 0) return
    const b = this.#blockOf(key)
    const block = this.#blocks[b]!
    const at = SortedKeys.#lowerBound(block, key)
    if (block[at] !== key) return
    block.splice(at, 1)
    if (block.length === 0) this.#blocks.splice(b, 1)
  }

  /** The keys starting with `prefix`, in order: a fresh array. */
  withPrefix(prefix: string): Array<string> {
    const found: Array<string> = []
    if (this.#blocks.length === 0) return found
    let b = this.#blockOf(prefix)
    let at = SortedKeys.#lowerBound(this.#blocks[b]!, prefix)
    for (; b < this.#blocks.length; b++, at = 0) {
      const block = this.#blocks[b]!
      for (; at < block.length; at++) {
        const key = block[at]!
        if (!key.startsWith(prefix)) return found
        found.push(key)
      }
    }
    return found
  }
}
