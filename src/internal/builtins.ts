/**
 * Node built-in modules that a process may never use, loaded on first use instead of
 * when this library is imported.
 *
 * A child process imports the whole facade through its step module before its step
 * body runs; `node:crypto`, `node:fs/promises` (which pulls in readline and streams),
 * `node:net`, `node:child_process` and `node:zlib` cost it tens of milliseconds it
 * does not need to spend before that first line. `process.getBuiltinModule` (Node
 * 22.3+) loads a built-in synchronously, once, and returns the same module after.
 *
 * @internal
 */

/** `node:fs/promises`. */
export const fsPromises = (): typeof import("node:fs/promises") => process.getBuiltinModule("node:fs/promises")

/** `node:crypto`. */
export const nodeCrypto = (): typeof import("node:crypto") => process.getBuiltinModule("node:crypto")

/** `node:net`. */
export const nodeNet = (): typeof import("node:net") => process.getBuiltinModule("node:net")

/** `node:child_process`. */
export const childProcess = (): typeof import("node:child_process") => process.getBuiltinModule("node:child_process")

/** `node:zlib`. */
export const nodeZlib = (): typeof import("node:zlib") => process.getBuiltinModule("node:zlib")

/** The hex SHA-256 digest of `text` (UTF-8). */
export const sha256Hex = (text: string): string => nodeCrypto().createHash("sha256").update(text, "utf8").digest("hex")

/**
 * `node:fs`, as its CommonJS module. Imported as an ES module, `node:fs` fills its
 * namespace from every export, `promises` included, which loads `node:fs/promises`
 * (and readline and the stream modules) on the spot; the CommonJS module keeps that
 * getter lazy. `node:fs` itself is loaded by Node's bootstrap, so this costs nothing.
 */
export const nodeFs: typeof import("node:fs") = process.getBuiltinModule("node:fs")
