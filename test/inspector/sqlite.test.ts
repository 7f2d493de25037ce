import { describe } from "@effect/vitest"
import { sqliteHome } from "../cli/backends.ts"
import { suite } from "./suite.ts"

describe("the inspector on the default SQLite storage", () => {
  suite(sqliteHome)
})
