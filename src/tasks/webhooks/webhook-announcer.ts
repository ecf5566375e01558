import type { Logger } from "pino";
import type { TaskEvents } from "../core/task-events.js";
import type { TaskWebhooks } from "./task-webhooks.js";

/**
 * Queues the webhook event of each task this process finishes, as the bus
 * tells it: only this process's own final events (it heard them at once,
 * whether Redis is up or not), so a cluster queues each once. The store's
 * outbox keeps the event until it is queued, so a failure here only delays
 * it. Returns the unsubscribe.
 */
export function announceWebhooksOnFinish(
  events: TaskEvents,
  webhooks: Pick<TaskWebhooks, "announce">,
  logger: Logger,
): () => void {
  return events.subscribe((event, local) => {
    if (!local || event.type !== "stage" || !event.record.webhook) return;
    if (event.stage !== "completed" && event.stage !== "failed") return;
    webhooks.announce(event.record).catch((err: unknown) => {
      logger.warn({ err, taskId: event.record.id }, "could not queue a webhook event yet");
    });
  });
}
