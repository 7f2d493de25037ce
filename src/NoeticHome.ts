/**
 * The on-disk roots of durable state: `$NOETIC_HOME` (else `~/.noetic`) holding
 * `checkpoints/` (snapshots and ledgers), `subprocess/` (manifests and IPC queues) and
 * `run/` (sockets). Discarding all recovery data is one directory removal.
 *
 * @since 0.1.0
 */
import * as Os from "node:os"
import * as Path from "node:path"

/** The three roots under one home directory. */
export interface NoeticRoots {
  readonly home: string
  readonly checkpoints: string
  readonly subprocess: string
  readonly run: string
}

/** The roots under `home`, or under `$NOETIC_HOME`, or under `~/.noetic`. */
export const roots = (home?: string): NoeticRoots => {
  const base = Path.resolve(home ?? process.env.NOETIC_HOME ?? Path.join(Os.homedir(), ".noetic"))
  return {
    home: base,
    checkpoints: Path.join(base, "checkpoints"),
    subprocess: Path.join(base, "subprocess"),
    run: Path.join(base, "run")
  }
}
