import { describe } from "@effect/vitest"
import { Effect } from "effect"
import * as FileStorage from "../../src/layers/FileStorage.ts"
import { roots } from "../../src/NoeticHome.ts"
import { freshHome } from "../cli/suite.ts"
import { suite } from "./suite.ts"

describe("the inspector on file storage", () => {
  suite(Effect.gen(function*() {
    const home = yield* freshHome
    return {
      args: ["--home", home],
      checkpoints: yield* FileStorage.make({ root: roots(home).checkpoints }),
      subprocess: yield* FileStorage.make({ root: roots(home).subprocess })
    }
  }))
})
