/**
 * What the inspector adds to the CLI's rows: `stopped` and `failed` children told
 * apart from `finished` by their persisted result, and an execution a child ran whose
 * result is a failure marked `failed` (unless something runs it).
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChildRow } from "../../src/cli/Children.ts"
import type { ExecutionRow } from "../../src/cli/Executions.ts"
import * as Views from "../../src/inspector/Views.ts"
import { MANIFEST_PREFIX } from "../../src/schema/SubprocessManifest.ts"

const execution = (executionId: string, status: ExecutionRow["status"]): ExecutionRow => ({
  executionId,
  status,
  stepsRecorded: 1,
  lastCheckpoint: "2026-01-01T00:00:00.000Z",
  threadId: null,
  resourceId: null,
  frontier: ["/job#0"],
  pendingAskUser: 0,
  lease: null
})

const child = (handleId: string, executionId: string, status: ChildRow["status"], result: unknown): ChildRow => ({
  handleId,
  status,
  adapter: "local",
  alive: status === "running",
  pid: 4242,
  stepId: "job",
  executionId,
  parentExecutionId: "parent",
  createdAt: "2026-01-01T00:00:00.000Z",
  ageMs: 1000,
  result
})

describe("the inspector's statuses", () => {
  it("children: finished told apart by outcome; executions their failed children ran read failed", () => {
    const stopped = Views.childView(child("h1", "e1", "finished", { _tag: "Failure", error: { _tag: "Stopped", message: "stopped" } }))
    const failed = Views.childView(child("h2", "e2", "finished", { _tag: "Failure", error: { _tag: "JobFailed", message: "no" } }))
    const succeeded = Views.childView(child("h3", "e3", "finished", { _tag: "Success", value: 1 }))
    const running = Views.childView(child("h4", "e4", "running", null))
    assert.deepStrictEqual([stopped.shown, failed.shown, succeeded.shown, running.shown], ["stopped", "failed", "finished", "running"])
    assert.deepStrictEqual([stopped.outcome, failed.outcome, succeeded.outcome, running.outcome], ["stopped", "failed", "succeeded", null])
    assert.strictEqual(stopped.key, `${MANIFEST_PREFIX}h1`)

    const rows = Views.withOutcomes(
      [execution("e1", "interrupted"), execution("e2", "finished"), execution("e3", "finished"), execution("e4", "interrupted"), execution("e5", "unreadable")],
      [stopped, failed, succeeded, running, Views.childView(child("h5", "e5", "finished", { _tag: "Failure", error: {} }))]
    )
    assert.deepStrictEqual(rows.map((row) => [row.executionId, row.status]), [
      ["e1", "failed"],
      ["e2", "failed"],
      ["e3", "finished"],
      ["e4", "running"],
      ["e5", "unreadable"]
    ])
  })

  it("the list's query: unknown values fall back to the defaults; limit is capped", () => {
    const fallback = Views.parseListQuery(new URLSearchParams("status=bogus&sort=nope&offset=-3&limit=100000"))
    assert.deepStrictEqual(fallback, { status: null, search: "", sort: "checkpoint", descending: true, offset: 0, limit: 500 })
    const given = Views.parseListQuery(new URLSearchParams("status=failed&q=%20AbC%20&sort=steps&dir=asc&offset=50&limit=10"))
    assert.deepStrictEqual(given, { status: "failed", search: "abc", sort: "steps", descending: false, offset: 50, limit: 10 })
  })
})
