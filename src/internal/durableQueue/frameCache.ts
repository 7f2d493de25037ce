/**
 * The committed frames a durable outbound queue keeps in memory for live delivery
 * (`services/DurableOutboundQueue.ts`): one segment per written batch, oldest first.
 * It serves the stored seqs of `[low, head]` (a segment's frames below `low` are no
 * longer served). Whole batches, not a map entry per frame: a stream commits and
 * evicts hundreds of thousands of frames a second.
 *
 * @since 0.1.0
 */

/** One stored frame and its sequence number. */
export interface CachedEntry {
  readonly seq: number
  readonly frame: string
}

/** The frames of one written batch. */
interface CacheSegment {
  readonly first: number
  readonly frames: ReadonlyArray<string>
}

/** The cache of one queue, holding at most `capacity` frames (0: none; every read goes to storage). */
export class FrameCache {
  private readonly segments: Array<CacheSegment> = []
  /** The frames of every segment, served or not. */
  private segmentFrames = 0
  /** The lowest seq the cache serves: everything below it is read from storage. */
  low: number

  constructor(readonly capacity: number, committed: number) {
    this.low = committed + 1
  }

  /** How many frames the cache serves: only the oldest segment may start below `low`. */
  private count(): number {
    const cache = this.segments
    return cache.length === 0 ? 0 : this.segmentFrames - Math.max(0, this.low - cache[0]!.first)
  }

  /** Serves nothing below `low` any more; drops the segments wholly below it. */
  evictBelow(low: number): void {
    const cache = this.segments
    if (low > this.low) this.low = low
    while (cache.length > 0 && cache[0]!.first + cache[0]!.frames.length <= this.low) {
      this.segmentFrames -= cache.shift()!.frames.length
    }
  }

  /** The position of the first segment that ends at or after `seq`. */
  private segmentFrom(seq: number): number {
    const cache = this.segments
    let low = 0
    let highIndex = cache.length
    while (low < highIndex) {
      const mid = (low + highIndex) >> 1
      if (cache[mid]!.first + cache[mid]!.frames.length - 1 < seq) low = mid + 1
      else highIndex = mid
    }
    return low
  }

  /** Keeps a committed batch, evicting the oldest frames past the capacity. */
  remember(first: number, frames: ReadonlyArray<string>): void {
    const cache = this.segments
    if (this.capacity === 0) {
      // Nothing is cached: the whole range up to the new head is read from storage.
      this.low = first + frames.length
      return
    }
    if (cache.length === 0) this.low = first
    cache.push({ first, frames })
    this.segmentFrames += frames.length
    const excess = this.count() - this.capacity
    if (excess > 0) {
      // The oldest frames go, whole segments at a time, then the excess of the oldest left.
      let dropped = 0
      while (cache.length > 1) {
        const oldest = cache[0]!
        const held = oldest.first + oldest.frames.length - Math.max(oldest.first, this.low)
        if (dropped + held > excess) break
        dropped += held
        this.segmentFrames -= cache.shift()!.frames.length
        this.low = cache[0]!.first
      }
      this.evictBelow(Math.max(this.low, cache[0]!.first) + (excess - dropped))
    }
  }

  /** A group that ends at `last` was burnt (its write failed): nothing of it is cached. */
  burnt(last: number): void {
    if (this.capacity > 0 && this.segments.length === 0) this.low = last + 1
    else if (this.capacity === 0) this.low = last + 1
  }

  /** The cached frames of `[max(start, low), to]`. */
  read(start: number, to: number): Array<CachedEntry> {
    const cache = this.segments
    const entries: Array<CachedEntry> = []
    const low = Math.max(start, this.low)
    for (let i = this.segmentFrom(low); i < cache.length; i++) {
      const segment = cache[i]!
      const end = Math.min(to, segment.first + segment.frames.length - 1)
      for (let seq = Math.max(low, segment.first); seq <= end; seq++) {
        entries.push({ seq, frame: segment.frames[seq - segment.first]! })
      }
      if (end >= to) break
    }
    return entries
  }

  /** Drops every frame (the queue closed). */
  clear(): void {
    this.segments.splice(0)
    this.segmentFrames = 0
  }
}
