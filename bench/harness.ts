/**
 * The machinery every benchmark case shares: timing, summaries (a median with its
 * spread), interleaved rounds so compared runs see the same machine, paired ratios,
 * and the shape of a case and of its result.
 *
 * A benchmark module exports `cases: ReadonlyArray<BenchCase>`; `bench/index.ts` runs
 * them, writes `bench/results.json` and prints the table.
 */
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"

const tempRoots: Array<string> = []

/** A fresh directory for one benchmark, under the system temp dir; removed by `removeTempRoots`. */
export const tempRoot = (name: string): string => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), `noetic-bench-${name}-`))
  tempRoots.push(dir)
  return dir
}

/** Removes every directory `tempRoot` made in this process (the runner calls it once all cases ran). */
export const removeTempRoots = (): void => {
  for (const dir of tempRoots.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
}

/** Rounds to three significant decimals, for the record. */
export const round = (x: number): number => {
  if (!Number.isFinite(x)) return x
  const magnitude = Math.abs(x)
  const digits = magnitude >= 100 ? 1 : magnitude >= 1 ? 3 : 5
  const scale = 10 ** digits
  return Math.round(x * scale) / scale
}

/** Milliseconds since an arbitrary origin, with sub-millisecond precision. */
export const now = (): number => performance.now()

/** A median over repeated runs and its spread: the quartiles, and the extremes. */
export interface Summary {
  readonly n: number
  readonly median: number
  readonly p25: number
  readonly p75: number
  readonly min: number
  readonly max: number
}

/** Summary statistics of samples (any unit); linear interpolation between ranks. */
export const summarize = (samples: ReadonlyArray<number>): Summary => {
  const sorted = [...samples].sort((a, b) => a - b)
  if (sorted.length === 0) return { n: 0, median: NaN, p25: NaN, p75: NaN, min: NaN, max: NaN }
  const at = (q: number) => {
    const rank = q * (sorted.length - 1)
    const low = Math.floor(rank)
    const high = Math.ceil(rank)
    return sorted[low]! + (sorted[high]! - sorted[low]!) * (rank - low)
  }
  return {
    n: sorted.length,
    median: round(at(0.5)),
    p25: round(at(0.25)),
    p75: round(at(0.75)),
    min: round(sorted[0]!),
    max: round(sorted[sorted.length - 1]!)
  }
}

/**
 * Runs each variant once per round, for `rounds` rounds after `warmup` unrecorded
 * ones, rotating which variant goes first, so machine noise (other processes, disk
 * flushes, GC) lands on every variant alike. A variant measures itself and returns the
 * figure (its setup stays outside the timing); the samples come back per variant, in
 * round order, so `pairedRatio` can compare the runs of one round.
 */
export const interleave = async <K extends string>(
  variants: Readonly<Record<K, () => Promise<number>>>,
  options: { readonly rounds: number; readonly warmup?: number }
): Promise<Record<K, Array<number>>> => {
  const names = Object.keys(variants) as Array<K>
  const samples = Object.fromEntries(names.map((name) => [name, [] as Array<number>])) as Record<K, Array<number>>
  const warmup = options.warmup ?? 1
  for (let round = 0; round < warmup + options.rounds; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length]!
      const value = await variants[name]()
      if (round >= warmup) samples[name].push(value)
    }
  }
  return samples
}

/** A fresh id for an execution, thread or file of this process. */
let unique = 0
export const fresh = (prefix: string): string => `${prefix}-${process.pid}-${unique++}`

/** The per-round ratios `a[i] / b[i]` of two interleaved sample lists, summarised. */
export const pairedRatio = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): Summary =>
  summarize(a.slice(0, Math.min(a.length, b.length)).map((x, i) => x / b[i]!))

/** One measured figure of a case. */
export interface Figure {
  /** Stable id within the case (`file@100`), used by the charts and the README. */
  readonly id: string
  readonly label: string
  /** "this" library, a "peer" library, or a raw "baseline". */
  readonly kind: "this" | "peer" | "baseline"
  readonly unit: string
  readonly summary: Summary
  /** Extra figures (round trips counted, bytes) and how the figure was obtained. */
  readonly detail?: Readonly<Record<string, unknown>> | undefined
  /** An absolute target of the issue, in the figure's unit: the median at most this. */
  readonly targetAtMost?: number | undefined
  readonly met?: boolean | undefined
}

/** A ratio of two figures measured in the same run, interleaved. */
export interface Ratio {
  readonly label: string
  /** Figure ids of the numerator and denominator. */
  readonly of: string
  readonly to: string
  /** Median and quartiles of the per-round ratios. */
  readonly summary: Summary
  /** The target: the ratio at most this (a cost) ... */
  readonly targetAtMost?: number | undefined
  /** ... or at least this (a rate). */
  readonly targetAtLeast?: number | undefined
  readonly met?: boolean | undefined
}

/** An issue's target for a ratio: a number is "at most". */
export type Target = number | { readonly atMost: number } | { readonly atLeast: number }

/** A variant that was not measured, and why: never silently dropped. */
export interface Skipped {
  readonly label: string
  readonly reason: string
}

/** A line of a chart: one figure per x. */
export interface Series {
  readonly name: string
  readonly kind: "this" | "peer" | "baseline"
  readonly points: ReadonlyArray<{ readonly x: number; readonly figure: string }>
}

/** What a case reports. */
export interface CaseResult {
  readonly id: string
  readonly title: string
  readonly figures: ReadonlyArray<Figure>
  readonly ratios: ReadonlyArray<Ratio>
  readonly skipped: ReadonlyArray<Skipped>
  readonly notes: ReadonlyArray<string>
  readonly series?: ReadonlyArray<Series> | undefined
  readonly durationMs?: number | undefined
}

/** What every case is given. */
export interface BenchContext {
  /** A smoke run: fewer rounds and the smallest sizes. */
  readonly quick: boolean
  /** The Postgres URL, or why Postgres is not available. */
  readonly postgres: { readonly _tag: "Available"; readonly url: string } | { readonly _tag: "Unavailable"; readonly reason: string }
  /** Progress on stderr, so stdout stays the table. */
  readonly log: (message: string) => void
}

/** One benchmark case, as a module exports it. */
export interface BenchCase {
  readonly id: string
  readonly title: string
  readonly run: (context: BenchContext) => Promise<CaseResult>
}

/** Builds a ratio of two figures by id, with its target check. */
export const ratioOf = (
  figures: ReadonlyArray<Figure>,
  samples: Readonly<Record<string, ReadonlyArray<number>>>,
  label: string,
  of: string,
  to: string,
  target?: Target
): Ratio | undefined => {
  const a = samples[of]
  const b = samples[to]
  if (a === undefined || b === undefined || !figures.some((f) => f.id === of) || !figures.some((f) => f.id === to)) {
    return undefined
  }
  const summary = pairedRatio(a, b)
  return { label, of, to, summary, ...targetOf(summary, target) }
}

/** The ratios that could be built (both figures measured). */
export const present = (ratios: ReadonlyArray<Ratio | undefined>): Array<Ratio> =>
  ratios.filter((r): r is Ratio => r !== undefined)

/** A figure over the samples `samples[id]`. */
export const figureOf = (
  samples: Readonly<Record<string, ReadonlyArray<number>>>,
  id: string,
  label: string,
  kind: Figure["kind"],
  unit: string,
  detail?: Readonly<Record<string, unknown>>
): Figure => ({ id, label, kind, unit, summary: summarize(samples[id]!), ...(detail === undefined ? {} : { detail }) })

/** The target fields of a ratio with `summary`. */
export const targetOf = (
  summary: Summary,
  target: Target | undefined
): { targetAtMost?: number; targetAtLeast?: number; met?: boolean } => {
  if (target === undefined) return {}
  if (typeof target === "number") return { targetAtMost: target, met: summary.median <= target }
  if ("atMost" in target) return { targetAtMost: target.atMost, met: summary.median <= target.atMost }
  return { targetAtLeast: target.atLeast, met: summary.median >= target.atLeast }
}

/**
 * The variants of a case measured at several sizes (`id@size`), with their labels:
 * `add` registers one per size, `figures` turns the interleaved samples into figures.
 */
export const sizedVariants = <X extends number | string>(sizes: ReadonlyArray<X>) => {
  const variants: Record<string, () => Promise<number>> = {}
  const labels: Record<string, { readonly label: string; readonly kind: Figure["kind"] }> = {}
  return {
    variants,
    labels,
    add: (id: string, label: string, kind: Figure["kind"], fn: (size: X) => () => Promise<number>): void => {
      labels[id] = { label, kind }
      for (const size of sizes) variants[`${id}@${size}`] = fn(size)
    },
    /** One figure per sample list; `labelOf` adds the size to a variant's label. */
    figures: (
      samples: Readonly<Record<string, ReadonlyArray<number>>>,
      unit: string,
      labelOf: (label: string, size: string) => string,
      detail?: (id: string, size: string) => Readonly<Record<string, unknown>> | undefined
    ): Array<Figure> =>
      Object.entries(samples).map(([key, values]) => {
        const [id, size] = key.split("@") as [string, string]
        const extra = detail?.(id, size)
        return {
          id: key,
          label: labelOf(labels[id]!.label, size),
          kind: labels[id]!.kind,
          unit,
          summary: summarize(values),
          ...(extra === undefined ? {} : { detail: extra })
        }
      })
  }
}

/** A chart line over the figures `id@size`, if the case measured it. */
export const seriesOf = (
  figures: ReadonlyArray<Figure>,
  sizes: ReadonlyArray<number>,
  id: string,
  name: string,
  kind: Series["kind"]
): Series | undefined =>
  figures.some((f) => f.id === `${id}@${sizes[0]}`)
    ? { name, kind, points: sizes.map((n) => ({ x: n, figure: `${id}@${n}` })) }
    : undefined

/** What a case collects while it sets up: what it skipped and why, notes, and what to close at the end. */
export interface CaseScope {
  readonly skipped: Array<Skipped>
  readonly notes: Array<string>
  readonly onClose: (close: () => Promise<void>) => void
}

/** Runs `body` with a case scope; closes what it registered, last first, whatever happens. */
export const withCaseScope = async <A>(body: (scope: CaseScope) => Promise<A>): Promise<A> => {
  const closers: Array<() => Promise<void>> = []
  try {
    return await body({ skipped: [], notes: [], onClose: (close) => closers.push(close) })
  } finally {
    for (const close of closers.reverse()) await close().catch(() => {})
  }
}

/** A variant's failure text, short enough for the table. */
export const reasonOf = (cause: unknown): string => {
  const text = cause instanceof Error ? cause.message : String(cause)
  return text.split("\n")[0]!.slice(0, 300)
}

/**
 * What the file storage does for one key, by hand: write a temp file, fsync it, rename
 * it over `name`, fsync the directory. The baseline durable writes are compared to.
 */
export const rawDurableWrite = async (dir: string, name: string, text: string): Promise<void> => {
  const temp = Path.join(dir, `.tmp-${name}`)
  const handle = await FsPromises.open(temp, "wx", 0o600)
  await handle.writeFile(text, "utf8")
  await handle.sync()
  await handle.close()
  await FsPromises.rename(temp, Path.join(dir, name))
  const dirHandle = await FsPromises.open(dir, "r")
  await dirHandle.sync()
  await dirHandle.close()
}

/**
 * The physical floor of a durable append: `write` + `fdatasync` of a record to one
 * open file. `append` times `count` appends of `text` and returns milliseconds in all.
 */
export const openAppendLog = (dir: string) => {
  const fd = Fs.openSync(Path.join(dir, `floor-${unique++}.log`), "a", 0o600)
  return {
    append: (text: string, count: number): number => {
      const bytes = Buffer.from(text)
      const start = now()
      for (let i = 0; i < count; i++) {
        Fs.writeSync(fd, bytes)
        Fs.fdatasyncSync(fd)
      }
      return now() - start
    },
    close: (): void => Fs.closeSync(fd)
  }
}

/**
 * The same append without blocking the event loop: an asynchronous `write` (libuv's
 * thread pool) to a file opened `O_DSYNC` on Linux (data durable when the write returns),
 * else `write` + `fdatasync`. The floor of any store that keeps the loop free while
 * the disk works; `append` resolves with milliseconds in all.
 */
export const openAsyncAppendLog = (dir: string) => {
  const dsync = process.platform === "linux" ? Fs.constants.O_DSYNC : 0
  const fd = Fs.openSync(
    Path.join(dir, `floor-${unique++}.log`),
    Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_APPEND | dsync,
    0o600
  )
  const write = (bytes: Buffer) =>
    new Promise<void>((resolve, reject) =>
      Fs.write(fd, bytes, (error) =>
        error !== null ? reject(error) : dsync !== 0 ? resolve() : Fs.fdatasync(fd, (e) => (e !== null ? reject(e) : resolve()))
      )
    )
  return {
    append: async (text: string, count: number): Promise<number> => {
      const bytes = Buffer.from(text)
      const start = now()
      for (let i = 0; i < count; i++) await write(bytes)
      return now() - start
    },
    close: (): void => Fs.closeSync(fd)
  }
}
