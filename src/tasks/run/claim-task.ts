import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import { HANDOVER } from "../core/task-queue.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import { taskLine } from "../service/task-line.js";
import { interrupted } from "./run-failure.js";
import { logFields } from "../../logging/log-fields.js";
import { createdMsOf, isFinished, type TaskRecord } from "../core/task-record.js";
import type { KeyValue } from "../../collections/key-value.js";
import { aliveMarkOf } from "./run-watch.js";

/** What {@link claimTask} writes with. */
export interface ClaimDeps {
  store: TaskStore;
  finisher: TaskFinisher;
  metrics: Metrics;
  logger: Logger;
  maxAttempts: number;
  now: () => number;
  /**
   * How long a rerun waits before it takes a task in progress whose lease
   * lapsed (see {@link claimTask}); 0 takes it at once. Default 0.
   */
  rerunGraceMs?: number;
  /**
   * Where a run whose lease lapsed says it goes on (see `run-watch.ts`): a
   * rerun waits while the mark of the attempt it replaces is there. Absent
   * (a store one process holds): no marks.
   */
  aliveMarks?: Pick<KeyValue, "get">;
  /** How often a rerun looks at that mark again. Default 5000. */
  aliveEveryMs?: number;
}

/**
 * Starts a run: the task moves to `in_progress` under this run's attempt
 * number. A task whose record names a channel's job (see `UpstreamJob`) is
 * resumed: its `started_at` stays, and its run polls the job (after a
 * hand-over, or its poller's death: not a new generation). Any other task
 * already in progress lost its earlier run with its holder (a crash, a lost
 * lease, a failed write): it runs again (a rerun, counted and logged) until
 * `maxAttempts`, then fails `interrupted`. Undefined when the run must not
 * go on (the race was lost, or the task failed here); `HANDOVER` when the
 * claim was lost with no other run's in its place (see {@link claimLost}).
 */
export async function claimTask(
  deps: ClaimDeps,
  record: TaskRecord,
  signal?: AbortSignal,
): Promise<TaskRecord | typeof HANDOVER | undefined> {
  const { store, finisher, metrics, logger } = deps;
  const resumed = record.upstream ? (record.status === "queued" ? "handover" : "lost") : undefined;
  const rerun = record.status === "in_progress" && !resumed;
  if (rerun && deps.rerunGraceMs) {
    const now = await afterGrace(deps, record, deps.rerunGraceMs, signal);
    if (now !== record) return now && claimTask({ ...deps, rerunGraceMs: 0 }, now, signal);
  }
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
  if (!started) {
    if (!(await claimLost(store, record))) return undefined;
    const fields = { ...taskLine(record), attempt: record.attempts + 1, reason: "claim_lost" };
    logFields(logger, "info", fields, "task.handover");
    return HANDOVER;
  }
  // From the creation's millisecond: `created` alone (whole seconds) added up to a second.
  const queueMs = Math.max(0, startedAtMs - createdMsOf(record));
  if (record.status === "queued" && !resumed) metrics.taskQueueWait.observe(queueMs / 1000);
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
      queue_ms: queueMs,
      ...(resumed ? { resumed } : {}),
    },
    "task.started",
  );
  return started;
}

/**
 * Whether a claim that did not take left the task as `record` was: no other
 * run claimed it, nothing ended it. With `store.minReplicas` that is a claim
 * a failover took back (the store does not write it again, see
 * `RunStepWrite.rewrite`); the queue's hold on the job likely went with it,
 * so the run gives the task back to the queue rather than end with it
 * claimed by nobody.
 */
async function claimLost(store: TaskStore, record: TaskRecord): Promise<boolean> {
  const now = await store.get(record.id).catch(() => undefined);
  return (
    now?.status === record.status &&
    now.attempts === record.attempts &&
    now.upstream?.id === record.upstream?.id
  );
}

/**
 * A lease can lapse while its run is alive: a store outage longer than the
 * lease (a Redis failover takes 30 s and more with Sentinel's defaults) keeps
 * the run from renewing it, and the queue hands the task to another run once
 * the store is back. The first run may hold its channel's answer and be
 * writing the task's end again (see `TaskFinisher.complete`): a claim now would
 * outbid it and call the channel a second time. So the rerun waits `graceMs`,
 * then reads the task again, and while that run says it goes on without its
 * lease (its mark in `aliveMarks`, see `run-watch.ts`) reads it again every
 * `aliveEveryMs`: resolves `record` when nothing changed (the run it replaces
 * is gone, or fell silent), the task as it now reads when it did (ended, or
 * its channel's job recorded), undefined when it is gone or `signal` aborted.
 */
async function afterGrace(
  deps: ClaimDeps,
  record: TaskRecord,
  graceMs: number,
  signal: AbortSignal | undefined,
): Promise<TaskRecord | undefined> {
  const everyMs = deps.aliveEveryMs ?? 5_000;
  let told = false;
  for (let waitMs = graceMs; ; waitMs = everyMs) {
    const aborted = await sleep(waitMs, false, { signal }).catch(() => true);
    if (aborted) return undefined;
    const now = await deps.store.get(record.id);
    if (!now || isFinished(now.status)) return undefined;
    const unchanged =
      now.status === record.status && now.attempts === record.attempts && !now.upstream;
    if (!unchanged) return now;
    const alive = await deps.aliveMarks?.get(aliveMarkOf(now)).catch(() => undefined);
    if (alive === undefined) return record;
    if (!told) {
      told = true;
      const fields = { ...taskLine(now), attempt: now.attempts, reason: "unleased_run" };
      logFields(deps.logger, "info", fields, "task.rerun_waits");
    }
  }
}
