/**
 * Steps that run in their own OS process. A local child imports the module that
 * defines its step (the adapter's `registryEntry`), so this module only defines
 * steps: no top-level side effects.
 */
import { existsSync, writeFileSync } from "node:fs"
import { runCode } from "noetic-effect/promise"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** One sub-step, so the child's own step ledger has something to record. */
export const findPapers = runCode({
  id: "find-papers",
  execute: async (topic: string) => {
    await sleep(100)
    return [`${topic}: a survey`, `${topic}: a benchmark`, `${topic}: a negative result`]
  }
})

/** A child agent: where it ran (pid, cwd) is part of its answer. */
export const researchAgent = runCode({
  id: "research-agent",
  execute: async (topic: string, ctx) => {
    const papers = await ctx.harness.run(findPapers, topic, ctx)
    return { summary: `${papers.length} papers on ${topic}`, pid: process.pid, cwd: process.cwd() }
  }
})

/** What a background job is told. */
export interface JobSpec {
  readonly name: string
  /** How long the job works. */
  readonly seconds?: number
  /** Instead of `seconds`: work until this file appears (at most two minutes). */
  readonly until?: string
  /** A file the job writes when it is done, for a host that was not there to see it. */
  readonly doneFile?: string
}

/** A long-lived job: long enough to outlive a host crash. */
export const backgroundWorker = runCode({
  id: "background-worker",
  execute: async (job: JobSpec) => {
    const startedAt = Date.now()
    const limit = job.until === undefined ? (job.seconds ?? 1) * 1000 : 120_000
    while (Date.now() - startedAt < limit && !(job.until !== undefined && existsSync(job.until))) await sleep(100)
    const result = { job: job.name, pid: process.pid, ranForMs: Date.now() - startedAt }
    if (job.doneFile !== undefined) writeFileSync(job.doneFile, JSON.stringify(result))
    return result
  }
})
