import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { suite } from "./DurableOutboundQueueSuite.ts"

suite("file", Effect.suspend(() => FileStorage.make({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-queue-")) })))
