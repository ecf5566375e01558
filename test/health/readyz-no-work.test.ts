import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type TestS3Server } from "../support/s3-server.js";
import type { TestApp } from "../support/start-test-app.js";
import {
  call,
  expectError,
  submit,
  upstreamPrompts,
  useApp,
  waitUntil,
} from "../tasks/task-api.js";

/*
 * `/readyz` needs no key, so it must cost nothing: it reads what the periodic
 * checks found and never calls the image store itself. A real S3 (s3rver on a
 * free port) counts what it receives while `/readyz` is called 300 times; and
 * while that store is away the replica stays ready (degraded), serving what
 * does not need it.
 */

let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

/** The requests an image store check makes: a `HeadBucket`, and its small object's PUT, GET, DELETE. */
const checkRequests = () =>
  s3.requests.filter((request) => request.method === "HEAD" || request.url.includes("/check-"));
/** One per check: the PUT of its object. */
const checks = () => checkRequests().filter((request) => request.method === "PUT").length;

async function readyz(app: TestApp) {
  const answer = await call(app, "GET", "/readyz", { key: null });
  return { status: answer.status, body: JSON.parse(answer.text) as Record<string, unknown> };
}

/** `/readyz` `count` times, `parallel` at once; resolves how long it took (ms). */
async function hammer(app: TestApp, count: number, parallel: number, pauseMs = 0) {
  const started = Date.now();
  let sent = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (sent < count) {
        sent += 1;
        const answer = await fetch(`${app.url}/readyz`);
        expect(answer.status).toBe(200);
        await answer.arrayBuffer();
        if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }),
  );
  return Date.now() - started;
}

const imagesAt = (more: Record<string, unknown> = {}) => ({
  ...s3.imagesConfig(`readyz-${randomBytes(4).toString("hex")}`),
  ...more,
});

describe("/readyz and the image store", () => {
  it("300 calls cost the store nothing beyond its periodic check (default: every 15 s)", async () => {
    const app = await useApp({ config: { images: imagesAt() } });
    const before = checkRequests().length;
    const elapsed = await hammer(app, 300, 10);
    const made = checkRequests().length - before;
    // Four requests a check, one check per started 15 s at most.
    expect(made).toBeLessThanOrEqual(4 * (Math.floor(elapsed / 15_000) + 1));
    expect((await readyz(app)).body).toMatchObject({ status: "ready", checks: { images: "ok" } });
  });

  it("with images.checkIntervalSec: 1, is checked about once a second however often it is asked", async () => {
    const app = await useApp({ config: { images: imagesAt({ checkIntervalSec: 1 }) } });
    const before = checks();
    // Spread over about 3 s, so the interval shows.
    const elapsed = await hammer(app, 300, 3, 25);
    expect(elapsed).toBeGreaterThan(1_500);
    const made = checks() - before;
    expect(made).toBeGreaterThanOrEqual(1);
    expect(made).toBeLessThanOrEqual(Math.floor(elapsed / 1_000) + 1);
  });

  it(
    "stays ready (degraded) while the store is away: passthrough works, submissions are refused, and it is ready again after",
    async () => {
      const app = await useApp({ config: { images: imagesAt({ checkIntervalSec: 1 }) } });
      expect((await readyz(app)).body.status).toBe("ready");
      await s3.stop();
      try {
        await waitUntil(
          async () => (await readyz(app)).body.status === "degraded",
          "the periodic check to find the store away",
        );
        const ready = await call(app, "GET", "/readyz", { key: null });
        expect(ready.status).toBe(200);
        expect(ready.headers.get("retry-after")).toBeNull();
        expect(JSON.parse(ready.text)).toEqual({
          status: "degraded",
          checks: {
            store: "ok",
            images: "the image store did not answer (ECONNREFUSED, on HeadBucket)",
            channels: expect.any(Object),
          },
        });
        const openai = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
        const chat = await openai.chat.completions.create({
          model: "gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
        });
        expect(chat.choices[0]?.message.content).toBeTruthy();
        expectError(await submit(app, { prompt: "while away" }), 503, "storage_unavailable");
        expect(upstreamPrompts(app.upstream)).not.toContain("while away");
      } finally {
        await s3.start();
      }
      // Every 2 s while it fails: back within a few.
      await waitUntil(async () => (await readyz(app)).body.status === "ready", "ready again");
    },
    slow(30_000),
  );
});
