import type { Logger } from "pino";
import type { ImageUrlSigner } from "../files/image-url-signer.js";
import type { QueueCounts } from "./queue/task-queue.js";
import {
  createWebhookDeliverer,
  type WebhookDeliverer,
} from "../webhooks/create-webhook-deliverer.js";
import type { ImageTasksDeps } from "./create-image-tasks.js";
import { createTaskEventStreams, type TaskEventStreams } from "./events/task-event-streams.js";
import { createTaskFeed, type TaskFeed } from "./events/task-feed.js";
import { announceWebhooksOnFinish } from "./events/webhook-announcer.js";
import { presentTask } from "./view/present-task.js";
import { createTaskImages, type TaskImages } from "./images/task-images.js";
import type { TaskBackend } from "./open-task-backend.js";
import { createTaskRunner, type TaskRunner } from "./run/task-runner.js";
import { createTaskFinisher } from "./service/task-finisher.js";
import { createTaskService, type TaskService } from "./service/task-service.js";
import { createTaskWaiters, type TaskWaiters } from "./service/task-waiters.js";
import { createTaskWebhooks, type TaskWebhooks } from "./service/task-webhooks.js";

/** The task feature's parts on its open backend: what its start, stop and entry hold. */
export interface TaskParts {
  deps: ImageTasksDeps;
  /** The feature's own logger (`component: tasks`). */
  logger: Logger;
  now: () => number;
  backend: TaskBackend;
  images: TaskImages;
  feed: TaskFeed;
  waiters: TaskWaiters;
  deliverer: WebhookDeliverer;
  webhooks: TaskWebhooks;
  runner: TaskRunner;
  service: TaskService;
  eventStreams: TaskEventStreams;
  /** Ends this process's webhook announcements (see `announceWebhooksOnFinish`). */
  stopAnnouncing: () => void;
  /** The periodic maintenance's timers, set by start. */
  timers: NodeJS.Timeout[];
  /** The queue's counts last read, shown while the store is away. */
  lastCounts: QueueCounts;
}

/**
 * Builds the parts on `backend`: task images, feed and waiters, webhook
 * deliveries, the finisher every end goes through, the runner, the service
 * and the event streams. Nothing runs yet (see `startImageTasks`).
 */
export function createTaskParts(
  deps: ImageTasksDeps,
  backend: TaskBackend,
  signer: ImageUrlSigner,
): TaskParts {
  const { config, metrics } = deps;
  const logger = deps.logger.child({ component: "tasks" });
  const now = deps.now ?? Date.now;
  const limits = config.imageTasks;
  const { store, queue, events } = backend;
  const images = createTaskImages({
    imageStore: deps.imageStore,
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
  const webhooks = createTaskWebhooks({ store, queue: backend.webhooks, images, logger, now });
  const finisher = createTaskFinisher({ store, events, metrics, logger, limits, images, now });
  const stopAnnouncing = announceWebhooksOnFinish(events, webhooks, logger);
  const { access, sealer } = deps;
  const runner = createTaskRunner({
    store,
    images,
    access,
    sealer,
    finisher,
    metrics,
    logger,
    limits,
    now,
  });
  const service = createTaskService({
    config,
    store,
    images,
    queue,
    finisher,
    access,
    sealer,
    metrics,
    logger,
    waiters,
    now,
  });
  const eventStreams = createTaskEventStreams({
    feed,
    read: service.get,
    present: (record, baseUrl) => presentTask(record, { images, baseUrl, data: "full" }),
    keepAliveMs: limits.eventsKeepAliveSec * 1000,
    metrics,
    logger,
  });
  return {
    deps,
    logger,
    now,
    backend,
    images,
    feed,
    waiters,
    deliverer,
    webhooks,
    runner,
    service,
    eventStreams,
    stopAnnouncing,
    timers: [],
    lastCounts: { waiting: 0, running: 0 },
  };
}
