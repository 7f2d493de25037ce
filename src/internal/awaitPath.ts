/**
 * Waiting for a file to appear: a child's socket, which it binds once its step body
 * has started. Watching its directory wakes the host the moment the socket exists, so
 * a child's result does not wait out a polling interval; the poll stays as the
 * fallback for file systems without change notifications and for a missed event.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as NodePath from "node:path"
import { nodeFs as Fs } from "./builtins.ts"

/**
 * Succeeds once `path` exists, checking on every change in its directory and at
 * least every `pollMs`. Interrupting it stops the watch and the timer.
 */
export const awaitPath = (path: string, pollMs: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const directory = NodePath.dirname(path)
    const name = NodePath.basename(path)
    let watcher: import("node:fs").FSWatcher | undefined
    let timer: ReturnType<typeof setTimeout> | undefined
    let done = false
    const stop = () => {
      done = true
      watcher?.close()
      if (timer !== undefined) clearTimeout(timer)
    }
    const check = () => {
      if (done || !Fs.existsSync(path)) return
      stop()
      resume(Effect.void)
    }
    const poll = () => {
      check()
      if (!done) timer = setTimeout(poll, pollMs)
    }
    try {
      watcher = Fs.watch(directory, { persistent: false }, (_event, file) => {
        // Some platforms report no file name: any change is worth a look then.
        if (file === null || file === name) check()
      })
      // A directory that cannot be watched (gone, or no notifications) is left to the poll.
      watcher.on("error", () => watcher?.close())
    } catch {
      watcher = undefined
    }
    // Checked after the watch is set up, so a file made between the two is not missed.
    poll()
    return Effect.sync(stop)
  })
