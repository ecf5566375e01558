import { slow, leaseSec } from "../support/time-factor.js";
import { rm } from "node:fs/promises";
import { describe, expect, it, onTestFinished } from "vitest";
import { startHangingRedis } from "../support/hanging-redis.js";
import { deleteKeys, imagesDirOf, startPrivateRedis, uniquePrefix } from "../support/redis.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import {
  call,
  expectError,
  getTask,
  submit,
  submitOk,
  waitForStatus,
  waitUntil,
} from "../tasks/task-api.js";

/** `store.commandTimeoutSec` of these tests: a hung Redis must be given up on within about this. */
const TIMEOUT_SEC = 1;
/** What a request may take while Redis hangs: the deadline, its check, and a loaded machine. */
const ANSWER_WITHIN_MS = slow(TIMEOUT_SEC * 1000 * 3 + 1500);

async function appOn(url: string, prefix: string): Promise<TestApp> {
  const app = await startTestApp({
    imageTasks: { maxConcurrent: 2, leaseSec: leaseSec(2) },
    config: {
      store: { url, prefix, commandTimeoutSec: TIMEOUT_SEC },
      images: { url: `file://${imagesDirOf(prefix)}` },
    },
  });
  onTestFinished(async () => {
    await app.close();
    await rm(imagesDirOf(prefix), { recursive: true, force: true });
  });
  return app;
}

/** Resolves what a call answered and how long it took, in ms. */
async function timed<T>(call: () => Promise<T>): Promise<{ answer: T; ms: number }> {
  const started = performance.now();
  const answer = await call();
  return { answer, ms: performance.now() - started };
}

/** `/readyz`'s `status`: ready, degraded or unavailable. */
async function readiness(app: TestApp): Promise<string> {
  return ((await (await fetch(`${app.url}/readyz`)).json()) as { status: string }).status;
}

/**
 * While Redis hangs: task routes answer 503 in time, `/readyz` 200 degraded
 * (at once: it reads the last check), the rest works.
 */
async function expectHungButServing(app: TestApp, id: string): Promise<void> {
  const poll = await timed(() => getTask(app, id));
  expectError(poll.answer, 503, "store_unavailable");
  expect(poll.ms).toBeLessThan(ANSWER_WITHIN_MS);
  const submitted = await timed(() => submit(app, { prompt: "while Redis hangs" }));
  expectError(submitted.answer, 503, "store_unavailable");
  expect(submitted.ms).toBeLessThan(ANSWER_WITHIN_MS);
  const ready = await timed(() => fetch(`${app.url}/readyz`));
  expect(ready.answer.status).toBe(200);
  expect(ready.ms).toBeLessThan(ANSWER_WITHIN_MS);
  await waitUntil(async () => (await readiness(app)) === "degraded", "/readyz degraded");
  expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  const chat = await call(app, "POST", "/v1/chat/completions", {
    json: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
  });
  expect(chat.status, chat.text).toBe(200);
}

async function expectRecovered(app: TestApp, ids: string[]): Promise<void> {
  await waitUntil(async () => (await readiness(app)) === "ready", "/readyz ready again", 20_000);
  for (const id of ids) {
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
  }
  const after = await submitOk(app, { prompt: "after the hang" });
  expect((await waitForStatus(app, after, ["completed", "failed"], 20_000)).body.status).toBe(
    "completed",
  );
}

describe("a Redis that hangs (accepts, never answers)", () => {
  it(
    "a paused redis-server (SIGSTOP): task routes answer 503 within the command timeout, /readyz degraded, passthrough works, all recovers on SIGCONT",
    async () => {
      const redis = await startPrivateRedis();
      onTestFinished(() => redis.close());
      const app = await appOn(redis.url, uniquePrefix("paused"));
      const done = await submitOk(app, { prompt: "before the pause" });
      await waitForStatus(app, done, ["completed"]);
      // One running while Redis is paused: it ends upstream meanwhile, and is written after.
      app.upstream.behave("images", { kind: "ok", delayMs: 1500 });
      const running = await submitOk(app, { prompt: "runs through the pause" });
      await waitForStatus(app, running, ["in_progress"]);

      redis.pause();
      await expectHungButServing(app, done);
      // Still hung a while later (the client keeps giving up on it), not hanging requests.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await expectHungButServing(app, done);

      redis.resume();
      app.upstream.behave("images", { kind: "ok" });
      await expectRecovered(app, [done, running]);
    },
    slow(90_000),
  );

  it(
    "a front that swallows every connection: the hung connections are given up on, and new ones recover once Redis answers",
    async () => {
      const prefix = uniquePrefix("swallowed");
      onTestFinished(async () => {
        await deleteKeys(prefix);
      });
      const front = await startHangingRedis({ host: "127.0.0.1", port: 6379 });
      onTestFinished(() => front.close());
      const app = await appOn(front.url, prefix);
      const done = await submitOk(app, { prompt: "before the hang" });
      await waitForStatus(app, done, ["completed"]);

      front.hang();
      await expectHungButServing(app, done);

      // Connections made before stay silent for ever: only reconnecting gets through.
      front.answer();
      await expectRecovered(app, [done]);
    },
    slow(90_000),
  );
});
