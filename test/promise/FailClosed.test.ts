/**
 * Fail closed (docs/durability.md#failing-closed) through the Promise facade: the engine's
 * behaviour, as NoeticError and NoeticConfigError codes.
 */
import { describe, expect, it } from "vitest"
import {
  AgentHarness,
  createCheckpointStore,
  createInMemoryStorage,
  invokeTool,
  isNoeticConfigError,
  isNoeticError,
  type NoeticConfigError,
  type NoeticError,
  Reconciled,
  runCode,
  type StorageAdapter
} from "../../src/promise/index.ts"
import { harness } from "./harnesses.ts"
import { runTurn } from "./turns.ts"

const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (e: unknown) => e)

describe("facade: at-most-once reconcile answers", () => {
  /** A payment whose body throws mid-payment on the first run; `answer` is what reconcile resolves with. */
  const payments = (
    checkpointStore: ReturnType<typeof createCheckpointStore>,
    counts: { body: number; reconcile: number },
    answer: () => unknown
  ) =>
    new AgentHarness({
      name: "payments",
      agentGraph: invokeTool({
        id: "pay",
        effects: "at-most-once",
        tool: {
          name: "pay",
          execute: async (args: { amount: number }) => {
            counts.body++
            if (counts.body === 1) throw new Error("connection reset mid-payment")
            return `paid ${args.amount}`
          }
        },
        reconcile: async () => {
          counts.reconcile++
          return answer() as never
        }
      }),
      environment: { storage: { checkpointStore } }
    })

  it("a plain object rejects RECONCILE_ANSWER_INVALID naming the execution and path; the body does not run; the intent stays", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    const counts = { body: 0, reconcile: 0 }
    let answer: () => unknown = () => ({ receipt: "paid 5" })
    const first = payments(checkpointStore, counts, () => answer())
    await expect(runTurn(first, { amount: 5 }, { executionId: "p1" })).rejects.toThrow("connection reset")
    await first.close()
    const second = payments(checkpointStore, counts, () => answer())
    const error = await rejection(second.resume("p1"))
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).code).toBe("RECONCILE_ANSWER_INVALID")
    expect((error as NoeticError).message).toContain("p1")
    expect((error as NoeticError).message).toContain("/pay#0")
    expect(counts).toEqual({ body: 1, reconcile: 1 })
    // A JS caller's hand-made { _tag: 'Rerun' } is refused too: only Reconciled.rerun runs the body again.
    answer = () => ({ _tag: "Rerun" })
    expect(((await rejection(second.resume("p1"))) as NoeticError).code).toBe("RECONCILE_ANSWER_INVALID")
    expect(counts).toEqual({ body: 1, reconcile: 2 })
    answer = () => Reconciled.rerun
    expect((await second.resume("p1"))?.output).toBe("paid 5")
    expect(counts).toEqual({ body: 2, reconcile: 3 })
    await second.close()
  })

  it("a reconcile that throws rejects with what it threw; the body does not run", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    const counts = { body: 0, reconcile: 0 }
    const first = payments(checkpointStore, counts, () => {
      throw new Error("provider unreachable")
    })
    await expect(runTurn(first, { amount: 5 }, { executionId: "p2" })).rejects.toThrow("connection reset")
    await expect(first.resume("p2")).rejects.toThrow("provider unreachable")
    expect(counts).toEqual({ body: 1, reconcile: 1 })
    await first.close()
  })

  it("a reconcile answering after close() rejects HARNESS_CLOSED and records nothing", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    const counts = { body: 0, reconcile: 0 }
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let asked!: () => void
    const wasAsked = new Promise<void>((resolve) => (asked = resolve))
    const first = payments(checkpointStore, counts, () => {
      asked()
      return released.then(() => Reconciled.completed("found payment of 5"))
    })
    await expect(runTurn(first, { amount: 5 }, { executionId: "p3" })).rejects.toThrow("connection reset")
    const resuming = rejection(first.resume("p3"))
    await wasAsked
    await first.close()
    release()
    const error = await resuming
    expect((error as NoeticError)?.code, String(error)).toBe("HARNESS_CLOSED")
    // Nothing recorded: the next host asks again.
    const second = payments(checkpointStore, counts, () => Reconciled.completed("found it later"))
    expect((await second.resume("p3"))?.output).toBe("found it later")
    expect(counts).toEqual({ body: 1, reconcile: 2 })
    await second.close()
  })

  it("at-most-once with retry throws NoeticConfigError AT_MOST_ONCE_RETRY_CONFLICT when built", () => {
    let thrown: unknown
    try {
      runCode({
        id: "charge",
        effects: "at-most-once",
        retry: { maxAttempts: 3, backoff: "fixed", initialDelay: 0 },
        execute: async () => "charged"
      })
    } catch (error) {
      thrown = error
    }
    expect(isNoeticConfigError(thrown)).toBe(true)
    expect((thrown as NoeticConfigError).code).toBe("AT_MOST_ONCE_RETRY_CONFLICT")
  })
})

describe("facade: ledger write failures", () => {
  /** A storage whose ledger record writes fail, as a full disk fails them. */
  const fullLedger = (): StorageAdapter => {
    const memory = createInMemoryStorage()
    return {
      get: (key) => memory.get(key),
      set: (key, value) =>
        /:ledger:\d{16}$/.test(key) ? Promise.reject(new Error("ENOSPC: no space left on device")) : memory.set(key, value),
      delete: (key) => memory.delete(key),
      list: (prefix) => memory.list(prefix)
    }
  }

  const graph = (ran: Array<string>) =>
    runCode({
      id: "root",
      execute: async (_: void, ctx) => {
        const a = await ctx.run(runCode({ id: "a", execute: () => (ran.push("a"), 1) }), undefined)
        return ctx.run(runCode({ id: "b", execute: (n: number) => (ran.push("b"), n + 1) }), a)
      }
    })

  it("best-effort (default): execute resolves", async () => {
    const ran: Array<string> = []
    const host = harness({
      name: "full",
      agentGraph: graph(ran),
      environment: { storage: { adapter: fullLedger(), checkpointStore: createCheckpointStore({ storage: createInMemoryStorage() }) } }
    })
    expect((await runTurn(host, undefined, { executionId: "f1" })).output).toBe(2)
    expect(ran).toEqual(["a", "b"])
  })

  it("stepLedgerDurability 'strict': rejects STEP_LEDGER_WRITE_FAILED and nothing downstream runs", async () => {
    const ran: Array<string> = []
    const host = harness({
      name: "full",
      agentGraph: graph(ran),
      environment: {
        storage: {
          adapter: fullLedger(),
          checkpointStore: createCheckpointStore({ storage: createInMemoryStorage() }),
          stepLedgerDurability: "strict"
        }
      }
    })
    const error = await rejection(runTurn(host, undefined, { executionId: "f2" }))
    expect(isNoeticError(error)).toBe(true)
    expect((error as NoeticError).code).toBe("STEP_LEDGER_WRITE_FAILED")
    expect((error as NoeticError).message).toContain("f2")
    expect(ran).toEqual(["a"])
  })

  it("an unknown stepLedgerDurability throws NoeticConfigError STEP_LEDGER_DURABILITY_INVALID", () => {
    expect(() =>
      new AgentHarness({
        name: "x",
        environment: { storage: { stepLedgerDurability: "always" as never } }
      })
    ).toThrow(expect.objectContaining({ code: "STEP_LEDGER_DURABILITY_INVALID" }))
  })
})
