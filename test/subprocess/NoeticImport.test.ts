import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { run as runCli } from "../../src/cli/Cli.ts"
import {
  AgentHarness,
  createCheckpointStore,
  createHomeStorage,
  createInMemoryStorage,
  createInMemorySubprocessAdapter,
  importNoeticData,
  runCode
} from "../../src/promise/index.ts"
import { decodeNoeticKey, encodeNoeticKey } from "../../src/NoeticImport.ts"
import { Cause, Effect, Exit } from "effect"
import { NodeServices } from "@effect/platform-node"
import { TestConsole } from "effect/testing"

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
})
const tempDir = (prefix: string) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

/**
 * Writes `key` as noetic's `createFileStorage` does, from its documented format: the
 * file `<encodeURIComponent(key) with % replaced by __>.json` holding the raw JSON value.
 */
const writeNoeticKey = (dir: string, key: string, value: unknown) => {
  const name = encodeURIComponent(key).replace(/%/g, "__")
  Fs.writeFileSync(Path.join(dir, `${name}.json`), JSON.stringify(value))
}

const executionId = "3f0c9a52-1d7e-4c1a-9e59-6a2b51f0c001"

/** A noetic checkpoint directory: one run of `pipeline` that crashed after two of its three steps. */
const writeNoeticDirectory = (dir: string) => {
  writeNoeticKey(dir, `execution:${executionId}:snapshot`, {
    schemaVersion: 2,
    executionId,
    threadId: "thread-9",
    frontier: [{ stepId: "pipeline", input: "brief" }, { stepId: "review", input: "B(A(brief))" }],
    layers: { scratchpad: { notes: ["kept"] } },
    cwd: { current: "/work", previous: null },
    askUser: [],
    itemLog: { items: [{ type: "message", role: "user", id: "u1", content: "brief" }] },
    capturedAt: "2026-11-30T10:00:00.000Z"
  })
  writeNoeticKey(dir, `execution:${executionId}:ledger:00000000`, {
    path: "/pipeline#0/draft#0",
    stepId: "draft",
    kind: "runCode",
    output: "A(brief)",
    completedAt: "2026-11-30T09:59:58.000Z"
  })
  writeNoeticKey(dir, `execution:${executionId}:ledger:00000001`, {
    path: "/pipeline#0/polish#0",
    stepId: "polish",
    kind: "runCode",
    output: "B(A(brief))",
    completedAt: "2026-11-30T09:59:59.000Z"
  })
  writeNoeticKey(dir, "localSubprocess:manifest:subprocess-77", {
    kind: "step",
    handleId: "subprocess-77",
    pid: 999999,
    pidStarttime: "Mon Nov 30 09:00:00 2026",
    stepId: "draft",
    executionId: "child-exec-1",
    serializedInput: { topic: "x" },
    overrides: { threadId: "thread-9", cwdInit: "/work/child" },
    startedAt: "2026-11-30T09:58:00.000Z"
  })
  writeNoeticKey(dir, "inMemorySubprocess:manifest:subprocess-88", {
    kind: "step",
    handleId: "subprocess-88",
    stepId: "double",
    executionId: "child-exec-2",
    serializedInput: 21,
    overrides: {},
    startedAt: "2026-11-30T09:58:30.000Z",
    reattachMode: "replay"
  })
  // noetic's auxiliary key (no reader in noetic-effect), and two unreadable records.
  writeNoeticKey(dir, `execution:${executionId}:frontier`, [])
  writeNoeticKey(dir, `execution:${executionId}:ledger:00000002`, { stepId: "review" })
  Fs.writeFileSync(Path.join(dir, `${encodeURIComponent("execution:broken:snapshot").replace(/%/g, "__")}.json`), "{not json")
  // An empty file (noetic reads it as no value) and a name that decodes to no key.
  Fs.writeFileSync(Path.join(dir, `${encodeURIComponent("execution:empty:snapshot").replace(/%/g, "__")}.json`), "")
  Fs.writeFileSync(Path.join(dir, "bad__ZZ.json"), "{}")
  // A half-written temp file of noetic's is not a record.
  Fs.writeFileSync(Path.join(dir, "execution__3Ax__3Asnapshot.json.tmp"), "{")
}

/** The same graph the noetic run was executing; each body counts its runs. */
const pipelineGraph = () => {
  const calls: Record<string, number> = { draft: 0, polish: 0, review: 0 }
  const count = (id: string, f: (s: string) => string) =>
    runCode(id, async (input: string) => {
      calls[id]!++
      return f(input)
    })
  const draft = count("draft", (s) => `A(${s})`)
  const polish = count("polish", (s) => `B(${s})`)
  const review = count("review", (s) => `C(${s})`)
  const graph = runCode("pipeline", async (input: string, ctx) => {
    const a = await ctx.run(draft, input)
    const b = await ctx.run(polish, a)
    return ctx.run(review, b)
  })
  return { calls, graph }
}

describe("import of noetic's on-disk data", () => {
  it("noetic's key encoding round-trips", () => {
    const key = "execution:1/2 x%:ledger:00000003"
    expect(encodeNoeticKey("execution:a:snapshot")).toBe("execution__3Aa__3Asnapshot")
    expect(decodeNoeticKey(encodeNoeticKey(key))).toBe(key)
  })

  it("imports snapshots, ledger entries and manifests, reports what it could not read, and resume replays", async () => {
    const source = tempDir("noetic-src-")
    writeNoeticDirectory(source)
    const storage = createInMemoryStorage()
    const subprocessStorage = createInMemoryStorage()
    const report = await importNoeticData(source, { storage, subprocessStorage })

    expect(report).toMatchObject({ snapshots: 1, ledgerEntries: 2, manifests: 2, executionIds: [executionId] })
    expect(report.skipped).toEqual([`execution:${executionId}:frontier`])
    expect(report.failures.map(({ key, kind }) => ({ key, kind }))).toHaveLength(4)
    expect(report.failures.map(({ key, kind }) => ({ key, kind }))).toEqual(expect.arrayContaining([
      { key: "execution:broken:snapshot", kind: "snapshot" },
      { key: "execution:empty:snapshot", kind: "snapshot" },
      { key: "bad__ZZ.json", kind: "file" },
      { key: `execution:${executionId}:ledger:00000002`, kind: "ledger" }
    ]))
    expect(report.failures.find((f) => f.kind === "ledger")!.message).toMatch(/path/)

    const checkpointStore = createCheckpointStore({ storage })
    const snapshot = await checkpointStore.load(executionId)
    expect(snapshot).toMatchObject({ executionId, threadId: "thread-9", layers: { scratchpad: { notes: ["kept"] } } })
    expect(await subprocessStorage.get("subprocess:manifest:subprocess-77")).toMatchObject({
      handleId: "subprocess-77",
      stepId: "draft",
      executionId: "child-exec-1",
      threadId: "thread-9",
      cwdInit: "/work/child",
      serializedInput: JSON.stringify({ topic: "x" }),
      pid: null
    })

    // An imported in-memory child is re-run from the module that exports its step.
    const adapter = createInMemorySubprocessAdapter({
      storage: subprocessStorage,
      registryEntry: Path.join(import.meta.dirname, "..", "fixtures", "subprocessSteps.ts")
    })
    try {
      const child = await adapter.reattach("subprocess-88")
      expect(child).toMatchObject({ id: "subprocess-88", metadata: { reattachMode: "replay", executionId: "child-exec-2" } })
      expect(await child!.await()).toBe(42)
    } finally {
      await adapter.close()
    }

    // Resume of the imported execution: draft and polish replay, only review runs.
    const { calls, graph } = pipelineGraph()
    const harness = new AgentHarness({
      name: "imported",
      params: {},
      agentGraph: graph,
      environment: { storage: { checkpointStore } }
    })
    try {
      const resumed = await harness.resume(executionId)
      expect(resumed).toEqual({ executionId, output: "C(B(A(brief)))" })
      expect(calls).toEqual({ draft: 0, polish: 0, review: 1 })
      const ctx = await harness.restore(executionId)
      expect(ctx!.items.map((item) => (item as { id: string }).id)).toEqual(["u1"])
    } finally {
      await harness.close()
    }
  })

  it("ids with '_' import from both of noetic's encodings (the hardened one writes '_' as '_u'), and resume replays", async () => {
    const snapshotOf = (id: string) => ({
      schemaVersion: 2,
      executionId: id,
      threadId: "t",
      frontier: [{ stepId: "pipeline", input: "brief" }],
      layers: {},
      cwd: { current: "/work", previous: null },
      askUser: [],
      itemLog: { items: [] },
      capturedAt: "2026-11-30T10:00:00.000Z"
    })
    const draftEntry = { path: "/pipeline#0/draft#0", stepId: "draft", kind: "runCode", output: "A(brief)" }
    const source = tempDir("noetic-src-")
    const write = (key: string, value: unknown, escaped: boolean) =>
      Fs.writeFileSync(Path.join(source, `${encodeNoeticKey(key, { escaped })}.json`), JSON.stringify(value))
    // "run_1" by the hardened encoding, "job_user" by the first one: "job_user" reads as
    // "jobser" escaped, and the record settles which it is.
    write("execution:run_1:snapshot", snapshotOf("run_1"), true)
    write("execution:run_1:ledger:00000000", draftEntry, true)
    write("execution:job_user:snapshot", snapshotOf("job_user"), false)
    write("execution:job_user:ledger:00000000", draftEntry, false)
    write("localSubprocess:manifest:child_user", {
      kind: "step",
      handleId: "child_user",
      stepId: "draft",
      executionId: "e",
      serializedInput: 1,
      overrides: {},
      startedAt: "2026-11-30T09:58:00.000Z"
    }, false)
    expect(encodeNoeticKey("execution:run_1:snapshot", { escaped: true })).toBe("execution__3Arun_u1__3Asnapshot")
    const storage = createInMemoryStorage()
    const subprocessStorage = createInMemoryStorage()
    const report = await importNoeticData(source, { storage, subprocessStorage })
    expect(report.failures).toEqual([])
    expect([...report.executionIds].sort()).toEqual(["job_user", "run_1"])
    expect(report).toMatchObject({ snapshots: 2, ledgerEntries: 2, manifests: 1 })
    expect(await subprocessStorage.get("subprocess:manifest:child_user")).toMatchObject({ handleId: "child_user" })
    for (const id of ["run_1", "job_user"]) {
      const { calls, graph } = pipelineGraph()
      const harness = new AgentHarness({
        name: "imported",
        params: {},
        agentGraph: graph,
        environment: { storage: { checkpointStore: createCheckpointStore({ storage }) } }
      })
      try {
        expect(await harness.resume(id)).toEqual({ executionId: id, output: "C(B(A(brief)))" })
        expect(calls).toEqual({ draft: 0, polish: 1, review: 1 })
      } finally {
        await harness.close()
      }
    }
  })

  it("the CLI command import-noetic writes into the home's storages and prints counts", async () => {
    const source = tempDir("noetic-src-")
    writeNoeticDirectory(source)
    const home = tempDir("noetic-home-")
    const output = await Effect.runPromise(
      Effect.gen(function*() {
        yield* runCli(["--home", home, "import-noetic", source])
        return (yield* TestConsole.logLines).map(String).join("\n")
      }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))
    )
    expect(output).toContain("1 snapshot")
    expect(output).toContain("2 ledger entries")
    expect(output).toContain("2 manifest")
    expect(output).toContain("execution:broken:snapshot")
    // The CLI imports into the home's default storage (SQLite).
    const homeStorage = createHomeStorage("checkpoints", { home })
    const store = createCheckpointStore({ storage: homeStorage })
    // A directory that cannot be listed is the user's error, with its message.
    const missing = await Effect.runPromise(
      Effect.exit(runCli(["--home", home, "import-noetic", Path.join(source, "nope")])).pipe(
        Effect.provide(TestConsole.layer),
        Effect.provide(NodeServices.layer)
      )
    )
    expect(Exit.isFailure(missing)).toBe(true)
    expect(String(Exit.isFailure(missing) ? Cause.squash(missing.cause) : "")).toContain("cannot list")
    // The listing's element shape changes with the facade's noetic form; the id is in it either way.
    const listed = await store.list()
    expect(listed).toHaveLength(1)
    expect(JSON.stringify(listed)).toContain(executionId)
    await homeStorage.close()
  })
})
