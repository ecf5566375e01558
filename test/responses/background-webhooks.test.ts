import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished } from "vitest";
import { startTestApp, TEST_KEYS } from "../support/start-test-app.js";
import { headerRecord, startWebhookReceiver } from "../webhooks/webhook-receiver.js";
import { retrieveUntil, sdk } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

const SECRET = `whsec_${randomBytes(24).toString("base64")}`;

describe("webhooks of background responses", () => {
  it("sends OpenAI's response events, signed per Standard Webhooks, to the key's receiver", async () => {
    const receiver = await startWebhookReceiver();
    onTestFinished(() => receiver.close());
    const app = await startTestApp({
      config: {
        auth: {
          keys: [
            { key: TEST_KEYS.default, group: "default", webhookUrl: `${receiver.url}/hooks` },
            { key: TEST_KEYS.other, group: "default" },
          ],
        },
        webhooks: { secret: SECRET, allowPrivateNetworks: true, retryScheduleSec: [1] },
      },
    });
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream, { hold: true });
    onTestFinished(() => channel.release());
    const client = sdk(app);

    // One completed, one cancelled; the other key has no receiver.
    const started = channel.nextStarted();
    const cancelled = await client.responses.create({
      model: "gpt-4o-mini",
      input: "cancel me",
      background: true,
    });
    await started;
    await client.responses.cancel(cancelled.id);
    channel.release();
    const completed = await client.responses.create({
      model: "gpt-4o-mini",
      input: "finish me",
      background: true,
    });
    await retrieveUntil(client, completed.id, ["completed"]);
    const silent = sdk(app, TEST_KEYS.other);
    const unheard = await silent.responses.create({
      model: "gpt-4o-mini",
      input: "nobody listens",
      background: true,
    });
    await retrieveUntil(silent, unheard.id, ["completed"]);

    await receiver.received(2);
    const verifier = new Webhook(SECRET);
    const events = receiver.requests.map((request) => {
      expect(request.path).toBe("/hooks");
      const event = verifier.verify(request.body, headerRecord(request.headers)) as {
        id: string;
        type: string;
        data: { id: string };
      };
      expect(request.headers["webhook-id"]).toBe(event.id);
      return event;
    });
    const byResponse = Object.fromEntries(events.map((event) => [event.data.id, event]));
    expect(byResponse[cancelled.id]).toMatchObject({
      object: "event",
      type: "response.cancelled",
      data: { id: cancelled.id },
    });
    expect(byResponse[completed.id]).toMatchObject({
      object: "event",
      type: "response.completed",
      data: { id: completed.id },
    });
    for (const event of events) {
      expect(event.id).toMatch(/^evt_[A-Za-z0-9_-]{22}$/);
      expect(Object.keys(event).sort()).toEqual(["created_at", "data", "id", "object", "type"]);
      expect(Object.keys(event.data)).toEqual(["id"]);
    }
    // Nothing more: the other key has no receiver.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.requests).toHaveLength(2);
  });
});
