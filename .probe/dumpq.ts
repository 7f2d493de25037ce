import { Effect, Option } from "effect"
import * as FileStorage from "../src/layers/FileStorage.ts"
const root = process.argv[2]!
Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const s = yield* FileStorage.make({ root })
  const keys = yield* s.list("")
  for (const k of keys) {
    const v = yield* Effect.result(s.get(k))
    const text = v._tag === "Success" ? JSON.stringify(Option.getOrUndefined(v.success)) : "ERR " + String(v.failure)
    console.log(k, text.slice(0, 120))
  }
}))).catch((e) => console.error("fail", e))
