/**
 * `noetic-effect inspect` from the command line: bad input (a port in use, a missing
 * home, two stores) as one line and a non-zero exit. The address it prints is read by
 * the browser test (test/browser/inspector.test.ts), from the real process.
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Net from "node:net"
import * as Path from "node:path"
import { assertOneLineFailure, cli, freshHome } from "../cli/suite.ts"

/** A port some other server holds for the scope. */
const busyPort = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<Net.Server>((resolve) => {
      const server = Net.createServer()
      server.listen(0, "127.0.0.1", () => resolve(server))
    })
  ),
  (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
).pipe(Effect.map((server) => (server.address() as Net.AddressInfo).port))

describe("noetic-effect inspect", () => {
  it.live("a port in use and a missing home are one line and a non-zero exit", () =>
    Effect.gen(function*() {
      const home = yield* freshHome
      const port = yield* busyPort
      assertOneLineFailure(yield* cli("--home", home, "inspect", "--port", String(port)), "cannot listen on 127.0.0.1")
      assertOneLineFailure(yield* cli("--home", Path.join(home, "nope"), "inspect", "--port", "0"), "no noetic state at")
      assertOneLineFailure(yield* cli("--home", home, "--pg", "postgres://x@127.0.0.1/db", "inspect"), "--home and --pg")
    }).pipe(Effect.scoped), { timeout: 60_000 })

})
