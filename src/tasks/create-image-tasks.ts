import { randomBytes } from "node:crypto";
import type Keyv from "keyv";
import type { Logger } from "pino";
import type { CredentialSealer } from "../auth/credential-sealer.js";
import type { Config } from "../config/config-schema.js";
import { createImageUrlSigner, type ImageUrlSigner } from "../files/image-url-signer.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { createWebhookDeliverer } from "../webhooks/create-webhook-deliverer.js";
import { createTaskEventStreams, type TaskEventStreams } from "./events/task-event-streams.js";
import { createTaskFeed, type TaskFeed } from "./events/task-feed.js";
import { announceWebhooksOnFinish } from "./events/webhook-announcer.js";
import { openTaskBackend } from "./open-task-backend.js";
import { presentTask } from "./present-task.js";
import { storeKind } from "./store/create-task-store.js";
import { createTaskFinisher } from "./task-finisher.js";
import { createTaskRunner } from "./task-runner.js";
import { available } from "./store-available.js";
import { createTaskService, type TaskService } from "./task-service.js";
import { createTaskWaiters } from "./task-waiters.js";
import { createTaskWebhooks } from "./task-webhooks.js";

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

/** Dependencies of {@link createImageTasks}. */
export interface ImageTasksDeps {
  config: Config;
  access: ModelAccess;
  /** Forward mode's sealer: forward keys' tasks keep their key sealed while unfinished. */
  sealer?: CredentialSealer;
  metrics: Metrics;
  logger: Logger;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now?: () => number;
}

/** One stored image, as the files route serves it. */
export interface StoredImage {
  mime: string;
  bytes: Buffer;
}

/** The async image-task feature, as the rest of the service sees it. */
export interface ImageTasks {
  /** Submit, read, cancel. */
  service: TaskService;
  /** Signs and checks the URLs of `url` images (the secret is shared by every replica). */
  signer: ImageUrlSigner;
  /** Every task's events as this process hears them (from any replica), by task id. */
  feed: TaskFeed;
  /** Task event streams (`GET .../events`, submissions with `Accept: text/event-stream`). */
  eventStreams: TaskEventStreams;
  images: {
    /** Image `index` of a completed task with its type, or undefined. */
    read(taskId: string, index: number): Promise<StoredImage | undefined>;
    /** The bytes of image `index` of a task, or undefined once expired. */
    bytes(taskId: string, index: number): Promise<Buffer | undefined>;
  };
  /** Rejects when the store cannot be reached (`/readyz`). */
  ping(): Promise<void>;
  /**
   * A value set once for every process of the deployment, kept in the task
   * store (the URL signing secret; a generated encryption key, say).
   */
  getOrSetMeta(key: string, create: () => string): Promise<string>;
  /** The value kept under `key`, if any; and forgetting it (a secret moved out of the store). */
  getMeta(key: string): Promise<string | undefined>;
  deleteMeta(key: string): Promise<void>;
  /**
   * A namespaced Keyv that every replica sees alike, for small entries with a
   * TTL (Redis: in Redis; embedded stores: this process's memory, at most
   * `maxLocalEntries`).
   */
  keyValue(namespace: string, maxLocalEntries: number): Keyv;
  /** Picks up what earlier processes left, starts running tasks and the periodic maintenance. */
  start(): Promise<void>;
  /**
   * Stops taking submissions and tasks, and answers waiting requests at once;
   * running tasks and webhook attempts get `graceMs`, then are handed back
   * (persistent store: to another replica or the next start) or fail
   * `interrupted` (memory store). Then closes the store, once `drained` (the
   * HTTP server's last requests) has settled too.
   */
  stop(graceMs: number, drained?: Promise<unknown>): Promise<void>;
}

/**
 * Builds the task feature on the store `store.url` names: store, queue, bus,
 * runner, finisher, service, waiting requests, webhook deliveries and
 * maintenance, behind one entry. Nothing runs until {@link ImageTasks.start}.
 */
export async function createImageTasks(deps: ImageTasksDeps): Promise<ImageTasks> {
  const { config, metrics } = deps;
  const logger = deps.logger.child({ component: "tasks" });
  const now = deps.now ?? Date.now;
  const limits = config.imageTasks;
  const backend = await openTaskBackend(config, logger);
  const { store, queue, events, close } = backend;
  let secret: string;
  try {
    secret =
      config.server.urlSigningSecret ??
      (await store.getOrSetMeta("url-signing-secret", () => randomBytes(32).toString("base64url")));
  } catch (err) {
    await close();
    throw err;
  }
  const signer = createImageUrlSigner(secret);
  const feed = createTaskFeed(events);
  const waiters = createTaskWaiters(feed);
  const deliverer = createWebhookDeliverer({
    config: config.webhooks,
    metrics,
    logger: deps.logger.child({ component: "webhooks" }),
  });
  const webhooks = createTaskWebhooks({
    store,
    queue: backend.webhooks,
    signer,
    logger,
    now,
  });
  const finisher = createTaskFinisher({ store, events, metrics, logger, limits, now });
  const stopAnnouncing = announceWebhooksOnFinish(events, webhooks, logger);
  const runner = createTaskRunner({
    store,
    access: deps.access,
    sealer: deps.sealer,
    finisher,
    metrics,
    logger,
    limits,
    now,
  });
  const service = createTaskService({
    config,
    store,
    queue,
    finisher,
    access: deps.access,
    sealer: deps.sealer,
    metrics,
    logger,
    waiters,
    now,
  });

  const eventStreams = createTaskEventStreams({
    feed,
    read: service.get,
    present: (record, baseUrl) =>
      presentTask(record, {
        imageBytes: (taskId, index) => available(() => store.getImage(taskId, index)),
        signer,
        baseUrl,
        data: "full",
      }),
    keepAliveMs: limits.eventsKeepAliveSec * 1000,
    metrics,
    logger,
  });

  /** Every unfinished task gets its place in the queue (what a restart or a lost write left). */
  const adoptUnfinished = async () => {
    const unfinished = await store.listUnfinished();
    await queue.adopt(unfinished.map(({ id, owner }) => ({ taskId: id, owner })));
  };
  const drainOutbox = (minAgeMs: number) =>
    webhooks.drainOutbox(minAgeMs).catch((err: unknown) => {
      logger.warn({ err }, "could not queue the webhook events left in the outbox");
    });
  const timers: NodeJS.Timeout[] = [];
  let lastCounts = { waiting: 0, running: 0 };

  return {
    service,
    signer,
    feed,
    eventStreams,
    images: {
      async read(taskId, index) {
        return available(async () => {
          const record = await store.get(taskId);
          const image = record?.status === "completed" ? record.images?.[index] : undefined;
          const bytes = image && (await store.getImage(taskId, index));
          return image && bytes ? { mime: image.mime, bytes } : undefined;
        });
      },
      bytes: (taskId, index) => available(() => store.getImage(taskId, index)),
    },
    ping: () => store.ping(),
    getOrSetMeta: (key, create) => store.getOrSetMeta(key, create),
    getMeta: (key) => store.getMeta(key),
    deleteMeta: (key) => store.deleteMeta(key),
    keyValue: backend.keyValue,

    async start() {
      await adoptUnfinished();
      await queue.start(runner.run);
      await backend.webhooks.start((delivery, attempt, options) =>
        deliverer.attempt(delivery, attempt, options),
      );
      // The embedded stores belong to this process: what their outbox holds, a dead one left.
      await drainOutbox(storeKind(config.store.url) === "redis" ? OUTBOX_GRACE_MS : 0);
      // The cluster's queue, read at scrape time; while the store is away, the last known one.
      metrics.watchQueue(async () => {
        lastCounts = await queue.counts().catch(() => lastCounts);
        return lastCounts;
      });
      timers.push(
        setInterval(() => {
          store.sweepExpired().catch((err: unknown) => logger.warn({ err }, "expiry sweep failed"));
        }, sweepIntervalMs(limits.retentionSec)),
        setInterval(() => {
          adoptUnfinished().catch((err: unknown) => logger.warn({ err }, "task adoption failed"));
          void drainOutbox(OUTBOX_GRACE_MS);
        }, ADOPT_INTERVAL_MS),
      );
      for (const timer of timers) timer.unref();
    },

    async stop(graceMs, drained) {
      // Waiting requests answer now, with the task as it is: a stop never waits for them.
      service.stopAccepting();
      for (const timer of timers) clearInterval(timer);
      await Promise.all([queue.stop(graceMs), backend.webhooks.stop(graceMs)]);
      await runner.close();
      await deliverer.close();
      waiters.close();
      stopAnnouncing();
      await drained;
      feed.close();
      await close();
    },
  };
}
