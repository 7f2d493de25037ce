// tsup 9 calls `typescript.parseJsonConfigFileContent` from its d.ts step, but
// TypeScript 7 ships no compiler API. Inside tsup (main thread and its d.ts worker),
// resolve `typescript` to the TypeScript 6 API of `@typescript/typescript6`; the
// project's own `typescript` (7) stays what `npm run typecheck` uses.
const Module = require("node:module")
const path = require("node:path")

const tsupDir = path.dirname(require.resolve("tsup/package.json"))
const typescript6 = require.resolve("@typescript/typescript6")
const resolve = Module._resolveFilename
Module._resolveFilename = function(request, parent, ...rest) {
  if (request === "typescript" && parent && parent.filename && parent.filename.startsWith(tsupDir)) {
    return typescript6
  }
  return resolve.call(this, request, parent, ...rest)
}
