#!/usr/bin/env node
/**
 * The noetic-effect command line: inspects and clears recovery state.
 *
 * @since 0.1.0
 */
const usage = `noetic-effect: durable execution state for AI agent harnesses

Usage:
  noetic-effect help      Show this message

Commands over checkpoints, ledgers and live children arrive with those services.
State lives under $NOETIC_HOME (default ~/.noetic).
`

const [command] = process.argv.slice(2)
if (command === undefined || command === "help" || command === "--help" || command === "-h") {
  process.stdout.write(usage)
} else {
  process.stderr.write(`unknown command: ${command}\n\n${usage}`)
  process.exitCode = 2
}
