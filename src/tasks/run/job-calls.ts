import type { Logger } from "pino";
import type { CallObserver } from "../../channels/call-observer.js";
import type { Channel } from "../../channels/channel.js";
import type { ChannelAnswer } from "../../channels/channel-answer.js";
import type { ChannelClient, ChannelRequest } from "../../channels/channel-client.js";
import { ChannelError } from "../../channels/channel-error.js";
import { base64Length } from "../../images/base64-length.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { TaskFailure } from "../core/task-failure.js";
import { imagesAsked, type TaskRecord } from "../core/task-record.js";
import { invalidResponse, type GenerationSource } from "./decode-generation.js";
import { SKIPPED_IN_ANSWER, warnSkippedOnce } from "./warn-skipped-once.js";
import {
  answerLimit,
  extractImages,
  guarded,
  readErrorText,
  upstreamFailure,
  type EditFile,
} from "./generate-images.js";
import type { JobAnswer, JobCall, JobDialect, JobState } from "./job-dialect.js";
import { JOB_DIALECTS } from "./job-dialects.js";
import { openBackgroundStream, type BackgroundStream } from "./background-stream.js";
import { isEventStream } from "./read-streamed-answer.js";

/** What a job's calls go through and are counted in. */
export interface JobCallDeps {
  client: ChannelClient;
  metrics: Metrics;
  logger: Logger;
}

/** A channel's job that a run follows. */
export interface FollowedJob {
  channel: Channel;
  dialect: JobDialect;
  id: string;
}

/** A job's state, and how long the channel asked to wait before the next poll. */
export interface JobReading {
  state: JobState;
  retryAfterMs: number;
}

/** A submission answered with a background response's event stream (partial images asked for). */
export interface StreamedSubmission {
  answer: ChannelAnswer;
  stream: BackgroundStream;
}

/** The longest a cancel sent on may take: it is best effort, and the task has ended. */
const CANCEL_BOUND_MS = 10_000;

/**
 * Submits `task` once, as a job of the first async candidate that takes it:
 * the next candidate only when the one before provably did not get it (the
 * channel client's one failover rule), each in its own dialect. Resolves the
 * job and its state (a submission may answer a finished job).
 * @throws TaskFailure the channel's refusal, or no job id; the signal's reason when aborted
 */
export async function submitJob(
  deps: JobCallDeps,
  input: {
    task: TaskRecord;
    files: EditFile[] | undefined;
    candidates: readonly Channel[];
    signal: AbortSignal;
    observer: CallObserver;
    /** Also ends the call (and an event stream its answer is): the run stops reading it. */
    stop?: AbortSignal;
  },
): Promise<FollowedJob & JobReading & { streamed?: StreamedSubmission }> {
  const { task, files, candidates, signal } = input;
  const calls = new Map<Channel, JobCall>();
  for (const channel of candidates) {
    calls.set(channel, await dialectOf(channel).submission(task, files, channel));
  }
  const counted = (channel: string, outcome: "accepted" | "refused" | "failed") =>
    deps.metrics.asyncSubmissions.inc({ channel, outcome });
  let answer: ChannelAnswer;
  try {
    answer = await guarded(signal, () =>
      deps.client.send(candidates, {
        route: "image_task_jobs",
        method: "POST",
        path: "",
        timeout: "chat",
        signal: input.stop ? AbortSignal.any([signal, input.stop]) : signal,
        observer: input.observer,
        forChannel: (channel) => calls.get(channel) as JobCall,
      }),
    );
  } catch (err) {
    if (!signal.aborted) counted(candidates.at(-1)?.name ?? "", "failed");
    throw err;
  }
  const { channel } = answer;
  const dialect = dialectOf(channel);
  if (answer.status >= 400) {
    counted(channel.name, "refused");
    throw upstreamFailure(answer.status, await readErrorText(answer, signal), answer.scrubber);
  }
  if (isEventStream(answer)) {
    let stream: BackgroundStream;
    try {
      stream = await guarded(signal, () => openBackgroundStream(answer, task));
    } catch (err) {
      if (!signal.aborted) counted(channel.name, "failed");
      throw err;
    }
    counted(channel.name, "accepted");
    return {
      channel,
      dialect,
      id: stream.id,
      state: { kind: "running" },
      retryAfterMs: 0,
      streamed: { answer, stream },
    };
  }
  let reading: JobAnswer;
  let id: string | undefined;
  try {
    reading = await readJobAnswer(answer, dialect, task, {
      signal,
      downloads: deps.client.downloads,
      onSkipped: warnSkippedOnce(deps.logger, task.id, SKIPPED_IN_ANSWER),
    });
    id = dialect.idOf(reading.body);
    if (!id) throw invalidResponse("to a submission names no job id");
  } catch (err) {
    if (!signal.aborted) counted(channel.name, "failed");
    throw err;
  }
  counted(channel.name, "accepted");
  const job = { channel, dialect, id };
  return { ...job, state: await dialect.stateOf(reading), retryAfterMs: retryAfterOf(answer) };
}

/**
 * Polls `job` once. What does not tell the job's state (no answer, a 5xx, a
 * 429, an answer cut or not JSON) counts as running: the next poll may. An
 * answer that says the job is unknown or refuses the poll (any other 4xx)
 * fails it, as does a finished job whose images are not what they must be.
 * @throws the signal's reason when aborted
 */
export async function pollJob(
  deps: JobCallDeps,
  job: FollowedJob,
  task: TaskRecord,
  signal: AbortSignal,
  traceparent: string,
): Promise<JobReading> {
  const { metrics, logger } = deps;
  const counted = (outcome: "running" | "completed" | "failed" | "error") =>
    metrics.asyncPolls.inc({ channel: job.channel.name, outcome });
  const running = (reason: string, status?: number): JobReading => {
    counted("error");
    logger.warn(
      { taskId: task.id, channel: job.channel.name, reason, status },
      "could not read a channel's job; polling again",
    );
    return { state: { kind: "running" }, retryAfterMs: 0 };
  };
  let answer: ChannelAnswer;
  try {
    answer = await deps.client.send(
      [job.channel],
      request(job.dialect.poll(job.id, task), {
        route: "image_task_polls",
        method: "GET",
        signal,
        traceparent,
      }),
    );
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    return running(err instanceof ChannelError ? err.code : "error");
  }
  const retryAfterMs = retryAfterOf(answer);
  if (answer.status >= 400) {
    const body = await readErrorText(answer, signal);
    if (answer.status >= 500 || answer.status === 429 || answer.status === 408) {
      return { ...running("status", answer.status), retryAfterMs };
    }
    counted("failed");
    return { state: { kind: "failed", failure: lostJob(answer, body) }, retryAfterMs };
  }
  let reading: JobAnswer;
  try {
    reading = await readJobAnswer(answer, job.dialect, task, {
      signal,
      downloads: deps.client.downloads,
      onSkipped: warnSkippedOnce(deps.logger, task.id, SKIPPED_IN_ANSWER),
    });
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    // Too large is the job's fault for good; anything else may read next time.
    if (err instanceof TaskFailure && /larger than/.test(err.message)) {
      counted("failed");
      return { state: { kind: "failed", failure: err }, retryAfterMs };
    }
    return { ...running(err instanceof TaskFailure ? err.code : "error"), retryAfterMs };
  }
  let state: JobState;
  try {
    state = await job.dialect.stateOf(reading);
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (!(err instanceof TaskFailure)) throw err;
    state = { kind: "failed", failure: err };
  }
  counted(state.kind);
  return { state, retryAfterMs };
}

/**
 * Sends a cancel of `job` on, where its dialect has one (best effort,
 * bounded): the task has ended, and the channel need not go on making it.
 */
export async function cancelJob(
  deps: JobCallDeps,
  job: FollowedJob,
  taskId: string,
  traceparent: string,
): Promise<void> {
  const call = job.dialect.cancel?.(job.id);
  if (!call) return;
  try {
    const answer = await deps.client.send(
      [job.channel],
      request(call, {
        route: "image_task_cancels",
        method: "POST",
        signal: AbortSignal.timeout(CANCEL_BOUND_MS),
        traceparent,
      }),
    );
    answer.discard();
    deps.logger.info(
      { taskId, channel: job.channel.name, status: answer.status },
      "sent a cancel of the channel's job on",
    );
  } catch (err) {
    deps.logger.warn(
      {
        taskId,
        channel: job.channel.name,
        reason: err instanceof ChannelError ? err.code : "error",
      },
      "could not send a cancel of the channel's job on",
    );
  }
}

/** The async client of `channel` (which has `async` set: the caller chose it for that). */
export function dialectOf(channel: Channel): JobDialect {
  return JOB_DIALECTS[channel.async ?? "sub2api"];
}

/** A poll's or cancel's request: the call, the trace's `traceparent`, the channel's timeout. */
function request(
  call: JobCall,
  options: { route: string; method: "GET" | "POST"; signal: AbortSignal; traceparent: string },
): ChannelRequest {
  const headers = {
    ...call.headers,
    ...(options.traceparent ? { traceparent: options.traceparent } : {}),
  };
  return {
    route: options.route,
    method: options.method,
    path: call.path,
    headers,
    ...(call.body ? { body: call.body } : {}),
    timeout: "chat",
    signal: options.signal,
  };
}

/**
 * A job's answer read whole, within what `n` images (and an edit's inputs,
 * which a Responses object may echo) take, its images decoded as they stream.
 */
async function readJobAnswer(
  answer: ChannelAnswer,
  dialect: JobDialect,
  task: TaskRecord,
  { signal, downloads, onSkipped }: Pick<GenerationSource, "signal" | "downloads" | "onSkipped">,
): Promise<JobAnswer> {
  const inputs = (task.inputs ?? []).reduce((sum, input) => sum + base64Length(input.bytes), 0);
  const limit = answerLimit(task.request, answer.channel.maxImageBytes) + inputs;
  const extractor = await guarded(signal, () => extractImages(answer, limit, dialect.imageKey));
  let body: unknown;
  try {
    body = JSON.parse(extractor.rest.toString("utf8"));
  } catch {
    throw invalidResponse("is not valid JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw invalidResponse("is not a JSON object");
  }
  return {
    status: answer.status,
    body: body as Record<string, unknown>,
    source: {
      channel: answer.channel,
      scrubber: answer.scrubber,
      requested: imagesAsked(task.request),
      signal,
      downloads,
      extracted: extractor.decoded,
      ...(onSkipped ? { onSkipped } : {}),
    },
  };
}

/** A poll the channel refused or a job it does not know: the channel's error, or its status. */
function lostJob(answer: ChannelAnswer, body: string): TaskFailure {
  if (answer.status === 404) {
    return new TaskFailure(
      "upstream_error",
      "The upstream channel no longer knows the job running this task's generation.",
      "upstream_error",
    );
  }
  return upstreamFailure(answer.status, body, answer.scrubber);
}

/** `Retry-After` in ms (seconds or an HTTP date), 0 when absent or unreadable. */
function retryAfterOf(answer: ChannelAnswer): number {
  const value = answer.headers["retry-after"];
  if (typeof value !== "string" || value.trim() === "") return 0;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? 0 : Math.max(0, at - Date.now());
}
