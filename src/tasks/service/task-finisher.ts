import { imageUsageOf } from "../core/image-usage.js";
import type { Logger } from "pino";
import type { Config } from "../../config/config-schema.js";
import { maskPrompts } from "../../logging/mask-prompt.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { FINISH_REASONS } from "../../metrics/task-metrics.js";
import type { TaskStore } from "../core/task-store.js";
import { busRecord, type TaskEvents, type TaskStage } from "../core/task-events.js";
import type { TaskImages } from "../images/task-images.js";
import { TaskFailure } from "../core/task-failure.js";
import {
  imagesAsked,
  retentionSecOf,
  startedMsOf,
  type TaskError,
  type TaskImage,
  type TaskRecord,
} from "../core/task-record.js";
import type { Span } from "../../tracing/tracer.js";
import { taskLine } from "./task-line.js";
import { logFields } from "../../logging/log-fields.js";

/**
 * How long a run's end (its completion, its failure) is written again while
 * the task store fails: a Redis failover takes seconds (Sentinel's default
 * `down-after-milliseconds` alone is 30 s).
 */
const END_RETRY_MS = 60_000;
/** The first wait after a failed write of a run's end, doubled up to the last. */
const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 1_000;

/** Dependencies of {@link createTaskFinisher}. */
export interface TaskFinisherDeps {
  store: TaskStore;
  events: TaskEvents;
  metrics: Metrics;
  logger: Logger;
  limits: Config["imageTasks"];
  /** Where an edit's input images are deleted once its task has finished. */
  images: Pick<TaskImages, "deleteInputs">;
  now: () => number;
  /** The configured channels' names: their images-missing counts start at 0. Default none. */
  channelNames?: readonly string[];
}

/**
 * What the run that ends a task knows of it, for the task line and the trace:
 * the channel it called last and what it answered, and the run's span.
 */
export interface RunEnd {
  channel?: string | undefined;
  upstreamStatus?: number | undefined;
  /** When the run started, in ms (the record keeps seconds). */
  startedMs?: number;
  span?: Span;
  /** The request that ended the task (a cancel, a delete): its `req_id` goes in the task line. */
  reqId?: string;
}

/**
 * The task a finisher call ends, as its caller read it: its id, and its own
 * retention where it has one.
 */
export type FinishingTask = Pick<TaskRecord, "id" | "retentionSec">;

/** The two ways a task ends, written once for the runner, cancel and recovery; and its stages told. */
export interface TaskFinisher {
  /**
   * Tells every replica that `record` (as the step that got it there wrote
   * it) reached `stage`: once, by the process that wrote it. Best effort: the
   * store already says so; the event only makes it known sooner.
   */
  announce(stage: TaskStage, record: TaskRecord, partialIndex?: number): void;
  /** `expires_at` (Unix seconds) of `task` completing at `atMs`. */
  expiresAt(atMs: number, task: FinishingTask): number;
  /**
   * `from -> failed`; undefined when the task was no longer in `from` (or,
   * with `attempts`, no longer that run's). A {@link TaskFailure} from a
   * channel's error answer keeps that answer's status with the task. A run's
   * failure (`attempts` set) is tried again, as a completion is, while the
   * store fails.
   */
  fail(
    task: FinishingTask,
    from: "queued" | "in_progress",
    error: TaskError | TaskFailure,
    options?: { attempts?: number; end?: RunEnd; more?: KindFields },
  ): Promise<TaskRecord | undefined>;
  /**
   * `in_progress -> completed` by run `attempts`, with what the record keeps
   * of its images (stored already, under keys made for the expiry of a task
   * completing at `atMs`). A store that fails is tried again for up to a
   * minute before this rejects.
   */
  complete(
    task: FinishingTask,
    attempts: number,
    result: { images: TaskImage[]; usage?: unknown },
    options?: { atMs?: number; end?: RunEnd; more?: KindFields },
  ): Promise<TaskRecord | undefined>;
}

/** What a kind of task writes of its own in the step that ends it (a background response's state). */
export type KindFields = Pick<Partial<TaskRecord>, "response">;

/** The finisher's dependencies. */
type FinisherState = TaskFinisherDeps;

/**
 * Ends tasks: the terminal transition with its timestamps and retention, the
 * finish metrics and the final event every replica hears (waiting requests,
 * event streams, and this process's webhook announcer follow the bus). Every
 * path that ends a task goes through here, so what must happen when a task
 * ends (a credential to delete) has one place to live. The store's finishing
 * step itself deletes an edit's input images and puts a task with a webhook
 * into the outbox, so none of that waits on this process.
 */
export function createTaskFinisher(deps: TaskFinisherDeps): TaskFinisher {
  const s: FinisherState = deps;
  // Known from the start, so a dashboard shows 0 rather than no data.
  for (const channel of deps.channelNames ?? []) {
    deps.metrics.taskImagesMissing.inc({ channel }, 0);
  }
  return {
    announce: (stage, record, partialIndex) => announce(s, stage, record, partialIndex),
    expiresAt: (atMs, task) => expiresAt(s, atMs, task),
    fail: (task, from, error, options) => fail(s, task, from, error, options),
    complete: (task, attempts, result, options) => complete(s, task, attempts, result, options),
  };
}

/** How long `task` is kept once finished, in ms: its own retention, or the configured one. */
function retentionMs(s: FinisherState, task: FinishingTask): number {
  return retentionSecOf(task, s.limits.retentionSec) * 1000;
}

/**
 * `expires_at` of a task finishing at `atMs`: rounded up, so a task is kept
 * at least its retention.
 */
function expiresAt(s: FinisherState, atMs: number, task: FinishingTask): number {
  return Math.ceil((atMs + retentionMs(s, task)) / 1000);
}

/** {@link TaskFinisher.announce}. */
function announce(
  s: FinisherState,
  stage: TaskStage,
  record: TaskRecord,
  partialIndex?: number,
): void {
  const event = {
    type: "stage",
    stage,
    record: busRecord(record),
    ...(partialIndex === undefined ? {} : { partialIndex }),
  } as const;
  s.events.publish(event).catch((err: unknown) => {
    s.logger.warn({ err, taskId: record.id, stage }, "could not announce a task's stage yet");
  });
}

/**
 * What follows a finishing write that won: the finish metrics, the task line,
 * the final event (on the bus and on the run's span), and (best effort) an
 * edit's input images deleted.
 */
function finished(
  s: FinisherState,
  record: TaskRecord | undefined,
  end: RunEnd = {},
): TaskRecord | undefined {
  if (!record) return record;
  logFinish(s, record, end);
  const { metrics } = s;
  const reason = record.status === "completed" ? "ok" : (record.error?.code ?? "other");
  metrics.tasksFinished.inc({
    status: record.status,
    reason: FINISH_REASONS.has(reason) ? reason : "other",
    dialect: record.dialect ?? "native",
  });
  if (record.error?.code === "timeout") metrics.taskTimeouts.inc();
  const missing = imagesMissing(record);
  // The channel's name is from the config (bounded); "other" when the run did not say.
  if (missing > 0) metrics.taskImagesMissing.inc({ channel: end.channel ?? "other" }, missing);
  const startedMs = startedMsOf(record);
  if (startedMs !== undefined) {
    metrics.taskRunDuration.observe({ status: record.status }, (s.now() - startedMs) / 1000);
  }
  announce(s, record.status, record);
  if (record.inputs) {
    // Best effort: the image store's sweep deletes them with their day otherwise.
    s.images.deleteInputs(record.inputs).catch((err: unknown) => {
      s.logger.warn({ err, taskId: record.id }, "could not delete an edit's input images yet");
    });
  }
  return record;
}

/** Images asked for (`n`) that a completed image task does not hold; 0 for anything else. */
function imagesMissing(record: TaskRecord): number {
  if (record.status !== "completed" || record.kind === "response") return 0;
  return Math.max(0, imagesAsked(record.request) - (record.images?.length ?? 0));
}

/**
 * {@link TaskFinisher.fail}. A finishing patch (this one and `complete`'s) sets
 * `sealedCredential: undefined`: every store deletes a field set to undefined,
 * so a forward key leaves the store in the same write that ends its task.
 */
async function fail(
  s: FinisherState,
  task: FinishingTask,
  from: "queued" | "in_progress",
  failure: TaskError | TaskFailure,
  options: { attempts?: number; end?: RunEnd; more?: KindFields } = {},
): Promise<TaskRecord | undefined> {
  const atMs = s.now();
  const error = failure instanceof TaskFailure ? failure.toTaskError() : failure;
  const status = failure instanceof TaskFailure ? failure.status : undefined;
  const patch = {
    status: "failed",
    completed_at: Math.floor(atMs / 1000),
    expires_at: expiresAt(s, atMs, task),
    error,
    ...(status === undefined ? {} : { failureStatus: status }),
    sealedCredential: undefined,
    ...options.more,
  } as const;
  const { attempts } = options;
  const write = () =>
    s.store.transition(task.id, from, patch, { ttlMs: retentionMs(s, task), attempts });
  if (attempts === undefined) return finished(s, await write(), options.end);
  // A run's failure: a rerun would call the channel again (and may pay where this run did not).
  const isThisEnd = (now: TaskRecord) =>
    now.status === "failed" &&
    now.attempts === attempts &&
    now.error?.code === error.code &&
    now.error?.message === error.message;
  return finished(s, await writeRunEnd(s, task.id, isThisEnd, write), options.end);
}

/** {@link TaskFinisher.complete}. */
async function complete(
  s: FinisherState,
  task: FinishingTask,
  attempts: number,
  result: { images: TaskImage[]; usage?: unknown },
  options: { atMs?: number; end?: RunEnd; more?: KindFields } = {},
): Promise<TaskRecord | undefined> {
  const atMs = options.atMs ?? s.now();
  const patch = {
    status: "completed",
    completed_at: Math.floor(atMs / 1000),
    expires_at: expiresAt(s, atMs, task),
    images: result.images,
    ...(result.usage === undefined ? {} : { usage: result.usage }),
    sealedCredential: undefined,
    ...options.more,
  } as const;
  const write = () =>
    s.store.transition(task.id, "in_progress", patch, { ttlMs: retentionMs(s, task), attempts });
  const isThisEnd = (now: TaskRecord) => now.status === "completed" && now.attempts === attempts;
  return finished(s, await writeRunEnd(s, task.id, isThisEnd, write), options.end);
}

/**
 * A run's end, written again while the task store fails (an outage, a Redis
 * failover), for {@link END_RETRY_MS} at most: the generation the run paid
 * for (or the failure it met) is kept, where the queue would start the task
 * again and call the channel twice. A write whose answer was lost may have
 * landed: a record that `isThisEnd` recognises (this run's `attempts`, and
 * what it wrote) says so.
 */
async function writeRunEnd(
  s: FinisherState,
  id: string,
  isThisEnd: (now: TaskRecord) => boolean,
  write: () => Promise<TaskRecord | undefined>,
): Promise<TaskRecord | undefined> {
  let until: number | undefined;
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, LAST_RETRY_MS)) {
    try {
      const record = await write();
      if (record || until === undefined) return record;
      const now = await s.store.get(id);
      return now && isThisEnd(now) ? now : undefined;
    } catch (err) {
      // The process's clock, not the task clock `now` (which tests may hold still).
      const first = until === undefined;
      until ??= performance.now() + END_RETRY_MS;
      const left = until - performance.now();
      if (left <= 0) throw err;
      // Once per end at warn: an outage meets every run that ends during it.
      s.logger[first ? "warn" : "debug"](
        { err, taskId: id },
        "could not record the end of a task's run yet; retrying",
      );
      // Unref'd: a store closed for good (a stop) does not hold the process up.
      await new Promise((resolve) => setTimeout(resolve, Math.min(wait, left)).unref());
    }
  }
}

/**
 * `task.completed`, `task.cancelled` or `task.failed`: the task line of an
 * end, with what the run knew of its channel; the same as the run span's
 * last event. The message is the one the client sees (never a channel's key),
 * with the task's prompt masked where it repeats it.
 */
function logFinish(s: FinisherState, record: TaskRecord, end: RunEnd): void {
  const startedMs = end.startedMs ?? startedMsOf(record);
  const runMs = startedMs === undefined ? undefined : Math.max(0, s.now() - startedMs);
  const fields: Record<string, unknown> = {
    ...taskLine(record, end.reqId ?? record.reqId),
    channel: end.channel,
    run_ms: runMs,
  };
  if (record.status === "completed") {
    const images = record.images ?? [];
    fields.images = images.length;
    fields.bytes = images.reduce((sum, image) => sum + image.bytes, 0);
    // What the images cost, as the channel reported it: gpt-image bills per token.
    const usage = imageUsageOf(record.usage);
    if (usage) {
      fields.input_tokens = usage.input;
      fields.output_tokens = usage.output;
      if (usage.image !== undefined) fields.image_tokens = usage.image;
    }
    logFields(s.logger, "info", fields, "task.completed");
    end.span?.addEvent("image.task.completed", { "image_task.images": images.length });
    return;
  }
  const code = record.error?.code;
  fields.error_code = code;
  // A channel's message may repeat the prompt ("Invalid prompt: ..."): the task keeps it, the
  // line does not.
  fields.error_message = maskPrompts(record.error?.message, record.request);
  fields.upstream_status = end.upstreamStatus;
  logFields(s.logger, "info", fields, code === "cancelled" ? "task.cancelled" : "task.failed");
  end.span?.addEvent(code === "cancelled" ? "image.task.cancelled" : "image.task.failed", {
    "error.type": code,
  });
  end.span?.setError(code ?? "failed");
}
