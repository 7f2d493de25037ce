import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as AgentHarness from "../../src/harness/AgentHarness.ts"
import { loop, runCode } from "../../src/harness/Step.ts"
import * as CheckpointStore from "../../src/services/CheckpointStore.ts"
import { makeMemory } from "../../src/services/StorageAdapter.ts"
import { isConfigError, toFacadeError } from "../../src/promise/errors.ts"

describe("the engine owns the harness's validations", () => {
  it.effect("a lease ttl that is not positive and finite fails make with LeaseTtlInvalid (LEASE_TTL_INVALID)", () =>
    Effect.gen(function*() {
      const store = yield* CheckpointStore.makeWith(yield* makeMemory)
      for (const ttl of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "soon" as never]) {
        const error = yield* Effect.flip(
          AgentHarness.make({ name: "leased", lease: { owner: "host-a", ttl } }).pipe(
            Effect.provideService(CheckpointStore.CheckpointStore, store)
          )
        )
        assert.strictEqual(error._tag, "LeaseTtlInvalid")
        assert.strictEqual(error.code, "LEASE_TTL_INVALID")
      }
      yield* AgentHarness.make({ name: "leased", lease: { owner: "host-a", ttl: "5 seconds" } }).pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, store)
      )
    }))

  it.effect("validateOptions checks every reachable step id; config errors are recognised by their schema", () =>
    Effect.gen(function*() {
      const bad = { ...runCode("x", () => Effect.succeed(1)), id: " " }
      const error = yield* Effect.flip(
        AgentHarness.validateOptions({ agentGraph: loop("outer", bad, { until: () => true }) })
      )
      assert.strictEqual(error.code, "EMPTY_STEP_ID")
      assert.isTrue(isConfigError(error))
      const facade = toFacadeError(error)
      assert.strictEqual(facade.name, "NoeticConfigError")
      // A run-time error with a code-like shape but no hint is not a configuration error.
      assert.isFalse(isConfigError({ _tag: "StorageError", code: "X", message: "m" }))
    }))
})
