import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import type { TaskRecord } from "../core/task-record.js";
import { taskLine } from "../service/task-line.js";
import { interrupted } from "./run-failure.js";

/** What {@link claimTask} writes with. */
export interface ClaimDeps {
  store: TaskStore;
  finisher: TaskFinisher;
  metrics: Metrics;
  logger: Logger;
  maxAttempts: number;
  now: () => number;
}

/**
 * Starts a run: the task moves to `in_progress` under this run's attempt
 * number. A task already in progress lost its earlier run with its holder (a
 * crash, a lost lease, a failed write): it runs again until `maxAttempts`,
 * then fails `interrupted`. Undefined when the run must not go on (the race
 * was lost, or the task failed here).
 */
export async function claimTask(
  deps: ClaimDeps,
  record: TaskRecord,
): Promise<TaskRecord | undefined> {
  const { store, finisher, metrics, logger } = deps;
  if (record.status === "in_progress") {
    if (record.attempts >= deps.maxAttempts) {
      await finisher.fail(
        record,
        "in_progress",
        interrupted("The service stopped while the task was running, too often to retry."),
        { attempts: record.attempts },
      );
      return undefined;
    }
    logger.info({ taskId: record.id }, "running again a task whose run was interrupted");
  }
  const startedAtMs = deps.now();
  const started = await store.transition(
    record.id,
    record.status,
    {
      status: "in_progress",
      started_at: Math.floor(startedAtMs / 1000),
      attempts: record.attempts + 1,
      // A new run streams its own partial images; an earlier run's no longer show.
      partials: undefined,
    },
    { attempts: record.attempts },
  );
  if (started && record.status === "queued") {
    metrics.taskQueueWait.observe(Math.max(0, startedAtMs / 1000 - record.created));
  }
  if (started) {
    finisher.announce("in_progress", started);
    logger.info(
      {
        ...taskLine(started),
        attempt: started.attempts,
        queue_ms: Math.max(0, startedAtMs - (record.createdMs ?? record.created * 1000)),
      },
      "task.started",
    );
  }
  return started;
}
