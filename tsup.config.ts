import { defineConfig } from "tsup"

export default defineConfig({
  entry: {
    index: "src/index.ts",
    promise: "src/promise/index.ts",
    testing: "src/testing/index.ts",
    // noetic-effect/client: no Node built-ins, for browsers (docs/agent-streams.md).
    client: "src/client/index.ts",
    cli: "src/cli/main.ts",
    // The local subprocess adapter starts children on this file, beside the chunks in dist/.
    subprocessChild: "src/layers/subprocessChild.ts"
  },
  format: ["esm", "cjs"],
  // The child bootstrap is run, never imported: it needs no declarations.
  dts: { entry: { index: "src/index.ts", promise: "src/promise/index.ts", testing: "src/testing/index.ts", client: "src/client/index.ts", cli: "src/cli/main.ts" } },
  clean: true,
  sourcemap: true,
  target: "node22",
  platform: "node",
  splitting: true
})
