import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { DatabaseSync } from "node:sqlite"
import * as SqliteStorage from "../src/layers/SqliteStorage.ts"
import { suite } from "./StorageSuite.ts"

const freshPath = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-sqlite-")), "storage.db")

suite("sqlite", () => SqliteStorage.layer({ path: freshPath() }))
