/**
 * Local child start, on the built package (`npm run build` first; `dist/` is what users run):
 * - from `detachedSpawn` to the first line of the step body, for the first child
 *   (empty compile cache) and the next ones (cache warm), against a bare `node`
 *   importing `effect/Effect` (new process each time) in the same run;
 * - 50 children spawned until every step body has started, against fifty sequential
 *   bare `node` starts importing `effect/Effect`.
 *
 * Times are wall-clock: the step body records `Date.now()` on its first line.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { round, tempRoot } from "./harness.ts"

const repo = Path.resolve(import.meta.dirname, "..")
const dist = Path.join(repo, "dist", "promise.js")

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

/** One bare `node` importing `effect/Effect`: spawn to its first output, in ms. */
const bareNode = () =>
  new Promise<number>((resolve, reject) => {
    const start = Date.now()
    const child = ChildProcess.spawn(process.execPath, ["--input-type=module", "-e", `import "effect/Effect"; process.stdout.write(String(Date.now()))`], {
      cwd: repo,
      stdio: ["ignore", "pipe", "inherit"],
      // The library's children get a compile cache; the baseline gets none, as a plain `node` would.
      env: { ...process.env, NODE_COMPILE_CACHE: "" }
    })
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

/** Runs the child start benchmark and returns its figures. */
export const run = async () => {
  if (!Fs.existsSync(dist)) throw new Error("bench/childStart needs the built package: run `npm run build` first")
  const base = tempRoot("child-start")
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
  const release = Path.join(base, "release")
  // The steps module named outright: under tsx, source maps hide which module defined a step.
  const subprocess = api.createLocalSubprocessAdapter({ root: Path.join(base, "subprocess"), entry: stepsFile })
  const harness = new api.AgentHarness({ name: "child-start", agentGraph: api.runCode("idle", (x: unknown) => x), environment: { subprocess } })
  const context = await harness.createContext()
  let n = 0
  const spawnOne = () => {
    const marker = Path.join(base, `marker-${++n}`)
    const start = Date.now()
    const handle = harness.detachedSpawn(mark, { marker, release, n }, context)
    return { handle, started: waitFor(marker).then((at) => at - start) }
  }

  try {
    const bareSamples: Array<number> = []
    const childSamples: Array<number> = []
    const handles: Array<{ await: () => Promise<unknown> }> = []
    // Interleaved, so load from other processes on the machine hits both alike.
    for (let i = 0; i < 6; i++) {
      bareSamples.push(await bareNode())
      const { handle, started } = spawnOne()
      handles.push(handle)
      childSamples.push(await started)
    }
    const [firstChild, ...warmChildren] = childSamples
    const bare = median(bareSamples)

    const fiftyBareStart = Date.now()
    for (let i = 0; i < 50; i++) await bareNode()
    const fiftyBareMs = Date.now() - fiftyBareStart
    const fiftyStart = Date.now()
    const fifty = Array.from({ length: 50 }, () => spawnOne())
    const fiftyMs = Math.max(...(await Promise.all(fifty.map((one) => one.started)))) + 0 - 0
    const fiftyLiveMs = Date.now() - fiftyStart
    handles.push(...fifty.map((one) => one.handle))

    Fs.writeFileSync(release, "go")
    await Promise.all(handles.map((handle) => handle.await()))
    return {
      benchmark: "local child: detachedSpawn to the step body's first line, vs a bare node importing effect/Effect",
      bareNodeImportingEffectMs: round(bare),
      firstChildMs: round(firstChild!),
      warmChildMedianMs: round(median(warmChildren)),
      childOverBare: { first: round(firstChild! / bare), warm: round(median(warmChildren) / bare) },
      fiftyChildren: {
        spawnedAndStartedMs: round(Math.max(fiftyMs, fiftyLiveMs)),
        fiftySequentialBareNodeMs: round(fiftyBareMs),
        ratio: round(Math.max(fiftyMs, fiftyLiveMs) / fiftyBareMs)
      }
    }
  } finally {
    await harness.close()
    await subprocess.close()
  }
}

if (process.argv[1]?.endsWith("childStart.ts") === true) {
  run().then((result) => console.log(JSON.stringify(result, null, 2)), (error) => {
    console.error(error)
    process.exit(1)
  })
}
