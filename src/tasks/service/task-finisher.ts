import type { Logger } from "pino";
import type { Config } from "../../config/config-schema.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { FINISH_REASONS } from "../../metrics/task-metrics.js";
import type { TaskStore } from "../core/task-store.js";
import { busRecord, type TaskEvents, type TaskStage } from "../core/task-events.js";
import type { TaskImages } from "../images/task-images.js";
import type { TaskError, TaskImage, TaskRecord } from "../core/task-record.js";

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
}

/** The two ways a task ends, written once for the runner, cancel and recovery; and its stages told. */
export interface TaskFinisher {
  /**
   * Tells every replica that `record` (as the step that got it there wrote
   * it) reached `stage`: once, by the process that wrote it. Best effort: the
   * store already says so; the event only makes it known sooner.
   */
  announce(stage: TaskStage, record: TaskRecord, partialIndex?: number): void;
  /** `expires_at` (Unix seconds) of a task that completes at `atMs`. */
  expiresAt(atMs: number): number;
  /**
   * `from -> failed`; undefined when the task was no longer in `from` (or,
   * with `attempts`, no longer that run's).
   */
  fail(
    id: string,
    from: "queued" | "in_progress",
    error: TaskError,
    options?: { attempts?: number },
  ): Promise<TaskRecord | undefined>;
  /**
   * `in_progress -> completed` by run `attempts`, with what the record keeps
   * of its images (stored already, under keys made for the expiry of a task
   * completing at `atMs`).
   */
  complete(
    id: string,
    attempts: number,
    result: { images: TaskImage[]; usage?: unknown },
    atMs?: number,
  ): Promise<TaskRecord | undefined>;
}

/** The finisher's dependencies, and how long a finished task is kept. */
interface FinisherState extends TaskFinisherDeps {
  retentionMs: number;
}

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
  const s: FinisherState = { ...deps, retentionMs: deps.limits.retentionSec * 1000 };
  return {
    announce: (stage, record, partialIndex) => announce(s, stage, record, partialIndex),
    expiresAt: (atMs) => expiresAt(s, atMs),
    fail: (id, from, error, options) => fail(s, id, from, error, options),
    complete: (id, attempts, result, atMs) => complete(s, id, attempts, result, atMs),
  };
}

/**
 * `expires_at` of a task finishing at `atMs`: rounded up, so a task is kept
 * at least `retentionSec`.
 */
function expiresAt(s: FinisherState, atMs: number): number {
  return Math.ceil((atMs + s.retentionMs) / 1000);
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
 * What follows a finishing write that won: the finish metrics, the final
 * event, and (best effort) an edit's input images deleted.
 */
function finished(s: FinisherState, record: TaskRecord | undefined): TaskRecord | undefined {
  if (!record) return record;
  const { metrics } = s;
  const reason = record.status === "completed" ? "ok" : (record.error?.code ?? "other");
  metrics.tasksFinished.inc({
    status: record.status,
    reason: FINISH_REASONS.has(reason) ? reason : "other",
  });
  if (record.error?.code === "timeout") metrics.taskTimeouts.inc();
  if (record.started_at !== undefined) {
    metrics.taskRunDuration.observe({ status: record.status }, s.now() / 1000 - record.started_at);
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

/**
 * {@link TaskFinisher.fail}. A finishing patch (this one and `complete`'s) sets
 * `sealedCredential: undefined`: every store deletes a field set to undefined,
 * so a forward key leaves the store in the same write that ends its task.
 */
async function fail(
  s: FinisherState,
  id: string,
  from: "queued" | "in_progress",
  error: TaskError,
  options: { attempts?: number } = {},
): Promise<TaskRecord | undefined> {
  const atMs = s.now();
  return finished(
    s,
    await s.store.transition(
      id,
      from,
      {
        status: "failed",
        completed_at: Math.floor(atMs / 1000),
        expires_at: expiresAt(s, atMs),
        error,
        sealedCredential: undefined,
      },
      { ttlMs: s.retentionMs, attempts: options.attempts },
    ),
  );
}

/** {@link TaskFinisher.complete}. */
async function complete(
  s: FinisherState,
  id: string,
  attempts: number,
  result: { images: TaskImage[]; usage?: unknown },
  atMs = s.now(),
): Promise<TaskRecord | undefined> {
  return finished(
    s,
    await s.store.transition(
      id,
      "in_progress",
      {
        status: "completed",
        completed_at: Math.floor(atMs / 1000),
        expires_at: expiresAt(s, atMs),
        images: result.images,
        ...(result.usage === undefined ? {} : { usage: result.usage }),
        sealedCredential: undefined,
      },
      { ttlMs: s.retentionMs, attempts },
    ),
  );
}
