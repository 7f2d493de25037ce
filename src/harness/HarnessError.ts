/**
 * Runtime failures of the agent harness (config failures live in `Errors.ts`).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** `invokeTool` named a tool the harness was not given. */
export class UnknownTool extends Schema.TaggedError<UnknownTool>("noetic-effect/UnknownTool")("UnknownTool", {
  stepId: Schema.String,
  tool: Schema.String,
  known: Schema.Array(Schema.String)
}) {
  /** The error code. */
  get code(): "UNKNOWN_TOOL" {
    return "UNKNOWN_TOOL"
  }
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
  /** The error code. */
  get code(): "TOOL_FAILED" {
    return "TOOL_FAILED"
  }
  override get message(): string {
    return `tool ${JSON.stringify(this.tool)} failed in step ${this.stepId}`
  }
}

/** An ask-user prompt was cancelled instead of answered. */
export class AskUserCancelled extends Schema.TaggedError<AskUserCancelled>("noetic-effect/AskUserCancelled")(
  "AskUserCancelled",
  { promptId: Schema.String, reason: Schema.optionalKey(Schema.String) }
) {
  /** The error code. */
  get code(): "ASK_USER_CANCELLED" {
    return "ASK_USER_CANCELLED"
  }
  override get message(): string {
    return `ask-user prompt ${this.promptId} was cancelled${this.reason === undefined ? "" : `: ${this.reason}`}`
  }
}

/** An ask-user answer named a prompt that no live context of this harness holds. */
export class UnknownAskUserPrompt extends Schema.TaggedError<UnknownAskUserPrompt>(
  "noetic-effect/UnknownAskUserPrompt"
)("UnknownAskUserPrompt", { executionId: Schema.String, promptId: Schema.String }) {
  /** The error code. */
  get code(): "UNKNOWN_ASK_USER_PROMPT" {
    return "UNKNOWN_ASK_USER_PROMPT"
  }
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
  /** The error code. */
  get code(): "RESUME_INPUT_UNAVAILABLE" {
    return "RESUME_INPUT_UNAVAILABLE"
  }
  override get message(): string {
    return `cannot resume execution ${this.executionId}: the input of root step ${this.rootStepId} is not in its snapshot frontier and its output is not in the ledger`
  }
}

/** A `spawn` step's child ran past the step's `timeout`; the child was interrupted. */
export class SpawnTimeout extends Schema.TaggedError<SpawnTimeout>("noetic-effect/SpawnTimeout")("SpawnTimeout", {
  stepId: Schema.String,
  timeoutMs: Schema.Number
}) {
  /** The error code. */
  get code(): "SPAWN_TIMEOUT" {
    return "SPAWN_TIMEOUT"
  }
  override get message(): string {
    return `spawn step ${this.stepId} timed out after ${this.timeoutMs}ms`
  }
}

/** A loop ran `maxIterations` iterations (retries included) without its `until` saying stop. */
export class LoopMaxIterations extends Schema.TaggedError<LoopMaxIterations>("noetic-effect/LoopMaxIterations")(
  "LoopMaxIterations",
  { stepId: Schema.String, maxIterations: Schema.Number }
) {
  /** The error code. */
  get code(): "LOOP_MAX_ITERATIONS" {
    return "LOOP_MAX_ITERATIONS"
  }
  override get message(): string {
    // noetic's wording (its loop throws step_failed with this cause).
    return `Loop exceeded maximum iterations (${this.maxIterations})`
  }
}

/**
 * An `inParallel` that failed as a whole (noetic's `fork_partial`): in `all` mode a path
 * failed (the paths still running were interrupted, and are listed as cancelled), in
 * `race` mode every path failed. `succeeded` holds the outputs of the paths that
 * finished, `failed` each other path with what it failed with.
 */
export class ForkPartial extends Schema.TaggedError<ForkPartial>("noetic-effect/ForkPartial")("ForkPartial", {
  stepId: Schema.String,
  succeeded: Schema.Array(Schema.Struct({ stepId: Schema.String, value: Schema.Unknown })),
  failed: Schema.Array(Schema.Struct({ stepId: Schema.String, error: Schema.Unknown }))
}) {
  /** The error code. */
  get code(): "FORK_PARTIAL" {
    return "FORK_PARTIAL"
  }
  override get message(): string {
    return `Fork '${this.stepId}' partial failure: ${this.succeeded.length} succeeded, ${this.failed.length} failed`
  }
}

/** A loop built with a `maxIterations` below 1, NaN or Infinity ran (see `checkMaxIterationsWhenRun`). */
export class InvalidMaxIterations extends Schema.TaggedError<InvalidMaxIterations>("noetic-effect/InvalidMaxIterations")(
  "InvalidMaxIterations",
  { stepId: Schema.String, maxIterations: Schema.Number }
) {
  /** The error code. */
  get code(): "INVALID_MAX_ITERATIONS" {
    return "INVALID_MAX_ITERATIONS"
  }
  override get message(): string {
    return `Invalid maxIterations: ${this.maxIterations}`
  }
}

/** The context was aborted (`ctx.abort(reason)`): the next step boundary fails with this. */
export class StepCancelled extends Schema.TaggedError<StepCancelled>("noetic-effect/StepCancelled")("StepCancelled", {
  executionId: Schema.String,
  reason: Schema.optionalKey(Schema.String)
}) {
  /** The error code. */
  get code(): "STEP_CANCELLED" {
    return "STEP_CANCELLED"
  }
  override get message(): string {
    return `execution ${this.executionId} was cancelled${this.reason === undefined ? "" : `: ${this.reason}`}`
  }
}

/** A `callModel` reply did not parse as its `output` schema (noetic's `model_parse_error`). */
export class ModelOutputInvalid extends Schema.TaggedError<ModelOutputInvalid>("noetic-effect/ModelOutputInvalid")(
  "ModelOutputInvalid",
  { stepId: Schema.String, raw: Schema.String, issues: Schema.Array(Schema.String) }
) {
  /** The error code. */
  get code(): "MODEL_OUTPUT_INVALID" {
    return "MODEL_OUTPUT_INVALID"
  }
  /** noetic's kind for a reply that fails its output schema. */
  readonly noeticKind = "model_parse_error"
  override get message(): string {
    return `the reply of step ${this.stepId} does not match its output schema: ${this.issues.join("; ")}`
  }
}

/** A context layer's `afterModelCall` denied a model reply (noetic's `steering_denied`). */
export class SteeringDenied extends Schema.TaggedError<SteeringDenied>("noetic-effect/SteeringDenied")(
  "SteeringDenied",
  { stepId: Schema.String, guidance: Schema.String }
) {
  /** The error code. */
  get code(): "STEERING_DENIED" {
    return "STEERING_DENIED"
  }
  /** noetic's kind for a reply a layer denied. */
  readonly noeticKind = "steering_denied"
  override get message(): string {
    return `a context layer denied the reply of step ${this.stepId}: ${this.guidance}`
  }
}

/** A step's identity at a path: its id and kind. */
const StepIdentity = Schema.Struct({ stepId: Schema.String, kind: Schema.String })

/**
 * The step at a recorded path is not the one recorded there (the workflow was
 * edited between the run and its resume), and the harness has `onDivergence: "fail"`.
 * Nothing was discarded: fix the workflow, or resume under the default policy.
 */
export class ReplayDiverged extends Schema.TaggedError<ReplayDiverged>("noetic-effect/ReplayDiverged")(
  "ReplayDiverged",
  {
    executionId: Schema.String,
    /** The recorded path the workflow no longer matches. */
    path: Schema.String,
    recorded: StepIdentity,
    current: StepIdentity,
    /** Where the current step runs: `path` for a changed kind, its own path for a renamed or inserted step. */
    currentPath: Schema.String
  }
) {
  /** The error code. */
  get code(): "REPLAY_DIVERGED" {
    return "REPLAY_DIVERGED"
  }
  override get message(): string {
    return `replay diverged at ${this.path} of execution ${this.executionId}: the ledger recorded ${this.recorded.kind} ${
      JSON.stringify(this.recorded.stepId)
    } there, the workflow now has ${this.current.kind} ${JSON.stringify(this.current.stepId)}${
      this.currentPath === this.path ? "" : ` (at ${this.currentPath})`
    }`
  }
}

/**
 * An at-most-once step found its intent recorded without a completion (a crash cut
 * its body short) and has no `reconcile`: whether the body took effect is unknown,
 * so it is not run again. Check the outside world, then clear the execution or give
 * the step a `reconcile`.
 */
export class ToolOutcomeUnknown extends Schema.TaggedError<ToolOutcomeUnknown>("noetic-effect/ToolOutcomeUnknown")(
  "ToolOutcomeUnknown",
  { executionId: Schema.String, path: Schema.String, step: StepIdentity }
) {
  /** The error code. */
  get code(): "TOOL_OUTCOME_UNKNOWN" {
    return "TOOL_OUTCOME_UNKNOWN"
  }
  override get message(): string {
    return `the outcome of at-most-once ${this.step.kind} ${
      JSON.stringify(this.step.stepId)
    } at ${this.path} of execution ${this.executionId} is unknown: its body started before a crash and did not record a completion; it is not run again without a reconcile`
  }
}

/** A short description of a value for an error message: its type, and its JSON when short. */
export const describeAnswer = (u: unknown): string => {
  if (u === null || u === undefined) return String(u)
  let json: string | undefined
  try {
    json = JSON.stringify(u)
  } catch {
    json = undefined
  }
  const text = json === undefined ? String(u) : json
  return `${typeof u} ${text.length > 80 ? `${text.slice(0, 77)}...` : text}`
}

/**
 * An at-most-once step's `reconcile` answered something that is not a `Reconciled`
 * value (`Reconciled.completed(output)` or `Reconciled.rerun`): a plain object, the
 * recorded output itself. Nothing is recorded and the body does not run; the intent
 * stays, so a resume asks `reconcile` again once it answers with `Reconciled`.
 */
export class ReconcileAnswerInvalid extends Schema.TaggedError<ReconcileAnswerInvalid>(
  "noetic-effect/ReconcileAnswerInvalid"
)("ReconcileAnswerInvalid", { executionId: Schema.String, path: Schema.String, step: StepIdentity, answer: Schema.String }) {
  /** The error code. */
  get code(): "RECONCILE_ANSWER_INVALID" {
    return "RECONCILE_ANSWER_INVALID"
  }
  override get message(): string {
    return `reconcile of at-most-once ${this.step.kind} ${JSON.stringify(this.step.stepId)} at ${this.path} of execution ${
      this.executionId
    } answered ${this.answer}, not Reconciled.completed(output) or Reconciled.rerun: nothing was recorded and the body did not run; its intent stays pending`
  }
}

/**
 * An at-most-once step's `reconcile` answered after its harness was closed: what it
 * found is not recorded and the body does not run; the intent stays pending for the
 * next resume.
 */
export class HarnessClosed extends Schema.TaggedError<HarnessClosed>("noetic-effect/HarnessClosed")(
  "HarnessClosed",
  { harness: Schema.String, executionId: Schema.String, path: Schema.String }
) {
  /** The error code. */
  get code(): "HARNESS_CLOSED" {
    return "HARNESS_CLOSED"
  }
  override get message(): string {
    return `harness ${this.harness} was closed before the step at ${this.path} of execution ${this.executionId} could record its outcome: nothing was recorded`
  }
}

/**
 * A step completed but its ledger record could not be written, and the harness asks
 * for strict durability (`stepLedgerDurability: "strict"`): the run stops here, so no
 * later step runs on an outcome a resume would not replay. `cause` is the storage failure.
 */
export class StepLedgerWriteFailed extends Schema.TaggedError<StepLedgerWriteFailed>(
  "noetic-effect/StepLedgerWriteFailed"
)("StepLedgerWriteFailed", { executionId: Schema.String, path: Schema.String, step: StepIdentity, cause: Schema.Defect() }) {
  /** The error code. */
  get code(): "STEP_LEDGER_WRITE_FAILED" {
    return "STEP_LEDGER_WRITE_FAILED"
  }
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `the ledger record of ${this.step.kind} ${JSON.stringify(this.step.stepId)} at ${this.path} of execution ${
      this.executionId
    } could not be written (${cause}); under strict durability the run stops here`
  }
}
