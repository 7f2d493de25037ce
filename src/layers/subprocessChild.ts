/**
 * The bootstrap of a local-adapter child process, run as
 * `node [execArgv] subprocessChild.js --noetic-subprocess-child --root <dir> --handle <id>`.
 *
 * It memoises module resolution for the child's start (see `internal/resolveMemo.ts`:
 * resolving the imports of the library, Effect and the step module otherwise costs a
 * child more than evaluating them) and then imports and runs the child
 * (`subprocessChildMain.ts`). It imports nothing else statically, so the memo serves
 * every module the child loads.
 *
 * It is a build entry of its own (tsup), never imported by the library.
 *
 * @since 0.1.0
 */
import { pathToFileURL } from "node:url"
import { CHILD_FLAG, claimChildRun, RESOLVE_MEMO_FLAG } from "../internal/childFlag.ts"
import { installResolveMemo } from "../internal/resolveMemo.ts"

export { CHILD_FLAG } from "../internal/childFlag.ts"

// Only the first copy of this module a child evaluates runs it: a step module may load
// the library again from another path (source vs built), and each copy would serve the socket.
if (process.argv.includes(CHILD_FLAG) && claimChildRun()) {
  // The library's own modules sit beside this file (dist/ when built), the process's
  // main script (`import.meta` is not there in the CommonJS build).
  const bootstrap = process.argv[1] ?? process.cwd() + "/"
  // The memo kept across children, when the adapter names its directory (RESOLVE_MEMO_FLAG).
  const at = process.argv.indexOf(RESOLVE_MEMO_FLAG)
  const directory = at < 0 ? undefined : process.argv[at + 1]
  const memo = installResolveMemo(
    new URL(".", pathToFileURL(bootstrap)).href,
    directory === undefined ? undefined : { directory, bootstrap }
  )
  void import("./subprocessChildMain.ts").then((child) => child.main(memo.end))
}
