/**
 * The inspector's routes on every backend: the state real runs left (test/cli/state.ts)
 * served over a real socket and read back through every view and action, with the
 * token, read-only and not-found rules.
 */
import { assert, it } from "@effect/vitest"
import { Effect, Option, type Scope } from "effect"
import { openStorages } from "../../src/cli/Storages.ts"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { runCode } from "../../src/harness/Step.ts"
import * as Inspector from "../../src/inspector/Inspector.ts"
import * as InMemorySubprocessAdapter from "../../src/layers/InMemorySubprocessAdapter.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { keyPrefix } from "../../src/services/DurableOutboundQueue.ts"
import { type Backend, withRecordedState } from "../cli/backends.ts"

/** The flags of the CLI, from a backend's arguments. */
const flagsOf = (args: ReadonlyArray<string>) => {
  const value = (name: string) => {
    const i = args.indexOf(name)
    return i < 0 ? Option.none<string>() : Option.some(args[i + 1]!)
  }
  return { home: value("--home"), pg: value("--pg"), table: value("--table") }
}

/** An inspector serving `b` on a free port, with its token. */
export const serveOn = (b: Backend, readOnly = false) =>
  Effect.gen(function*() {
    const storages = yield* openStorages(flagsOf(b.args))
    const served = yield* Inspector.serve({ storages, port: 0, readOnly, stopGraceMs: 1_000 })
    const get = (path: string, init: RequestInit = {}) =>
      Effect.promise(() => fetch(`${served.base}${path}`, { redirect: "manual", ...init }))
    const authed = (path: string, init: RequestInit = {}) =>
      get(path, { ...init, headers: { authorization: `Bearer ${served.token}`, ...init.headers } })
    const reply = (response: Response) =>
      Effect.promise(async (): Promise<{ readonly status: number; readonly body: any }> => ({ status: response.status, body: await response.json() }))
    const api = (path: string) => Effect.flatMap(authed(path), reply)
    const post = (path: string, headers: Record<string, string> = { "x-noetic-inspector": "1" }) =>
      Effect.flatMap(authed(path, { method: "POST", headers }), reply)
    return { ...served, get, authed, api, post }
  })

/** Reads server-sent events from `response`, one parsed `data:` message at a time. */
export const events = (response: Response) => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffered = ""
  const next: Effect.Effect<{ status: number; body: any }> = Effect.promise(async () => {
    for (;;) {
      const end = buffered.indexOf("\n\n")
      if (end >= 0) {
        const block = buffered.slice(0, end)
        buffered = buffered.slice(end + 2)
        const data = block.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n")
        if (data !== "") return JSON.parse(data)
        continue
      }
      const chunk = await reader.read()
      if (chunk.done) throw new Error("the event stream ended")
      buffered += decoder.decode(chunk.value, { stream: true })
    }
  })
  return { next, close: Effect.promise(() => reader.cancel()) }
}

/** Registers the inspector's route tests; `backend` builds a fresh one per test. */
export const suite = (backend: Effect.Effect<Backend, unknown, Scope.Scope>) => {
  const withState = withRecordedState(backend)

  it.live("every request needs the token: 401 with an empty body, then a cookie after the first visit", () =>
    withState((b) =>
      Effect.gen(function*() {
        const inspector = yield* serveOn(b)
        for (const path of ["/", "/executions", "/api/executions", "/assets/app.js", "/api/events?view=queues", "/nope"]) {
          const none = yield* inspector.get(path)
          assert.strictEqual(none.status, 401, path)
          assert.strictEqual(yield* Effect.promise(() => none.text()), "", path)
          const wrong = yield* inspector.get(`${path}${path.includes("?") ? "&" : "?"}token=${inspector.token.slice(1)}x`)
          assert.strictEqual(wrong.status, 401, path)
        }
        const post = yield* inspector.get("/api/executions/done/clear", { method: "POST", headers: { "x-noetic-inspector": "1" } })
        assert.strictEqual(post.status, 401)

        // The printed address: a redirect that drops the token and sets the cookie.
        const first = yield* inspector.get(`/?token=${inspector.token}`)
        assert.strictEqual(first.status, 303)
        assert.strictEqual(first.headers.get("location"), "/")
        const cookie = first.headers.get("set-cookie")!
        assert.include(cookie, `${Inspector.COOKIE}=${inspector.token}`)
        assert.include(cookie, "HttpOnly")
        assert.include(cookie, "SameSite=Strict")
        const page = yield* inspector.get("/executions", { headers: { cookie: cookie.split(";")[0]! } })
        assert.strictEqual(page.status, 200)
        const html = yield* Effect.promise(() => page.text())
        assert.include(html, "/assets/app.js")
        assert.notInclude(html, "https://")
        const script = yield* inspector.get("/assets/app.js", { headers: { cookie: cookie.split(";")[0]! } })
        assert.strictEqual(script.status, 200)
        assert.include(script.headers.get("content-type")!, "javascript")
        assert.include(yield* Effect.promise(() => script.text()), "EventSource")
      })
    ), { timeout: 60_000 })

  it.live("executions: statuses, filter, search, sort and pages; detail with ledger marks, snapshot and outputs; 404s", () =>
    withState((b) =>
      Effect.gen(function*() {
        const inspector = yield* serveOn(b)
        const list = yield* inspector.api("/api/executions")
        assert.strictEqual(list.status, 200)
        assert.deepStrictEqual(list.body.rows.map((row: any) => [row.executionId, row.status, row.stepsRecorded]), [
          ["evicted", "finished", 3],
          ["changed", "finished", 4],
          ["crashed", "failed", 1],
          ["done", "finished", 6]
        ])
        assert.strictEqual(list.body.rows.find((row: any) => row.executionId === "done").threadId, "thread-1")
        assert.deepStrictEqual(list.body.counts, { finished: 3, failed: 1 })
        // Its run failed in its host (a defect): the harness left a failure mark, shown with the row.
        const failed = yield* inspector.api("/api/executions?status=failed")
        assert.deepStrictEqual(failed.body.rows.map((row: any) => [row.executionId, row.problem]), [["crashed", "boom"]])
        // Without the mark, what the run left reads as a run cut short.
        yield* b.checkpoints.delete("execution:crashed:failed")

        const interrupted = yield* inspector.api("/api/executions?status=interrupted")
        assert.deepStrictEqual(interrupted.body.rows.map((row: any) => row.executionId), ["crashed"])
        assert.strictEqual(interrupted.body.total, 1)
        assert.strictEqual(interrupted.body.all, 4)
        const search = yield* inspector.api("/api/executions?q=CH")
        assert.deepStrictEqual(search.body.rows.map((row: any) => row.executionId).sort(), ["changed"])
        const byId = yield* inspector.api("/api/executions?sort=id&dir=asc")
        assert.deepStrictEqual(byId.body.rows.map((row: any) => row.executionId), ["changed", "crashed", "done", "evicted"])
        const second = yield* inspector.api("/api/executions?sort=id&dir=asc&offset=1&limit=2")
        assert.deepStrictEqual(second.body.rows.map((row: any) => row.executionId), ["crashed", "done"])
        assert.strictEqual(second.body.total, 4)

        // A damaged snapshot: listed as unreadable, its page shows the key beside the ledger.
        yield* b.checkpoints.set("checkpoints:old-format", { version: 1, executionId: "old-format" })
        yield* b.checkpoints.set("execution:old-format:snapshot", { schemaVersion: 1, executionId: "old-format" })
        const withBad = yield* inspector.api("/api/executions?q=old")
        assert.strictEqual(withBad.body.rows[0].status, "unreadable")
        assert.include(withBad.body.rows[0].problem, "schemaVersion")
        const bad = yield* inspector.api("/api/executions/old-format")
        assert.strictEqual(bad.status, 200)
        assert.strictEqual(bad.body.snapshotProblem.key, "execution:old-format:snapshot")
        assert.isNull(bad.body.snapshot)
        assert.deepStrictEqual(bad.body.ledger.records, [])

        const done = yield* inspector.api("/api/executions/done")
        assert.strictEqual(done.status, 200)
        assert.strictEqual(done.body.execution.status, "finished")
        assert.strictEqual(done.body.snapshot.threadId, "thread-1")
        assert.deepStrictEqual(done.body.snapshot.frontier.map((entry: any) => entry.path), ["/pipeline#0"])
        const records = done.body.ledger.records
        assert.strictEqual(records.length, 6)
        assert.isTrue(records.every((record: any) => record.state === "live" && typeof record.at === "string"))
        const fetched = records.find((record: any) => record.stepId === "fetch")
        assert.strictEqual(fetched.path, "/pipeline#0/fetch#0")
        const output = yield* inspector.api(`/api/executions/done/outputs/${fetched.seq}`)
        assert.deepStrictEqual(output.body, { seq: fetched.seq, undefined: false, value: { url: "https://example.com", body: "x".repeat(100) } })
        assert.strictEqual((yield* inspector.api("/api/executions/done/outputs/999")).status, 404)

        // A step that changed identity at a recorded path: a tombstone, the old record discarded, the path diverged.
        const changed = (yield* inspector.api("/api/executions/changed")).body.ledger
        const tombstone = changed.records.find((record: any) => record.record === "tombstone")
        assert.isDefined(tombstone)
        assert.isTrue(tombstone.diverged)
        assert.isTrue(changed.records.some((record: any) => record.state === "discarded" && record.by === tombstone.seq))
        // Retention evicted records: counted as missing.
        const evicted = (yield* inspector.api("/api/executions/evicted")).body.ledger
        assert.isAbove(evicted.missing, 0)

        const unknown = yield* inspector.api("/api/executions/nope")
        assert.strictEqual(unknown.status, 404)
        assert.include(unknown.body.error, "unknown execution nope")
        assert.strictEqual((yield* inspector.authed("/executions/nope")).status, 404)
        assert.strictEqual((yield* inspector.authed("/executions/done")).status, 200)
        assert.strictEqual((yield* inspector.authed("/no/such/page")).status, 404)
        assert.strictEqual((yield* inspector.authed("/children/nope")).status, 404)
        assert.strictEqual((yield* inspector.api("/api/children/nope")).status, 404)
      })
    ), { timeout: 60_000 })

  it.live("queues: head, acked, depth, bytes and a depth history", () =>
    withState((b) =>
      Effect.gen(function*() {
        const inspector = yield* serveOn(b)
        const { body } = yield* inspector.api("/api/queues")
        const queue = body.queues.find((q: any) => q.socketId === "demo-queue")
        assert.include(queue, { headSeq: 3, ackedSeq: 1, pendingFrames: 2 })
        assert.isAbove(queue.pendingBytes, 0)
        assert.deepStrictEqual(queue.history, [2])
      })
    ), { timeout: 60_000 })

  it.live("damaged records: a ledger record and a queue record shown as unreadable with their keys, the rest intact", () =>
    withState((b) =>
      Effect.gen(function*() {
        const inspector = yield* serveOn(b)
        const ledgerKeys = (yield* b.checkpoints.list("execution:done:ledger:")).filter((key) => !key.endsWith(":stats"))
        const damagedKey = ledgerKeys[1]!
        yield* b.checkpoints.set(damagedKey, { torn: true })
        const done = (yield* inspector.api("/api/executions/done")).body
        const corrupt = done.ledger.records.filter((record: any) => record.state === "corrupt")
        assert.deepStrictEqual(corrupt.map((record: any) => record.key), [damagedKey])
        assert.strictEqual(done.ledger.records.filter((record: any) => record.state === "live").length, 5)
        assert.strictEqual(done.snapshot.threadId, "thread-1")

        const recordKeys = (yield* b.checkpoints.list(keyPrefix("demo-queue"))).filter((key) => !key.endsWith(":meta"))
        yield* b.checkpoints.set(recordKeys[recordKeys.length - 1]!, { torn: true })
        const queue = (yield* inspector.api("/api/queues")).body.queues.find((q: any) => q.socketId === "demo-queue")
        assert.isAbove(queue.damaged.length, 0)
        assert.strictEqual(queue.headSeq, 3)
        assert.strictEqual((yield* inspector.api("/api/executions")).body.rows.length, 4)
      })
    ), { timeout: 60_000 })

  it.live("live: the event stream sends a view again when it changes", () =>
    withState((b) =>
      Effect.gen(function*() {
        const inspector = yield* serveOn(b)
        const response = yield* inspector.authed("/api/events?view=executions&status=finished")
        assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
        const stream = events(response)
        const first = yield* stream.next
        assert.deepStrictEqual(first.body.rows.map((row: any) => row.executionId), ["evicted", "changed", "done"])
        const store = yield* CheckpointStore.makeWith(b.checkpoints)
        const harness = yield* AgentHarness.make({ name: "later", agentGraph: runCode("later", () => Effect.succeed(1)) }).pipe(
          Effect.provideService(CheckpointStore.CheckpointStore, store)
        )
        yield* harness.execute(undefined, { executionId: "later" })
        const second = yield* stream.next
        assert.deepStrictEqual(second.body.rows.map((row: any) => row.executionId), ["later", "evicted", "changed", "done"])
        yield* stream.close
        assert.strictEqual((yield* inspector.authed("/api/events?view=bogus")).status, 400)
      })
    ), { timeout: 60_000 })

  it.live("actions: clear and stop behind the page's header; 403 read-only; 404 unknown", () =>
    withState((b) =>
      Effect.gen(function*() {
        // A host whose scope closes while its in-process child runs: the manifest stays.
        yield* Effect.scoped(Effect.gen(function*() {
          const adapter = yield* InMemorySubprocessAdapter.make({ storage: b.subprocess })
          const store = yield* CheckpointStore.makeWith(b.checkpoints)
          const harness = yield* AgentHarness.make({ name: "host", subprocess: adapter }).pipe(
            Effect.provideService(CheckpointStore.CheckpointStore, store)
          )
          const parent = yield* harness.createContext({ id: "parent-1" })
          yield* harness.detachedSpawn(runCode("forever", () => Effect.never), "in", parent, { handleId: "child-1" })
        }))
        const readOnly = yield* serveOn(b, true)
        assert.strictEqual((yield* readOnly.post("/api/executions/done/clear")).status, 403)
        assert.strictEqual((yield* readOnly.post("/api/children/child-1/stop")).status, 403)
        assert.isTrue((yield* readOnly.api("/api/executions/done")).status === 200)

        const inspector = yield* serveOn(b)
        const children = (yield* inspector.api("/api/children")).body.children
        assert.strictEqual(children.length, 1)
        assert.include(children[0], { handleId: "child-1", status: "in-process", shown: "in-process", parentExecutionId: "parent-1", stepId: "forever" })
        const parent = (yield* inspector.api("/api/executions/parent-1")).body
        assert.deepStrictEqual(parent.children.map((child: any) => child.handleId), ["child-1"])
        assert.strictEqual((yield* inspector.api("/api/children/child-1")).body.handleId, "child-1")

        // Without the page's header (another origin's form), refused.
        assert.strictEqual((yield* inspector.post("/api/executions/done/clear", {})).status, 403)
        assert.strictEqual((yield* inspector.post("/api/executions/nope/clear")).status, 404)
        assert.strictEqual((yield* inspector.post("/api/children/nope/stop")).status, 404)
        const cleared = yield* inspector.post("/api/executions/done/clear")
        assert.deepStrictEqual(cleared, { status: 200, body: { cleared: "done" } })
        assert.strictEqual((yield* inspector.api("/api/executions/done")).status, 404)
        const stopped = yield* inspector.post("/api/children/child-1/stop")
        assert.strictEqual(stopped.status, 200)
        assert.strictEqual(stopped.body.action, "manifest-removed")
        assert.deepStrictEqual((yield* inspector.api("/api/children")).body.children, [])
      })
    ), { timeout: 60_000 })
}
