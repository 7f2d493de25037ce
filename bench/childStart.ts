/**
 * Local child start on the built package (`npm run build` first: `dist/` is what users
 * run), against bare `node` processes importing `effect/Effect`, interleaved:
 * - from `detachedSpawn` to the first line of the step body, one child at a time
 *   (compile cache warm after the first child; the first, with an empty cache, is
 *   reported on its own), against one bare `node` start (no compile cache);
 * - 50 children spawned at once until every step body has started, against fifty
 *   sequential bare `node` starts.
 *
 * Times are wall-clock: the step body writes `Date.now()` on its first line, a bare
 * `node` prints it once `effect/Effect` is imported.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { type BenchCase, type BenchContext, type CaseResult, type Figure, interleave, ratioOf, summarize, tempRoot } from "./harness.ts"

const repo = Path.resolve(import.meta.dirname, "..")
const dist = Path.join(repo, "dist", "promise.js")

/** The newest modification time under `dir`, in ms. */
const newestUnder = (dir: string): number =>
  Fs.readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    const path = Path.join(dir, entry.name)
    return Math.max(newest, entry.isDirectory() ? newestUnder(path) : Fs.statSync(path).mtimeMs)
  }, 0)

/** Fails unless `dist/` is built and newer than every file of `src/`: a stale build would measure other code. */
const checkBuilt = () => {
  if (!Fs.existsSync(dist)) throw new Error("childStart measures the built package: run `npm run build` first")
  if (Fs.statSync(dist).mtimeMs < newestUnder(Path.join(repo, "src"))) {
    throw new Error("dist/ is older than src/: run `npm run build` first, so the children run the current code")
  }
}

/** One bare `node` importing `effect/Effect`: spawn to its first output, in ms. */
const bareNode = () =>
  new Promise<number>((resolve, reject) => {
    const start = Date.now()
    const child = ChildProcess.spawn(
      process.execPath,
      ["--input-type=module", "-e", `import "effect/Effect"; process.stdout.write(String(Date.now()))`],
      {
        cwd: repo,
        stdio: ["ignore", "pipe", "inherit"],
        // The library's children get a compile cache; the baseline gets none, as a plain `node` would.
        env: { ...process.env, NODE_COMPILE_CACHE: "" }
      }
    )
    let out = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.once("exit", (code) => (code === 0 ? resolve(Number(out) - start) : reject(new Error(`bare node exited ${code}`))))
  })

const waitFor = async (path: string) => {
  while (!Fs.existsSync(path)) await new Promise((resolve) => setTimeout(resolve, 2))
  // The marker is written whole by one writeFileSync of a short string; read until it parses.
  for (;;) {
    const text = Fs.readFileSync(path, "utf8")
    if (text.length > 0) return Number(text)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

interface Handle {
  readonly await: () => Promise<unknown>
}

/**
 * A host on the built package with a local adapter whose children run a step that
 * marks its first line, then waits for its round's release file.
 */
const host = async (base: string) => {
  const stepsFile = Path.join(base, "steps.mjs")
  Fs.writeFileSync(
    stepsFile,
    `import * as Fs from "node:fs"
import { runCode } from ${JSON.stringify(pathToFileURL(dist).href)}
export const mark = runCode("mark", async (input) => {
  Fs.writeFileSync(input.marker, String(Date.now()))
  while (!Fs.existsSync(input.release)) await new Promise((resolve) => setTimeout(resolve, 20))
  return input.n
})
`
  )
  const api = await import(pathToFileURL(dist).href)
  const { mark } = await import(pathToFileURL(stepsFile).href)
  // The steps module named outright: under tsx, source maps hide which module defined a step.
  const subprocess = api.createLocalSubprocessAdapter({ root: Path.join(base, "subprocess"), entry: stepsFile })
  const harness = new api.AgentHarness({
    name: "child-start",
    agentGraph: api.runCode("idle", (x: unknown) => x),
    environment: { subprocess }
  })
  const context = await harness.createContext()
  let n = 0
  /** Spawns one child; `started` is the ms from `detachedSpawn` to its step body's first line. */
  const spawnOne = (release: string): { handle: Handle; started: Promise<number> } => {
    const marker = Path.join(base, `marker-${++n}`)
    const start = Date.now()
    const handle: Handle = harness.detachedSpawn(mark, { marker, release, n }, context)
    return { handle, started: waitFor(marker).then((at) => at - start) }
  }
  /** Lets the children of `release` return, and waits for them. */
  const settle = async (release: string, handles: ReadonlyArray<Handle>) => {
    Fs.writeFileSync(release, "go")
    await Promise.all(handles.map((handle) => handle.await()))
  }
  return {
    spawnOne,
    settle,
    close: async () => {
      await harness.close()
      await subprocess.close()
    }
  }
}

const coldCase: BenchCase = {
  id: "childStart:cold",
  title: "Local child start (built package): detachedSpawn to the step body's first line, against a bare node importing effect/Effect (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    checkBuilt()
    const rounds = context.quick ? 2 : 8
    const base = tempRoot("child-start")
    const children = await host(base)
    try {
      // The first child finds the compile cache empty: one sample, beside one bare start.
      const firstRelease = Path.join(base, "release-first")
      const firstBare = await bareNode()
      const first = children.spawnOne(firstRelease)
      const firstMs = await first.started
      await children.settle(firstRelease, [first.handle])
      let round = 0
      const samples = await interleave({
        bare: bareNode,
        child: async () => {
          const release = Path.join(base, `release-${round++}`)
          const one = children.spawnOne(release)
          const ms = await one.started
          await children.settle(release, [one.handle])
          return ms
        }
      }, { rounds, warmup: 1 })
      const figures: Array<Figure> = [
        {
          id: "bare",
          label: "bare node importing effect/Effect, no compile cache (spawn to first output)",
          kind: "baseline",
          unit: "ms",
          summary: summarize(samples.bare)
        },
        {
          id: "child",
          label: "local child, compile cache warm: detachedSpawn to the step body's first line",
          kind: "this",
          unit: "ms",
          summary: summarize(samples.child)
        },
        {
          id: "first-child",
          label: "the first local child, compile cache empty (one sample)",
          kind: "this",
          unit: "ms",
          summary: summarize([firstMs]),
          detail: { bareNodeJustBeforeMs: firstBare }
        }
      ]
      const ratio = ratioOf(figures, samples, "child start / bare node importing effect/Effect", "child", "bare", 2)
      return {
        id: "childStart:cold",
        title: coldCase.title,
        figures,
        ratios: ratio === undefined ? [] : [ratio],
        skipped: [],
        notes: [
          `The first child (empty compile cache) took ${Math.round(firstMs)} ms against ${firstBare} ms for the bare start just before it ` +
            `(${(firstMs / firstBare).toFixed(2)}x, one pair).`
        ]
      }
    } finally {
      await children.close()
    }
  }
}

const fiftyCase: BenchCase = {
  id: "childStart:fifty",
  title: "50 local children spawned at once until every step body started, against 50 sequential bare node starts (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    checkBuilt()
    const count = 50
    const rounds = context.quick ? 1 : 3
    const base = tempRoot("child-fifty")
    const children = await host(base)
    try {
      let round = 0
      const samples = await interleave({
        bare: async () => {
          const start = Date.now()
          for (let i = 0; i < count; i++) await bareNode()
          return Date.now() - start
        },
        children: async () => {
          const release = Path.join(base, `release-${round++}`)
          const start = Date.now()
          const spawned = Array.from({ length: count }, () => children.spawnOne(release))
          await Promise.all(spawned.map((one) => one.started))
          const ms = Date.now() - start
          await children.settle(release, spawned.map((one) => one.handle))
          return ms
        }
      }, { rounds, warmup: context.quick ? 0 : 1 })
      const figures: Array<Figure> = [
        { id: "bare", label: `${count} sequential bare node starts importing effect/Effect`, kind: "baseline", unit: "ms", summary: summarize(samples.bare) },
        { id: "children", label: `${count} local children spawned at once, until every step body started`, kind: "this", unit: "ms", summary: summarize(samples.children) }
      ]
      const ratio = ratioOf(figures, samples, `${count} children / ${count} sequential bare node starts`, "children", "bare", 2)
      return {
        id: "childStart:fifty",
        title: fiftyCase.title,
        figures,
        ratios: ratio === undefined ? [] : [ratio],
        skipped: [],
        notes: ["Reattach of 50 live children is measured by subprocess:restart."]
      }
    } finally {
      await children.close()
    }
  }
}

/**
 * A host on the built package whose children run a trivial step that returns the
 * times of its first and last lines, over a SQLite or a directory (file storage) root.
 */
/** CPU ticks (utime + stime) of the prewarmed spares under `base`, by pid: /proc scan for `--noetic-spare`. */
const spareTicks = (base: string): Map<number, number> => {
  const ticks = new Map<number, number>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const args = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")
      const root = args[args.indexOf("--root") + 1]
      if (!args.includes("--noetic-spare") || root === undefined || !root.startsWith(base)) continue
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[0] === "Z") continue
      ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]))
    } catch {
      // Gone meanwhile.
    }
  }
  return ticks
}

/** Waits until a new spare of `base` (none of `taken`, the one the last spawn took) has started and used no CPU for 100 ms. */
const spareIdle = async (base: string, taken: ReadonlyArray<number>) => {
  const deadline = Date.now() + 10_000
  const fresh = () => new Map([...spareTicks(base)].filter(([pid]) => !taken.includes(pid)))
  let before = fresh()
  let still = 0
  while (Date.now() < deadline && still < 2) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    const now = fresh()
    const idle = now.size === 1 && [...now].every(([pid, ticks]) => before.get(pid) === ticks)
    still = idle ? still + 1 : 0
    before = now
  }
}

const resultHost = async (base: string, kind: "sqlite" | "file", prewarm = false) => {
  const stepsFile = Path.join(base, "result-steps.mjs")
  Fs.writeFileSync(
    stepsFile,
    `import { runCode } from ${JSON.stringify(pathToFileURL(dist).href)}
export const trivial = runCode("trivial", async (input) => {
  const first = Date.now()
  return { n: input.n, first, last: Date.now() }
})
`
  )
  const api = await import(pathToFileURL(dist).href)
  const { trivial } = await import(pathToFileURL(stepsFile).href)
  const subprocess = kind === "sqlite"
    ? api.createLocalSubprocessAdapter({ storage: api.createSqliteStorage({ path: Path.join(base, "subprocess.db") }), entry: stepsFile, prewarm })
    : api.createLocalSubprocessAdapter({ root: Path.join(base, "subprocess"), entry: stepsFile, prewarm })
  const harness = new api.AgentHarness({ name: "child-result", agentGraph: api.runCode("idle", (x: unknown) => x), environment: { subprocess } })
  const context = await harness.createContext()
  let n = 0
  /** One child, as a user waits for it: detachedSpawn to `await()` resolving. */
  const once = async (): Promise<{ total: number; toFirst: number; lastToHost: number }> => {
    const taken = prewarm ? [...spareTicks(base).keys()] : []
    const start = Date.now()
    const result = (await harness.detachedSpawn(trivial, { n: ++n }, context).await()) as { first: number; last: number }
    const end = Date.now()
    // Not measured: the next spare gets ready now, not during the next variant's sample.
    if (prewarm) await spareIdle(base, taken)
    return { total: end - start, toFirst: result.first - start, lastToHost: end - result.last }
  }
  return {
    once,
    close: async () => {
      await harness.close()
      await subprocess.close()
    }
  }
}

const VARIANTS = ["sqlite", "file", "sqlite-prewarm", "file-prewarm"] as const
type Variant = (typeof VARIANTS)[number]

const resultCase: BenchCase = {
  id: "childStart:result",
  title: "A local child's result (built package): detachedSpawn to await() resolving, against a bare node importing effect/Effect (ms)",
  run: async (context: BenchContext): Promise<CaseResult> => {
    checkBuilt()
    const rounds = context.quick ? 2 : 8
    // The default adapter, and the opt-in `prewarm: true` one (a spare child started
    // ahead takes each spawn), on each root.
    const hosts: Record<Variant, Awaited<ReturnType<typeof resultHost>>> = {
      sqlite: await resultHost(tempRoot("child-result-sqlite"), "sqlite"),
      file: await resultHost(tempRoot("child-result-file"), "file"),
      "sqlite-prewarm": await resultHost(tempRoot("child-result-sqlite-prewarm"), "sqlite", true),
      "file-prewarm": await resultHost(tempRoot("child-result-file-prewarm"), "file", true)
    }
    try {
      // The first child of each host fills its compile cache: not measured.
      for (const kind of VARIANTS) await hosts[kind].once()
      const parts = Object.fromEntries(VARIANTS.map((kind) => [kind, { toFirst: [] as Array<number>, lastToHost: [] as Array<number> }])) as
        Record<Variant, { toFirst: Array<number>; lastToHost: Array<number> }>
      const child = (kind: Variant) => async () => {
        const { total, toFirst, lastToHost } = await hosts[kind].once()
        parts[kind].toFirst.push(toFirst)
        parts[kind].lastToHost.push(lastToHost)
        return total
      }
      // The parts of the warm-up round (the first of each) are dropped, as interleave drops its samples.
      const samples = await interleave({
        bare: bareNode,
        sqlite: child("sqlite"),
        file: child("file"),
        "sqlite-prewarm": child("sqlite-prewarm"),
        "file-prewarm": child("file-prewarm")
      }, { rounds, warmup: 1 })
      const labelOf = (kind: Variant) =>
        kind.endsWith("-prewarm") ? `${kind.slice(0, -"-prewarm".length)} root, opt-in prewarm: true (a spare child started ahead)` : `${kind} root`
      const figures: Array<Figure> = [
        { id: "bare", label: "bare node importing effect/Effect, no compile cache (spawn to first output)", kind: "baseline", unit: "ms", summary: summarize(samples.bare) },
        ...VARIANTS.flatMap((kind): Array<Figure> => [
          { id: kind, label: `local child on a ${labelOf(kind)}, compile cache warm: detachedSpawn to await() resolving`, kind: "this", unit: "ms", summary: summarize(samples[kind]) },
          { id: `${kind}-to-first`, label: `of which detachedSpawn to the step body's first line (${labelOf(kind)})`, kind: "this", unit: "ms", summary: summarize(parts[kind].toFirst.slice(1)) },
          { id: `${kind}-last-to-host`, label: `of which the body's last line to the host seeing the result (${labelOf(kind)})`, kind: "this", unit: "ms", summary: summarize(parts[kind].lastToHost.slice(1)) }
        ])
      ]
      const ratios = VARIANTS.flatMap((kind) => {
        const ratio = ratioOf(figures, samples, `child result (${labelOf(kind)}) / bare node importing effect/Effect`, kind, "bare", 2)
        return ratio === undefined ? [] : [ratio]
      })
      return {
        id: "childStart:result",
        title: resultCase.title,
        figures,
        ratios,
        skipped: [],
        notes: ["The -prewarm variants use the opt-in `prewarm: true` (one idle spare child per adapter); the default is off."]
      }
    } finally {
      for (const kind of VARIANTS) await hosts[kind].close()
    }
  }
}

/** The child start cases. */
export const cases: ReadonlyArray<BenchCase> = [coldCase, resultCase, fiftyCase]
