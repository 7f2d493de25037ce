/**
 * The inspector in a real browser (Debian's chromium-headless-shell driven by
 * playwright-core), served by the real `noetic-effect inspect` process over a home a
 * real host was SIGKILLed in:
 * - the list shows the killed run `interrupted`, its page shows its recorded steps;
 * - a resume in another process turns it `finished` on the open page, without a reload;
 * - a live child (its host SIGKILLed, the child outliving it) shows alive, then
 *   `stopped` after the stop action and its confirmation.
 * It writes the screenshots docs/inspector.md and the README show.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { chromium, type Page } from "playwright-core"
import * as SqliteStorage from "../../src/layers/SqliteStorage.ts"
import { makeSubprocessStorage, roots } from "../../src/NoeticHome.ts"
import { recordState } from "../cli/state.ts"
import { crashDirectory, sigkill, startHost } from "../hostProcesses.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium-headless-shell"
const repo = Path.join(import.meta.dirname, "..", "..")
const demoHost = Path.join(import.meta.dirname, "fixtures", "inspectorHost.ts")
const childHost = Path.join(repo, "test", "fixtures", "sqliteCrashHost.ts")
const mainScript = Path.join(repo, "src", "cli", "main.ts")
const screenshots = Path.join(repo, "docs", "img")

/** `noetic-effect inspect --home <home> --port 0` as a real process; the printed address. */
const startInspector = (home: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const proc = ChildProcess.spawn(process.execPath, ["--import", "tsx", mainScript, "--home", home, "inspect", "--port", "0"], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      const lines = Readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
      const first = await lines.next()
      if (first.done === true) throw new Error("noetic-effect inspect exited before printing its address")
      return { proc, line: String(first.value) }
    }),
    ({ proc }) => sigkill(proc)
  )

const browserPage = Effect.acquireRelease(
  Effect.promise(async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" })
    return { browser, page: await context.newPage() }
  }),
  ({ browser }) => Effect.promise(() => browser.close())
)

const shoot = (page: Page, name: string) =>
  Effect.promise(async () => {
    Fs.mkdirSync(screenshots, { recursive: true })
    await page.screenshot({ path: Path.join(screenshots, name), fullPage: false })
  })

const on = <A>(f: () => Promise<A>) => Effect.promise(f)

describe.skipIf(!Fs.existsSync(CHROMIUM))("the inspector in a real browser", () => {
  it.live("a SIGKILLed run reads interrupted, turns finished on the open page after a resume; a live child is stopped", () =>
    Effect.gen(function*() {
      const home = yield* crashDirectory("nci-", (dir) => makeSubprocessStorage(dir))
      const env = { ...process.env, NOETIC_HOME: home }
      // Other executions and a queue beside, as real runs leave them.
      yield* Effect.scoped(Effect.flatMap(SqliteStorage.make({ path: roots(home).checkpointsDatabase }), recordState))

      const release = Path.join(home, "release")
      const host = yield* startHost(demoHost, ["run", release], env)
      assert.deepStrictEqual(yield* host.nextLine, { waiting: true })
      yield* sigkill(host.proc)

      const inspector = yield* startInspector(home)
      assert.match(inspector.line, /^inspector at http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{43}$/)
      const url = inspector.line.slice("inspector at ".length)
      const { page } = yield* browserPage

      // The list: the killed run is interrupted.
      yield* on(() => page.goto(url))
      assert.notInclude(page.url(), "token=")
      yield* on(() => page.waitForSelector("tr[data-execution=\"crawl-1\"] [data-status=\"interrupted\"]"))
      yield* on(() => page.waitForSelector("tr[data-execution=\"done\"] [data-status=\"finished\"]"))
      yield* shoot(page, "inspector-list.png")

      // Its page: the steps it recorded, reached with the keyboard from the list.
      yield* on(() => page.focus("tr[data-execution=\"crawl-1\"] a"))
      yield* on(() => page.keyboard.press("Enter"))
      yield* on(() => page.waitForSelector("[data-testid=\"ledger\"] tr[data-path=\"/pipeline#0/parse#0\"]"))
      assert.include(yield* on(() => page.textContent("[data-testid=\"ledger\"]")), "fetch")
      assert.strictEqual(yield* on(() => page.getAttribute("[data-testid=\"status\"] [data-status]", "data-status")), "interrupted")
      yield* on(() => page.click("tr[data-path=\"/pipeline#0/fetch#0\"] button"))
      yield* on(() => page.waitForSelector("[data-testid=\"json\"]"))
      assert.include(yield* on(() => page.textContent("[data-testid=\"json\"]")), "Example Domain")

      // A resume in another process: the open page turns finished by itself.
      yield* on(() => page.evaluate(() => ((globalThis as unknown as { marker: number }).marker = 42)))
      Fs.writeFileSync(release, "go")
      const resumer = yield* startHost(demoHost, ["resume", release], env)
      // The step waiting for the file runs again (it had not finished), then the run ends.
      assert.deepStrictEqual(yield* resumer.nextLine, { waiting: true })
      assert.deepStrictEqual(yield* resumer.nextLine, { output: { summary: "a page titled Example Domain" } })
      yield* on(() => page.waitForSelector("[data-testid=\"status\"] [data-status=\"finished\"]"))
      yield* on(() => page.waitForSelector("[data-testid=\"ledger\"] tr[data-path=\"/pipeline#0/summarize#0\"]"))
      assert.strictEqual(yield* on(() => page.evaluate(() => (globalThis as unknown as { marker?: number }).marker)), 42)
      yield* shoot(page, "inspector-detail.png")

      // A live child whose host was SIGKILLed: alive, then stopped after the stop action.
      const spawner = yield* startHost(childHost, ["spawn", Path.join(home, "never")], env)
      const { handleId } = (yield* spawner.nextLine) as { handleId: string }
      yield* sigkill(spawner.proc)
      yield* on(() => page.click("nav a[data-nav=\"children\"]"))
      const row = `tr[data-handle="${handleId}"]`
      yield* on(() => page.waitForSelector(`${row} [data-status="running"]`))
      yield* on(() => page.waitForSelector(`${row} [data-status="alive"]`))
      yield* shoot(page, "inspector-children.png")
      yield* on(() => page.click(`${row} [data-testid="stop"]`))
      assert.include(yield* on(() => page.textContent("#confirm")), `Stop child ${handleId}?`)
      yield* on(() => page.click("#confirm-ok"))
      yield* on(() => page.waitForSelector(`${row} [data-status="stopped"]`, { timeout: 20_000 }))
      assert.strictEqual(yield* on(() => page.evaluate(() => (globalThis as unknown as { marker?: number }).marker)), 42)
    }).pipe(Effect.scoped), { timeout: 120_000 })
})
