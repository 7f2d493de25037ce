/**
 * `execute` resolves once its input is queued (noetic's semantics, docs/runtime.md#sessions);
 * `runTurn` is `execute` followed by the wait for that message's turn: its
 * `{ executionId, output }`, or its failure.
 */
import type { ExecuteReceipt } from "../../src/promise/index.ts"

export const runTurn = <O>(
  harness: { execute(input: any, options?: any): Promise<ExecuteReceipt<O>> },
  input?: unknown,
  options?: object
): Promise<{ readonly executionId: string; readonly output: O }> =>
  harness.execute(input, options).then((receipt) => receipt.result())
