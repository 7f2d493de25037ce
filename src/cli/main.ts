#!/usr/bin/env node
/**
 * The `noetic-effect` executable.
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect, Exit } from "effect"
import * as Cli from "./Cli.ts"

NodeRuntime.runMain(Cli.main(process.argv.slice(2)).pipe(Effect.provide(NodeServices.layer)), {
  // The exit code is the CLI's: main reports every failure itself, as one line.
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : 1)
})
