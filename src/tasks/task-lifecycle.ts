import { sweepExpiredImages } from "../images/sweep-expired-images.js";
import type { TaskParts } from "./create-task-parts.js";

/**
 * How often every process makes sure each unfinished task has its place in
 * the queue, and each finished task's webhook event its place in the webhook
 * queue.
 */
const ADOPT_INTERVAL_MS = 60_000;
/**
 * An outbox entry younger than this is left to the process that finished its
 * task (which queues it within milliseconds); older ones were left by a crash
 * or an outage.
 */
const OUTBOX_GRACE_MS = 30_000;
/**
 * How often every process sweeps expired tasks out of the store and its
 * indexes: every minute, or every `retentionSec` when tasks are kept less.
 */
const sweepIntervalMs = (retentionSec: number) =>
  Math.min(60_000, Math.max(1_000, retentionSec * 1000));
/**
 * How often every process deletes the image store's expiry-day folders that
 * are over (what outlived its task: a crash between writing images and
 * recording the task); a day is swept within this of its end.
 */
const IMAGE_SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * Picks up what earlier processes left (unfinished tasks, the webhook
 * outbox), starts the queues, the queue gauges and the periodic maintenance.
 */
export async function startImageTasks(p: TaskParts): Promise<void> {
  const { backend, deps } = p;
  await adoptUnfinished(p);
  await backend.queue.start(p.runner.run);
  await backend.webhooks.start((delivery, attempt, options) =>
    p.deliverer.attempt(delivery, attempt, options),
  );
  // The embedded stores belong to this process: what their outbox holds, a dead one left.
  await drainOutbox(p, deps.config.deployment.shared ? OUTBOX_GRACE_MS : 0);
  // The cluster's queue, read at scrape time; while the store is away, the last known one.
  deps.metrics.watchQueue(async () => {
    p.lastCounts = await backend.queue.counts().catch(() => p.lastCounts);
    return p.lastCounts;
  });
  p.timers.push(
    setInterval(() => {
      backend.store
        .sweepExpired((keys) => dropImages(p, keys))
        .catch((err: unknown) => p.logger.warn({ err }, "expiry sweep failed"));
    }, sweepIntervalMs(deps.config.imageTasks.retentionSec)),
    setInterval(() => {
      adoptUnfinished(p).catch((err: unknown) => p.logger.warn({ err }, "task adoption failed"));
      void drainOutbox(p, OUTBOX_GRACE_MS);
    }, ADOPT_INTERVAL_MS),
    setInterval(() => sweepImages(p), IMAGE_SWEEP_INTERVAL_MS),
  );
  sweepImages(p);
  for (const timer of p.timers) timer.unref();
}

/**
 * Stops taking submissions and tasks, answers waiting requests at once, gives
 * running tasks and webhook attempts `graceMs`, and closes the backend once
 * `drained` has settled too (see `ImageTasks.stop`).
 */
export async function stopImageTasks(
  p: TaskParts,
  graceMs: number,
  drained?: Promise<unknown>,
): Promise<void> {
  const { backend } = p;
  // Waiting requests answer now, with the task as it is: a stop never waits for them.
  p.service.stopAccepting();
  for (const timer of p.timers) clearInterval(timer);
  await Promise.all([backend.queue.stop(graceMs), backend.webhooks.stop(graceMs)]);
  await p.runner.close();
  await p.deliverer.close();
  p.waiters.close();
  p.stopAnnouncing();
  await drained;
  p.feed.close();
  await backend.close();
}

/** Every unfinished task gets its place in the queue (what a restart or a lost write left). */
async function adoptUnfinished(p: TaskParts): Promise<void> {
  const unfinished = await p.backend.store.listUnfinished();
  await p.backend.queue.adopt(unfinished.map(({ id, owner }) => ({ taskId: id, owner })));
}

/** Queues the webhook events the outbox has held at least `minAgeMs`. */
function drainOutbox(p: TaskParts, minAgeMs: number): Promise<void> {
  return p.webhooks.drainOutbox(minAgeMs).catch((err: unknown) => {
    p.logger.warn({ err }, "could not queue the webhook events left in the outbox");
  });
}

/** The images of expired tasks go with their records (the day sweep catches what this misses). */
async function dropImages(p: TaskParts, keys: string[]): Promise<void> {
  await p.deps.imageStore.delete(keys).catch((err: unknown) => {
    p.logger.warn({ err, count: keys.length }, "could not delete expired tasks' images yet");
  });
}

/** Deletes the image store's expiry days that are over; logs, never rejects. */
function sweepImages(p: TaskParts): void {
  sweepExpiredImages(p.deps.imageStore, { nowMs: p.now() }).then(
    (deleted) => {
      if (deleted > 0) p.logger.info({ deleted }, "deleted images of expiry days that are over");
    },
    (err: unknown) => p.logger.warn({ err }, "image expiry sweep failed"),
  );
}
