/**
 * The noetic-effect command line: an operator's view of every execution, child and
 * queue recorded under a home directory or in a PostgreSQL table, and the repairs
 * (clear, stop) an operator needs after a crash.
 *
 * Every command reads `--home` (default `$NOETIC_HOME`, else `~/.noetic`) or
 * `--pg <url> [--table]`, prints a table by default and one JSON document with
 * `--json`, and on bad input exits non-zero with one line on stderr.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Argument from "effect/cli/Argument"
import * as CliError from "effect/cli/CliError"
import * as CliOutput from "effect/cli/CliOutput"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Readline from "node:readline"
import * as PostgresStorage from "../layers/PostgresStorage.ts"
import { layerCheckpointStorage, makeSubprocessStorage, roots } from "../NoeticHome.ts"
import { DEFAULT_MAX_DEPTH, DEFAULT_MAX_FILE_BYTES, importNoeticDirectory } from "../NoeticImport.ts"
import { queueSocketId } from "../schema/SubprocessManifest.ts"
import { StorageAdapter, type StorageAdapterShape } from "../services/StorageAdapter.ts"
import * as Children from "./Children.ts"
import * as Executions from "./Executions.ts"
import * as Queues from "./Queues.ts"
import * as ReadModel from "./ReadModel.ts"
import * as Render from "./Render.ts"
import * as Serve from "./Serve.ts"
import * as Inspector from "../inspector/Inspector.ts"
import { CliFailure, type CliStorages, firstLine, openStorages } from "./Storages.ts"

/** The version the CLI reports. */
export const VERSION = "0.1.0"

const noetic = Command.make("noetic-effect").pipe(
  Command.withSharedFlags({
    home: Flag.String("home").pipe(
      Flag.withDescription("State directory (default $NOETIC_HOME, else ~/.noetic)"),
      Flag.optional
    ),
    pg: Flag.String("pg").pipe(
      Flag.withDescription("Read the state from PostgreSQL at this URL instead of the home directory"),
      Flag.optional
    ),
    table: Flag.String("table").pipe(
      Flag.withDescription(`Postgres table, with --pg (default ${PostgresStorage.DEFAULT_TABLE})`),
      Flag.optional
    )
  }),
  Command.withDescription("See and repair the durable state of noetic-effect: executions, children and queues")
)

/** Runs `f` on the storages the shared flags select, closing them afterwards. */
const withStorages = <A, E, R>(f: (storages: CliStorages) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const flags = yield* noetic
    return yield* Effect.scoped(Effect.flatMap(openStorages(flags), f))
  })

const required = (storage: Option.Option<StorageAdapterShape>): StorageAdapterShape | undefined =>
  Option.getOrUndefined(storage)

const json = Flag.Boolean("json").pipe(Flag.withDescription("Print one JSON document"), Flag.withDefault(false))

/** Asks a yes/no question on stderr and reads the answer from stdin; end of input is "no". */
const confirm = (question: string): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    process.stderr.write(`${Render.escape(question)} [y/N] `)
    const lines = Readline.createInterface({ input: process.stdin })
    let answered = false
    lines.once("line", (line) => {
      answered = true
      lines.close()
      resume(Effect.succeed(/^y(es)?$/i.test(line.trim())))
    })
    lines.once("close", () => {
      if (!answered) resume(Effect.succeed(false))
    })
    return Effect.sync(() => lines.close())
  })

const notConfirmed = new CliFailure({ message: "not confirmed; nothing was changed (pass --yes to skip the question)" })

// -----------------------------------------------------------------------------
// executions
// -----------------------------------------------------------------------------

const executionId = Argument.String("execution-id").pipe(Argument.withDescription("The execution id"))

const executionRows = (storages: CliStorages, now: number, only?: string) =>
  Render.withProgress((progress) => ReadModel.executionRows(storages, now, progress, only))

const statusFlag = Flag.Literals("status", Executions.EXECUTION_STATUSES as ReadonlyArray<Executions.ExecutionStatus>).pipe(
  Flag.withDescription("Only executions with this status"),
  Flag.optional
)

const executionsList = Command.make(
  "list",
  {
    json,
    status: statusFlag,
    since: Flag.String("since").pipe(
      Flag.withDescription("Only executions checkpointed since then: a duration back from now (2h, 7d) or an ISO date"),
      Flag.optional
    )
  },
  ({ json, since, status }) =>
    withStorages((storages) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const from = Option.isSome(since) ? yield* Render.parseSince(since.value, now) : undefined
        const rows = (yield* executionRows(storages, now)).filter((row) =>
          (Option.isNone(status) || row.status === status.value) &&
          (from === undefined || (row.lastCheckpoint !== null && Date.parse(row.lastCheckpoint) >= from))
        )
        if (json) return yield* Render.printJson({ source: storages.source, executions: rows })
        if (rows.length === 0) return yield* Render.say`no recorded executions under ${storages.source}`
        yield* Console.log(Render.table(
          ["EXECUTION", "STATUS", "STEPS", "LAST CHECKPOINT", "THREAD"],
          rows.map((row) => [
            row.executionId,
            row.status,
            String(row.stepsRecorded),
            row.lastCheckpoint ?? "-",
            row.threadId ?? "-"
          ])
        ))
      })
    )
).pipe(Command.withDescription("List executions: status, steps recorded, last checkpoint, thread"),
  Command.withAlias("ls"),
  Command.withExamples([
    { command: "noetic-effect executions list --status interrupted", description: "What a crash left to resume" },
    { command: "noetic-effect executions list --since 2h --json", description: "Recent executions, for a script" }
  ])
)

const label = (name: string, value: string) => `${name.padEnd(11)}${value}`

/** The rows of the ledger tree: each path under its parent, in the order its subtree first recorded. */
const ledgerTreeRows = (records: ReadonlyArray<Executions.LedgerRecordView>): Array<Array<string>> => {
  interface Node {
    readonly segment: string
    readonly children: Map<string, Node>
    readonly records: Array<Executions.LedgerRecordView>
    first: number
  }
  const root: Node = { segment: "", children: new Map(), records: [], first: Infinity }
  for (const record of records) {
    const segments = record.path.split(/(?=[/[])/).filter((segment) => segment !== "")
    let node = root
    node.first = Math.min(node.first, record.seq)
    for (const segment of segments) {
      let child = node.children.get(segment)
      if (child === undefined) {
        child = { segment, children: new Map(), records: [], first: Infinity }
        node.children.set(segment, child)
      }
      child.first = Math.min(child.first, record.seq)
      node = child
    }
    node.records.push(record)
  }
  const rows: Array<Array<string>> = []
  const note = (record: Executions.LedgerRecordView) => {
    switch (record.state) {
      case "live":
        return ""
      case "superseded":
        return `superseded by seq ${record.by}`
      case "discarded":
        return `discarded by tombstone seq ${record.by}`
      case "tombstone":
        return "TOMBSTONE: discards this path and below"
      case "corrupt":
        return "CORRUPT record, skipped on resume"
    }
  }
  const visit = (node: Node, depth: number) => {
    const name = `${"  ".repeat(depth)}${node.segment}`
    if (node.records.length === 0) rows.push([name, "", "", "", "", "", ""])
    for (const record of node.records) {
      rows.push([
        name,
        record.kind ?? (record.record === "tombstone" ? "-" : "?"),
        record.stepId ?? "-",
        record.outputBytes === null ? "-" : Render.bytes(record.outputBytes),
        record.at ?? "-",
        String(record.seq),
        note(record)
      ])
    }
    for (const child of [...node.children.values()].sort((a, b) => a.first - b.first)) visit(child, depth + 1)
  }
  for (const child of [...root.children.values()].sort((a, b) => a.first - b.first)) visit(child, 0)
  // Records whose path could not be read (corrupt) sit at the end.
  return rows
}

const executionsShow = Command.make(
  "show",
  {
    executionId,
    json,
    output: Flag.String("output").pipe(
      Flag.withDescription("Print the recorded output of the step at this ledger path (e.g. /root#0/fetch#0)"),
      Flag.optional
    )
  },
  ({ executionId, json, output }) =>
    withStorages((storages) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const detail = yield* Render.withProgress((progress) => ReadModel.executionDetail(storages, executionId, now, progress))
        if (Option.isNone(detail)) {
          return yield* new CliFailure({ message: `unknown execution ${executionId} under ${storages.source}` })
        }
        const { children: spawned, ledger: view, outputs, snapshot, snapshotProblem } = detail.value
        if (snapshotProblem !== null) return yield* Effect.fail(snapshotProblem.error)
        const row = detail.value.row ?? undefined

        if (Option.isSome(output)) {
          const path = output.value
          const atPath = view.records.filter((record) => record.path === path)
          const live = atPath.find((record) => record.state === "live")
          if (live === undefined) {
            const last = atPath[atPath.length - 1]
            return yield* new CliFailure({
              message: last === undefined
                ? `execution ${executionId} has no ledger record at ${path}`
                : `execution ${executionId} has no live output at ${path}: its last record (seq ${last.seq}) is ${last.state}${
                  last.by === null ? "" : ` by seq ${last.by}`
                }`
            })
          }
          const recorded = outputs.get(live.seq)!
          if (json) {
            return yield* Render.printJson({
              executionId,
              path,
              seq: live.seq,
              stepId: live.stepId,
              kind: live.kind,
              at: live.at,
              undefined: recorded.undefined,
              output: recorded.undefined ? null : recorded.value
            })
          }
          return yield* Console.log(recorded.undefined ? "undefined" : Render.jsonText(recorded.value))
        }

        if (json) return yield* Render.printJson({ execution: row ?? null, snapshot, ledger: view, children: spawned })

        const counts = { live: 0, superseded: 0, discarded: 0, tombstone: 0, corrupt: 0 }
        for (const record of view.records) counts[record.state]++
        const lines: Array<string> = [label("execution", executionId), label("status", row?.status ?? "-")]
        if (row?.status === "failed" && row.problem !== undefined) lines.push(label("failure", row.problem))
        if (snapshot === null) {
          lines.push(label("snapshot", "none recorded"))
        } else {
          lines.push(
            label("thread", snapshot.threadId ?? "-"),
            label("resource", snapshot.resourceId ?? "-"),
            label("captured", snapshot.capturedAt),
            label("items", String(snapshot.items)),
            label("cwd", snapshot.cwd?.current ?? "-"),
            label("layers", snapshot.layers.join(", ") || "-"),
            label(
              "frontier",
              snapshot.frontier.length === 0
                ? "(idle)"
                : snapshot.frontier.map((entry) => entry.path).join(" > ") +
                  (row?.status === "finished" ? "  (completed after this snapshot: its output is recorded)" : "")
            ),
            label("ask-user", `${snapshot.askUser.length} pending${snapshot.askUser.map((p) => ` ${p.id}`).join("")}`)
          )
        }
        if (row?.runningIn !== undefined) {
          lines.push(label("running in", `child ${row.runningIn.handleId} (pid ${row.runningIn.pid ?? "not yet recorded"})`))
        }
        if (row?.lease !== null && row?.lease !== undefined) {
          lines.push(label(
            "lease",
            `${row.lease.owner} until ${Render.iso(row.lease.expiresAt)} (${row.lease.live ? "live" : "expired or released"})`
          ))
        }
        if (spawned.length > 0) {
          lines.push(label("children", spawned.map((child) => `${child.handleId} (${child.status})`).join(", ")))
        }
        lines.push(label(
          "ledger",
          `${view.records.length} records: ${counts.live} live, ${counts.superseded} superseded, ${counts.discarded} discarded, ${counts.tombstone} tombstones` +
            (counts.corrupt > 0 ? `, ${counts.corrupt} CORRUPT` : "") +
            (view.missing > 0
              ? `; ${view.missing} EVICTED or lost (seqs below ${view.lowestSeq} are gone; those steps re-run on resume)`
              : "") +
            (view.recordFailed > 0 ? `; ${view.recordFailed} record writes FAILED (those steps re-run on resume)` : "")
        ))
        yield* Render.lines(...lines)
        if (view.records.length > 0) {
          yield* Console.log("")
          yield* Console.log(Render.table(["PATH", "KIND", "STEP", "OUTPUT", "TIME", "SEQ", "NOTE"], ledgerTreeRows(view.records)))
        }
      })
    )
).pipe(Command.withDescription("Show an execution: its snapshot and its ledger as a tree of step paths"),
  Command.withExamples([
    { command: "noetic-effect executions show <id>", description: "Snapshot, then every ledger record by path" },
    { command: "noetic-effect executions show <id> --output /root#0/fetch#0", description: "One recorded output" }
  ])
)

const executionsClear = Command.make(
  "clear",
  {
    executionId: Argument.String("execution-id").pipe(
      Argument.withDescription("The execution to clear"),
      Argument.optional
    ),
    finished: Flag.Boolean("finished").pipe(
      Flag.withDescription("Clear every finished execution (with --older-than: only those last checkpointed before then)"),
      Flag.withDefault(false)
    ),
    olderThan: Flag.String("older-than").pipe(
      Flag.withDescription("With --finished: only executions whose last checkpoint is older than this (7d, 12h)"),
      Flag.optional
    ),
    yes: Flag.Boolean("yes").pipe(Flag.withAlias("y"), Flag.withDescription("Do not ask for confirmation"), Flag.withDefault(false)),
    force: Flag.Boolean("force").pipe(
      Flag.withDescription("Clear an execution even while its lease is held (a host is running it)"),
      Flag.withDefault(false)
    ),
    json
  },
  ({ executionId, finished, force, json, olderThan, yes }) =>
    withStorages((storages) =>
      Effect.gen(function*() {
        if (Option.isSome(executionId) && (finished || Option.isSome(olderThan))) {
          return yield* new CliFailure({ message: "name one execution id, or pass --finished [--older-than <duration>], not both" })
        }
        if (Option.isNone(executionId) && !finished) {
          return yield* new CliFailure({
            message: Option.isSome(olderThan)
              ? "--older-than needs --finished"
              : "name an execution id, or pass --finished [--older-than <duration>]"
          })
        }
        const storage = required(storages.checkpoints)
        const now = yield* Clock.currentTimeMillis
        let targets: ReadonlyArray<Executions.ExecutionRow>
        if (Option.isSome(executionId)) {
          const id = executionId.value
          if (storage === undefined || !(yield* Executions.isRecorded(storage, id))) {
            return yield* new CliFailure({ message: `unknown execution ${id} under ${storages.source}` })
          }
          const [row] = yield* executionRows(storages, now, id)
          if (row !== undefined && row.status === "running" && !force) {
            const where = row.runningIn !== undefined
              ? `in child ${row.runningIn.handleId} (pid ${row.runningIn.pid ?? "not yet recorded"})`
              : `(lease held by ${row.lease?.owner} until ${Render.iso(row.lease?.expiresAt)})`
            return yield* new CliFailure({ message: `execution ${id} is running ${where}; pass --force to clear it anyway` })
          }
          targets = [row ?? emptyRow(id)]
        } else {
          const before = Option.isSome(olderThan) ? now - (yield* Render.parseDuration("--older-than", olderThan.value)) : undefined
          targets = (yield* executionRows(storages, now)).filter((row) =>
            row.status === "finished" &&
            (before === undefined || (row.lastCheckpoint !== null && Date.parse(row.lastCheckpoint) < before))
          )
        }
        if (targets.length === 0 || storage === undefined) {
          if (json) return yield* Render.printJson({ cleared: [] })
          return yield* Console.log("no execution matches; nothing was cleared")
        }
        if (!yes) {
          const question = targets.length === 1
            ? `Clear execution ${targets[0]!.executionId} (${targets[0]!.status}, ${targets[0]!.stepsRecorded} ledger records)?`
            : `Clear ${targets.length} finished executions?`
          if (!(yield* confirm(question))) return yield* notConfirmed
        }
        yield* Render.withProgress((progress) =>
          Effect.forEach(targets, (row, i) => {
            progress.update("clearing", i, targets.length)
            return Executions.clearExecution(storage, row.executionId)
          }, { discard: true })
        )
        const cleared = targets.map((row) => row.executionId)
        if (json) return yield* Render.printJson({ cleared })
        yield* (cleared.length === 1
          ? Render.say`cleared ${cleared[0]}: snapshot and step ledger`
          : Render.say`cleared ${cleared.length} executions: ${cleared.join(", ")}`)
      })
    )
).pipe(Command.withDescription("Discard executions: snapshot, step ledger and in-process child agents' snapshots"),
  Command.withExamples([
    { command: "noetic-effect executions clear <id>", description: "Asks first" },
    { command: "noetic-effect executions clear --finished --older-than 7d --yes", description: "Housekeeping, unattended" }
  ])
)

const emptyRow = (executionId: string): Executions.ExecutionRow => ({
  executionId,
  status: "empty",
  stepsRecorded: 0,
  lastCheckpoint: null,
  threadId: null,
  resourceId: null,
  frontier: [],
  pendingAskUser: 0,
  lease: null
})

const executions = Command.make("executions").pipe(
  Command.withDescription("Recorded executions: list, show, clear"),
  Command.withSubcommands([executionsList, executionsShow, executionsClear])
)

// -----------------------------------------------------------------------------
// children
// -----------------------------------------------------------------------------

const handleId = Argument.String("handle-id").pipe(Argument.withDescription("The child's handle id"))

const resultSummary = (result: unknown): string => {
  if (result === null || typeof result !== "object") return "-"
  const outcome = result as { readonly _tag?: unknown; readonly value?: unknown; readonly error?: unknown }
  if (outcome._tag === "Success") {
    const text = JSON.stringify(outcome.value) ?? "undefined"
    return `ok ${text.length > 48 ? `${text.slice(0, 45)}...` : text}`
  }
  const error = outcome.error as { readonly _tag?: unknown; readonly message?: unknown } | undefined
  return `${String(error?._tag ?? "Failure")}: ${String(error?.message ?? "")}`
}

const childrenList = Command.make("list", { json }, ({ json }) =>
  withStorages((storages) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* Option.match(storages.subprocess, {
        onNone: () => Effect.succeed<ReadonlyArray<Children.ChildRow>>([]),
        onSome: (storage) => Render.withProgress((progress) => Children.listChildren(storage, progress, now))
      })
      if (json) return yield* Render.printJson({ source: storages.source, children: rows })
      if (rows.length === 0) return yield* Render.say`no recorded children under ${storages.source}`
      yield* Console.log(Render.table(
        ["HANDLE", "STATUS", "PID", "STEP", "PARENT", "AGE", "RESULT"],
        rows.map((row) => [
          row.handleId,
          row.status,
          row.pid === null ? "-" : String(row.pid),
          row.stepId ?? "-",
          row.parentExecutionId ?? "-",
          row.ageMs === null ? "-" : Render.span(row.ageMs),
          row.problem ?? resultSummary(row.result)
        ])
      ))
    })
  )).pipe(
    Command.withDescription("List subprocess children: liveness (pid and start time), parent, step, age, result"),
    Command.withAlias("ls")
  )

const requireChild = (storages: CliStorages, id: string) =>
  Effect.gen(function*() {
    const storage = required(storages.subprocess)
    if (storage === undefined || !(yield* Children.hasChild(storage, id))) {
      return yield* new CliFailure({ message: `unknown child handle ${id} under ${storages.source}` })
    }
    return storage
  })

const childrenShow = Command.make("show", { handleId, json }, ({ handleId, json }) =>
  withStorages((storages) =>
    Effect.gen(function*() {
      const storage = yield* requireChild(storages, handleId)
      const now = yield* Clock.currentTimeMillis
      const detail = yield* Children.childDetail(storage, handleId, now)
      const queue = yield* Effect.flatMap(
        Queues.hasQueue(storage, queueSocketId(handleId)),
        (present) => present ? Effect.asSome(Queues.inspectQueue(storage, "subprocess", queueSocketId(handleId))) : Effect.succeedNone
      )
      const queueSummary = Option.match(queue, {
        onNone: () => null,
        onSome: ({ frames: _, ...summary }) => summary
      })
      if (json) return yield* Render.printJson({ ...detail, queue: queueSummary })
      const { manifest, row } = detail
      const lines = [
        label("handle", handleId),
        label("status", row.status + (row.alive === true && row.status === "finished" ? " (process still alive, lingering)" : "")),
        label("adapter", row.adapter ?? "-"),
        label("step", row.stepId ?? "-"),
        label("execution", row.executionId ?? "-"),
        label("parent", row.parentExecutionId ?? "-"),
        label("pid", row.pid === null ? "-" : `${row.pid}${manifest?.pidStarttime == null ? "" : ` (started at tick ${manifest.pidStarttime})`}`),
        label("alive", row.alive === null ? "-" : String(row.alive)),
        label("created", `${row.createdAt ?? "-"}${row.ageMs === null ? "" : ` (${Render.span(row.ageMs)} ago)`}`)
      ]
      if (manifest !== null) {
        lines.push(
          label("module", manifest.entry ?? manifest.module ?? "-"),
          label("input", manifest.serializedInput),
          label("cwd", manifest.cwdInit ?? "-"),
          label("socket", manifest.socketPath ?? "-"),
          label("thread", manifest.threadId ?? "-")
        )
      }
      if (row.problem !== undefined) lines.push(label("problem", row.problem))
      lines.push(label("result", row.result === null ? "-" : JSON.stringify(row.result)))
      lines.push(label("acked", detail.watermark === null ? "-" : JSON.stringify(detail.watermark)))
      if (queueSummary !== null) {
        lines.push(label(
          "queue",
          `${queueSummary.socketId}: head ${queueSummary.headSeq}, acked ${queueSummary.ackedSeq}, ${queueSummary.pendingFrames} pending (${
            Render.bytes(queueSummary.pendingBytes)
          })`
        ))
      }
      yield* Render.lines(...lines)
    })
  )).pipe(Command.withDescription("Show one child: manifest, liveness, result and IPC queue"))

const childrenStop = Command.make(
  "stop",
  {
    handleId,
    grace: Flag.String("grace").pipe(
      Flag.withDescription("How long to wait after SIGTERM before SIGKILL"),
      Flag.withDefault("5s")
    ),
    reason: Flag.String("reason").pipe(
      Flag.withDescription("Why it is stopped: the child's stopReason, reported by the host that reattaches it"),
      Flag.optional
    ),
    json
  },
  ({ grace, handleId, json, reason }) =>
    withStorages((storages) =>
      Effect.gen(function*() {
        const graceMs = yield* Render.parseDuration("--grace", grace)
        const storage = yield* requireChild(storages, handleId)
        const outcome = yield* Children.stopChild(storage, handleId, graceMs, Option.getOrUndefined(reason))
        if (json) return yield* Render.printJson(outcome)
        switch (outcome.action) {
          case "stopped":
            return yield* Render.say`stopped ${handleId} (${outcome.signal}); result: ${resultSummary(outcome.result)}`
          case "already-finished":
            return yield* Render.say`${handleId} had already finished; result: ${resultSummary(outcome.result)}`
          case "already-exited":
            return yield* Render.say`${handleId} had already exited without a result; recorded it as stopped`
          case "manifest-removed":
            return yield* Render.say`${handleId} runs inside its host (in-process adapter): removed its manifest, so no restarted host re-runs it`
        }
      })
    )
).pipe(Command.withDescription("Stop a child: SIGTERM, then SIGKILL after --grace; records it as stopped"))

const children = Command.make("children").pipe(
  Command.withDescription("Subprocess children: list, show, stop"),
  Command.withSubcommands([childrenList, childrenShow, childrenStop])
)

// -----------------------------------------------------------------------------
// queues
// -----------------------------------------------------------------------------

const queuesList = Command.make("list", { json }, ({ json }) =>
  withStorages((storages) =>
    Render.withProgress((progress) =>
      Effect.gen(function*() {
        const rows = yield* ReadModel.queueRows(storages, progress)
        if (json) return yield* Render.printJson({ source: storages.source, queues: rows })
        if (rows.length === 0) return yield* Render.say`no durable queues under ${storages.source}`
        yield* Console.log(Render.table(
          ["QUEUE", "STORAGE", "HEAD", "ACKED", "PENDING", "SEQS", "BYTES"],
          rows.map((row) => [
            row.socketId,
            row.storage,
            String(row.headSeq),
            String(row.ackedSeq),
            String(row.pendingFrames),
            row.pendingSeqs === null ? "-" : `${row.pendingSeqs.from}-${row.pendingSeqs.to}`,
            Render.bytes(row.pendingBytes) + (row.damaged.length > 0 ? ` + ${row.damaged.length} UNREADABLE record(s)` : "")
          ])
        ))
      })
    )
  )).pipe(Command.withDescription("List durable outbound queues: head, acked and pending seqs and bytes"), Command.withAlias("ls"))

const queuesShow = Command.make(
  "show",
  {
    queueId: Argument.String("queue-id").pipe(Argument.withDescription("The queue's socket id (e.g. subprocess:<handleId>)")),
    frames: Flag.Boolean("frames").pipe(Flag.withDescription("Print the pending frames"), Flag.withDefault(false)),
    json
  },
  ({ frames, json, queueId }) =>
    withStorages((storages) =>
      Effect.gen(function*() {
        const queue = yield* ReadModel.findQueue(storages, queueId)
        if (Option.isNone(queue)) return yield* new CliFailure({ message: `unknown queue ${queueId} under ${storages.source}` })
        const found = queue.value
        const { frames: pending, ...summary } = found
        if (json) return yield* Render.printJson(frames ? found : summary)
        yield* Render.lines(...[
          label("queue", summary.socketId),
          label("storage", summary.storage),
          label("head", String(summary.headSeq)),
          label("acked", String(summary.ackedSeq)),
          label(
            "pending",
            summary.pendingSeqs === null
              ? "none"
              : `${summary.pendingFrames} frames, seqs ${summary.pendingSeqs.from}-${summary.pendingSeqs.to}, ${Render.bytes(summary.pendingBytes)}`
          )
        ].concat(summary.damaged.map((damage) => label("UNREADABLE", `record through seq ${damage.through}: ${damage.message}`))))
        if (frames && pending.length > 0) {
          yield* Console.log("")
          yield* Console.log(Render.table(["SEQ", "BYTES", "FRAME"], pending.map((entry) => [String(entry.seq), String(entry.bytes), entry.frame])))
        }
      })
    )
).pipe(Command.withDescription("Show one queue; --frames prints its pending frames"))

const queues = Command.make("queues").pipe(
  Command.withDescription("Durable outbound (IPC) queues: list, show"),
  Command.withSubcommands([queuesList, queuesShow])
)

// -----------------------------------------------------------------------------
// inspect (docs/inspector.md)
// -----------------------------------------------------------------------------

const inspect = Command.make(
  "inspect",
  {
    port: Flag.Int("port").pipe(
      Flag.withDescription(`Port on 127.0.0.1 (default ${Inspector.DEFAULT_PORT}; 0 picks a free one)`),
      Flag.withDefault(Inspector.DEFAULT_PORT)
    ),
    readOnly: Flag.Boolean("read-only").pipe(
      Flag.withDescription("Refuse the actions (clear an execution, stop a child)"),
      Flag.withDefault(false)
    )
  },
  ({ port, readOnly }) =>
    withStorages((storages) =>
      Effect.gen(function*() {
        const served = yield* Inspector.serve({ storages, port, readOnly }).pipe(
          Effect.mapError((error) => new CliFailure({ message: error.message }))
        )
        yield* Console.log(`inspector at ${served.url}`)
        return yield* Effect.never
      })
    )
).pipe(Command.withDescription("Serve the web inspector on 127.0.0.1 until interrupted: executions, children and queues, live"))

// -----------------------------------------------------------------------------
// paths
// -----------------------------------------------------------------------------

const paths = Command.make("paths", { json }, ({ json }) =>
  Effect.gen(function*() {
    const flags = yield* noetic
    const r = roots(Option.getOrUndefined(flags.home))
    if (json) return yield* Render.printJson({ home: r.home, checkpoints: r.checkpoints, subprocess: r.subprocess, run: r.run })
    yield* Render.say`home         ${r.home}`
    yield* Render.say`checkpoints  ${r.checkpoints}`
    yield* Render.say`subprocess   ${r.subprocess}`
    yield* Render.say`run          ${r.run}`
  })).pipe(Command.withDescription("Print the state directories"))

// -----------------------------------------------------------------------------
// import-noetic
// -----------------------------------------------------------------------------

const importNoetic = Command.make(
  "import-noetic",
  {
    directory: Argument.String("directory").pipe(Argument.withDescription("A directory noetic's createFileStorage wrote")),
    maxFileBytes: Flag.Int("max-file-bytes").pipe(
      Flag.withDescription("The largest file read, in bytes; a larger one is reported, not read"),
      Flag.withDefault(DEFAULT_MAX_FILE_BYTES)
    ),
    maxDepth: Flag.Int("max-depth").pipe(
      Flag.withDescription("The deepest nesting of arrays and objects in a record; a deeper one is reported, not read"),
      Flag.withDefault(DEFAULT_MAX_DEPTH)
    ),
    json
  },
  ({ directory, json, maxDepth, maxFileBytes }) =>
    Effect.gen(function*() {
      const flags = yield* noetic
      // Unlike the read-only commands, an import creates its target storages when missing.
      const checkpoints = Option.isSome(flags.pg)
        ? PostgresStorage.layerFromUrl(Redacted.make(flags.pg.value), {
          ...(Option.isSome(flags.table) ? { table: flags.table.value } : {})
        })
        : layerCheckpointStorage(Option.getOrUndefined(flags.home))
      const report = yield* Effect.gen(function*() {
        const target = yield* StorageAdapter
        // Manifests go where the local subprocess adapter reads them: with --pg the same
        // table, else the home's subprocess storage.
        const subprocess = Option.isSome(flags.pg) ? target : yield* makeSubprocessStorage(Option.getOrUndefined(flags.home))
        if (maxFileBytes < 1 || maxDepth < 1) {
          return yield* new CliFailure({ message: "--max-file-bytes and --max-depth must be at least 1" })
        }
        return yield* importNoeticDirectory(directory, { checkpoints: target, subprocess }, { maxFileBytes, maxDepth }).pipe(
          Effect.catchTag("NoeticDirectoryUnreadable", (error) => Effect.fail(new CliFailure({ message: error.message })))
        )
      }).pipe(Effect.scoped, Effect.provide(checkpoints as Layer.Layer<StorageAdapter, unknown>))
      if (json) return yield* Render.printJson(report)
      yield* Render.say`imported ${report.snapshots} snapshot(s), ${report.ledgerEntries} ledger entries, ${report.manifests} manifest(s) from ${directory}`
      if (report.skipped.length > 0) yield* Render.say`skipped ${report.skipped.length} auxiliary key(s)`
      for (const entry of report.notRead) {
        yield* Render.say`not read: ${entry.file} (${entry.type}; only regular files inside the directory are read)`
      }
      for (const failure of report.failures) {
        yield* Render.say`could not read ${failure.kind} ${failure.key}: ${failure.message}`
      }
    })
).pipe(Command.withDescription("Import checkpoints, step ledgers and subprocess manifests written by noetic"))

// -----------------------------------------------------------------------------
// serve (src/cli/Serve.ts)
// -----------------------------------------------------------------------------

const serve = Command.make("serve", Serve.flags, (flags) => Effect.flatMap(noetic, (shared) => Serve.run(shared, flags)))
  .pipe(Command.withDescription("Serve Durable Streams over HTTP on the home's SQLite database or on --pg"))

/** The whole command tree. */
export const command = noetic.pipe(Command.withSubcommands([executions, children, queues, inspect, paths, importNoetic, serve]))

/** Runs the CLI on arguments (without the node and script paths); fails as the command did. */
export const run = Command.runWith(command, { version: VERSION })

/** The one line an error is reported as: what went wrong, never a stack trace. */
const describeFailure = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "_tag" in error) {
    if (error._tag === "CliFailure") return firstLine((error as CliFailure).message)
    if (error._tag === "StorageError") return `storage: ${firstLine(error)}`
  }
  return firstLine(error)
}

/** Help and version as usual; a usage error as one line on stderr, naming the help to read. */
const presenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Console.error(
        `noetic-effect: ${Render.escape(event.errors.map((error) => firstLine(error)).join("; "))} (see: ${
          event.commandPath.join(" ")
        } --help)`
      )
      : CliOutput.defaultPresenter.present(event)
}

/**
 * Runs the CLI and settles with its exit code: 0 on success, 1 with one line on
 * stderr when a command fails, 2 on a usage error (the help and the error are shown),
 * 130 when interrupted. It never fails and never prints a stack trace.
 */
export const main = (args: ReadonlyArray<string>) =>
  run(args).pipe(
    Effect.provideService(CliOutput.Presenter, presenter),
    Effect.as(0),
    Effect.catchCause((cause) => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.succeed(130)
      const failure = cause.reasons.find((reason) => reason._tag === "Fail")
      if (failure !== undefined) {
        const error = failure.error
        // The parser has shown the help and what was wrong with the arguments.
        if (CliError.isCliError(error) && error._tag === "ShowHelp") return Effect.succeed(2)
        if (CliError.isCliError(error) && error._tag === "UserError") return Effect.succeed(1)
        return Effect.as(Console.error(`noetic-effect: ${Render.escape(describeFailure(error))}`), 1)
      }
      const defect = cause.reasons.find((reason) => reason._tag === "Die")
      return Effect.as(Console.error(`noetic-effect: internal error: ${Render.escape(firstLine(defect?.defect ?? "unknown"))}`), 1)
    })
  )
