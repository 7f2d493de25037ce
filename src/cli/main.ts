#!/usr/bin/env node
/**
 * The `noetic-effect` executable.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Cli from "./Cli.ts"

NodeRuntime.runMain(Cli.main(process.argv.slice(2)).pipe(Effect.provide(NodeServices.layer)), {
  // The exit code is the CLI's: main reports every failure itself, as one line.
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : 1)
})
