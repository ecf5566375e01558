import { createWebhookEvent, type FinishedTaskView } from "./webhook-event.js";

/**
 * One event on its way to one receiver: what a queue job carries. Plain JSON,
 * so any queue backend can store it; fixed when the task finishes and never
 * rebuilt, so every attempt sends the same id and the same bytes.
 */
export interface WebhookDelivery {
  /** The event's id (`evt_...`): the `webhook-id` of every attempt, and a natural job id. */
  eventId: string;
  /** The task the event is about; for logs only. */
  taskId: string;
  /** The receiver, as validated at submission ({@link validateWebhookUrl}). */
  url: string;
  /** The event, serialised once: the exact body of every attempt. */
  payload: string;
  /** The task's trace as a `traceparent`, when tracing: each attempt is a span in it. */
  trace?: string;
}

/**
 * The delivery of a finished task's event to `url`: what the task core
 * enqueues, once per task, on the transition to `completed` or `failed`.
 *
 * @param task the task as GET shows it (`b64_json` items are dropped here)
 * @param url the task's stored `webhook_url`
 * @param options.id the event id, when it was fixed earlier (kept with the
 *   finished task, so a re-enqueue after a crash makes the same event and a
 *   queue deduplicating on `eventId` keeps one); default a new one
 * @param options.createdAt Unix seconds; default now (pass the task's `completed_at`)
 * @param options.fields the view's fields the event carries, for an async dialect's view
 */
export function createWebhookDelivery(
  task: FinishedTaskView,
  url: string,
  options: {
    id?: string;
    createdAt?: number;
    trace?: string | undefined;
    fields?: readonly string[] | undefined;
  } = {},
): WebhookDelivery {
  const { fields, ...rest } = options;
  const event = createWebhookEvent(task, fields ? { ...rest, fields } : rest);
  const delivery: WebhookDelivery = {
    eventId: event.id,
    taskId: task.id,
    url,
    payload: JSON.stringify(event),
  };
  if (options.trace) delivery.trace = options.trace;
  return delivery;
}
