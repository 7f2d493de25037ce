import { layerMemory } from "../src/services/StorageAdapter.ts"
import { suite } from "./StorageSuite.ts"

suite("memory", () => layerMemory)
