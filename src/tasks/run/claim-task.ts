import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import type { TaskRecord } from "../core/task-record.js";
import { taskLine } from "../service/task-line.js";
import { interrupted } from "./run-failure.js";
import { logFields } from "../../logging/log-fields.js";

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
 * number. A task whose record names a channel's job (see `UpstreamJob`) is
 * resumed: its `started_at` stays, and its run polls the job (after a
 * hand-over, or its poller's death: not a new generation). Any other task
 * already in progress lost its earlier run with its holder (a crash, a lost
 * lease, a failed write): it runs again (a rerun, counted and logged) until
 * `maxAttempts`, then fails `interrupted`. Undefined when the run must not
 * go on (the race was lost, or the task failed here).
 */
export async function claimTask(
  deps: ClaimDeps,
  record: TaskRecord,
): Promise<TaskRecord | undefined> {
  const { store, finisher, metrics, logger } = deps;
  const resumed = record.upstream ? (record.status === "queued" ? "handover" : "lost") : undefined;
  const rerun = record.status === "in_progress" && !resumed;
  if (rerun && record.attempts >= deps.maxAttempts) {
    await finisher.fail(
      record,
      "in_progress",
      interrupted("The service stopped while the task was running, too often to retry."),
      { attempts: record.attempts },
    );
    return undefined;
  }
  const startedAtMs = deps.now();
  const started = await store.transition(
    record.id,
    record.status,
    resumed
      ? { status: "in_progress", attempts: record.attempts + 1 }
      : {
          status: "in_progress",
          started_at: Math.floor(startedAtMs / 1000),
          startedMs: startedAtMs,
          attempts: record.attempts + 1,
          // A new run streams its own partial images; an earlier run's no longer show.
          partials: undefined,
        },
    { attempts: record.attempts },
  );
  if (!started) return undefined;
  if (record.status === "queued" && !resumed) {
    metrics.taskQueueWait.observe(Math.max(0, startedAtMs / 1000 - record.created));
  }
  if (rerun) {
    metrics.taskReruns.inc({ reason: "lost" });
    logFields(
      logger,
      "info",
      { ...taskLine(started), attempt: started.attempts, reason: "lost" },
      "task.rerun",
    );
  }
  if (resumed === "lost") metrics.taskHandovers.inc({ reason: "lost" });
  finisher.announce("in_progress", started);
  logFields(
    logger,
    "info",
    {
      ...taskLine(started),
      attempt: started.attempts,
      queue_ms: Math.max(0, startedAtMs - (record.createdMs ?? record.created * 1000)),
      ...(resumed ? { resumed } : {}),
    },
    "task.started",
  );
  return started;
}
