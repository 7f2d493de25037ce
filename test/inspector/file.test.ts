import { describe } from "@effect/vitest"
import { fileHome } from "../cli/backends.ts"
import { suite } from "./suite.ts"

describe("the inspector on file storage", () => {
  suite(fileHome)
})
