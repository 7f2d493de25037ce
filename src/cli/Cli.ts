/**
 * The noetic-effect command line: inspects and clears the durable state of executions.
 *
 * @since 0.1.0
 */
import { Console, Effect, Layer, Option, Redacted } from "effect"
import { Argument, CliError, Command, Flag } from "effect/cli"
import * as PostgresStorage from "../layers/PostgresStorage.ts"
import { layerCheckpointStorage, makeSubprocessStorage, roots } from "../NoeticHome.ts"
import { importNoeticDirectory } from "../NoeticImport.ts"
import * as CheckpointStore from "../services/CheckpointStore.ts"
import { StorageAdapter } from "../services/StorageAdapter.ts"

const noetic = Command.make("noetic-effect").pipe(
  Command.withSharedFlags({
    home: Flag.String("home").pipe(
      Flag.withDescription("State directory (default $NOETIC_HOME, else ~/.noetic)"),
      Flag.optional
    ),
    pg: Flag.String("pg").pipe(
      Flag.withDescription("Read checkpoints from PostgreSQL at this URL instead of files"),
      Flag.optional
    ),
    table: Flag.String("table").pipe(
      Flag.withDescription(`Postgres table (default ${PostgresStorage.DEFAULT_TABLE})`),
      Flag.optional
    )
  }),
  Command.withDescription("Inspect and clear the durable state of noetic-effect executions")
)

/**
 * The checkpoint store the shared flags select: Postgres with --pg, else the home's
 * checkpoint storage (`checkpoints/checkpoints.db`, or the file storage an older setup
 * left in `checkpoints/`).
 */
const checkpointStore = Effect.gen(function*() {
  const flags = yield* noetic
  const storage = Option.isSome(flags.pg)
    ? PostgresStorage.layerFromUrl(Redacted.make(flags.pg.value), {
      ...(Option.isSome(flags.table) ? { table: flags.table.value } : {})
    })
    : layerCheckpointStorage(Option.getOrUndefined(flags.home))
  // Built in the command's scope: the store is used after this returns, and a SQLite
  // database or a Postgres pool must stay open until the command is done.
  const context = yield* Layer.build(storage as Layer.Layer<StorageAdapter, unknown>)
  return yield* CheckpointStore.make.pipe(Effect.provideContext(context))
})

const json = Flag.Boolean("json").pipe(Flag.withDescription("Print JSON"), Flag.withDefault(false))
const executionId = Argument.String("execution-id").pipe(Argument.withDescription("The execution id"))

const list = Command.make("list", { json }, ({ json }) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* checkpointStore
    const ids = yield* store.list
    if (json) return yield* Console.log(JSON.stringify(ids))
    if (ids.length === 0) return yield* Console.log("no recorded executions")
    for (const id of ids) yield* Console.log(id)
  }))).pipe(Command.withDescription("List executions that have a snapshot"), Command.withAlias("ls"))

const show = Command.make("show", { executionId, json }, ({ executionId, json }) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* checkpointStore
    const snapshot = yield* store.load(executionId)
    if (Option.isNone(snapshot)) {
      return yield* new CliError.UserError({
        cause: new Error(`no snapshot recorded for ${executionId}`),
        userMessage: `no snapshot recorded for ${executionId}`
      })
    }
    const s = snapshot.value
    if (json) return yield* Console.log(JSON.stringify(s, null, 2))
    yield* Console.log(`execution  ${s.executionId}`)
    if (s.threadId !== undefined) yield* Console.log(`thread     ${s.threadId}`)
    if (s.resourceId !== undefined) yield* Console.log(`resource   ${s.resourceId}`)
    yield* Console.log(`captured   ${s.capturedAt}`)
    yield* Console.log(`items      ${s.itemLog.items.length}`)
    yield* Console.log(`cwd        ${s.cwd?.current ?? "-"}`)
    yield* Console.log(`layers     ${Object.keys(s.layers).join(", ") || "-"}`)
    yield* Console.log(`frontier   ${s.frontier.map((entry) => entry.stepId).join(" > ") || "(idle)"}`)
    yield* Console.log(`ask-user   ${s.askUser.length} pending`)
  }))).pipe(Command.withDescription("Show an execution's snapshot"))

const clear = Command.make("clear", { executionId }, ({ executionId }) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* checkpointStore
    yield* store.clear(executionId)
    yield* Console.log(`cleared ${executionId}: snapshot and step ledger`)
  }))).pipe(Command.withDescription("Discard an execution's snapshot and every ledger entry"))

const executions = Command.make("executions").pipe(
  Command.withDescription("Recorded executions"),
  Command.withSubcommands([list, show, clear])
)

const paths = Command.make("paths", {}, () =>
  Effect.gen(function*() {
    const flags = yield* noetic
    const r = roots(Option.getOrUndefined(flags.home))
    yield* Console.log(`home         ${r.home}`)
    yield* Console.log(`checkpoints  ${r.checkpoints}`)
    yield* Console.log(`subprocess   ${r.subprocess}`)
    yield* Console.log(`run          ${r.run}`)
  })).pipe(Command.withDescription("Print the state directories"))

const importNoetic = Command.make(
  "import-noetic",
  { directory: Argument.String("directory").pipe(Argument.withDescription("A directory noetic's createFileStorage wrote")) },
  ({ directory }) =>
    Effect.gen(function*() {
      const flags = yield* noetic
      const checkpoints = Option.isSome(flags.pg)
        ? PostgresStorage.layerFromUrl(Redacted.make(flags.pg.value), {
          ...(Option.isSome(flags.table) ? { table: flags.table.value } : {})
        })
        : layerCheckpointStorage(Option.getOrUndefined(flags.home))
      const report = yield* Effect.gen(function*() {
        // Manifests go where the local subprocess adapter reads them: the home's subprocess root.
        const subprocess = yield* makeSubprocessStorage(Option.getOrUndefined(flags.home))
        return yield* importNoeticDirectory(directory, { checkpoints: yield* StorageAdapter, subprocess }).pipe(
          Effect.catchTag("NoeticDirectoryUnreadable", (error) =>
            Effect.fail(new CliError.UserError({ cause: error, userMessage: error.message })))
        )
      }).pipe(Effect.scoped, Effect.provide(checkpoints as Layer.Layer<StorageAdapter, unknown>))
      yield* Console.log(
        `imported ${report.snapshots} snapshot(s), ${report.ledgerEntries} ledger entries, ${report.manifests} manifest(s)` +
          ` from ${directory}`
      )
      if (report.skipped.length > 0) yield* Console.log(`skipped ${report.skipped.length} auxiliary key(s)`)
      for (const failure of report.failures) {
        yield* Console.log(`could not read ${failure.kind} ${failure.key}: ${failure.message}`)
      }
    })
).pipe(Command.withDescription("Import checkpoints, step ledgers and subprocess manifests written by noetic"))

/** The whole command tree. */
export const command = noetic.pipe(Command.withSubcommands([executions, paths, importNoetic]))

/** Runs the CLI on arguments (without the node and script paths). */
export const run = Command.runWith(command, { version: "0.1.0" })
