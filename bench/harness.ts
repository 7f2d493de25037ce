/** Small timing helpers shared by the benchmarks. */
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"

/** A fresh directory for one benchmark, under the system temp dir. */
export const tempRoot = (name: string): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), `noetic-bench-${name}-`))

/** Summary statistics of a list of durations in milliseconds. */
export const summarize = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
  return {
    n: sorted.length,
    medianMs: round(at(0.5)),
    p95Ms: round(at(0.95)),
    meanMs: round(sorted.reduce((a, b) => a + b, 0) / sorted.length)
  }
}

/** Rounds to three decimals, for printing. */
export const round = (x: number): number => Math.round(x * 1000) / 1000

/** Milliseconds since an arbitrary origin, with sub-millisecond precision. */
export const now = (): number => performance.now()

/**
 * What the file storage does for one key, by hand: write a temp file, fsync it, rename
 * it over `name`, fsync the directory. The baseline storage figures are compared to.
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
