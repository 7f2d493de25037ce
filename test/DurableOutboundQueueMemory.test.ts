import { makeMemory } from "../src/services/StorageAdapter.ts"
import { suite } from "./DurableOutboundQueueSuite.ts"

suite("memory", makeMemory)
