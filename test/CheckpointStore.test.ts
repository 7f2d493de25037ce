import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as FileStorage from "../src/layers/FileStorage.ts"
import { layerMemory } from "../src/services/StorageAdapter.ts"
import { suite } from "./CheckpointStoreSuite.ts"

suite("memory", () => layerMemory)
suite("file", () => FileStorage.layer({ root: Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-checkpoint-")) }))
