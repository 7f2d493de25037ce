/**
 * A set of strings kept in code-unit order, so the keys under a prefix are found by
 * binary search instead of a scan of every key. The memory storage indexes its keys with
 * it (docs/architecture.md#storage-adapter): a listing costs the keys it returns plus a
 * logarithm, whatever else is stored.
 *
 * @internal
 */
export class SortedKeys {
  readonly #keys: Array<string> = []

  /** The position of the first key not below `key`. */
  #lowerBound(key: string): number {
    let low = 0
    let high = this.#keys.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (this.#keys[middle]! < key) low = middle + 1
      else high = middle
    }
    return low
  }

  /** Adds `key`; adding a key already present changes nothing. */
  add(key: string): void {
    const at = this.#lowerBound(key)
    if (this.#keys[at] !== key) this.#keys.splice(at, 0, key)
  }

  /** Removes `key` if present. */
  remove(key: string): void {
    const at = this.#lowerBound(key)
    if (this.#keys[at] === key) this.#keys.splice(at, 1)
  }

  /** The keys starting with `prefix`, in order: a fresh array. */
  withPrefix(prefix: string): Array<string> {
    const found: Array<string> = []
    for (let at = this.#lowerBound(prefix); at < this.#keys.length; at++) {
      const key = this.#keys[at]!
      if (!key.startsWith(prefix)) break
      found.push(key)
    }
    return found
  }
}
