import { describe } from "@effect/vitest"
import { pgTable, pgUrl } from "../cli/backends.ts"
import { suite } from "./suite.ts"

describe.skipIf(pgUrl === undefined)("the inspector on PostgreSQL", () => {
  suite(pgTable("noetic_inspector_"))
})
