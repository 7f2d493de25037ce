/**
 * How a process that did not build a step finds it again and runs it as its manifest
 * says: import the module that defined it (recorded when it was built) or an `entry`
 * module, and take the exported step with the recorded id. The same module may export
 * `subprocessLayer`, a Layer of the services the step needs in the child (a
 * `LanguageModel` provider, tools' clients).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { whileImportingStepModule } from "../internal/childFlag.ts"
import { ownFileUrl, toModuleUrl } from "../internal/moduleUrl.ts"
import type { SubprocessManifest } from "../schema/SubprocessManifest.ts"
import { StepUnavailable, SubprocessError } from "../services/SubprocessAdapter.ts"
import type { AgentHarness } from "./AgentHarness.ts"
import { type AnyStep, isStep } from "./Step.ts"

/** The exported step with id `stepId` (top-level exports and the default export's own fields). */
const findExported = (exports: Record<string, unknown>, stepId: string): AnyStep | undefined => {
  const candidates: Array<unknown> = Object.values(exports)
  const fallback = exports.default
  if (typeof fallback === "object" && fallback !== null && !isStep(fallback)) {
    candidates.push(...Object.values(fallback))
  }
  return candidates.find((value): value is AnyStep => isStep(value) && value.id === stepId)
}

/** The name of the export a step module uses to give its steps services in a child process. */
export const SUBPROCESS_LAYER_EXPORT = "subprocessLayer"

/** A step found in a module, with the services that module provides for it. */
export interface LoadedStep {
  readonly step: AnyStep
  readonly layer: Layer.Layer<never> | undefined
}

/**
 * `import(url)`. The CJS build rewrites a literal `import()` into `require()`, which
 * takes no file URL and no ES module with top-level await, so there (this file is a
 * `.cjs` chunk) a real dynamic import is compiled at run time instead.
 */
const importModule: (url: string) => Promise<Record<string, unknown>> = ownFileUrl.endsWith(".cjs")
  ? new Function("url", "return import(url)") as (url: string) => Promise<Record<string, unknown>>
  : (url) => import(url)

/** What trying one module found: the step, or why not. */
const tryModule = (url: string, stepId: string): Effect.Effect<LoadedStep | string> =>
  Effect.promise(() =>
    whileImportingStepModule(() => importModule(url)).then(
      (exports: Record<string, unknown>) => {
        const step = findExported(exports, stepId)
        if (step === undefined) return `${url} exports no step with id ${JSON.stringify(stepId)}`
        const layer = exports[SUBPROCESS_LAYER_EXPORT]
        return { step, layer: Layer.isLayer(layer) ? layer as unknown as Layer.Layer<never> : undefined }
      },
      (cause: unknown) => `${url} failed to import: ${cause instanceof Error ? cause.message : String(cause)}`
    )
  )

/**
 * Loads step `stepId` from `entry` when given, else from `module`. Fails with
 * `StepUnavailable` naming both when neither exports it.
 */
export const loadStep = (
  handleId: string,
  stepId: string,
  module: string | null,
  entry: string | null
): Effect.Effect<LoadedStep, SubprocessError> =>
  Effect.gen(function*() {
    const notes: Array<string> = []
    for (const candidate of [entry, module]) {
      if (candidate === null) continue
      const found = yield* tryModule(toModuleUrl(candidate), stepId)
      if (typeof found !== "string") return found
      notes.push(found)
    }
    return yield* new SubprocessError({
      reason: new StepUnavailable({
        handleId,
        stepId,
        module,
        entry,
        message: `cannot load step ${JSON.stringify(stepId)}: ${
          notes.length === 0 ? "the step recorded no module and the adapter has no entry" : notes.join("; ")
        }. Export the step from a module without top-level side effects, or give the adapter an entry module ` +
          "(noetic: registryEntry)."
      })
    })
  })

/**
 * Runs the step of `manifest` as the root of `harness` on its recorded input, with
 * its recorded execution id, thread, resource and cwd, and the services its module
 * exports (`layer`); resolves with the step's output. `onRootDispatch` is called once
 * the step is dispatched, just before its body starts (see `ExecuteOptions`).
 */
export const runManifestStep = (
  harness: AgentHarness<any>,
  manifest: SubprocessManifest,
  input: unknown,
  layer: Layer.Layer<never> | undefined,
  onRootDispatch?: () => void
): Effect.Effect<unknown, unknown> => {
  const run = harness.execute(input, {
    executionId: manifest.executionId,
    ...(manifest.threadId === null ? {} : { threadId: manifest.threadId }),
    ...(manifest.resourceId === null ? {} : { resourceId: manifest.resourceId }),
    ...(manifest.cwdInit === null ? {} : { cwd: manifest.cwdInit }),
    ...(onRootDispatch === undefined ? {} : { onRootDispatch }),
    runByAdapter: true
  }) as unknown as Effect.Effect<{ readonly output: unknown }, unknown>
  return Effect.map(layer === undefined ? run : Effect.provide(run, layer), (result) => result.output)
}
