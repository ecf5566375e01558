import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "../support/serve-process.js";
import { call, expectError, submit } from "../tasks/task-api.js";
import { startWebhookReceiver } from "./webhook-receiver.js";

/*
 * Webhooks can be tried on the embedded defaults, with no file: the built
 * bin on config/default.yaml, WEBHOOKS_SECRET and
 * WEBHOOKS_ALLOW_PRIVATE_NETWORKS set, a receiver on this machine.
 */

const DEFAULTS = resolve(import.meta.dirname, "../../config/default.yaml");
const DEMO_KEY = "sk-demo-image-task-sidecar";
const SECRET = `whsec_${randomBytes(32).toString("base64")}`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "webhooks-defaults-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const headerRecord = (headers: IncomingHttpHeaders) =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)]));

describe("webhooks on the embedded defaults", () => {
  it(
    "deliver to a receiver on this machine with WEBHOOKS_SECRET and WEBHOOKS_ALLOW_PRIVATE_NETWORKS",
    async () => {
      const receiver = await startWebhookReceiver();
      try {
        const served = await serve(DEFAULTS, dir, {
          PORT: "0",
          WEBHOOKS_SECRET: SECRET,
          WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true",
        });
        const target = { url: served.url, key: DEMO_KEY };
        const answer = await submit(target, {
          prompt: "a lighthouse",
          webhook_url: `${receiver.url}/hook`,
        });
        expect(answer.status, answer.text).toBe(202);
        await receiver.received(1);
        const [request] = receiver.requests;
        const event = new Webhook(SECRET).verify(request!.body, headerRecord(request!.headers)) as {
          type: string;
          data: { id: string };
        };
        expect(event).toMatchObject({ type: "image.task.completed", data: { id: answer.body.id } });
        served.child.kill("SIGTERM");
        expect(await served.exited).toBe(0);
      } finally {
        await receiver.close();
      }
    },
    slow(30_000),
  );

  it(
    "refuse a loopback receiver without the setting, naming it",
    async () => {
      // A store of its own (the defaults keep tasks under ./data).
      const cwd = await mkdtemp(join(dir, "refused-"));
      const served = await serve(DEFAULTS, cwd, { PORT: "0", WEBHOOKS_SECRET: SECRET });
      const answer = await submit(
        { url: served.url, key: DEMO_KEY },
        { prompt: "x", webhook_url: "http://127.0.0.1:9/hook" },
      );
      expectError(answer, 400, "invalid_value", "webhook_url");
      expect(answer.body.error!.message).toContain(
        "set webhooks.allowPrivateNetworks: true, or WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true.",
      );
      // Nothing was made of it.
      const listed = await call({ url: served.url, key: DEMO_KEY }, "GET", "/v1/images/tasks");
      expect(JSON.parse(listed.text)).toMatchObject({ data: [] });
      served.child.kill("SIGTERM");
      await served.exited;
    },
    slow(30_000),
  );
});
