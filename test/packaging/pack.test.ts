/**
 * The published package: `npm pack` makes a tarball that installs into an empty
 * project with the lock file's dependency versions (offline from the npm cache; the
 * registry only for what the cache lacks), where `import` and `require` of every
 * entry point work, the types resolve under `moduleResolution` `nodenext` and
 * `bundler`, and the bin runs. The tarball holds no tests, benchmarks, examples or
 * local state.
 *
 * It packs the build in dist/, building first when dist/ is missing or older than
 * the sources (CI builds just before the tests, so there it does not).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, type ExecFileSyncOptions } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const repo = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
// This process's node (24, from the devDependency) goes first on PATH, so npm and
// the bin's `#!/usr/bin/env node` run on it whatever `node` the machine has.
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PATH: `${Path.dirname(process.execPath)}${Path.delimiter}${process.env.PATH ?? ""}`
}
// The tests' own Node flags (a source condition, a loader) must not reach the consumer.
delete env.NODE_OPTIONS

const run = (command: string, args: ReadonlyArray<string>, options: ExecFileSyncOptions = {}): string =>
  execFileSync(command, args, { encoding: "utf8", env, stdio: ["ignore", "pipe", "pipe"], ...options }).toString()

const newestMtime = (path: string): number => {
  const stat = Fs.statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Math.max(0, ...Fs.readdirSync(path).map((entry) => newestMtime(Path.join(path, entry))))
}

/** Builds dist/ unless every entry point is there and newer than every input of the build. */
const ensureBuild = () => {
  const entries = ["index", "promise", "testing", "client", "cli"].flatMap((name) =>
    [".js", ".cjs", ".d.ts", ".d.cts"].map((ext) => Path.join(repo, "dist", name + ext))
  )
  const built = entries.every((file) => Fs.existsSync(file))
    ? Math.min(...entries.map((file) => Fs.statSync(file).mtimeMs))
    : 0
  const inputs = Math.max(
    newestMtime(Path.join(repo, "src")),
    newestMtime(Path.join(repo, "package.json")),
    newestMtime(Path.join(repo, "tsup.config.ts"))
  )
  if (built < inputs) run("npm", ["run", "build"], { cwd: repo })
}

/** package.json and a lock for the consumer: the tarball plus the repository lock's production packages. */
const writeConsumer = (dir: string, tarball: string) => {
  const lock = JSON.parse(Fs.readFileSync(Path.join(repo, "package-lock.json"), "utf8"))
  const manifest = JSON.parse(Fs.readFileSync(Path.join(repo, "package.json"), "utf8"))
  const integrity = `sha512-${createHash("sha512").update(Fs.readFileSync(tarball)).digest("base64")}`
  const packages: Record<string, unknown> = {
    "": { name: "consumer", version: "1.0.0", dependencies: { "noetic-effect": `file:${tarball}` } },
    "node_modules/noetic-effect": {
      version: manifest.version,
      resolved: `file:${tarball}`,
      integrity,
      license: manifest.license,
      dependencies: manifest.dependencies,
      bin: manifest.bin,
      engines: manifest.engines
    }
  }
  for (const [path, entry] of Object.entries<any>(lock.packages)) {
    if (path === "" || entry.dev === true || entry.link === true) continue
    const { devOptional: _devOptional, ...rest } = entry
    packages[path] = rest
  }
  Fs.writeFileSync(
    Path.join(dir, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true, dependencies: { "noetic-effect": `file:${tarball}` } })
  )
  Fs.writeFileSync(
    Path.join(dir, "package-lock.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", lockfileVersion: 3, requires: true, packages }, null, 2)
  )
}

const install = (dir: string): string => {
  const args = ["ci", "--no-audit", "--no-fund", "--ignore-scripts"]
  try {
    run("npm", [...args, "--offline"], { cwd: dir })
    return "offline, from the npm cache"
  } catch {
    // The cache lacks some tarball: the same pinned versions from the registry.
    run("npm", [...args, "--prefer-offline"], { cwd: dir })
    return "the npm cache, then the registry"
  }
}

const consumerSource = `
import { AgentHarness, createFileStorage, createInMemoryStorage, type StorageAdapter } from "noetic-effect/promise"
import { FileStorage, StorageAdapter as StorageService } from "noetic-effect"
import * as Testing from "noetic-effect/testing"

export const storage: StorageAdapter = createInMemoryStorage()
export const files = createFileStorage({ root: "/tmp/consumer" })
export const harness: AgentHarness = new AgentHarness({ name: "consumer", params: {} })
export const layer = FileStorage.layer({ root: "/tmp/consumer" })
export const service = StorageService.StorageAdapter
export const testing = Testing
// @ts-expect-error the root is a string: this fails only when the types resolved
createFileStorage({ root: 42 })
`

const tsconfig = (moduleResolution: "nodenext" | "bundler") => ({
  compilerOptions: {
    target: "ES2022",
    module: moduleResolution === "nodenext" ? "nodenext" : "preserve",
    moduleResolution,
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    types: ["node"]
  },
  include: ["index.ts", "require.cts"]
})

describe("packaging", () => {
  it("npm pack makes a tarball that installs into an empty project and works there", { timeout: 600_000 }, () => {
    ensureBuild()
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-pack-"))
    try {
      const [packed] = JSON.parse(run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], { cwd: repo }))
      const tarball = Path.join(dir, packed.filename)
      const paths: Array<string> = packed.files.map((file: { path: string }) => file.path)
      console.log(
        `npm pack: ${packed.filename}, ${(packed.size / 1024).toFixed(0)} KiB packed, ` +
          `${(packed.unpackedSize / 1024).toFixed(0)} KiB unpacked, ${paths.length} files`
      )

      // Only the build, its sources (for source maps), the manifest, README and LICENSE.
      const stray = paths.filter((path) =>
        /^(test|bench|examples|scripts|\.ci|node_modules)\//.test(path) ||
        /\.(test|bench)\.[cm]?[jt]s$/.test(path) ||
        /(^|\/)\.(noetic|bench-tmp|scratch)(\/|$)/.test(path) ||
        /\.(log|tgz|db|sqlite)$/.test(path)
      )
      assert.deepStrictEqual(stray, [])
      for (const required of ["package.json", "README.md", "LICENSE", "dist/index.js", "dist/promise.cjs", "dist/testing.d.ts", "dist/cli.js"]) {
        assert.ok(paths.includes(required), `the tarball has ${required}`)
      }

      const consumer = Path.join(dir, "consumer")
      Fs.mkdirSync(consumer)
      writeConsumer(consumer, tarball)
      const how = install(consumer)
      console.log(`installed into an empty project (${how})`)

      // import, from an ES module.
      const esm = run(process.execPath, [
        "--input-type=module",
        "-e",
        `const main = await import("noetic-effect")
         const promise = await import("noetic-effect/promise")
         const testing = await import("noetic-effect/testing")
         const storage = promise.createInMemoryStorage()
         await storage.set("k", { v: 1 })
         const harness = new promise.AgentHarness({ name: "x", params: {} })
         await harness.close()
         console.log(JSON.stringify({
           main: typeof main.AgentHarness, storage: typeof main.FileStorage.layer,
           value: await storage.get("k"), testing: Object.keys(testing).length > 0
         }))`
      ], { cwd: consumer })
      assert.deepStrictEqual(JSON.parse(esm), { main: "object", storage: "function", value: { v: 1 }, testing: true })

      // require, from CommonJS.
      const cjs = run(process.execPath, [
        "-e",
        `const main = require("noetic-effect")
         const promise = require("noetic-effect/promise")
         const testing = require("noetic-effect/testing")
         console.log(JSON.stringify([typeof main.FileStorage.layer, typeof promise.createFileStorage, Object.keys(testing).length > 0]))`
      ], { cwd: consumer })
      assert.deepStrictEqual(JSON.parse(cjs), ["function", "function", true])

      // Types, under both module resolutions, from an ES module and a CommonJS one.
      Fs.writeFileSync(Path.join(consumer, "index.ts"), consumerSource)
      Fs.writeFileSync(
        Path.join(consumer, "require.cts"),
        `import promise = require("noetic-effect/promise")\nexport const s: promise.StorageAdapter = promise.createInMemoryStorage()\n`
      )
      const tsc = Path.join(repo, "node_modules", "typescript", "bin", "tsc")
      for (const resolution of ["nodenext", "bundler"] as const) {
        const project = Path.join(consumer, `tsconfig.${resolution}.json`)
        Fs.writeFileSync(project, JSON.stringify(tsconfig(resolution)))
        try {
          run(process.execPath, [tsc, "-p", project], { cwd: consumer })
        } catch (error: any) {
          assert.fail(`types under moduleResolution ${resolution}:\n${error.stdout}${error.stderr}`)
        }
      }

      // The bin, as npm linked it.
      const help = run(Path.join(consumer, "node_modules", ".bin", "noetic-effect"), ["--help"], { cwd: consumer })
      assert.match(help, /executions/)
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
    }
  })
})
