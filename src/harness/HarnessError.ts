/**
 * Runtime failures of the agent harness (config failures live in `Errors.ts`).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/** `invokeTool` named a tool the harness was not given. */
export class UnknownTool extends Schema.TaggedError<UnknownTool>("noetic-effect/UnknownTool")("UnknownTool", {
  stepId: Schema.String,
  tool: Schema.String,
  known: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `step ${this.stepId} invokes unknown tool ${JSON.stringify(this.tool)}; known tools: ${
      this.known.join(", ") || "(none)"
    }`
  }
}

/** A tool's handler failed; `cause` is what it failed with. */
export class ToolFailed extends Schema.TaggedError<ToolFailed>("noetic-effect/ToolFailed")("ToolFailed", {
  stepId: Schema.String,
  tool: Schema.String,
  cause: Schema.Defect()
}) {
  override get message(): string {
    return `tool ${JSON.stringify(this.tool)} failed in step ${this.stepId}`
  }
}

/** An ask-user prompt was cancelled instead of answered. */
export class AskUserCancelled extends Schema.TaggedError<AskUserCancelled>("noetic-effect/AskUserCancelled")(
  "AskUserCancelled",
  { promptId: Schema.String, reason: Schema.optionalKey(Schema.String) }
) {
  override get message(): string {
    return `ask-user prompt ${this.promptId} was cancelled${this.reason === undefined ? "" : `: ${this.reason}`}`
  }
}

/** An ask-user answer named a prompt that no live context of this harness holds. */
export class UnknownAskUserPrompt extends Schema.TaggedError<UnknownAskUserPrompt>(
  "noetic-effect/UnknownAskUserPrompt"
)("UnknownAskUserPrompt", { executionId: Schema.String, promptId: Schema.String }) {
  override get message(): string {
    return `no pending ask-user prompt ${this.promptId} in a live context of execution ${this.executionId}`
  }
}

/**
 * `resume` found a snapshot but cannot know the root input: the root step is neither
 * in flight in the snapshot nor recorded in the ledger (its output was dropped).
 */
export class ResumeInputUnavailable extends Schema.TaggedError<ResumeInputUnavailable>(
  "noetic-effect/ResumeInputUnavailable"
)("ResumeInputUnavailable", { executionId: Schema.String, rootStepId: Schema.String }) {
  override get message(): string {
    return `cannot resume execution ${this.executionId}: the input of root step ${this.rootStepId} is not in its snapshot frontier and its output is not in the ledger`
  }
}

/** A `spawn` step's child ran past the step's `timeout`; the child was interrupted. */
export class SpawnTimeout extends Schema.TaggedError<SpawnTimeout>("noetic-effect/SpawnTimeout")("SpawnTimeout", {
  stepId: Schema.String,
  timeoutMs: Schema.Number
}) {
  override get message(): string {
    return `spawn step ${this.stepId} timed out after ${this.timeoutMs}ms`
  }
}

/** A loop ran `maxIterations` iterations (retries included) without its `until` saying stop. */
export class LoopMaxIterations extends Schema.TaggedError<LoopMaxIterations>("noetic-effect/LoopMaxIterations")(
  "LoopMaxIterations",
  { stepId: Schema.String, maxIterations: Schema.Number }
) {
  override get message(): string {
    return `loop ${this.stepId} exceeded its maximum of ${this.maxIterations} iterations`
  }
}

/** The context was aborted (`ctx.abort(reason)`): the next step boundary fails with this. */
export class StepCancelled extends Schema.TaggedError<StepCancelled>("noetic-effect/StepCancelled")("StepCancelled", {
  executionId: Schema.String,
  reason: Schema.optionalKey(Schema.String)
}) {
  override get message(): string {
    return `execution ${this.executionId} was cancelled${this.reason === undefined ? "" : `: ${this.reason}`}`
  }
}

/** A `callModel` reply did not parse as its `output` schema (noetic's `model_parse_error`). */
export class ModelOutputInvalid extends Schema.TaggedError<ModelOutputInvalid>("noetic-effect/ModelOutputInvalid")(
  "ModelOutputInvalid",
  { stepId: Schema.String, raw: Schema.String, issues: Schema.Array(Schema.String) }
) {
  override get message(): string {
    return `the reply of step ${this.stepId} does not match its output schema: ${this.issues.join("; ")}`
  }
}
