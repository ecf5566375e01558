import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

const TASK_BUCKETS = [0.5, 1, 2.5, 5, 10, 20, 30, 60, 100, 150, 200, 300, 600, 1200];
/**
 * A queue wait is milliseconds while there is a free slot: buckets from 5 ms, else
 * the panel reads every such wait as a quarter of a second (the first bucket's middle).
 */
const QUEUE_WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, ...TASK_BUCKETS];

/** Bounded reasons for `tasks_finished_total`: anything else is counted as `other`. */
export const FINISH_REASONS = new Set([
  "ok",
  "timeout",
  "cancelled",
  "interrupted",
  "upstream_error",
  "upstream_unavailable",
  "content_policy_violation",
  "invalid_response",
  "rate_limit_exceeded",
  "invalid_request",
  "credential_unavailable",
  "storage_unavailable",
]);

/**
 * Why a generation runs again (`task_reruns_total`): `lost`, its replica
 * died or lost its lease mid-run; `grace`, its replica stopped and the
 * shutdown grace ended before the generation did.
 */
export const RERUN_REASONS = ["lost", "grace"] as const;

/**
 * Why a poll of a channel's job moved to another run (`task_handovers_total`):
 * `stop`, its replica stopped and handed it over; `lost`, its replica died
 * or lost its lease, and another run took the poll over.
 */
export const HANDOVER_REASONS = ["stop", "lost"] as const;

/** Image tasks: the queue's gauges, submissions, ends, timeouts and durations. */
export function createTaskMetrics(registry: Registry) {
  const taskReruns = new Counter({
    name: `${p}task_reruns_total`,
    help: "Generations run again because the run that started them ended first, by reason (lost: its replica died or lost its lease; grace: the shutdown grace ran out).",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  const taskHandovers = new Counter({
    name: `${p}task_handovers_total`,
    help: "Polls of a channel's async job taken over by another run, by reason (stop: a stopping replica handed it over; lost: its replica died or lost its lease); never submitted again.",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  // Known from the start, so a dashboard shows 0 rather than no data.
  for (const reason of RERUN_REASONS) taskReruns.inc({ reason }, 0);
  for (const reason of HANDOVER_REASONS) taskHandovers.inc({ reason }, 0);
  let queueCounts: () => Promise<{ waiting: number; running: number }> = async () => ({
    waiting: 0,
    running: 0,
  });
  return {
    taskQueueDepth: new Gauge({
      name: `${p}task_queue_depth`,
      help: "Image tasks waiting for a slot, across all replicas.",
      registers: [registry],
      async collect() {
        this.set((await queueCounts()).waiting);
      },
    }),
    /**
     * Names where the queue's counts are read at scrape time (the queue is
     * built after metrics); with Redis they are the cluster's, so every
     * replica reports the same values.
     */
    watchQueue(source: () => Promise<{ waiting: number; running: number }>) {
      queueCounts = source;
    },
    tasksInProgress: new Gauge({
      name: `${p}tasks_in_progress`,
      help: "Image tasks running now, across all replicas.",
      registers: [registry],
      async collect() {
        this.set((await queueCounts()).running);
      },
    }),
    tasksSubmitted: new Counter({
      name: `${p}tasks_submitted_total`,
      help: "Image tasks accepted (202), not counting idempotent replays, by dialect (native, sub2api, bifrost).",
      labelNames: ["dialect"] as const,
      registers: [registry],
    }),
    ...finishCounters(registry),
    taskRunDuration: new Histogram({
      name: `${p}task_run_duration_seconds`,
      help: "Time from started_at to the end of a task, by final status.",
      labelNames: ["status"] as const,
      buckets: TASK_BUCKETS,
      registers: [registry],
    }),
    taskReruns,
    taskHandovers,
    taskLeaseLapses: new Counter({
      name: `${p}task_lease_lapses_total`,
      help: "Runs whose queue lease lapsed (Redis: their lock not renewed within imageTasks.leaseSec, in an outage or failover that long or a stalled event loop) while they went on paying for a generation; the queue's next lease of the task waits for them.",
      registers: [registry],
    }),
    taskQueueWait: new Histogram({
      name: `${p}task_queue_wait_seconds`,
      help: "Time a task waited queued before it started.",
      buckets: QUEUE_WAIT_BUCKETS,
      registers: [registry],
    }),
  };
}

/** How image tasks ended: by status and reason, timed out, and the images completed ones lack. */
function finishCounters(registry: Registry) {
  return {
    tasksFinished: new Counter({
      name: `${p}tasks_finished_total`,
      help: "Image tasks that ended, by status (completed, failed), reason (error code, or ok) and dialect.",
      labelNames: ["status", "reason", "dialect"] as const,
      registers: [registry],
    }),
    taskImagesMissing: new Counter({
      name: `${p}task_images_missing_total`,
      help: "Images asked for (n) that completed image tasks do not hold, by the channel that answered: the channel made fewer, or one could not be had (not an image, too large, a download that failed for good, the stream's end: see the run's warning 'skipped an image of the channel's answer').",
      labelNames: ["channel"] as const,
      registers: [registry],
    }),
    taskTimeouts: new Counter({
      name: `${p}task_timeouts_total`,
      help: "Image tasks failed because generation ran past imageTasks.timeoutSec.",
      registers: [registry],
    }),
  };
}
