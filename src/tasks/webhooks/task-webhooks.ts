import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { createWebhookDelivery } from "../../webhooks/webhook-delivery.js";
import type { WebhookQueue } from "../../webhooks/webhook-queue.js";
import type { PresentDeps } from "../view/present-task.js";
import { eventFieldsOf, showTask, webhookDialect } from "../view/show-task.js";
import type { Sub2apiLimits } from "../view/sub2api-view.js";
import type { TaskStore } from "../core/task-store.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import { responseWebhookDelivery } from "./response-webhook.js";

/** Outbox entries read per pass; the next pass takes the rest. */
const OUTBOX_BATCH = 500;

/** Dependencies of {@link createTaskWebhooks}. */
export interface TaskWebhooksDeps {
  store: TaskStore;
  queue: WebhookQueue;
  /** The links of `url` images, as GET shows them. */
  images: PresentDeps["images"];
  /** `imageTasks`' timeout and retention: what a sub2api task's `expires_at` reads. */
  limits: Sub2apiLimits;
  logger: Logger;
  now: () => number;
}

/** Hands finished tasks' events to the webhook queue. */
export type TaskWebhooks = ReturnType<typeof createTaskWebhooks>;

/**
 * The event id of a task's one event: derived from the task id, so that
 * whoever builds the event again (the outbox pass after a crash) makes the
 * same id, and the queue, keyed by it, keeps one delivery.
 */
export function eventIdOf(taskId: string): string {
  const digest = createHash("sha256").update(`image-task-event:${taskId}`).digest("base64url");
  return `evt_${digest.slice(0, 22)}`;
}

/**
 * From a finished task to its queued delivery. The store puts a task with a
 * webhook into its outbox in the same step that finishes it; `announce`
 * builds the event (the task as GET shows it in the dialect it was submitted
 * in, without `b64_json`; image URLs on the origin it was submitted at),
 * queues it and takes the task out of
 * the outbox. Whatever a crash or an outage left in the outbox is announced
 * by {@link TaskWebhooks.drainOutbox}, which every process runs now and then.
 */
export function createTaskWebhooks(deps: TaskWebhooksDeps) {
  const { store, queue, images, limits, logger, now } = deps;

  /** An image task's event: the task as GET shows it in its dialect. */
  async function taskDelivery(record: TaskRecord, webhook: NonNullable<TaskRecord["webhook"]>) {
    const dialect = webhookDialect(record);
    const view = await showTask(
      record,
      { images, baseUrl: webhook.baseUrl, data: "listed", limits },
      dialect,
    );
    return createWebhookDelivery(view, webhook.url, {
      id: eventIdOf(record.id),
      createdAt: record.completed_at,
      trace: record.trace,
      fields: eventFieldsOf(dialect),
    });
  }

  async function announce(record: TaskRecord): Promise<void> {
    if (!record.webhook || !isFinished(record.status)) return;
    const delivery =
      record.kind === "response"
        ? responseWebhookDelivery(record, record.webhook.url)
        : await taskDelivery(record, record.webhook);
    await queue.add(delivery);
    await store.clearWebhookOutbox(record.id);
  }

  return {
    announce,

    /**
     * Announces what is in the outbox since at least `minAgeMs` (younger
     * entries are likely being announced by the process that finished them).
     */
    async drainOutbox(minAgeMs: number): Promise<void> {
      for (const { id, sinceMs } of await store.webhookOutbox(OUTBOX_BATCH)) {
        if (now() - sinceMs < minAgeMs) continue;
        const record = await store.get(id);
        if (record?.webhook && isFinished(record.status)) {
          logger.info({ taskId: id }, "queueing a webhook event left in the outbox");
          await announce(record);
        } else {
          await store.clearWebhookOutbox(id); // expired meanwhile: nothing left to send
        }
      }
    },
  };
}
