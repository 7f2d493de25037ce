/**
 * noetic's `filesystem(options)` in the engine's form: `#path/to/file.ts` references
 * in appended messages are tracked, read through a file reader (the facade's: the
 * harness's `environment.fs`), rewritten to anchor links, and recalled as a
 * `# Referenced Files` block in priority order; docs/layers-and-channels.md#built-in-layers.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import { logWarning } from "../internal/diagnostics.ts"
import type { AgentContext, ContextLayer, Item } from "./AgentContext.ts"
import { LayerOptionInvalid, Slot } from "./BuiltinLayers.ts"
import { timeoutOf, withHookTimeout } from "./LayerHooks.ts"
import { estimateTokens, message } from "./LayerLifecycle.ts"

/** What the layer needs of a file's stats. */
export interface FileStats {
  readonly size: number
  isSymbolicLink(): boolean
}

/**
 * Reads files for the layer. A failure carrying `code: 'ENOENT'` means the file is
 * gone, `code: 'EACCES'` that it may not be read; any other failure fails the hook.
 */
export interface FileReader {
  readonly stat: (path: string) => Effect.Effect<FileStats, unknown>
  readonly lstat: (path: string) => Effect.Effect<FileStats, unknown>
  readonly readFileText: (path: string) => Effect.Effect<string, unknown>
}

/** A file reader over a Promise adapter (noetic's `FsAdapter`, the three methods the layer uses). */
export const fileReaderOf = (adapter: {
  stat(path: string): PromiseLike<FileStats>
  lstat(path: string): PromiseLike<FileStats>
  readFileText(path: string): PromiseLike<string>
}): FileReader => {
  const lift = <A>(f: () => PromiseLike<A>) => Effect.tryPromise({ try: async () => await f(), catch: (cause) => cause })
  return {
    stat: (path) => lift(() => adapter.stat(path)),
    lstat: (path) => lift(() => adapter.lstat(path)),
    readFileText: (path) => lift(() => adapter.readFileText(path))
  }
}

/** One referenced file as the layer tracks it (noetic's `TrackedFile`). */
export interface TrackedFile {
  readonly absolutePath: string
  readonly referencePath: string
  readonly content: string | null
  /** 0-100, higher first in the recalled block. */
  readonly priority: number
  readonly contentHash: string
  readonly deleted: boolean
  readonly tokenCount: number
  /** Why the file is not shown (`PATH_TRAVERSAL`, `SYMLINK`, `DISALLOWED_EXTENSION`, `FILE_TOO_LARGE`, ...). */
  readonly error?: string | undefined
}

/**
 * The layer's state: the tracked files by reference, in the order first referenced,
 * and the base directory. noetic keeps the files in a `Map`; a plain object survives
 * the JSON of snapshots and of the durable write-through.
 */
export interface FilesystemState {
  readonly files: Readonly<Record<string, TrackedFile>>
  readonly baseDir: string
}

/** Options of `filesystem()` (noetic's `FilesystemOptions`, without `scoringModel`). */
export interface FilesystemOptions {
  /** Where the files are read: a reader, or the reader of a context (none: the layer's init fails). */
  readonly fs: FileReader | ((ctx: AgentContext) => FileReader | undefined)
  /** References resolve under it (default: the process's working directory). */
  readonly baseDir?: string | undefined
  readonly slot?: number | undefined
  /** Bytes; a larger file is shown as `FILE_TOO_LARGE` (default 1 MiB). */
  readonly maxFileSize?: number | undefined
  /** false (default): any symlinked path component below `baseDir` is refused. */
  readonly followSymlinks?: boolean | undefined
  /** Extensions (or whole file names such as `Dockerfile`) that may be read. */
  readonly allowedExtensions?: ReadonlyArray<string> | undefined
  /** A model to score relevance: refused (`UNSUPPORTED_OPTION`), hooks have no model to ask here. */
  readonly scoringModel?: unknown
}

const DEFAULT_ALLOWED_EXTENSIONS = [
  ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".json", ".yaml", ".yml", ".toml", ".md", ".mdx", ".txt", ".csv",
  ".html", ".css", ".scss", ".less", ".py", ".rb", ".go", ".rs", ".java", ".kt", ".swift", ".c", ".cpp", ".h", ".hpp",
  ".sh", ".bash", ".zsh", ".sql", ".graphql", ".xml", ".svg", ".env", ".env.local", ".env.example", ".gitignore",
  ".dockerignore", "Dockerfile", "Makefile", "Taskfile"
]

// A path with an extension: `#hashtag`, `#123` and `#region` are not references.
const FILE_REF = /#((?:[a-zA-Z0-9_.-]+\/)*[a-zA-Z0-9_.-]+\.[a-zA-Z0-9]+)/g

const anchorLinks = (text: string): string =>
  text.replace(FILE_REF, (_, path: string) => `[#${path}](#${path.replace(/[^a-zA-Z0-9-]/g, "-").toLowerCase()})`)

const referencesIn = (text: string): Array<string> => [...new Set([...text.matchAll(FILE_REF)].map((m) => m[1]!))]

const normalize = (input: string): string => {
  const parts: Array<string> = []
  for (const part of (input.startsWith("/") ? input : `/${input}`).split("/")) {
    if (part === "" || part === ".") continue
    if (part === "..") parts.pop()
    else parts.push(part)
  }
  return `/${parts.join("/")}`
}

const resolve = (base: string, ref = ""): string => normalize(ref.startsWith("/") ? ref : `${base}/${ref}`)

const basename = (path: string): string => {
  const normalized = normalize(path)
  return normalized === "/" ? "" : normalized.slice(normalized.lastIndexOf("/") + 1)
}

const extname = (path: string): string => {
  const name = basename(path)
  const dot = name.lastIndexOf(".")
  return dot > 0 ? name.slice(dot) : ""
}

/** A 32-bit rolling hash with the length: enough to see that a file changed. */
const contentHash = (content: string): string => {
  let hash = 0
  for (let i = 0; i < content.length; i++) hash = ((hash << 5) - hash + content.charCodeAt(i)) | 0
  return `${content.length}:${hash.toString(16)}`
}

/** A message whose parts are all `input_text` (user or developer input): the only items scanned. */
const inputTextOf = (item: Item): string | undefined => {
  if (item.type !== "message" || !Array.isArray(item.content)) return undefined
  const parts = item.content as ReadonlyArray<{ readonly type?: unknown; readonly text?: unknown }>
  if (!parts.every((p) => p?.type === "input_text" && typeof p.text === "string")) return undefined
  return parts.map((p) => p.text as string).join("\n")
}

const codeOf = (error: unknown): unknown => typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined

interface ReadOptions {
  readonly baseDir: string
  readonly maxFileSize: number
  readonly followSymlinks: boolean
  readonly allowedExtensions: ReadonlyArray<string>
}

interface ReadResult {
  readonly content: string | null
  readonly deleted: boolean
  readonly error?: string | undefined
}

/**
 * The stats of `target` after an `lstat` of every component strictly below `base`,
 * or `SYMLINK` for the first symlink: containment by the path string alone lets
 * `base/link -> /etc` escape. `base` and its ancestors are trusted (macOS `/tmp` is one).
 */
const statRefusingSymlinks = (fs: FileReader, base: string, target: string) =>
  Effect.gen(function*() {
    const segments = target === base ? [] : target.slice(base.length + 1).split("/")
    if (segments.length === 0) return { stats: yield* fs.stat(target) }
    let current = base
    let stats: FileStats | undefined
    for (const segment of segments) {
      current = `${current}/${segment}`
      stats = yield* fs.lstat(current)
      if (stats.isSymbolicLink()) return { error: "SYMLINK: Symlinks not allowed" }
    }
    return { stats: stats! }
  })

const readChecked = (fs: FileReader, absolutePath: string, options: ReadOptions): Effect.Effect<ReadResult, unknown> =>
  Effect.gen(function*() {
    const base = resolve(options.baseDir)
    const path = resolve(absolutePath)
    if (!path.startsWith(`${base}/`) && path !== base) return { content: null, deleted: false, error: "PATH_TRAVERSAL: File outside allowed directory" }
    const ext = extname(path).toLowerCase()
    const name = basename(path)
    const allowed = options.allowedExtensions.some((a) => ext === a.toLowerCase() || name === a)
    if (!allowed && options.allowedExtensions.length > 0) {
      return { content: null, deleted: false, error: `DISALLOWED_EXTENSION: ${ext || "no extension"}` }
    }
    let stats: FileStats
    if (options.followSymlinks) stats = yield* fs.stat(absolutePath)
    else {
      const walked = yield* statRefusingSymlinks(fs, base, path)
      if (walked.error !== undefined) return { content: null, deleted: false, error: walked.error }
      stats = walked.stats!
    }
    if (stats.size > options.maxFileSize) {
      return { content: null, deleted: false, error: `FILE_TOO_LARGE: ${stats.size} bytes exceeds limit of ${options.maxFileSize}` }
    }
    return { content: yield* fs.readFileText(absolutePath), deleted: false }
  }).pipe(Effect.catch((error) => {
    const code = codeOf(error)
    if (code === "ENOENT") return Effect.succeed<ReadResult>({ content: null, deleted: true })
    if (code === "EACCES") return Effect.succeed<ReadResult>({ content: null, deleted: false, error: "PERMISSION_DENIED: Cannot read file" })
    return Effect.fail(error)
  }))

/** With no model to ask, noetic's path-match score: 80 when the query names the file, else 50. */
const relevance = (path: string, query: string): number => {
  const q = query.toLowerCase()
  const p = path.toLowerCase()
  return p.includes(q) || q.includes(basename(p)) ? 80 : 50
}

const track = (fs: FileReader, options: ReadOptions, ref: string, query: string): Effect.Effect<TrackedFile, unknown> => {
  if (ref.startsWith("/")) {
    return Effect.succeed({
      absolutePath: ref,
      referencePath: ref,
      content: null,
      priority: 0,
      contentHash: "",
      deleted: false,
      tokenCount: 0,
      error: "ABSOLUTE_PATH: Only relative paths are allowed"
    })
  }
  const absolutePath = resolve(options.baseDir, ref)
  return Effect.map(readChecked(fs, absolutePath, options), (read) => ({
    absolutePath,
    referencePath: ref,
    content: read.content,
    priority: read.content ? relevance(ref, query) : 0,
    contentHash: read.content ? contentHash(read.content) : "",
    deleted: read.deleted,
    tokenCount: read.content ? estimateTokens(read.content) : 0,
    ...(read.error === undefined ? {} : { error: read.error })
  }))
}

/** A tracked file read again: its new record when it changed, appeared, vanished or failed; else null. */
const refresh = (fs: FileReader, options: ReadOptions, ref: string, tracked: TrackedFile, query: string) =>
  Effect.map(readChecked(fs, tracked.absolutePath, options), (read): TrackedFile | null => {
    if (read.deleted && !tracked.deleted) return { ...tracked, content: null, deleted: true }
    if (read.error !== undefined && tracked.error === undefined) return { ...tracked, content: null, error: read.error }
    if (read.deleted || !read.content) return null
    const hash = contentHash(read.content)
    if (hash === tracked.contentHash) return null
    const { error: _, ...rest } = tracked
    return {
      ...rest,
      content: read.content,
      contentHash: hash,
      deleted: false,
      tokenCount: estimateTokens(read.content),
      priority: query ? relevance(ref, query) : tracked.priority
    }
  })

const marker = (omitted: number) => `\n\n... [truncated ${omitted} lines] ...\n\n`

/** How many lines from `start` (forwards) or from the end down to `floor` fit `chars` joined. */
const fitting = (lines: ReadonlyArray<string>, indices: Iterable<number>, chars: number): number => {
  let count = 0
  let used = 0
  for (const i of indices) {
    const next = used === 0 ? lines[i]!.length : lines[i]!.length + 1
    if (used + next > chars) break
    used += next
    count++
  }
  return count
}

function* range(from: number, to: number, step: 1 | -1) {
  for (let i = from; step > 0 ? i < to : i >= to; i += step) yield i
}

/** The file's content cut to `budget` tokens: its head (60%) and tail around a truncation marker. */
const truncated = (file: TrackedFile, budget: number): string => {
  if (!file.content || file.tokenCount <= budget) return file.content ?? ""
  const lines = file.content.split("\n")
  const chars = Math.max(0, Math.max(0, budget * 4) - marker(lines.length).length)
  const headCount = fitting(lines, range(0, lines.length, 1), Math.floor(chars * 0.6))
  const tailCount = fitting(lines, range(lines.length - 1, headCount, -1), chars - lines.slice(0, headCount).join("\n").length)
  const omitted = lines.length - headCount - tailCount
  const head = lines.slice(0, headCount).join("\n")
  const tail = tailCount > 0 ? lines.slice(lines.length - tailCount).join("\n") : ""
  return omitted <= 0 ? [head, tail].filter((s) => s.length > 0).join("\n") : `${head}${marker(omitted)}${tail}`
}

const blockOf = (file: TrackedFile, used: number, budget: number): string | null => {
  const status = file.deleted
    ? `## ${file.referencePath}\n\n[FILE DELETED: ${file.absolutePath}]`
    : file.error !== undefined
    ? `## ${file.referencePath}\n\n[ERROR: ${file.error}]`
    : null
  if (status !== null) return used + estimateTokens(status) <= budget ? status : null
  if (!file.content) return null
  const header = `## ${file.referencePath}`
  if (used + estimateTokens(header) >= budget) return null
  return `${header}\n\n\`\`\`\n${truncated(file, budget - used - estimateTokens(header) - 10)}\n\`\`\``
}

/** The `## <path>` blocks of a rendered `# Referenced Files` message, by path. */
const blocksIn = (items: ReadonlyArray<Item>): Map<string, string> => {
  const blocks = new Map<string, string>()
  for (const item of items) {
    if (item.type !== "message" || !Array.isArray(item.content)) continue
    for (const part of item.content as ReadonlyArray<{ readonly text?: unknown }>) {
      if (typeof part?.text !== "string") continue
      for (const chunk of part.text.split(/\n(?=## )/)) {
        const heading = chunk.match(/^## (.+)$/m)
        if (heading?.[1]) blocks.set(heading[1].trim(), chunk.trim())
      }
    }
  }
  return blocks
}

const invalid = (code: string, text: string, hint: string) => Effect.fail(new LayerOptionInvalid({ code, message: text, hint }))

/**
 * noetic's filesystem layer: `#path` references in appended input messages are read
 * (under `baseDir`, no traversal, no symlinked component unless `followSymlinks`,
 * allowed extensions, at most `maxFileSize` bytes; each refusal is shown instead of
 * the content), scored by noetic's path-match heuristic, and rewritten to anchor
 * links; every append re-reads the tracked files and asks for an immediate re-render
 * when one changed. Recall: `# Referenced Files`, highest priority first, trimmed to
 * the budget; `renderDelta` sends only the files that changed. Slot 350, scope
 * `thread`, budget `auto`, placed `anchor`, `onItemAppend` timeout 30 s. Fails with
 * `LayerOptionInvalid` for bad options and `UNSUPPORTED_OPTION` for `scoringModel`.
 */
export const filesystem = (options: FilesystemOptions): Effect.Effect<ContextLayer<FilesystemState>, LayerOptionInvalid> => {
  if (options.scoringModel !== undefined) {
    return invalid(
      "UNSUPPORTED_OPTION",
      "filesystem: 'scoringModel' is not run by noetic-effect (a layer hook has no model to ask)",
      "Remove it: files are scored by noetic's path-match heuristic (80 when the message names the file, else 50)."
    )
  }
  if (typeof options.fs !== "function" && (typeof options.fs !== "object" || options.fs === null)) {
    return invalid("INVALID_CONTEXT_LAYER", "filesystem: `fs` must be a file reader", "Pass fs: fileReaderOf(adapter).")
  }
  const maxFileSize = options.maxFileSize ?? 1024 * 1024
  if (!(typeof maxFileSize === "number" && maxFileSize >= 0)) {
    return invalid("INVALID_CONTEXT_LAYER", `filesystem: maxFileSize ${JSON.stringify(maxFileSize)}`, "Give a byte count (default 1048576).")
  }
  const allowedExtensions = options.allowedExtensions ?? DEFAULT_ALLOWED_EXTENSIONS
  if (!Array.isArray(allowedExtensions) || allowedExtensions.some((e) => typeof e !== "string")) {
    return invalid("INVALID_CONTEXT_LAYER", "filesystem: allowedExtensions must be an array of strings", "For example ['.ts', '.md', 'Dockerfile'].")
  }
  const baseDir = options.baseDir ?? process.cwd()
  if (typeof baseDir !== "string" || baseDir === "") {
    return invalid("INVALID_CONTEXT_LAYER", `filesystem: baseDir ${JSON.stringify(baseDir)}`, "Give the directory references resolve under.")
  }
  const given = options.fs
  const timeouts = { onItemAppend: 30_000 }
  const readerOf = (ctx: AgentContext): FileReader | undefined => typeof given === "function" ? given(ctx) : given
  const followSymlinks = options.followSymlinks ?? false
  const readOptionsOf = (state: FilesystemState): ReadOptions => ({ baseDir: state.baseDir, maxFileSize, followSymlinks, allowedExtensions })
  const empty = (): FilesystemState => ({ files: {}, baseDir })
  const isState = (saved: unknown): saved is FilesystemState =>
    typeof saved === "object" && saved !== null && (saved as FilesystemState).baseDir === baseDir &&
    typeof (saved as FilesystemState).files === "object" && (saved as FilesystemState).files !== null

  const onAppend = (items: ReadonlyArray<Item>, state: FilesystemState, fs: FileReader) =>
    Effect.gen(function*() {
      const files: Record<string, TrackedFile> = { ...state.files }
      const readOptions = readOptionsOf(state)
      const out: Array<Item> = []
      let changed = false
      let query = ""
      for (const item of items) {
        const text = inputTextOf(item)
        if (!text) {
          out.push(item)
          continue
        }
        if (item.role === "user") query = text
        const refs = referencesIn(text)
        // `#config.json` and `#./config.json` are one file: tracked once.
        const seen = new Set(Object.values(files).map((f) => f.absolutePath))
        const fresh: Array<string> = []
        for (const ref of refs) {
          if (ref in files) continue
          const absolute = ref.startsWith("/") ? ref : resolve(state.baseDir, ref)
          if (seen.has(absolute)) continue
          seen.add(absolute)
          fresh.push(ref)
        }
        const tracked = yield* Effect.forEach(fresh, (ref) => track(fs, readOptions, ref, query), { concurrency: "unbounded" })
        fresh.forEach((ref, i) => void (files[ref] = tracked[i]!))
        changed = changed || fresh.length > 0
        out.push(
          refs.length === 0 ? item : {
            ...item,
            content: (item.content as ReadonlyArray<{ readonly text: string }>).map((p) => ({ type: "input_text", text: anchorLinks(p.text) }))
          }
        )
      }
      const entries = Object.entries(files)
      const refreshed = yield* Effect.forEach(entries, ([ref, tracked]) => refresh(fs, readOptions, ref, tracked, query), { concurrency: "unbounded" })
      entries.forEach(([ref], i) => {
        const next = refreshed[i]
        if (next === null || next === undefined) return
        files[ref] = next
        changed = true
      })
      return { items: out, state: { ...state, files }, changed }
    })

  return Effect.succeed({
    id: "filesystem",
    name: "Filesystem",
    slot: options.slot ?? Slot.RAG,
    scope: "thread",
    budget: "auto",
    // A large payload that changes a file at a time: anchored, with a delta on change.
    placement: "anchor",
    timeouts,
    lifecycle: {
      init: ({ storage, ctx }) =>
        readerOf(ctx) === undefined
          ? Effect.fail(
            new LayerOptionInvalid({
              code: "MISSING_ENVIRONMENT_ADAPTER",
              message: "filesystem(): this context has no file reader to read referenced files with",
              hint: "Pass environment: { fs: createLocalFsAdapter() } to the AgentHarness (or fs to the engine's filesystem())."
            })
          )
          : Effect.map(storage.get("state"), (saved) => ({ state: isState(saved) ? saved : empty() })),
      recall: ({ state, budget }) =>
        Effect.sync(() => {
          const files = Object.values(state?.files ?? {})
          if (files.length === 0) return { items: [], tokenCount: 0 }
          const blocks: Array<string> = []
          let used = 0
          for (const file of [...files].sort((a, b) => b.priority - a.priority)) {
            const block = blockOf(file, used, budget)
            if (block === null) continue
            blocks.push(block)
            used += estimateTokens(block)
          }
          if (blocks.length === 0) return { items: [], tokenCount: 0 }
          const content = `# Referenced Files\n\n${blocks.join("\n\n")}`
          return { items: [message(content, "developer")], tokenCount: estimateTokens(content) }
        }),
      renderDelta: ({ next, prev }) =>
        Effect.sync(() => {
          const before = blocksIn(prev)
          const after = blocksIn(next)
          const changed = [...after].filter(([path, block]) => before.get(path) !== block).map(([, block]) => block)
          const dropped = [...before.keys()].filter((path) => !after.has(path))
          if (changed.length === 0 && dropped.length === 0) return null
          return [
            ...(changed.length > 0 ? [changed.join("\n\n")] : []),
            ...(dropped.length > 0 ? [`No longer referenced: ${dropped.join(", ")}`] : [])
          ].join("\n\n")
        })
    },
    appendEffect: ({ ctx, items, state }) => {
      const fs = readerOf(ctx)
      if (fs === undefined || state === undefined) return Effect.succeed({ items })
      return withHookTimeout(onAppend(items, state, fs), "filesystem", "onItemAppend", timeoutOf(timeouts, "onItemAppend")).pipe(
        Effect.map(({ changed, items, state }) => ({
          items,
          state,
          ...(changed ? { rerender: { timing: "immediate", scope: "self" } as const } : {})
        })),
        Effect.catch((error) =>
          Effect.as(logWarning("context layer 'filesystem': onItemAppend failed", error), { items })
        )
      )
    }
  })
}
