import { randomBytes } from "node:crypto";
import type { lookup as dnsLookup } from "node:dns";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import express from "express";
import { Webhook } from "standardwebhooks";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { webhooksSchema, type WebhooksConfig } from "../../src/config/config-schema.js";
import { createMetrics } from "../../src/metrics/create-metrics.js";
import {
  createWebhookDeliverer,
  type WebhookAttemptReport,
  type WebhookDeliverer,
} from "../../src/webhooks/create-webhook-deliverer.js";
import {
  createWebhookDelivery,
  type WebhookDelivery,
} from "../../src/webhooks/webhook-delivery.js";
import { slowSec } from "../support/time-factor.js";
import { headerRecord, startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";

const SECRET = `whsec_${randomBytes(24).toString("base64")}`;

/** A finished task as GET shows it, with a b64_json item the event must drop. */
const TASK = {
  id: "task_AAAAAAAAAAAAAAAAAAAAAA",
  object: "image.task",
  status: "completed",
  created: 1_700_000_000,
  model: "gpt-image-1",
  completed_at: 1_700_000_030,
  data: [{ b64_json: "iVBORw0KGgo=", revised_prompt: "a red fox" }],
};

/** A DNS that answers `address` for every name. */
function dnsAnswering(address: string, family = 4): typeof dnsLookup {
  return ((
    _hostname: string,
    options: { all?: boolean },
    callback: (err: null, address: unknown, family?: number) => void,
  ) => {
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as typeof dnsLookup;
}

function webhooksConfig(input: Record<string, unknown> = {}): WebhooksConfig {
  return webhooksSchema.parse({ secret: SECRET, allowPrivateNetworks: true, ...input });
}

let receiver: WebhookReceiver;
const deliverers: WebhookDeliverer[] = [];

function deliverer(
  input: Record<string, unknown> = {},
  extra: Omit<Parameters<typeof createWebhookDeliverer>[0], "config"> = {},
) {
  const created = createWebhookDeliverer({ config: webhooksConfig(input), ...extra });
  deliverers.push(created);
  return created;
}

function deliveryTo(url: string): WebhookDelivery {
  return createWebhookDelivery(TASK, url);
}

/** What a queue does, without waiting the schedule's delays: attempts until `done`. */
async function deliverUntilDone(
  sender: WebhookDeliverer,
  delivery: WebhookDelivery,
): Promise<WebhookAttemptReport[]> {
  const reports: WebhookAttemptReport[] = [];
  for (let attempt = 1; ; attempt += 1) {
    const report = await sender.attempt(delivery, attempt);
    reports.push(report);
    if (report.next.action === "done") return reports;
  }
}

beforeEach(async () => {
  receiver = await startWebhookReceiver();
});
afterEach(async () => {
  await Promise.all(deliverers.splice(0).map((d) => d.close()));
  await receiver.close();
});

describe("one attempt", () => {
  it("POSTs the event, signed so that the standardwebhooks package verifies it", async () => {
    const delivery = deliveryTo(`${receiver.url}/hooks/images?token=abc`);
    const report = await deliverer().attempt(delivery, 1);

    expect(report).toMatchObject({
      attempt: 1,
      outcome: "delivered",
      status: 200,
      next: { action: "done", result: "delivered" },
    });
    expect(receiver.requests).toHaveLength(1);
    const [request] = receiver.requests;
    expect(request).toMatchObject({ method: "POST", path: "/hooks/images?token=abc" });
    expect(request!.headers["content-type"]).toBe("application/json");
    expect(request!.headers["webhook-id"]).toBe(delivery.eventId);
    expect(request!.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(Number(request!.headers["webhook-timestamp"])).toBeCloseTo(Date.now() / 1000, -2);

    const event = new Webhook(SECRET).verify(request!.body, headerRecord(request!.headers));
    expect(event).toEqual({
      id: delivery.eventId,
      object: "event",
      type: "image.task.completed",
      created_at: expect.any(Number),
      data: { ...TASK, data: [{ revised_prompt: "a red fox" }] },
    });
    expect(request!.body).not.toContain("b64_json");
  });

  it("a signature made with another secret does not verify (the check above can fail)", async () => {
    await deliverer().attempt(deliveryTo(receiver.url), 1);
    const [request] = receiver.requests;
    const other = new Webhook(`whsec_${randomBytes(24).toString("base64")}`);
    expect(() => other.verify(request!.body, headerRecord(request!.headers))).toThrow(/signature/i);
    const tampered = request!.body.replace("a red fox", "a red cat");
    expect(() => new Webhook(SECRET).verify(tampered, headerRecord(request!.headers))).toThrow(
      /signature/i,
    );
  });

  it("a 500 then a 200: retried after the schedule's first wait, with the same webhook-id", async () => {
    receiver.respond = (res, _req, n) => {
      res.statusCode = n === 1 ? 500 : 200;
      res.end();
    };
    const delivery = deliveryTo(`${receiver.url}/hook`);
    const reports = await deliverUntilDone(deliverer(), delivery);

    expect(reports.map((r) => [r.outcome, r.status, r.next])).toEqual([
      ["http_error", 500, { action: "retry", delayMs: 5000 }],
      ["delivered", 200, { action: "done", result: "delivered" }],
    ]);
    expect(receiver.requests).toHaveLength(2);
    const ids = receiver.requests.map((r) => r.headers["webhook-id"]);
    expect(ids).toEqual([delivery.eventId, delivery.eventId]);
    expect(receiver.requests[1]!.body).toBe(receiver.requests[0]!.body);
    for (const request of receiver.requests) {
      expect(new Webhook(SECRET).verify(request.body, headerRecord(request.headers))).toEqual(
        JSON.parse(delivery.payload),
      );
    }
  });

  it("any non-2xx is retried, 4xx included, until maxAttempts; then the delivery is exhausted", async () => {
    const statuses = [400, 404, 410, 429];
    receiver.respond = (res, _req, n) => {
      res.statusCode = statuses[n - 1] ?? 503;
      res.end("no");
    };
    const metrics = createMetrics({ defaultMetrics: false });
    const sender = deliverer({ maxAttempts: 5, retryScheduleSec: [1, 2] }, { metrics });
    const reports = await deliverUntilDone(sender, deliveryTo(receiver.url));

    expect(reports.map((r) => [r.status, r.next])).toEqual([
      [400, { action: "retry", delayMs: 1000 }],
      [404, { action: "retry", delayMs: 2000 }],
      [410, { action: "retry", delayMs: 2000 }],
      [429, { action: "retry", delayMs: 2000 }],
      [503, { action: "done", result: "exhausted" }],
    ]);
    const text = await metrics.registry.metrics();
    expect(text).toContain('image_task_sidecar_webhook_attempts_total{outcome="http_error"} 5');
    expect(text).toContain('image_task_sidecar_webhook_deliveries_total{result="exhausted"} 1');
    expect(text).toContain(
      'image_task_sidecar_webhook_delivery_attempts_sum{result="exhausted"} 5',
    );
    expect(text).toContain(
      'image_task_sidecar_webhook_attempt_duration_seconds_count{outcome="http_error"} 5',
    );
  });

  it("a redirect is a failed attempt and is not followed", async () => {
    receiver.respond = (res, req) => {
      if (req.path === "/hook") {
        res.writeHead(307, { location: `${receiver.url}/elsewhere` });
        res.end();
      } else res.end("ok");
    };
    const report = await deliverer().attempt(deliveryTo(`${receiver.url}/hook`), 1);

    expect(report).toMatchObject({
      outcome: "redirect",
      status: 307,
      next: { action: "retry", delayMs: 5000 },
    });
    expect(receiver.requests.map((r) => r.path)).toEqual(["/hook"]);
  });

  it("a receiver that is down is a network error, retried", async () => {
    const url = receiver.url;
    await receiver.close();
    receiver = await startWebhookReceiver();
    const report = await deliverer().attempt(deliveryTo(url), 1);
    expect(report).toMatchObject({
      outcome: "network_error",
      detail: "ECONNREFUSED",
      next: { action: "retry" },
    });
  });

  it("a receiver that answers 200 with an endless body is delivered, without reading it all", async () => {
    receiver.respond = (res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      const chunk = Buffer.alloc(64 * 1024, "x");
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once("drain", pump);
      };
      pump();
    };
    const report = await deliverer().attempt(deliveryTo(receiver.url), 1);
    expect(report).toMatchObject({ outcome: "delivered", status: 200 });
  });

  it("without webhooks.secret nothing is sent, and the delivery ends refused", async () => {
    const sender = createWebhookDeliverer({
      config: webhooksSchema.parse({ allowPrivateNetworks: true }),
    });
    deliverers.push(sender);
    const report = await sender.attempt(deliveryTo(receiver.url), 1);
    expect(report).toMatchObject({
      outcome: "refused",
      next: { action: "done", result: "refused" },
    });
    expect(receiver.requests).toHaveLength(0);
  });
});

describe("addresses, checked again when connecting", () => {
  it("refuses a name that now resolves to loopback (DNS rebinding), reaching nothing, and does not retry", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const sender = deliverer(
      { allowPrivateNetworks: false },
      { lookup: dnsAnswering("127.0.0.1"), metrics },
    );
    const report = await sender.attempt(
      deliveryTo(`http://hooks.example:${receiver.port}/hook`),
      1,
    );

    expect(report).toMatchObject({
      outcome: "refused",
      next: { action: "done", result: "refused" },
    });
    expect(report.detail).toContain("loopback");
    expect(receiver.requests).toHaveLength(0);
    expect(await metrics.registry.metrics()).toContain(
      'image_task_sidecar_webhook_deliveries_total{result="refused"} 1',
    );
  });

  it("refuses loopback literals in any spelling", async () => {
    const sender = deliverer({ allowPrivateNetworks: false });
    for (const host of ["127.0.0.1", "[::ffff:127.0.0.1]", "2130706433", "0x7f.1"]) {
      const report = await sender.attempt(deliveryTo(`http://${host}:${receiver.port}/`), 1);
      expect(report.outcome, host).toBe("refused");
    }
    expect(receiver.requests).toHaveLength(0);
  });

  it("with allowPrivateNetworks the same name and literal are reached (so the refusals above were the guard)", async () => {
    const sender = deliverer({ allowPrivateNetworks: true }, { lookup: dnsAnswering("127.0.0.1") });
    const byName = await sender.attempt(deliveryTo(`http://hooks.example:${receiver.port}/`), 1);
    const byLiteral = await sender.attempt(deliveryTo(`http://127.0.0.1:${receiver.port}/`), 1);
    expect([byName.outcome, byLiteral.outcome]).toEqual(["delivered", "delivered"]);
    expect(receiver.requests).toHaveLength(2);
  });

  it("keeps cloud metadata refused even with allowPrivateNetworks", async () => {
    const sender = deliverer(
      { allowPrivateNetworks: true },
      { lookup: dnsAnswering("169.254.169.254") },
    );
    const byName = await sender.attempt(deliveryTo("http://metadata.example/latest/"), 1);
    const byLiteral = await sender.attempt(deliveryTo("http://169.254.169.254/latest/"), 1);
    expect(byName).toMatchObject({ outcome: "refused", next: { result: "refused" } });
    expect(byName.detail).toContain("metadata");
    expect(byLiteral).toMatchObject({ outcome: "refused", next: { result: "refused" } });
  });
});

describe("slow receivers", () => {
  it("a receiver that never answers hits the attempt's timeout, while another receiver is served meanwhile", async () => {
    receiver.respond = (res, req) => {
      if (req.path === "/fast") res.end("ok");
      // /slow: never answered
    };
    // 1 s on an idle machine: the fast receiver's attempt has the same timeout, and a loaded
    // CI run took longer than 1 s to deliver it.
    const timeoutSec = slowSec(1);
    const sender = deliverer({ timeoutSec });
    let hungSettled = false;
    const hung = sender.attempt(deliveryTo(`${receiver.url}/slow`), 1).finally(() => {
      hungSettled = true;
    });
    await receiver.received(1);
    const fast = await sender.attempt(deliveryTo(`${receiver.url}/fast`), 1);
    expect(fast.outcome).toBe("delivered");
    expect(hungSettled).toBe(false);

    const report = await hung;
    expect(report).toMatchObject({
      outcome: "timeout",
      detail: `timed out after ${timeoutSec} s`,
      next: { action: "retry", delayMs: 5000 },
    });
    expect(report.status).toBeUndefined();
    expect(report.latencyMs).toBeGreaterThanOrEqual(timeoutSec * 1000 - 100);
  });

  it("a receiver that holds its answer open after a 200 has it delivered, its slot free a second later", async () => {
    receiver.respond = (res) => res.writeHead(200).write("ok");
    const sender = deliverer({ timeoutSec: 15, maxConcurrent: 1 });
    const started = Date.now();
    const report = await sender.attempt(deliveryTo(`${receiver.url}/held`), 1);
    expect(report).toMatchObject({ outcome: "delivered", status: 200 });
    // Not the attempt's whole timeout (15 s): the answer's body is read a second at most.
    expect(Date.now() - started).toBeLessThan(slowSec(5) * 1000);
  });

  it("at most maxConcurrent attempts are in flight; the others wait their turn and then go", async () => {
    const held: Array<() => void> = [];
    receiver.respond = (res) => held.push(() => res.end("ok"));
    const sender = deliverer({ maxConcurrent: 2 });
    const attempts = [1, 2, 3, 4].map((n) =>
      sender.attempt(deliveryTo(`${receiver.url}/n${n}`), 1),
    );
    await receiver.received(2);
    expect(sender.load).toEqual({ active: 2, waiting: 2 });
    expect(receiver.requests).toHaveLength(2);

    held.splice(0).forEach((release) => release());
    await receiver.received(4);
    held.splice(0).forEach((release) => release());
    const reports = await Promise.all(attempts);
    expect(reports.map((r) => r.outcome)).toEqual(Array(4).fill("delivered"));
    expect(receiver.requests.map((r) => r.path)).toEqual(["/n1", "/n2", "/n3", "/n4"]);
    expect(sender.load).toEqual({ active: 0, waiting: 0 });
  });

  it("an attempt the caller aborts (a stop) rejects and is not counted", async () => {
    receiver.respond = () => undefined; // never answers
    const metrics = createMetrics({ defaultMetrics: false });
    const sender = deliverer({}, { metrics });
    const stop = new AbortController();
    const attempt = sender.attempt(deliveryTo(receiver.url), 1, { signal: stop.signal });
    await receiver.received(1);
    stop.abort(new Error("stopping"));
    await expect(attempt).rejects.toThrow("stopping");
    expect(await metrics.registry.metrics()).not.toMatch(/webhook_attempts_total\{/);
  });
});

describe("the receiver in docs/image-tasks.md", () => {
  it("an Express app with express.raw and standardwebhooks verifies a delivery", async () => {
    const seen: unknown[] = [];
    const webhook = new Webhook(SECRET);
    const app = express();
    app.post("/images", express.raw({ type: "application/json" }), (req, res) => {
      let event;
      try {
        event = webhook.verify(req.body as Buffer, req.headers as Record<string, string>);
      } catch {
        return res.status(400).end();
      }
      seen.push(event);
      res.status(204).end();
    });
    const server = app.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const { port } = server.address() as AddressInfo;
      const delivery = deliveryTo(`http://127.0.0.1:${port}/images`);
      const report = await deliverer().attempt(delivery, 1);
      expect(report).toMatchObject({ outcome: "delivered", status: 204 });
      expect(seen).toEqual([JSON.parse(delivery.payload)]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
