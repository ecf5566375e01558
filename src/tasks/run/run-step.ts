import type { CallReport } from "../../observability/create-call-observer.js";
import type { Span } from "../../tracing/tracer.js";
import type { HANDOVER } from "../core/task-queue.js";
import type { TaskRecord } from "../core/task-record.js";
import type { RunEnd } from "../service/task-finisher.js";

/** What a run reports: its channel tries (for the task line) and its span. */
export interface RunTelemetry {
  report: CallReport;
  span: Span;
}

/**
 * One claimed run of a task, as a kind's run step sees it. The runner made
 * it: the task is `in_progress` under this run's attempt, its lease is held,
 * its timeout and cancel watched.
 */
export interface RunContext {
  /** The task as this run claimed it. */
  started: TaskRecord;
  /**
   * Aborted when the run must stop: its lease ended (cancel, hand-back,
   * shutdown, lost), its timeout passed, or a re-read found the task finished
   * or taken; the reason says which (see `settleRunFailure`).
   */
  signal: AbortSignal;
  /**
   * What bounds a generation paid for at the channel: the held call that
   * makes it, then keeping its result (writing its images, completing the
   * task). It is `signal`, except that a lease that lapsed (its lock not
   * renewed in time: a store outage longer than the lease, a stalled event
   * loop) does not abort it: the completion's compare-and-set on this run's
   * attempt decides whether the result counts, and the runner's re-read
   * aborts it once another run took the task.
   */
  paidSignal: AbortSignal;
  /**
   * Aborted when this process begins to stop and another run could take the
   * task over (see `TaskLease.draining`): a step that can give its task up at
   * no cost (the poll of a channel's job) hands it over and resolves
   * `HANDOVER`; any other goes on.
   */
  draining: AbortSignal;
  /** Whether the task's timeout (from its `started_at`) has passed, its timer fired or not. */
  pastDeadline(): boolean;
  /** What the run learned of its channel so far, for the end it writes (the task line). */
  end(): RunEnd;
  /** The run's span and channel tries. */
  telemetry: RunTelemetry;
  /**
   * Ends a run that did not succeed as the error and the signal say: the
   * step's one way to fail (a timeout, a cancel, a hand-back, a channel's
   * refusal are each written as they must be).
   */
  fail(err: unknown): Promise<void>;
}

/**
 * What a kind of task does once claimed (an image generation or edit, a
 * background response, ...): call its channel, keep what it made, and end
 * the task through the finisher, or through {@link RunContext.fail}. Queue,
 * lease, claim, timeout, cancel and telemetry are the runner's, shared by
 * every kind. Resolves `HANDOVER` when it gave the task back to the queue
 * (its record `queued` again), and rejects only when the run must be tried
 * again later (a store that cannot be read or written).
 */
export type RunStep = (context: RunContext) => Promise<typeof HANDOVER | void>;

/** The kinds of task the runner knows, each by its run step. */
export interface RunSteps {
  /** Generations and edits (`kind` `generation`, `edit`, or absent). */
  image: RunStep;
  /** Background responses (`kind` `response`). */
  response: RunStep;
}

/** Which run step runs `record`. */
export function stepKindOf(record: TaskRecord): keyof RunSteps {
  return record.kind === "response" ? "response" : "image";
}
