#!/usr/bin/env node
/**
 * The `noetic-effect` executable.
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import * as Cli from "./Cli.ts"

Cli.run(process.argv.slice(2)).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
