/**
 * Every code sample of the seed page (durability.md), run with only its import
 * specifiers changed to `noetic-effect/promise` (here the source module). Each
 * sample's body is as the page prints it; what it `declare`s (a harness, an
 * execution id, a socket) is supplied by the test, and `process.env.HOME` points at
 * a temp directory so the samples' `~/.noetic` roots stay out of the real home.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
// import { AgentHarness, createCheckpointStore } from '@noetic-tools/core';
// import { createFileStorage, createLocalSubprocessAdapter } from '@noetic-tools/platform-node';
// import { AgentHarness, DEFAULT_STEP_LEDGER_RETENTION } from '@noetic-tools/core';
// import { reattachLiveChildren } from '@noetic-tools/cli';
// import { createDurableOutboundQueue } from '@noetic-tools/platform-node';
import {
  AgentHarness,
  type CheckpointSnapshot,
  createCheckpointStore,
  createDurableOutboundQueue,
  createFileStorage,
  createInMemoryStorage,
  createLocalSubprocessAdapter,
  DEFAULT_STEP_LEDGER_RETENTION,
  encodeFrame,
  reattachLiveChildren
} from "../../src/promise/index.ts"
import { agent, backgroundWorkerStep, researchAgent } from "../fixtures/seedSteps.ts"
import { runTurn } from "./turns.ts"

const realHome = process.env.HOME
let home: string
beforeAll(() => {
  home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "noetic-seed-home-"))
  process.env.HOME = home
})
afterAll(() => {
  process.env.HOME = realHome
})

const closing: Array<{ close(): Promise<void> }> = []
const closeAll = () => Promise.all(closing.splice(0).map((c) => c.close()))

describe("seed page samples", () => {
  it("Quick Example: a harness with file storages, a local subprocess adapter and a checkpoint store", async () => {
    // Two distinct on-disk roots: subprocess manifests vs checkpoint snapshots.
    const subprocessStorage = createFileStorage({
      root: `${process.env.HOME}/.noetic/subprocess`,
    });
    const checkpointStorage = createFileStorage({
      root: `${process.env.HOME}/.noetic/checkpoints`,
    });

    const harness = new AgentHarness({
      name: 'durable-agent',
      agentGraph: agent,
      params: {},
      environment: {
        subprocess: createLocalSubprocessAdapter({ storage: subprocessStorage }),
        storage: {
          checkpointStore: createCheckpointStore({ storage: checkpointStorage }),
        },
      },
    });
    closing.push(harness)
    try {
      // "Any execute() turn lands a checkpoint."
      const { executionId } = await runTurn(harness, "hello")
      expect(Fs.existsSync(Path.join(home, ".noetic", "checkpoints"))).toBe(true)
      expect((await harness.restore(executionId))?.id).toBe(executionId)
    } finally {
      await closeAll()
    }
  })

  it("What's in a Snapshot: the CheckpointSnapshot type", () => {
    const snapshot: CheckpointSnapshot = {
      schemaVersion: 2,
      executionId: "e",
      frontier: [{ stepId: "s", input: 1, state: {} }],
      layers: {},
      cwd: { current: null, previous: null },
      askUser: [{ id: "a", input: {}, createdAt: 0 }],
      itemLog: { items: [] },
      capturedAt: new Date(0).toISOString()
    }
    expect(snapshot.schemaVersion).toBe(2)
  })

  it("Restore, Retention, When to Clear a Ledger, Restoring a decorated context", async () => {
    const checkpointStore = createCheckpointStore({ storage: createInMemoryStorage() })
    const first = new AgentHarness({
      name: "durable-agent",
      agentGraph: agent,
      params: {},
      environment: { storage: { checkpointStore } }
    })
    const { executionId: recorded } = await runTurn(first, "x")
    await first.close()

    // --- Retention ---
    const harness = new AgentHarness({
      name: 'durable-agent',
      params: {},
      environment: {
        storage: {
          checkpointStore,
          stepLedgerRetention: {
            maxEntryBytes: 128 * 1024, // default: largest output recorded, UTF-8 bytes of its JSON
            maxEntries: 1e3,           // default: entries retained per execution
          },
        },
      },
    });
    closing.push(harness)
    expect(DEFAULT_STEP_LEDGER_RETENTION).toEqual({ maxEntryBytes: 128 * 1024, maxEntries: 1000 })

    // --- Restore ---
    await (async (harness: AgentHarness, executionId: string) => {
      const restored = await harness.restore(executionId);
      if (restored !== null) {
        // `restored.id === executionId`. The item log, layer state, and cwd
        // are rebuilt from the snapshot; the frontier tells the caller which
        // step to resume.
        expect(restored.id).toBe(executionId)
      }
      expect(restored).not.toBeNull()
    })(harness, recorded)

    // --- Restoring a decorated context ---
    await (async (harness: AgentHarness, executionId: string, sessionState: { queue: unknown }) => {
      const restored = await harness.restore(executionId, {
        state: sessionState,
      });
      expect(restored?.state).toBe(sessionState)
    })(harness, recorded, { queue: "host queue" })

    // --- When to Clear a Ledger ---
    await (async (executionId: string) => {
      // Discards the snapshot AND every ledger shard for this execution.
      await harness.clearCheckpoint(executionId);
    })(recorded)
    expect(await harness.restore(recorded)).toBeNull()
    await closeAll()
  })

  it("Durable IPC: append, ack, resume from the client's ack", async () => {
    const storage = createInMemoryStorage()
    const socketPath = Path.join(home, "run", "agent.sock")
    const written: Array<string> = []
    const socket = { write: (line: string) => written.push(line) }
    const frame = { type: "item" as const, item: { type: "message", content: "hello" } }

    const queue = await createDurableOutboundQueue({ storage, socketPath });

    // On each outbound frame:
    const { seq } = await queue.append(JSON.stringify(frame));
    socket.write(encodeFrame({ type: 'durable', seq, frame }));

    const second = await queue.append(JSON.stringify({ type: "text", text: "again" }))
    const ack = { throughSeq: seq }
    // On client durableAck:
    await queue.ackUpTo(ack.throughSeq);

    const resume = { ackedThrough: seq }
    // On client durableResume:
    for (const entry of await queue.frameRange(resume.ackedThrough + 1)) {
      socket.write(encodeFrame({
        type: 'durable',
        seq: entry.seq,
        frame: JSON.parse(entry.frame),
      }));
    }
    expect(written.map((line) => JSON.parse(line).seq)).toEqual([seq, second.seq])
    await queue.close()
  })

  it("Run an Agent Out-of-Process and Survive a Host Crash: a local child, then reattach on a second boot", async () => {
    const release = Path.join(home, "release-job")
    const adapters: Array<{ close(): Promise<void> }> = []
    const boot = () => {
      const subprocess = createLocalSubprocessAdapter({
        storage: createFileStorage({ root: `${process.env.HOME}/.noetic/subprocess` }),
        // This test cannot kill its own process: the first host "crashes" by closing
        // an adapter that lets its children outlive it (test/crash kills real hosts).
        outliveHost: true,
      })
      adapters.push(subprocess)
      // First boot: configure durable storage.
      const harness = new AgentHarness({
        name: 'crash-proof',
        agentGraph: agent,
        params: {},
        environment: {
          subprocess,
          storage: {
            checkpointStore: createCheckpointStore({
              storage: createFileStorage({ root: `${process.env.HOME}/.noetic/checkpoints` }),
            }),
          },
        },
      });
      closing.push(harness)
      return harness
    }
    try {
      const harness = boot()
      const parentCtx = harness.createContext()

      // --- Run an Agent Out-of-Process ---
      const localAdapter = createLocalSubprocessAdapter({
        storage: createFileStorage({
          root: `${process.env.HOME}/.noetic/subprocess`,
        }),
      });

      const handle = harness.detachedSpawn(
        researchAgent,
        'summarise the latest arXiv papers on RL',
        parentCtx,
        {
          subprocess: localAdapter,
          cwdInit: '/tmp/research-workspace',
        },
      );

      // The parent continues immediately. The child runs in a separate bun
      // process. If the parent crashes, the manifest survives and the child
      // keeps running; on restart, `reattachLiveChildren` rebinds it.
      const result = await handle.await();
      expect(result).toContain("cwd /tmp/research-workspace")
      expect(result).not.toContain(`pid ${process.pid})`)

      // --- Survive a Host Crash ---
      const jobSpec = { release, name: "nightly" }
      // Launch a long-lived child.
      const worker = harness.detachedSpawn(backgroundWorkerStep, jobSpec, parentCtx);
      await worker.started()

      // ... process crashes ... The first host lets go of the child as a dead host would,
      // so it cannot connect to the child after the second host has and take it back.
      await adapters[0]!.close()
      {
        const harness = boot()
        const { handles, contexts } = await reattachLiveChildren(harness);
        // `handles` contains the still-running background worker.
        // `contexts` has its rebuilt parent context.
        expect(handles.map((h) => h.stepId)).toContain("backgroundWorkerStep")
        const live = handles.find((h) => h.stepId === "backgroundWorkerStep")!
        expect(contexts.get(live.handleId)?.id).toBe(parentCtx.id)
        Fs.writeFileSync(release, "")
        expect(await live.await()).toBe("nightly done in release-job")
      }
    } finally {
      Fs.writeFileSync(release, "")
      await closeAll()
      await Promise.all(adapters.map((adapter) => adapter.close()))
    }
  }, 60_000)
})
