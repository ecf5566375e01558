import { createHash } from "node:crypto";
import type { WebhookDelivery } from "../../webhooks/webhook-delivery.js";
import { responseStatusOf } from "../core/response-state.js";
import type { TaskRecord } from "../core/task-record.js";

/**
 * The event of a finished background response in OpenAI's webhook shape:
 * `response.completed`, `response.failed`, `response.cancelled` or
 * `response.incomplete`, its `data` the response's id alone (the receiver
 * retrieves it). Its id is derived from the response's, so an event built
 * again (the outbox after a crash) is the same event, delivered once.
 */
export function responseWebhookDelivery(record: TaskRecord, url: string): WebhookDelivery {
  const status = responseStatusOf(record);
  const digest = createHash("sha256").update(`response-event:${record.id}`).digest("base64url");
  const id = `evt_${digest.slice(0, 22)}`;
  const event = {
    id,
    object: "event",
    type: `response.${status}`,
    created_at: record.completed_at ?? Math.floor(Date.now() / 1000),
    data: { id: record.id },
  };
  const delivery: WebhookDelivery = {
    eventId: id,
    taskId: record.id,
    url,
    payload: JSON.stringify(event),
  };
  if (record.trace) delivery.trace = record.trace;
  return delivery;
}
