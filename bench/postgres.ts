/**
 * Postgres for the benchmark: this library's storage, the raw baselines through the
 * same driver (`@effect/sql-pg`), LangGraph's PostgresSaver, and a counting proxy that
 * measures round trips the same way for every client.
 *
 * Round trips are counted on the wire, not inside a driver, so this library and the
 * peer (which uses `pg`) are counted alike: a local TCP proxy forwards the bytes
 * unchanged and counts the frontend messages that make the client wait for the server
 * (`Q`, a simple query, and `S`, the Sync that ends an extended-protocol exchange).
 * Timed runs never go through the proxy.
 */
import { PgClient } from "@effect/sql-pg"
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres"
import { Effect, Exit, Redacted, Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import * as Net from "node:net"
import * as PostgresStorage from "../src/layers/PostgresStorage.ts"
import type { StorageAdapterShape } from "../src/services/StorageAdapter.ts"

/** A value built in a scope of its own, and how to release it. */
export interface Scoped<A> {
  readonly value: A
  readonly close: () => Promise<void>
}

/** Runs a scoped effect, keeping its scope open until `close`. */
export const openScoped = async <A, E>(effect: Effect.Effect<A, E, Scope.Scope>): Promise<Scoped<A>> => {
  const scope = Scope.makeUnsafe()
  try {
    const value = await Effect.runPromise(Scope.provide(effect, scope))
    return { value, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
  } catch (cause) {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    throw cause
  }
}

/** A fresh name for a table or schema of this run (other engineers share the database). */
export const freshName = (prefix: string): string =>
  `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`

const pgClient = (url: string) =>
  PgClient.make({ url: Redacted.make(url), maxConnections: 4 }).pipe(
    Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make)
  )

/** Whether Postgres answers at `url` within a few seconds. */
export const probe = async (url: string): Promise<string | undefined> => {
  try {
    const scoped = await openScoped(Effect.gen(function*() {
      const client = yield* pgClient(url)
      yield* client`SELECT 1`
    }).pipe(Effect.timeout("5 seconds")))
    await scoped.close()
    return undefined
  } catch (cause) {
    return cause instanceof Error ? cause.message : String(cause)
  }
}

/** This library's Postgres storage on its own pool and table. */
export const storage = (url: string, table: string): Promise<Scoped<StorageAdapterShape>> =>
  openScoped(PostgresStorage.makeFromUrl(url, { table, maxConnections: 4 }).pipe(Effect.orDie))

/** The raw baselines: one single-row upsert, one `SELECT ... WHERE key = ANY($1)`, through `@effect/sql-pg`. */
export interface RawPg {
  /** The table it upserts into and selects from. */
  readonly table: string
  readonly upsert: (key: string, value: string) => Promise<void>
  readonly selectAny: (keys: ReadonlyArray<string>) => Promise<number>
  /** One multi-row INSERT of `rows` (key, value). */
  readonly insertBatch: (rows: ReadonlyArray<readonly [string, string]>) => Promise<void>
  readonly dropTables: (names: ReadonlyArray<string>) => Promise<void>
  readonly dropSchema: (name: string) => Promise<void>
}

/** A raw client with its own table shaped like the storage's (`key text COLLATE "C" PRIMARY KEY, value text`). */
export const raw = (url: string, table: string): Promise<Scoped<RawPg>> =>
  openScoped(Effect.gen(function*() {
    const sql = (yield* pgClient(url)).withoutTransforms()
    yield* sql`CREATE TABLE IF NOT EXISTS ${sql(table)} (key text COLLATE "C" PRIMARY KEY, value text NOT NULL)`
    return {
      table,
      upsert: (key, value) =>
        Effect.runPromise(Effect.asVoid(sql`INSERT INTO ${sql(table)} (key, value) VALUES (${key}, ${value})
          ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`)),
      selectAny: (keys) =>
        Effect.runPromise(
          Effect.map(
            sql<{ key: string; value: string }>`SELECT key, value FROM ${sql(table)} WHERE key = ANY(${[...keys]})`,
            (rows) => rows.length
          )
        ),
      insertBatch: (rows) => {
        const values = rows.map(([key, value]) => ({ key, value }))
        return Effect.runPromise(Effect.asVoid(
          sql`INSERT INTO ${sql(table)} ${sql.insert(values as [typeof values[number], ...Array<typeof values[number]>])}`
        ))
      },
      dropTables: (names) =>
        Effect.runPromise(Effect.forEach(names, (name) => sql`DROP TABLE IF EXISTS ${sql(name)}`, { discard: true })),
      dropSchema: (name) => Effect.runPromise(Effect.asVoid(sql`DROP SCHEMA IF EXISTS ${sql(name)} CASCADE`))
    } satisfies RawPg
  }).pipe(Effect.orDie))

/** LangGraph's PostgresSaver in its own schema, set up. */
export const langGraphSaver = async (url: string, schema: string): Promise<Scoped<PostgresSaver>> => {
  const saver = PostgresSaver.fromConnString(url, { schema })
  await saver.setup()
  return { value: saver, close: () => saver.end() }
}

/** A byte-transparent proxy in front of Postgres that counts round trips. */
export interface CountingProxy {
  /** `url` with its host and port pointing at the proxy. */
  readonly url: string
  readonly roundTrips: () => number
  /** The statements sent since the last reset (the start of each), in order. */
  readonly statements: () => ReadonlyArray<string>
  readonly reset: () => void
  readonly close: () => Promise<void>
}

const SSL_REQUEST = 80877103
const GSSENC_REQUEST = 80877104

/** Counts `Q` and `S` messages in one connection's frontend stream; hands the statements parsed to `onStatement`. */
export const frontendCounter = (onRoundTrip: () => void, onStatement: (text: string) => void) => {
  let buffer: Buffer<ArrayBufferLike> = Buffer.alloc(0)
  // Until the startup message, messages carry no type byte.
  let startup = true
  const prepared = new Map<string, string>()
  return (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
    for (;;) {
      if (startup) {
        if (buffer.length < 8) return
        const length = buffer.readInt32BE(0)
        if (buffer.length < length) return
        const code = buffer.readInt32BE(4)
        buffer = buffer.subarray(length)
        if (code !== SSL_REQUEST && code !== GSSENC_REQUEST) startup = false
        continue
      }
      if (buffer.length < 5) return
      const type = String.fromCharCode(buffer[0]!)
      const length = buffer.readInt32BE(1)
      if (buffer.length < 1 + length) return
      if (type === "Q" || type === "S") onRoundTrip()
      // Query: the text, NUL-terminated.
      if (type === "Q") onStatement(buffer.toString("utf8", 5, Math.min(length, 5 + 200)))
      if (type === "P") {
        // Parse: a statement name, then the query text, both NUL-terminated.
        const nameEnd = buffer.indexOf(0, 5)
        const textEnd = buffer.indexOf(0, nameEnd + 1)
        prepared.set(buffer.toString("utf8", 5, nameEnd), buffer.toString("utf8", nameEnd + 1, Math.min(textEnd, nameEnd + 1 + 200)))
      }
      if (type === "B") {
        // Bind: a portal name, then the name of the prepared statement it executes.
        const portalEnd = buffer.indexOf(0, 5)
        const nameEnd = buffer.indexOf(0, portalEnd + 1)
        onStatement(prepared.get(buffer.toString("utf8", portalEnd + 1, nameEnd)) ?? "?")
      }
      buffer = buffer.subarray(1 + length)
    }
  }
}

/** Starts a counting proxy to the server of `url`. */
export const countingProxy = async (url: string): Promise<CountingProxy> => {
  const target = new URL(url)
  const host = target.hostname
  const port = Number(target.port || 5432)
  let count = 0
  let statements: Array<string> = []
  const sockets = new Set<Net.Socket>()
  const server = Net.createServer((client) => {
    const upstream = Net.connect({ host, port })
    sockets.add(client)
    sockets.add(upstream)
    const counter = frontendCounter(() => count++, (text) => statements.push(text.replace(/\s+/g, " ").trim()))
    client.on("data", (chunk: Buffer) => {
      counter(chunk)
      upstream.write(chunk)
    })
    upstream.on("data", (chunk: Buffer) => client.write(chunk))
    const end = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on("close", end)
    upstream.on("close", end)
    client.on("error", end)
    upstream.on("error", end)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address() as Net.AddressInfo
  const proxied = new URL(url)
  proxied.hostname = "127.0.0.1"
  proxied.port = String(address.port)
  return {
    url: proxied.toString(),
    roundTrips: () => count,
    statements: () => statements,
    reset: () => {
      count = 0
      statements = []
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
}
