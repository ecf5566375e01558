import type { Logger } from "pino";
import type { ImageStore } from "../images/image-store.js";
import { sweepExpiredImages } from "../images/sweep-expired-images.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { RedisPrimaryWatch } from "../redis/redis-primary.js";
import type { QueueCounts, TaskQueue } from "./core/task-queue.js";
import type { TaskStore } from "./core/task-store.js";
import type { TaskWebhooks } from "./webhooks/task-webhooks.js";

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
 * How often every process deletes the image store's expiry-day folders that
 * are over (what outlived its task: a crash between writing images and
 * recording the task); a day is swept within this of its end.
 */
const IMAGE_SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * How often every process sweeps expired tasks out of the store and its
 * indexes, handing their images to the image store to delete: the bound the
 * docs give for a finished task's images (about 5 s past its expiry) is this
 * and a delete's own time. A sweep with nothing due reads one index entry.
 */
const SWEEP_INTERVAL_MS = 2_000;

/**
 * How soon an adoption pass follows a submission whose task could not be
 * queued (Redis failing over between the record and the job), and how often
 * it is tried again until one succeeds: the task waits seconds, not up to a
 * minute for the periodic pass.
 */
const ADOPT_SOON_MS = 2_000;

/** Dependencies of {@link TaskMaintenance}. */
export interface TaskMaintenanceDeps {
  store: TaskStore;
  queue: TaskQueue;
  imageStore: ImageStore;
  webhooks: Pick<TaskWebhooks, "drainOutbox">;
  metrics: Metrics;
  logger: Logger;
  /**
   * On Redis, the primary this process writes to: after a switch, an adoption
   * pass follows in {@link ADOPT_SOON_MS} (what the old primary acknowledged
   * and never passed on, a task's job among it, is gone).
   */
  primary?: Pick<RedisPrimaryWatch, "status" | "onChange">;
  /** Replicas share the store: a young outbox entry belongs to the replica that finished it. */
  shared: boolean;
  now: () => number;
}

/**
 * What every process does now and then, whichever replica it is: unfinished
 * tasks get their place in the queue (what a restart or a lost write left),
 * the webhook outbox is queued, expired tasks and their images are swept,
 * and the queue gauges read the cluster's queue. It owns its timers.
 */
export class TaskMaintenance {
  private readonly timers: NodeJS.Timeout[] = [];
  /** The expiry sweep under way, if one is. */
  private sweeping: Promise<void> | undefined;
  /** The queue's counts last read, shown while the store is away. */
  private lastCounts: QueueCounts = { waiting: 0, running: 0 };
  /** The adoption pass {@link adoptSoon} asked for, until one succeeds. */
  private adoptTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly deps: TaskMaintenanceDeps) {}

  /** Every unfinished task gets its place in the queue; rejects when the store cannot say. */
  async adoptUnfinished(): Promise<void> {
    const unfinished = await this.deps.store.listUnfinished();
    await this.deps.queue.adopt(unfinished.map(({ id, owner }) => ({ taskId: id, owner })));
  }

  /**
   * An adoption pass in {@link ADOPT_SOON_MS}, tried again as often until
   * one succeeds: a submission's task was written but not queued. Calls while
   * one is pending add nothing (the pass takes every unfinished task).
   */
  adoptSoon(): void {
    if (this.adoptTimer || this.stopped) return;
    this.adoptTimer = setTimeout(() => {
      this.adoptUnfinished().then(
        () => (this.adoptTimer = undefined),
        () => {
          this.adoptTimer = undefined;
          this.adoptSoon();
        },
      );
    }, ADOPT_SOON_MS).unref();
  }

  /**
   * Queues what the outbox holds (the embedded stores belong to this process:
   * all of it, a dead one left it), then starts the periodic passes.
   */
  async start(): Promise<void> {
    const { deps } = this;
    await this.drainOutbox(deps.shared ? OUTBOX_GRACE_MS : 0);
    this.adoptAfterSwitches();
    // The cluster's queue, read at scrape time; while the store is away, the last known one.
    deps.metrics.watchQueue(async () => {
      this.lastCounts = await deps.queue.counts().catch(() => this.lastCounts);
      return this.lastCounts;
    });
    this.timers.push(
      setInterval(() => this.sweepTasks(), SWEEP_INTERVAL_MS),
      setInterval(() => {
        this.adoptUnfinished().catch((err: unknown) =>
          deps.logger.warn({ err }, "task adoption failed"),
        );
        void this.drainOutbox(OUTBOX_GRACE_MS);
      }, ADOPT_INTERVAL_MS),
      setInterval(() => this.sweepImages(), IMAGE_SWEEP_INTERVAL_MS),
    );
    this.sweepImages();
    for (const timer of this.timers) timer.unref();
  }

  stop(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    this.stopped = true;
    clearTimeout(this.adoptTimer);
  }

  /** An adoption pass soon after each switch of the Redis primary (see `primary`). */
  private adoptAfterSwitches(): void {
    const { primary } = this.deps;
    if (!primary) return;
    let switches = primary.status().switches;
    primary.onChange((status) => {
      if (status.switches > switches) this.adoptSoon();
      switches = status.switches;
    });
  }

  /** Queues the webhook events the outbox has held at least `minAgeMs`. */
  private drainOutbox(minAgeMs: number): Promise<void> {
    return this.deps.webhooks.drainOutbox(minAgeMs).catch((err: unknown) => {
      this.deps.logger.warn({ err }, "could not queue the webhook events left in the outbox");
    });
  }

  /**
   * Expired tasks leave the store; their images go with them (the day sweep
   * catches the rest). One sweep at a time: a slow one (many images to
   * delete) is not run over by the next.
   */
  private sweepTasks(): void {
    const { store, imageStore, logger } = this.deps;
    if (this.sweeping) return;
    const dropImages = (keys: string[]) =>
      imageStore.delete(keys).catch((err: unknown) => {
        logger.warn({ err, count: keys.length }, "could not delete expired tasks' images yet");
      });
    this.sweeping = store
      .sweepExpired(dropImages)
      .then(
        () => undefined,
        (err: unknown) => logger.warn({ err }, "the task store's expiry sweep failed"),
      )
      .finally(() => {
        this.sweeping = undefined;
      });
  }

  /** Deletes the image store's expiry days that are over; logs, never rejects. */
  private sweepImages(): void {
    const { imageStore, logger, now } = this.deps;
    sweepExpiredImages(imageStore, { nowMs: now() }).then(
      (deleted) => {
        if (deleted > 0) logger.info({ deleted }, "deleted images of expiry days that are over");
      },
      (err: unknown) =>
        logger.warn({ err }, "the image store's sweep of expiry days that are over failed"),
    );
  }
}
