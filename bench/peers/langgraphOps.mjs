/**
 * The work the LangGraph JS checkpoint savers do in the benchmark, in plain JavaScript
 * so a child process on another Node (for a saver whose native addon was built for
 * that Node's ABI) runs exactly what the main process runs. Every function times
 * itself and returns milliseconds, so a child's process boundary is not in the figure.
 *
 * The state saved is what a resume needs: the list of step outputs so far, in one
 * channel, as a LangGraph graph keeps a list of messages. After each step the saver
 * puts a checkpoint of that state (only the changed channel gets a new version), which
 * is the least a LangGraph graph writes per superstep (it also writes task writes).
 */
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint"

/** The output of step `i`: the same value the harness and `effect/workflow` steps return. */
export const stepOutput = (i) => ({ step: i, value: (i * 31 + 7) % 1_000_003 })

const now = () => performance.now()

const checkpointOf = (seq, values, versions) => ({
  ...emptyCheckpoint(),
  id: uuid6(seq),
  ts: new Date().toISOString(),
  channel_values: values,
  channel_versions: versions,
  versions_seen: {}
})

/** Puts one checkpoint of `values` after `parent` (a config), returning the new config. */
const putValues = (saver, parent, seq, values) => {
  const versions = {}
  for (const key of Object.keys(values)) versions[key] = seq + 1
  return saver.put(parent, checkpointOf(seq, values, versions), { source: "loop", step: seq, parents: {} }, versions)
}

const threadConfig = (threadId) => ({ configurable: { thread_id: threadId, checkpoint_ns: "" } })

/**
 * A run of `steps` steps on a fresh thread: each step computes its output and puts a
 * checkpoint of the outputs so far. Returns the run's milliseconds.
 */
export const runSteps = async (saver, threadId, steps) => {
  const start = now()
  let config = threadConfig(threadId)
  const results = []
  for (let i = 0; i < steps; i++) {
    results.push(stepOutput(i))
    config = await putValues(saver, config, i, { results })
  }
  return now() - start
}

/** Loads the latest checkpoint of a thread; returns milliseconds and how many results it holds. */
export const loadLatest = async (saver, threadId) => {
  const start = now()
  const tuple = await saver.getTuple(threadConfig(threadId))
  const ms = now() - start
  const results = tuple?.checkpoint.channel_values.results ?? tuple?.checkpoint.channel_values.messages
  return { ms, count: Array.isArray(results) ? results.length : -1 }
}

/** Fills a thread as `runSteps` would, untimed (the state for a restore). */
export const fillThread = async (saver, threadId, steps) => {
  await runSteps(saver, threadId, steps)
}

/**
 * Puts a checkpoint holding `items` as its message list after `parent`; returns the
 * milliseconds and the config to chain the next put on.
 */
export const saveItems = async (saver, threadId, seq, items, parent) => {
  const start = now()
  const config = await putValues(saver, parent ?? threadConfig(threadId), seq, { messages: items })
  return { ms: now() - start, config }
}
