/**
 * The behavioural suites of the durable surfaces, on SQLite storage: checkpoint store,
 * step ledger and durable outbound queue, as they run on memory and file storage.
 */
import { Effect, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import { suite as checkpointStoreSuite } from "./CheckpointStoreSuite.ts"
import { suite as queueSuite } from "./DurableOutboundQueueSuite.ts"
import { suite as stepLedgerSuite } from "./StepLedgerSuite.ts"

const freshPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sqlite-suite-")), "storage.db")

checkpointStoreSuite("sqlite", () => SqliteStorage.layer({ path: freshPath() }))
stepLedgerSuite("sqlite", () => SqliteStorage.layer({ path: freshPath() }))
// The queue suite takes a storage without a scope; these databases stay open until the
// test process ends.
queueSuite("sqlite", Effect.suspend(() => SqliteStorage.make({ path: freshPath() }).pipe(Scope.provide(Scope.makeUnsafe()))))
