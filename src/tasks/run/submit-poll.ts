import type { Logger } from "pino";
import type { Channel } from "../../channels/channel.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { Tracer } from "../../tracing/tracer.js";
import { TaskFailure } from "../core/task-failure.js";
import { HANDOVER } from "../core/task-queue.js";
import { imageCallObserver } from "./image-call-observer.js";
import { imageUsageOf } from "../core/image-usage.js";
import { observeTokenUsage, setUsageAttributes } from "../../observability/create-call-observer.js";
import { isFinished, type TaskRecord, type UpstreamJob } from "../core/task-record.js";
import type { TaskStore } from "../core/task-store.js";
import { taskLine } from "../service/task-line.js";
import type { EditFile } from "./generate-images.js";
import { keepResult, type KeepResultDeps } from "./keep-result.js";
import { keepPartials, type KeepPartialsDeps } from "./keep-partials.js";
import { readBackgroundStream } from "./background-stream.js";
import type { AbortReason } from "./run-failure.js";
import type { RunContext } from "./run-step.js";
import {
  cancelJob,
  pollJob,
  submitJob,
  type FollowedJob,
  type JobCallDeps,
  type JobReading,
  type StreamedSubmission,
} from "./job-calls.js";
import type { JobState } from "./job-dialect.js";
import { JOB_DIALECTS } from "./job-dialects.js";
import { pauseOrDrain } from "./pause-or-drain.js";
import { SKIPPED_IN_ANSWER, warnSkippedOnce } from "./warn-skipped-once.js";

/** What the submit-poll strategy works with. */
export interface SubmitPollDeps extends JobCallDeps {
  store: Pick<TaskStore, "transition" | "get">;
  metrics: Metrics;
  logger: Logger;
  tracer: Tracer;
  /** Keeping the result, as the hold strategy does. */
  keep: KeepResultDeps;
  /** Keeping partial images, where the dialect streams them. */
  partials?: KeepPartialsDeps;
}

/** A job a run follows, and whether the task's record names it yet. */
interface Followed extends FollowedJob {
  /** The record holds the job (so another run would poll it, never submit again). */
  kept: boolean;
}

/** How a job ended. */
type JobEnd = Exclude<JobState, { kind: "running" }>;

/** The task is no longer this run's (finished, or taken): its job is not wanted. */
class NotThisRunsTask extends Error {}

/**
 * The submit-poll strategy of the image run step, for channels with an
 * async API (`channels[].async`): the generation is submitted once (the next
 * async candidate only when the one before provably did not get it), the
 * channel's job id is written into the task's record the moment the
 * submission is answered, then the job is polled every `pollSec` (never
 * sooner than a `Retry-After`) until it is finished or failed. A stop hands
 * the poll over (the task is queued again with its job and `started_at`); a
 * cancel, the timeout or a stop that hands nothing over send a cancel on
 * where the dialect has one. Resolves {@link HANDOVER} when it handed over.
 */
export async function submitAndPoll(
  deps: SubmitPollDeps,
  context: RunContext,
  candidates: readonly Channel[],
  files: EditFile[] | undefined,
): Promise<typeof HANDOVER | void> {
  const { started, signal, telemetry } = context;
  let job: Followed;
  let first: JobReading;
  let streamed: StreamedSubmission | undefined;
  // Stops reading an event stream the submission answered (a hand-over), not the job.
  const streamStop = new AbortController();
  try {
    const submitted = await submitJob(deps, {
      task: started,
      files,
      candidates,
      signal,
      stop: streamStop.signal,
      // The generation's duration is the job's, reported when it ends (finishWith).
      observer: imageCallObserver(telemetry, started.model, deps, false),
    });
    job = { channel: submitted.channel, dialect: submitted.dialect, id: submitted.id, kept: false };
    first = submitted;
    streamed = submitted.streamed;
  } catch (err) {
    await context.fail(err);
    return;
  }
  describe(context, job, false);
  let ended: JobEnd | typeof HANDOVER | undefined;
  try {
    // The one write that makes the generation this task's for good: kept before anything else.
    await keepJob(deps, context, job);
    if (streamed) ended = await followStream(deps, context, job, streamed, streamStop);
  } catch (err) {
    return endEarly(deps, context, job, err);
  }
  if (ended === HANDOVER) return handOver(deps, context, job);
  if (ended) return finishWith(deps, context, ended);
  // A stream that ended before the job did: polled from here, after a first pause.
  return follow(deps, context, job, streamed ? { ...first, retryAfterMs: 0 } : first);
}

/**
 * Reads a streamed submission's events (its partial images kept as they
 * come) until the job ends, the stream does, or the process stops (then the
 * stream is dropped and the job, kept, is handed over).
 */
async function followStream(
  deps: SubmitPollDeps,
  context: RunContext,
  job: Followed,
  streamed: StreamedSubmission,
  streamStop: AbortController,
): Promise<JobEnd | typeof HANDOVER | undefined> {
  const { started, signal, draining, telemetry } = context;
  const onPartial = deps.partials
    ? keepPartials(deps.partials, started, signal, telemetry.span)
    : undefined;
  let drained = false;
  const onDrain = () => {
    if (!job.kept) return;
    drained = true;
    streamStop.abort();
  };
  if (draining.aborted) onDrain();
  else draining.addEventListener("abort", onDrain, { once: true });
  try {
    const state = await readBackgroundStream(streamed.stream, job.dialect, streamed.answer, {
      signal,
      downloads: deps.client.downloads,
      onSkipped: warnSkippedOnce(deps.logger, started.id, SKIPPED_IN_ANSWER),
      ...(onPartial ? { onPartial } : {}),
      maxPartials: started.partialImages ?? 0,
    });
    if (drained) return HANDOVER;
    return state?.kind === "running" ? undefined : state;
  } finally {
    draining.removeEventListener("abort", onDrain);
    streamed.answer.discard();
  }
}

/**
 * The strategy for a task whose record names a channel's job already (handed
 * over, or its poller died): it is polled at once, never submitted again.
 */
export async function resumePoll(
  deps: SubmitPollDeps,
  context: RunContext,
  channel: Channel | undefined,
  upstream: UpstreamJob,
): Promise<typeof HANDOVER | void> {
  if (!channel?.async || channel.async !== upstream.dialect) {
    await context.fail(
      new TaskFailure(
        "upstream_unavailable",
        "The channel running this task's generation is no longer configured for it.",
        "upstream_error",
      ),
    );
    return;
  }
  const job: Followed = {
    channel,
    dialect: JOB_DIALECTS[upstream.dialect],
    id: upstream.id,
    kept: true,
  };
  context.telemetry.report.channel = channel.name;
  describe(context, job, true);
  return follow(deps, context, job, undefined);
}

/** Polls `job` from `first` (a submission's answer) until it ends, then ends the task. */
async function follow(
  deps: SubmitPollDeps,
  context: RunContext,
  job: Followed,
  first: JobReading | undefined,
): Promise<typeof HANDOVER | void> {
  let state: JobEnd | typeof HANDOVER;
  try {
    state =
      first && first.state.kind !== "running"
        ? first.state
        : await pollUntilDone(deps, context, job, first);
  } catch (err) {
    return endEarly(deps, context, job, err);
  }
  if (state === HANDOVER) return handOver(deps, context, job);
  return finishWith(deps, context, state);
}

/** Ends the task as its job ended: its images kept and the task completed, or failed. */
async function finishWith(deps: SubmitPollDeps, context: RunContext, state: JobEnd): Promise<void> {
  observeJobDuration(deps, context);
  if (state.kind === "failed") {
    await context.fail(state.failure);
    return;
  }
  reportJobUsage(deps, context, state.usage);
  await keepResult(deps.keep, context.started, state, context.paidSignal, context.end());
}

/**
 * A finished job's time, as the GenAI operation's duration (a held call's is
 * its call's): from the task's start, which a hand-over keeps and the
 * submission follows at once, to the answer that told the job ended.
 */
function observeJobDuration(deps: SubmitPollDeps, context: RunContext): void {
  // The run's start as the task line counts it, on the same clock.
  const startedMs = context.end().startedMs ?? deps.keep.now();
  deps.metrics.genAiOperationDuration
    .series("image_generation", context.started.model)
    .observe(Math.max(0, deps.keep.now() - startedMs) / 1000);
}

/**
 * A finished job's usage, counted as a held call's is: in the GenAI token
 * metrics (`image_generation`, the task's model) and on the run's span (a
 * held call puts it on its client span; a job's submission span ended long
 * before). Counted once the job is read finished, before its images are
 * kept: the tokens were spent whether or not they are.
 */
function reportJobUsage(deps: SubmitPollDeps, context: RunContext, raw: unknown): void {
  const usage = imageUsageOf(raw);
  if (!usage) return;
  // The model passed the task's checks: one a channel serves, a bounded label.
  observeTokenUsage(deps.metrics, "image_generation", context.started.model, usage);
  setUsageAttributes(context.telemetry.span, usage);
}

/**
 * Polls every `pollSec` (or the `Retry-After` the channel sent, if longer;
 * at once after a hand-over) until the job is finished or failed; resolves
 * {@link HANDOVER} when the process stops and the job is kept in the record.
 * @throws the run's abort reason (cancel, timeout, lease end); NotThisRunsTask
 */
async function pollUntilDone(
  deps: SubmitPollDeps,
  context: RunContext,
  job: Followed,
  first: JobReading | undefined,
): Promise<JobEnd | typeof HANDOVER> {
  const { started, signal, draining, telemetry } = context;
  let waitMs = first ? Math.max(job.channel.pollMs, first.retryAfterMs) : 0;
  for (;;) {
    const woke = await pauseOrDrain(waitMs, signal, job.kept ? draining : undefined);
    if (woke === "drain") return HANDOVER;
    if (!job.kept) await keepJob(deps, context, job);
    // A stop mid-poll hands over at once: the next run polls again.
    const pollSignal = job.kept ? AbortSignal.any([signal, draining]) : signal;
    let reading: JobReading;
    try {
      reading = await pollJob(deps, job, started, pollSignal, telemetry.span.traceparent);
    } catch (err) {
      if (!signal.aborted && draining.aborted && job.kept) return HANDOVER;
      throw err;
    }
    telemetry.span.addEvent("image_task.poll", { "image_task.upstream.state": reading.state.kind });
    if (reading.state.kind !== "running") return reading.state;
    waitMs = Math.max(job.channel.pollMs, reading.retryAfterMs);
  }
}

/**
 * Writes the job into the task's record (one compare-and-set on this run's
 * attempt). A store that cannot be written is tried again at the next poll
 * (the run goes on); a task that is no longer this run's ends the run.
 */
async function keepJob(deps: SubmitPollDeps, context: RunContext, job: Followed): Promise<void> {
  const { started } = context;
  const upstream: UpstreamJob = {
    channel: job.channel.name,
    dialect: job.dialect.name,
    id: job.id,
  };
  let kept: TaskRecord | undefined;
  try {
    kept = await deps.store.transition(
      started.id,
      "in_progress",
      { status: "in_progress", upstream },
      { attempts: started.attempts },
    );
  } catch (err) {
    deps.logger.warn(
      { err, taskId: started.id, channel: job.channel.name },
      "could not keep a channel's job id with its task yet; trying again at the next poll",
    );
    return;
  }
  if (!kept) throw new NotThisRunsTask();
  job.kept = true;
}

/**
 * A run that ended before its job did: a cancel, the timeout or a stop that
 * hands nothing over send a cancel on (where the dialect has one); the end of
 * the grace hands a kept job over; a task that is no longer this run's (a
 * lost lease, a cancel found on write) has its job cancelled only if nobody
 * else follows it.
 */
async function endEarly(
  deps: SubmitPollDeps,
  context: RunContext,
  job: Followed,
  err: unknown,
): Promise<typeof HANDOVER | void> {
  const { started, signal, telemetry } = context;
  const reason = signal.aborted ? (signal.reason as AbortReason) : undefined;
  if (reason === "handback" && job.kept) return handOver(deps, context, job);
  const traceparent = telemetry.span.traceparent;
  if (err instanceof NotThisRunsTask) {
    const current = await deps.store.get(started.id).catch(() => undefined);
    if (!current || isFinished(current.status) || current.upstream?.id !== job.id) {
      await cancelJob(deps, job, started.id, traceparent);
    }
    return;
  }
  if (
    reason === "cancelled" ||
    reason === "timeout" ||
    reason === "shutdown" ||
    context.pastDeadline()
  ) {
    await cancelJob(deps, job, started.id, traceparent);
  }
  await context.fail(err);
}

/**
 * Gives the task back to the queue, keeping its job and `started_at`: the
 * next run (another replica, or the next start) polls it. Not counted as a
 * run (its attempt is given back).
 */
async function handOver(
  deps: SubmitPollDeps,
  context: RunContext,
  job: Followed,
): Promise<typeof HANDOVER | void> {
  const { started, telemetry } = context;
  const back = await deps.store.transition(
    started.id,
    "in_progress",
    { status: "queued", attempts: started.attempts - 1 },
    { attempts: started.attempts },
  );
  if (!back) return; // finished or taken meanwhile: nothing to hand over
  deps.metrics.taskHandovers.inc({ reason: "stop" });
  deps.logger.info(
    {
      ...taskLine(back),
      attempt: started.attempts,
      channel: job.channel.name,
      dialect: job.dialect.name,
    },
    "task.handover",
  );
  telemetry.span.addEvent("image.task.handover");
  return HANDOVER;
}

/** The run's span learns which job it follows. */
function describe(context: RunContext, job: Followed, resumed: boolean): void {
  context.telemetry.span.setAttributes({
    "image_task.upstream.channel": job.channel.name,
    "image_task.upstream.dialect": job.dialect.name,
    "image_task.resumed": resumed,
  });
}
