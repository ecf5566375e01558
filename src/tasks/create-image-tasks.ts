import { randomBytes } from "node:crypto";
import type Keyv from "keyv";
import type { Logger } from "pino";
import type { CredentialSealer } from "../auth/credential-sealer.js";
import type { Config } from "../config/config-schema.js";
import { createImageUrlSigner, type ImageUrlSigner } from "../files/image-url-signer.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { createWebhookDeliverer } from "../webhooks/create-webhook-deliverer.js";
import { extensionOf } from "../files/image-type.js";
import type { FileSource } from "../files/create-files-router.js";
import type { ImageStore } from "../images/image-store.js";
import { sweepExpiredImages } from "../images/sweep-expired-images.js";
import { createTaskEventStreams, type TaskEventStreams } from "./events/task-event-streams.js";
import { createTaskFeed, type TaskFeed } from "./events/task-feed.js";
import { announceWebhooksOnFinish } from "./events/webhook-announcer.js";
import { openTaskBackend } from "./open-task-backend.js";
import { storeKind } from "./store/create-task-store.js";
import { createTaskFinisher } from "./task-finisher.js";
import { presentTask, type PresentDeps } from "./present-task.js";
import { createTaskImages, storageUnavailable } from "./task-images.js";
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
/**
 * How often every process deletes the image store's expiry-day folders that
 * are over (what outlived its task: a crash between writing images and
 * recording the task); a day is swept within this of its end.
 */
const IMAGE_SWEEP_INTERVAL_MS = 10 * 60_000;

/** Dependencies of {@link createImageTasks}. */
export interface ImageTasksDeps {
  config: Config;
  access: ModelAccess;
  /** Forward mode's sealer: forward keys' tasks keep their key sealed while unfinished. */
  sealer?: CredentialSealer;
  metrics: Metrics;
  logger: Logger;
  /** Where image bytes live (see `openImageStore`); opened and closed by the caller. */
  imageStore: ImageStore;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now?: () => number;
}

/** A task's images as the HTTP routes and MCP read them. */
export interface ImageReads extends FileSource {
  /** The `url` of a result image, in the `images.links` mode (or `service`, the service's own). */
  link: PresentDeps["images"]["link"];
  /** A result image's bytes as a stream (`b64_json`), or undefined once gone. */
  open: PresentDeps["images"]["open"];
  /** The `url` of a running task's partial image. */
  partialLink: PresentDeps["images"]["partialLink"];
  /** A partial image's bytes as a stream, or undefined once gone. */
  openPartial: PresentDeps["images"]["openPartial"];
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
  images: ImageReads;
  /**
   * Rejects when the task store (503 `store_unavailable`) or the image store
   * (503 `storage_unavailable`) cannot be reached (`/readyz`).
   */
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
  const { imageStore } = deps;
  const taskImages = createTaskImages({
    imageStore,
    taskStore: store,
    signer,
    config: config.images,
    logger,
    now,
    runLimitSec: limits.timeoutSec + limits.retentionSec,
  });
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
    images: taskImages,
    logger,
    now,
  });
  const finisher = createTaskFinisher({
    store,
    events,
    metrics,
    logger,
    limits,
    images: taskImages,
    now,
  });
  const stopAnnouncing = announceWebhooksOnFinish(events, webhooks, logger);
  const runner = createTaskRunner({
    store,
    images: taskImages,
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
    images: taskImages,
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
      presentTask(record, { images: taskImages, baseUrl, data: "full" }),
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
  /** The images of expired tasks go with their records (the day sweep catches what this misses). */
  const dropImages = async (keys: string[]) => {
    await imageStore.delete(keys).catch((err: unknown) => {
      logger.warn({ err, count: keys.length }, "could not delete expired tasks' images yet");
    });
  };
  const sweepImages = () => {
    sweepExpiredImages(imageStore, { nowMs: now() }).then(
      (deleted) => {
        if (deleted > 0) logger.info({ deleted }, "deleted images of expiry days that are over");
      },
      (err: unknown) => logger.warn({ err }, "image expiry sweep failed"),
    );
  };
  const timers: NodeJS.Timeout[] = [];
  let lastCounts = { waiting: 0, running: 0 };

  return {
    service,
    signer,
    feed,
    eventStreams,
    images: {
      link: taskImages.link,
      open: taskImages.open,
      partialLink: taskImages.partialLink,
      openPartial: taskImages.openPartial,
      async openPartialFile(taskId, index, ext, signal) {
        // Kept, and linked to, until the task expires, whatever its status.
        const record = await available(() => store.get(taskId));
        const image = record?.partials?.[index];
        if (!record || !image || extensionOf(image.mime) !== ext) return undefined;
        return taskImages.openPartial(record, index, signal);
      },
      async openCompleted(taskId, index, ext, signal) {
        const record = await available(() => store.get(taskId));
        const image = record?.status === "completed" ? record.images?.[index] : undefined;
        if (!record || !image || extensionOf(image.mime) !== ext) return undefined;
        return taskImages.open(record, index, signal);
      },
    },
    async ping() {
      await available(() => store.ping());
      await imageStore.ping().catch((err: unknown) => {
        throw storageUnavailable(err);
      });
    },
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
          store
            .sweepExpired(dropImages)
            .catch((err: unknown) => logger.warn({ err }, "expiry sweep failed"));
        }, sweepIntervalMs(limits.retentionSec)),
        setInterval(() => {
          adoptUnfinished().catch((err: unknown) => logger.warn({ err }, "task adoption failed"));
          void drainOutbox(OUTBOX_GRACE_MS);
        }, ADOPT_INTERVAL_MS),
        setInterval(sweepImages, IMAGE_SWEEP_INTERVAL_MS),
      );
      sweepImages();
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
