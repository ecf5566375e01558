import type { Logger } from "pino";
import type { CredentialSealer } from "../auth/credential-sealer.js";
import type { Config } from "../config/config-schema.js";
import { createImageUrlSigner, type ImageUrlSigner } from "./images/image-url-signer.js";
import { urlSigningSecret } from "./images/url-signing-secret.js";
import type { ImageStore } from "../images/image-store.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import type { Tracer } from "../tracing/tracer.js";
import {
  createWebhookDeliverer,
  type WebhookDeliverer,
} from "../webhooks/create-webhook-deliverer.js";
import { createTaskFeed, type TaskFeed } from "./events/task-feed.js";
import { createImageReads, type ImageReads } from "./images/image-reads.js";
import { createTaskImages, type TaskImages } from "./images/task-images.js";
import type { TaskBackend } from "./open-task-backend.js";
import { createResponseService, type ResponseService } from "./responses/response-service.js";
import { createTaskRunner, type TaskRunner } from "./run/task-runner.js";
import { createTaskFinisher } from "./service/task-finisher.js";
import { createTaskService, type TaskService } from "./service/task-service.js";
import { createTaskWaiters, type TaskWaiters } from "./service/task-waiters.js";
import { createTaskHealth, type TaskHealth } from "./task-health.js";
import { TaskMaintenance } from "./task-maintenance.js";
import { createTaskWebhooks, type TaskWebhooks } from "./webhooks/task-webhooks.js";
import { announceWebhooksOnFinish } from "./webhooks/webhook-announcer.js";

/** Dependencies of {@link createImageTasks}: every part it builds on, opened by the caller. */
export interface ImageTasksDeps {
  config: Config;
  access: ModelAccess;
  /** Forward mode's sealer: forward keys' tasks keep their key sealed while unfinished. */
  sealer?: CredentialSealer;
  metrics: Metrics;
  logger: Logger;
  /** Where image bytes live (see `openImageStore`); opened and closed by the caller. */
  imageStore: ImageStore;
  /**
   * The task store, queue and bus the deployment names (see `openTaskBackend`):
   * opened by the caller, which closes it when this rejects; once built,
   * {@link ImageTasks.stop} closes it, after the last request and task.
   */
  backend: TaskBackend;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now?: () => number;
  /** Spans of task runs and webhook deliveries, in each task's trace. Default: tracing off. */
  tracer?: Tracer;
}

/** The async image-task feature, as the rest of the service sees it. */
export interface ImageTasks {
  /** Submit, read, list, wait, cancel. */
  service: TaskService;
  /** Signs and checks the URLs of `url` images (the secret is shared by every replica). */
  signer: ImageUrlSigner;
  /** Every task's events as this process hears them (from any replica), by task id. */
  feed: TaskFeed;
  /** Tasks' images as the routes read them: links, bytes, files. */
  images: ImageReads;
  /** Background responses (`POST /v1/responses` with `background: true`), tasks of their own kind. */
  responses: BackgroundResponsesFeature;
  /**
   * Whether the task store and the image store work (each checked at start-up,
   * periodically, on `/readyz` and when an operation fails): submissions are
   * refused with 503 while one does not.
   */
  health: TaskHealth;
  /** Picks up what earlier processes left, starts running tasks and the periodic maintenance. */
  start(): Promise<void>;
  /**
   * Stops taking submissions and tasks, and answers waiting requests at once;
   * polls of channels' async jobs are handed over at once (persistent store);
   * other running tasks and webhook attempts get `graceMs` to end (the stop
   * resolves as soon as they did), then are handed back (persistent store: to
   * another replica or the next start) or fail `interrupted` (memory store).
   * Then closes the backend, once `drained` (the HTTP server's last requests)
   * has settled too.
   */
  stop(graceMs: number, drained?: Promise<unknown>): Promise<void>;
}

/** Background responses as the routes serve them. */
export interface BackgroundResponsesFeature {
  service: ResponseService;
  /** Where their images' bytes are read from (their records hold the keys). */
  imageStore: Pick<ImageStore, "get">;
}

/** The parts of the feature, built once; nothing in them is filled in later. */
interface TaskParts {
  images: TaskImages;
  feed: TaskFeed;
  waiters: TaskWaiters;
  runner: TaskRunner;
  service: TaskService;
  responses: ResponseService;
  deliverer: WebhookDeliverer;
  webhooks: TaskWebhooks;
  maintenance: TaskMaintenance;
  health: TaskHealth;
  /** Ends this process's webhook announcements (see `announceWebhooksOnFinish`). */
  stopAnnouncing: () => void;
}

/**
 * Builds the task feature on its opened backend and image store: task
 * images, the feed of events and waiting requests, the finisher every end
 * goes through, the runner, the service, webhook deliveries and the periodic
 * maintenance. Nothing runs until {@link ImageTasks.start}.
 */
export async function createImageTasks(deps: ImageTasksDeps): Promise<ImageTasks> {
  const { backend } = deps;
  const signer = createImageUrlSigner(await urlSigningSecret(deps.config, backend.store));
  const parts = createParts(deps, signer);
  return {
    service: parts.service,
    signer,
    feed: parts.feed,
    images: createImageReads(backend.store, parts.images, deps.now),
    responses: { service: parts.responses, imageStore: deps.imageStore },
    health: parts.health,
    start: () => start(backend, parts),
    stop: (graceMs, drained) => stop(backend, parts, graceMs, drained),
  };
}

/** {@link ImageTasks.start}: unfinished tasks adopted, queues started, maintenance begun. */
async function start(backend: TaskBackend, parts: TaskParts): Promise<void> {
  await parts.maintenance.adoptUnfinished();
  await backend.queue.start(parts.runner.run);
  await backend.webhooks.start((delivery, attempt, options) =>
    parts.deliverer.attempt(delivery, attempt, options),
  );
  await parts.maintenance.start();
  parts.health.start();
}

/** {@link ImageTasks.stop}. */
async function stop(
  backend: TaskBackend,
  parts: TaskParts,
  graceMs: number,
  drained: Promise<unknown> | undefined,
): Promise<void> {
  // Waiting requests answer now, with the task as it is: a stop never waits for them.
  parts.service.stopAccepting();
  parts.responses.stopAccepting();
  parts.maintenance.stop();
  parts.health.stop();
  await Promise.all([backend.queue.stop(graceMs), backend.webhooks.stop(graceMs)]);
  await parts.runner.close();
  await parts.deliverer.close();
  parts.waiters.close();
  parts.stopAnnouncing();
  await drained;
  parts.feed.close();
  await backend.close();
}

/** The parts on the backend, each given what it uses. */
function createParts(deps: ImageTasksDeps, signer: ImageUrlSigner): TaskParts {
  const { config, metrics, backend, access, sealer } = deps;
  const logger = deps.logger.child({ component: "tasks" });
  const now = deps.now ?? Date.now;
  const limits = config.imageTasks;
  const { store, queue, events } = backend;
  const images = createTaskImages({
    imageStore: deps.imageStore,
    signer,
    config: config.images,
    logger,
    now,
    runLimitSec: limits.timeoutSec + limits.retentionSec,
  });
  const health = createTaskHealth({
    ...{ store, imageStore: deps.imageStore, metrics, logger },
    imageCheckIntervalMs: config.images.checkIntervalSec * 1000,
  });
  const feed = createTaskFeed(events);
  const waiters = createTaskWaiters(feed);
  const finisher = createTaskFinisher({
    ...{ store, events, metrics, logger, limits, images, now },
    channelNames: config.channels.map((channel) => channel.name),
  });
  const runner = createTaskRunner({
    ...{ store, images, access, sealer, finisher },
    ...{ metrics, logger, limits, now, stores: health, tracer: deps.tracer },
    writeRetryMs: config.images.writeRetrySec * 1000,
    // A run that outlived its lease in a store outage writes its end again every second, after
    // a write to the dead primary has timed out: a rerun leaves it that long, and some.
    rerunGraceMs: config.deployment.shared ? config.store.commandTimeoutSec * 1000 + 3_000 : 0,
    // A run that outlived its lease says it goes on, so that a rerun on another replica waits.
    aliveMarks: config.deployment.shared ? backend.keyValue("unleased-runs", 0) : undefined,
    channels: config.channels,
    responseEvents: backend.responseEvents,
  });
  const webhooks = createTaskWebhooks({
    ...{ store, queue: backend.webhooks, images, logger, now },
    limits,
  });
  const deliverer = createWebhookDeliverer({
    config: config.webhooks,
    metrics,
    logger: deps.logger.child({ component: "webhooks" }),
    tracer: deps.tracer,
  });
  const maintenance = new TaskMaintenance({
    ...{ store, queue, imageStore: deps.imageStore, webhooks, metrics, logger, now },
    shared: config.deployment.shared,
    primary: backend.redis,
  });
  const service = createTaskService({
    ...{ config, store, images, queue, finisher, access, sealer },
    ...{ metrics, logger, waiters, feed, now, stores: health },
    adoptSoon: () => maintenance.adoptSoon(),
  });
  const responses = createResponseService({
    ...{ config, store, images, queue, finisher, access, sealer, metrics, logger, now, feed },
    log: backend.responseEvents,
    stores: health,
    adoptSoon: () => maintenance.adoptSoon(),
  });
  const stopAnnouncing = announceWebhooksOnFinish(events, webhooks, logger);
  return {
    images,
    feed,
    waiters,
    runner,
    service,
    responses,
    deliverer,
    webhooks,
    maintenance,
    health,
    stopAnnouncing,
  };
}
