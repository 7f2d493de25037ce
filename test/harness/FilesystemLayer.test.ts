/**
 * noetic's `filesystem()` in the engine (src/harness/FilesystemLayer.ts) over a real
 * directory: references tracked and rewritten, the security gates, change detection
 * with an immediate re-render, recall order and trimming, renderDelta.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import type { Item } from "../../src/harness/AgentContext.ts"
import * as FilesystemLayer from "../../src/harness/FilesystemLayer.ts"
import * as LayerLifecycle from "../../src/harness/LayerLifecycle.ts"

const reader = FilesystemLayer.fileReaderOf({
  stat: (path) => FsPromises.stat(path),
  lstat: (path) => FsPromises.lstat(path),
  readFileText: (path) => FsPromises.readFile(path, "utf8")
})

const user = (text: string): Item => ({ type: "message", role: "user", content: [{ type: "input_text", text }] })
const textOf = (item: Item | undefined): string => ((item?.content as Array<{ text: string }> | undefined) ?? []).map((p) => p.text).join("")

/** A fresh directory (its real path: macOS's /tmp is a symlink) with `files` written in it. */
const workspace = (files: Record<string, string>): string => {
  const dir = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "fs-layer-")))
  for (const [name, content] of Object.entries(files)) {
    Fs.mkdirSync(Path.dirname(Path.join(dir, name)), { recursive: true })
    Fs.writeFileSync(Path.join(dir, name), content)
  }
  return dir
}

const setup = (baseDir: string, options: Partial<FilesystemLayer.FilesystemOptions> = {}) =>
  Effect.gen(function*() {
    const layer = yield* FilesystemLayer.filesystem({ fs: reader, baseDir, ...options })
    const harness = yield* AgentHarness.make({ name: "fs", context: [layer] })
    const ctx = yield* harness.createContext()
    yield* LayerLifecycle.initLayers(ctx)
    const files = () => ctx.layerState<FilesystemLayer.FilesystemState>("filesystem")!.files
    return { layer, ctx, files }
  })

describe("filesystem", () => {
  it.effect("has noetic's id, slot, scope, budget, placement and onItemAppend timeout", () =>
    Effect.gen(function*() {
      const layer = yield* FilesystemLayer.filesystem({ fs: reader, baseDir: "/w" })
      assert.deepStrictEqual(
        [layer.id, layer.slot, layer.scope, layer.budget, layer.placement, layer.timeouts],
        ["filesystem", 350, "thread", "auto", "anchor", { onItemAppend: 30_000 }]
      )
    }))

  it.effect("tracks #references of a message once each and rewrites them to anchor links; #hashtags and absolute paths are not read", () =>
    Effect.gen(function*() {
      const dir = workspace({ "a.ts": "export const a = 1", "sub/dir/file.ts": "b", "config.json": "{}" })
      const { ctx, files } = yield* setup(dir)
      const [added] = yield* ctx.append([user("Look at #a.ts and #sub/dir/file.ts, #a.ts again, #config.json, #./config.json, #hashtag #123")])
      assert.strictEqual(
        textOf(added),
        "Look at [#a.ts](#a-ts) and [#sub/dir/file.ts](#sub-dir-file-ts), [#a.ts](#a-ts) again, [#config.json](#config-json), [#./config.json](#--config-json), #hashtag #123"
      )
      assert.deepStrictEqual(Object.keys(files()), ["a.ts", "sub/dir/file.ts", "config.json"])
      assert.deepStrictEqual(files()["a.ts"]!.content, "export const a = 1")
      assert.strictEqual(files()["a.ts"]!.absolutePath, `${dir}/a.ts`)
      yield* ctx.append([user("no references here")])
      assert.strictEqual(Object.keys(files()).length, 3)
    }).pipe(Effect.scoped))

  it.effect("refuses traversal, symlinked components, other extensions and large files, showing the reason instead of the content", () =>
    Effect.gen(function*() {
      const outside = workspace({ "secret.txt": "TOP SECRET" })
      const dir = workspace({ "ok.md": "fine", "image.png": "png", "big.txt": "x".repeat(2000) })
      Fs.symlinkSync(outside, Path.join(dir, "link"))
      Fs.symlinkSync(Path.join(outside, "secret.txt"), Path.join(dir, "leaf.txt"))
      const { ctx, files, layer } = yield* setup(dir, { maxFileSize: 1000 })
      yield* ctx.append([user("#../outside.txt #link/secret.txt #leaf.txt #image.png #big.txt #ok.md")])
      const error = (ref: string) => files()[ref]?.error
      assert.include(error("../outside.txt"), "PATH_TRAVERSAL")
      assert.include(error("link/secret.txt"), "SYMLINK: Symlinks not allowed")
      assert.include(error("leaf.txt"), "SYMLINK: Symlinks not allowed")
      assert.include(error("image.png"), "DISALLOWED_EXTENSION: .png")
      assert.include(error("big.txt"), "FILE_TOO_LARGE: 2000 bytes exceeds limit of 1000")
      assert.strictEqual(files()["link/secret.txt"]!.content, null)
      const [entry] = yield* LayerLifecycle.recallLayers(ctx, { budgets: new Map([["filesystem", 10_000]]) })
      const text = textOf(entry!.items[0])
      assert.include(text, "## link/secret.txt\n\n[ERROR: SYMLINK: Symlinks not allowed]")
      assert.notInclude(text, "TOP SECRET")
      assert.include(text, "## ok.md\n\n```\nfine\n```")

      // followSymlinks: true reads through them.
      const lenient = yield* setup(dir, { followSymlinks: true })
      yield* lenient.ctx.append([user("#link/secret.txt")])
      assert.strictEqual(lenient.files()["link/secret.txt"]!.content, "TOP SECRET")
      assert.isUndefined(lenient.files()["link/secret.txt"]!.error)
      assert.strictEqual(layer.id, "filesystem")
    }).pipe(Effect.scoped))

  it.effect("a changed or deleted file is seen at the next append, which asks for an immediate re-render of the layer", () =>
    Effect.gen(function*() {
      const dir = workspace({ "notes.md": "v1" })
      const { ctx, files, layer } = yield* setup(dir)
      const first = yield* ctx.appendPipeline([layer], [user("read #notes.md")])
      assert.deepStrictEqual(first.rerenderRequests.map((r) => [r.layerId, r.timing, r.scope]), [["filesystem", "immediate", "self"]])
      yield* ctx.append(first.items)
      const quiet = yield* ctx.appendPipeline([layer], [user("nothing new")])
      assert.deepStrictEqual(quiet.rerenderRequests, [])
      Fs.writeFileSync(Path.join(dir, "notes.md"), "v2")
      const changed = yield* ctx.appendPipeline([layer], [user("again")])
      assert.strictEqual(changed.rerenderRequests.length, 1)
      yield* ctx.append(changed.items)
      assert.strictEqual(files()["notes.md"]!.content, "v2")
      Fs.rmSync(Path.join(dir, "notes.md"))
      yield* ctx.append([user("and now?")])
      assert.isTrue(files()["notes.md"]!.deleted)
      const [entry] = yield* LayerLifecycle.recallLayers(ctx, { budgets: new Map([["filesystem", 1000]]) })
      assert.include(textOf(entry!.items[0]), `## notes.md\n\n[FILE DELETED: ${dir}/notes.md]`)
    }).pipe(Effect.scoped))

  it.effect("recall orders by priority (a changed file the latest message does not name drops to 50, and goes last), trims an oversized file head and tail; renderDelta sends only what changed", () =>
    Effect.gen(function*() {
      const long = Array.from({ length: 400 }, (_, i) => `line ${i}`).join("\n")
      const dir = workspace({ "first.ts": "first", "second.ts": "second", "long.txt": long })
      const { ctx, files, layer } = yield* setup(dir)
      yield* ctx.append([user("see #first.ts #second.ts #long.txt")])
      // The message names each file: noetic's path-match heuristic scores them 80.
      assert.deepStrictEqual(Object.values(files()).map((f) => f.priority), [80, 80, 80])
      const budgets = { budgets: new Map([["filesystem", 300]]) }
      const before = (yield* LayerLifecycle.recallLayers(ctx, budgets))[0]!.items
      Fs.writeFileSync(Path.join(dir, "long.txt"), `${long}\nline 400`)
      yield* ctx.append([user("carry on")])
      assert.deepStrictEqual(Object.values(files()).map((f) => f.priority), [80, 80, 50])
      const after = (yield* LayerLifecycle.recallLayers(ctx, budgets))[0]!.items
      const text = textOf(after[0])
      assert.isTrue(text.startsWith("# Referenced Files\n\n## first.ts\n\n```\nfirst\n```\n\n## second.ts\n\n```\nsecond\n```\n\n## long.txt\n\n```\nline 0\n"))
      assert.match(text, /line 0\n[\s\S]*\.\.\. \[truncated \d+ lines\] \.\.\.[\s\S]*line 400\n```$/)
      assert.isAtMost(Math.ceil(text.length / 4), 300)
      const delta = yield* layer.lifecycle!.renderDelta!({ prev: before, next: after, prevState: undefined, state: undefined, ctx, budget: 300 })
      assert.isTrue(delta!.startsWith("## long.txt\n\n```\nline 0\n"))
      assert.isTrue(delta!.endsWith("line 400\n```"))
      assert.isNull(yield* layer.lifecycle!.renderDelta!({ prev: after, next: after, prevState: undefined, state: undefined, ctx, budget: 300 }))
    }).pipe(Effect.scoped))

  it.effect("refuses scoringModel by name, bad options, and a context with no reader at init", () =>
    Effect.gen(function*() {
      const code = (options: Partial<FilesystemLayer.FilesystemOptions>) =>
        Effect.map(Effect.flip(FilesystemLayer.filesystem({ fs: reader, ...options })), (e) => e.code)
      assert.strictEqual(yield* code({ scoringModel: "anthropic/claude-haiku-4-5" }), "UNSUPPORTED_OPTION")
      assert.strictEqual(yield* code({ maxFileSize: -1 }), "INVALID_CONTEXT_LAYER")
      assert.strictEqual(yield* code({ allowedExtensions: [1 as never] }), "INVALID_CONTEXT_LAYER")
      const orphan = yield* FilesystemLayer.filesystem({ fs: () => undefined, baseDir: "/w" })
      const harness = yield* AgentHarness.make({ name: "fs", context: [orphan] })
      const ctx = yield* harness.createContext()
      const exit = yield* Effect.exit(LayerLifecycle.initLayers(ctx))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "no file reader")
    }).pipe(Effect.scoped))
})
