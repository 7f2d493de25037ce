/**
 * Steps that run in their own OS process. A local child imports the module that
 * defines its step (the adapter's `registryEntry`), so this module only defines
 * steps: no top-level side effects.
 */
import { existsSync } from "node:fs"
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

/** A long-lived job: it works for `seconds`, or until the file `until` appears (at most two minutes). */
export const backgroundWorker = runCode({
  id: "background-worker",
  execute: async (job: { readonly name: string; readonly seconds?: number; readonly until?: string }) => {
    const startedAt = Date.now()
    const limit = job.until === undefined ? (job.seconds ?? 1) * 1000 : 120_000
    while (Date.now() - startedAt < limit && !(job.until !== undefined && existsSync(job.until))) await sleep(100)
    return { job: job.name, pid: process.pid, ranForMs: Date.now() - startedAt }
  }
})
