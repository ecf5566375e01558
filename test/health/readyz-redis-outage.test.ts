import { slow } from "../support/time-factor.js";
import { rm } from "node:fs/promises";
import OpenAI from "openai";
import { describe, expect, it, onTestFinished } from "vitest";
import { deleteKeys, imagesDirOf, startPrivateRedis, uniquePrefix } from "../support/redis.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import {
  call,
  expectError,
  submit,
  submitOk,
  waitForStatus,
  waitUntil,
} from "../tasks/task-api.js";

/*
 * Readiness keeps what still works: a Redis task store of the test's own (a
 * private redis-server) stops; the replica stays ready (200, degraded, the
 * store's reason in `checks`), passthrough answers, task submissions are
 * refused, and it is ready again once Redis is back. Redis's address is on
 * the metrics listener, never on the public port.
 */

async function readyz(app: TestApp) {
  const answer = await call(app, "GET", "/readyz", { key: null });
  return {
    status: answer.status,
    text: answer.text,
    body: JSON.parse(answer.text) as Record<string, unknown>,
  };
}

describe("/readyz while the task store (Redis) is away", () => {
  it(
    "stays 200 degraded: chat 200, submissions 503, ready again after; no Redis address on the public port",
    async () => {
      const redis = await startPrivateRedis();
      onTestFinished(() => redis.close());
      const prefix = uniquePrefix("readyz-redis");
      const app = await startTestApp({
        config: {
          store: { url: redis.url, prefix, commandTimeoutSec: 1 },
          images: { url: `file://${imagesDirOf(prefix)}` },
          metrics: { port: 0 },
        },
      });
      onTestFinished(async () => {
        await app.close();
        await deleteKeys(prefix, redis.url).catch(() => undefined);
        await rm(imagesDirOf(prefix), { recursive: true, force: true });
      });
      const redisPort = new URL(redis.url).port;

      const ready = await readyz(app);
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({
        status: "ready",
        checks: { store: "ok", images: "ok", channels: expect.any(Object) },
      });
      expect(ready.text).not.toContain(redisPort);
      // Where the primary is, for operators: on the metrics listener.
      const metrics = await (await fetch(`${app.server.metricsUrl}/metrics`)).text();
      expect(metrics).toMatch(new RegExp(`redis_primary_info\\{[^}]*127\\.0\\.0\\.1:${redisPort}`));

      await redis.stop();
      try {
        // The submission meets the outage (and has the store checked again at once).
        expectError(await submit(app, { prompt: "while Redis is away" }), 503, "store_unavailable");
        await waitUntil(
          async () => (await readyz(app)).body.status === "degraded",
          "the store's check to find Redis away",
        );
        const degraded = await readyz(app);
        expect(degraded.status).toBe(200);
        expect(degraded.body).toEqual({
          status: "degraded",
          checks: {
            store: expect.stringMatching(/^the task store cannot be reached/),
            images: "ok",
            channels: expect.any(Object),
          },
        });
        expect(degraded.text).not.toContain(redisPort);
        const openai = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
        const chat = await openai.chat.completions.create({
          model: "gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
        });
        expect(chat.choices[0]?.message.content).toBeTruthy();
        expectError(await submit(app, { prompt: "still away" }), 503, "store_unavailable");
      } finally {
        await redis.start();
      }
      // Checked every 2 s while it fails.
      await waitUntil(
        async () => (await readyz(app)).body.status === "ready",
        "ready again",
        20_000,
      );
      const after = await submitOk(app, { prompt: "after the outage" });
      expect((await waitForStatus(app, after, ["completed", "failed"], 20_000)).body.status).toBe(
        "completed",
      );
    },
    slow(60_000),
  );
});
