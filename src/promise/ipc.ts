/**
 * The Promise facade of durable IPC: `createDurableOutboundQueue` and `encodeFrame`,
 * as the documented API has them.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import { IpcError } from "../IpcError.ts"
import { type ClientFrame, encodeFrame as encodeFrameEffect, type ServerFrame } from "../schema/IpcFrame.ts"
import { makeWith } from "../services/DurableOutboundQueue.ts"
import { toFacadeError } from "./errors.ts"
import { runForFacade, type StorageAdapter, toEngineStorage } from "./storage.ts"

/** A durable outbound queue: numbered, persisted frames, kept until acknowledged. */
export interface DurableOutboundQueue {
  /** The id the queue's keys are written under. */
  readonly socketId: string
  /** Appends a frame (opaque text, usually a frame's JSON) durably; resolves with its seq. */
  append(frame: string): Promise<{ seq: number }>
  /** The unacked frames with seq at least `fromSeq`, in order. */
  frameRange(fromSeq: number): Promise<Array<{ seq: number; frame: string }>>
  /** Marks frames up to `seq` handled and compacts them (clamped to the head; lower acks ignored). */
  ackUpTo(seq: number): Promise<void>
  /** The seq of the last durable frame (0 when none). */
  readonly headSeq: number
  /** The acked watermark. */
  readonly ackedSeq: number
  /** Waits for in-flight writes; the queue is unusable afterwards. */
  close(): Promise<void>
}

/** The queue id a socket path gets when none is given: short, so file keys stay short. */
export const socketIdOf = (socketPath: string): string =>
  createHash("sha256").update(NodePath.resolve(socketPath)).digest("hex").slice(0, 20)

/** Opens (or reopens, repairing what a crash left) the durable outbound queue of `socketPath`. */
export const createDurableOutboundQueue = async (options: {
  readonly storage: StorageAdapter
  readonly socketPath: string
  readonly socketId?: string
}): Promise<DurableOutboundQueue> => {
  const socketId = options.socketId ?? socketIdOf(options.socketPath)
  const queue = await runForFacade(
    Effect.flatMap(toEngineStorage(options.storage), (storage) => makeWith(storage, { socketId }))
  )
  return {
    socketId,
    append: (frame) => runForFacade(Effect.map(queue.append(frame), (seq) => ({ seq }))),
    frameRange: (fromSeq) => runForFacade(Effect.map(queue.frameRange(fromSeq), (entries) => entries.map((e) => ({ ...e })))),
    ackUpTo: (seq) => runForFacade(Effect.asVoid(queue.ackUpTo(seq))),
    get headSeq() {
      return Effect.runSync(queue.headSeq)
    },
    get ackedSeq() {
      return Effect.runSync(queue.ackedSeq)
    },
    close: () => runForFacade(queue.close)
  }
}

/** One wire line (with its newline) for a frame; throws `NoeticError` when it cannot be encoded. */
export const encodeFrame = (frame: ServerFrame | ClientFrame): string => {
  const result = Effect.runSync(Effect.result(encodeFrameEffect(frame)))
  if (result._tag === "Success") return result.success
  throw toFacadeError(new IpcError({ socketPath: "", reason: result.failure }))
}
