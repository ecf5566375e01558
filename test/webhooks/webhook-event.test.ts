import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { signWebhook } from "../../src/webhooks/sign-webhook.js";
import { createWebhookDelivery } from "../../src/webhooks/webhook-delivery.js";
import {
  createWebhookEvent,
  EVENT_ID_PATTERN,
  newEventId,
} from "../../src/webhooks/webhook-event.js";
import { webhookSigningKey } from "../../src/config/schema/webhook-secret.js";

const completed = {
  id: "task_BBBBBBBBBBBBBBBBBBBBBB",
  object: "image.task",
  status: "completed",
  created: 1_700_000_000,
  model: "gpt-image-1",
  kind: "generation",
  prompt: "a red fox",
  parameters: { size: "1024x1024", n: 2, response_format: "b64_json" },
  started_at: 1_700_000_001,
  completed_at: 1_700_000_020,
  expires_at: 1_700_086_420,
  data: [
    { b64_json: "AAAA", revised_prompt: "one" },
    { url: "https://sidecar.example/v1/images/files/task_B/1.png?expires=1&signature=s" },
  ],
  usage: { total_tokens: 10 },
};

describe("createWebhookEvent", () => {
  it("carries the completed task as GET shows it, without b64_json", () => {
    const event = createWebhookEvent(completed, { createdAt: 1_700_000_020 });
    expect(event).toEqual({
      id: expect.stringMatching(EVENT_ID_PATTERN),
      object: "event",
      type: "image.task.completed",
      created_at: 1_700_000_020,
      data: {
        ...completed,
        data: [{ revised_prompt: "one" }, { url: completed.data[1]!.url }],
      },
    });
    expect(completed.data[0]).toHaveProperty("b64_json", "AAAA"); // the caller's view is untouched
  });

  it("is image.task.failed for a failed task, with its error", () => {
    const error = { code: "timeout", message: "took too long", type: "server_error" };
    const failed = { id: "task_C", status: "failed", error };
    const event = createWebhookEvent(failed);
    expect(event.type).toBe("image.task.failed");
    expect(event.data).toEqual({ id: "task_C", status: "failed", error });
    expect(event.created_at).toBeCloseTo(Date.now() / 1000, -1);
  });

  it("carries only the fields GET shows, even when handed a stored record", () => {
    const record = {
      ...completed,
      owner: "key:3f9a…",
      request: { prompt: "secret plans", user: "end-user-7" },
      webhook_url: "https://hooks.example/in?token=t",
      attempts: 1,
    };
    const event = createWebhookEvent(record);
    expect(JSON.stringify(event)).not.toContain("end-user-7");
    expect(Object.keys(event.data).sort()).toEqual(
      [
        "id",
        "object",
        "status",
        "created",
        "model",
        "kind",
        "prompt",
        "parameters",
        "started_at",
        "completed_at",
        "expires_at",
        "data",
        "usage",
      ].sort(),
    );
  });

  it("refuses a task that has not finished", () => {
    expect(() => createWebhookEvent({ id: "task_D", status: "in_progress" })).toThrow();
  });

  it("gives every event its own 128-bit id", () => {
    const ids = new Set(Array.from({ length: 1000 }, newEventId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(EVENT_ID_PATTERN);
  });
});

describe("createWebhookDelivery", () => {
  it("serialises the event once: the job's payload, with its id beside it", () => {
    const delivery = createWebhookDelivery(completed, "https://hooks.example/in");
    expect(delivery).toEqual({
      eventId: expect.stringMatching(EVENT_ID_PATTERN),
      taskId: completed.id,
      url: "https://hooks.example/in",
      payload: expect.any(String),
    });
    expect(JSON.parse(delivery.payload)).toMatchObject({ id: delivery.eventId, object: "event" });
    // Plain JSON all the way: a queue can store and restore it as it is.
    expect(JSON.parse(JSON.stringify(delivery))).toEqual(delivery);
  });

  it("keeps an event id fixed earlier, so a re-enqueue makes the same event", () => {
    const id = newEventId();
    const first = createWebhookDelivery(completed, "https://hooks.example/in", {
      id,
      createdAt: completed.completed_at,
    });
    const again = createWebhookDelivery(completed, "https://hooks.example/in", {
      id,
      createdAt: completed.completed_at,
    });
    expect(first.eventId).toBe(id);
    expect(again).toEqual(first);
  });
});

describe("signWebhook", () => {
  it("is what the standardwebhooks package verifies, with the same secret only", () => {
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    const body = JSON.stringify(createWebhookEvent(completed));
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signWebhook(webhookSigningKey(secret), "evt_x", timestamp, body);

    expect(headers["webhook-id"]).toBe("evt_x");
    expect(headers["webhook-timestamp"]).toBe(String(timestamp));
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
    // The reference signer agrees byte for byte.
    expect(headers["webhook-signature"]).toBe(
      new Webhook(secret).sign("evt_x", new Date(timestamp * 1000), body),
    );
    expect(() => new Webhook(secret).verify(`${body} `, { ...headers })).toThrow();
    expect(() =>
      new Webhook(`whsec_${randomBytes(32).toString("base64")}`).verify(body, { ...headers }),
    ).toThrow();
  });
});
