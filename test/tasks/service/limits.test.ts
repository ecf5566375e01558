import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { loadConfig } from "../../../src/config/load-config.js";
import { startServer } from "../../../src/server.js";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../../support/start-test-app.js";
import { slowSec } from "../../support/time-factor.js";
import {
  cancelTask,
  expectError,
  getTask,
  submit,
  submitOk,
  upstreamPrompts,
  useApp,
  useTempDir,
  waitForStatus,
  waitUntil,
  type ApiResponse,
  type Target,
} from "../task-api.js";

/** A 1x1 PNG, for answers the test writes itself. */
const PNG_MAGIC_B64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

describe("IMAGE_ASYNC_MAX_CONCURRENT", () => {
  it("runs at most maxConcurrent tasks at once, reaches that limit, and starts them in order", async () => {
    const app = await useApp({ imageTasks: { maxConcurrent: 2 } });
    // The channel holds each generation until the test lets the oldest one end, so the order
    // in which tasks start is what the queue decided, not how fast each start ran.
    const held: Array<() => void> = [];
    app.upstream.behave("images", {
      kind: "custom",
      async respond(_req, res) {
        await new Promise<void>((resolve) => held.push(resolve));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_MAGIC_B64 }] }));
      },
    });

    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await submitOk(app, { prompt: `task ${i}` }));
    const expected = ids.map((_, i) => `task ${i}`);
    await waitUntil(() => app.upstream.requests.length === 2, "two tasks to start");
    for (let started = 2; started <= ids.length; started++) {
      await sleep(100); // a third start would show here
      expect(upstreamPrompts(app.upstream)).toEqual(expected.slice(0, started));
      expect(app.upstream.inFlight).toBe(Math.min(2, ids.length - (started - 2)));
      held.shift()!(); // the oldest generation ends: the next task takes its slot
      if (started < ids.length) {
        await waitUntil(() => app.upstream.requests.length === started + 1, "the next start");
      }
    }
    while (held.length > 0) held.shift()!();
    for (const id of ids) {
      const done = await waitForStatus(app, id, ["completed", "failed"], 15_000);
      expect(done.body.status, done.text).toBe("completed");
    }
    expect(app.upstream.maxInFlight).toBe(2);
  });

  it("takes IMAGE_ASYNC_MAX_CONCURRENT and IMAGE_ASYNC_TIMEOUT_SEC from the environment over the file", async () => {
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const dir = await useTempDir();
    const file = join(dir, "config.yaml");
    await writeFile(
      file,
      [
        "server: { port: 0, host: 127.0.0.1 }",
        "store: { url: memory:// }",
        "auth:",
        "  keys:",
        `    - { key: ${TEST_KEYS.default}, group: default }`,
        "groups:",
        '  default: { models: ["gpt-image-*"] }',
        "channels:",
        "  - name: fake",
        "    baseUrl: ${UPSTREAM_BASE_URL}",
        "    apiKey: ${UPSTREAM_KEY}",
        '    models: ["gpt-image-1"]',
        "imageTasks: { maxConcurrent: 4, timeoutSec: 600, pollIntervalSec: 1 }",
        "logging: { level: silent }",
        "",
      ].join("\n"),
    );
    const { config } = loadConfig({
      file,
      env: {
        UPSTREAM_BASE_URL: upstream.baseUrl,
        UPSTREAM_KEY,
        IMAGE_ASYNC_MAX_CONCURRENT: "1",
        // Far below the file's 600 s, above what a loaded run takes for a 200 ms answer: a fixed
        // 1 s failed a task queued behind two others under CI's load.
        IMAGE_ASYNC_TIMEOUT_SEC: String(slowSec(3)),
      },
    });
    const server = await startServer({ config, logger: pino({ level: "silent" }) });
    onTestFinished(() => server.close(500));
    const target = { url: server.url, key: TEST_KEYS.default };

    upstream.behave("images", { kind: "ok", delayMs: 200 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await submitOk(target, { prompt: `env ${i}` }));
    for (const id of ids) {
      expect((await waitForStatus(target, id, ["completed", "failed"])).body.status).toBe(
        "completed",
      );
    }
    expect(upstream.maxInFlight).toBe(1);
    expect(upstreamPrompts(upstream)).toEqual(["env 0", "env 1", "env 2"]);

    upstream.behave("images", { kind: "hang" });
    const hung = await submitOk(target, { prompt: "never answered" });
    const failed = await waitForStatus(target, hung, ["completed", "failed"]);
    expect(failed.body.status).toBe("failed");
    expect(failed.body.error?.code).toBe("timeout");
  });
});

describe("IMAGE_ASYNC_TIMEOUT_SEC", () => {
  it("aborts the upstream call and fails the task with code timeout", async () => {
    const app = await useApp({ imageTasks: { timeoutSec: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    const id = await submitOk(app, { prompt: "slow" });

    const running = await waitForStatus(app, id, ["in_progress", "failed", "completed"]);
    const done = await waitForStatus(app, id, ["completed", "failed"]);

    expect(done.body.status).toBe("failed");
    expect(done.body.error).toEqual({
      code: "timeout",
      message: expect.any(String),
      type: expect.any(String),
    });
    expect(done.body.started_at).toEqual(expect.any(Number));
    expect(done.body.completed_at! - done.body.started_at!).toBeGreaterThanOrEqual(1);
    expect(done.headers.get("retry-after")).toBeNull();
    expect(done.body).not.toHaveProperty("data");
    expect(running.body.status).not.toBe("completed");
    await waitUntil(() => app.upstream.aborted >= 1, "the upstream to see the abort");
    expect(app.upstream.inFlight).toBe(0);
  });
  it("takes a timeout longer than a timer can hold (30 days) without failing at once", async () => {
    const app = await useApp({ imageTasks: { timeoutSec: 30 * 24 * 3600 } });
    app.upstream.behave("images", { kind: "ok", delayMs: 300 });
    const id = await submitOk(app, { prompt: "patient" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
  });
});

describe("maxQueued", () => {
  it("answers 429 queue_full with Retry-After once the queue is full, and takes tasks again when it drains", async () => {
    const app = await useApp({ imageTasks: { maxQueued: 1, maxConcurrent: 1 } });
    app.upstream.behave("images", { kind: "hang" });

    const arrived = app.upstream.nextRequest("images");
    const first = await submitOk(app, { prompt: "runs" });
    await arrived;
    const second = await submitOk(app, { prompt: "waits" });
    const waiting = await getTask(app, second);
    expect(waiting.body.status).toBe("queued");
    expect(waiting.body).not.toHaveProperty("started_at");
    expect(waiting.headers.get("cache-control")).toBe("no-store");
    expect(Number(waiting.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await getTask(app, first)).body.status).toBe("in_progress");

    const third = await submit(app, { prompt: "refused" });
    expectError(third, 429, "queue_full");
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    // Counted by reason, as every refused submission is.
    expect(await (await fetch(`${app.url}/metrics`)).text()).toMatch(
      /^image_task_sidecar_task_submissions_refused_total\{reason="queue_full"\} 1$/m,
    );

    // The refused submission left nothing behind; a free slot in the queue takes a task again.
    expect((await cancelTask(app, second)).body.status).toBe("failed");
    const fourth = await submit(app, { prompt: "accepted again" });
    expect(fourth.status).toBe(202);
    expect(upstreamPrompts(app.upstream)).toEqual(["runs"]);
  });

  it.each(["memory", "sqlite"])(
    "holds maxQueued under concurrent submissions (%s)",
    async (kind) => {
      const storeUrl =
        kind === "sqlite" ? `sqlite://${join(await useTempDir(), "t.db")}` : "memory://";
      // One key may take the whole queue here (by default it would stop at half of it).
      const app = await useApp({
        storeUrl,
        imageTasks: { maxQueued: 2, maxConcurrent: 1, maxQueuedPerKey: 2 },
      });
      app.upstream.behave("images", { kind: "hang" });
      const arrived = app.upstream.nextRequest("images");
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => submit(app, { prompt: `burst ${i}` })),
      );
      const accepted = answers.filter((answer) => answer.status === 202);
      const refused = answers.filter((answer) => answer.status !== 202);
      // One runs at once, two wait: three accepted, the rest refused.
      expect(accepted).toHaveLength(3);
      for (const answer of refused) expectError(answer, 429, "queue_full");
      await arrived;
      const statuses = await Promise.all(
        accepted.map(async (answer) => (await getTask(app, answer.body.id)).body.status),
      );
      expect(statuses.sort()).toEqual(["in_progress", "queued", "queued"]);
    },
  );

  it("answers a retry with a known Idempotency-Key even while the queue is full", async () => {
    const app = await useApp({ imageTasks: { maxQueued: 1, maxConcurrent: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    await submitOk(app, { prompt: "runs" });
    await arrived;
    const headers = { "Idempotency-Key": "retry-when-full" };
    const queued = await submit(app, { prompt: "waits" }, { headers });
    expect(queued.status).toBe(202);
    expectError(await submit(app, { prompt: "new" }), 429, "queue_full");

    const retry = await submit(app, { prompt: "waits" }, { headers });
    expect(retry.status, retry.text).toBe(202);
    expect(retry.body.id).toBe(queued.body.id);
    expectError(
      await submit(app, { prompt: "other body" }, { headers }),
      409,
      "idempotency_key_conflict",
    );
  });
});

describe("retentionSec", () => {
  /**
   * Polls until the task is finished, then until it is gone. Returns the finished answer and
   * how long it stayed visible for sure: from the last poll that still saw it running (the
   * task finished after that poll was sent) to the first 404 (it expired before that arrived).
   */
  async function watchUntilGone(
    app: Target,
    id: string,
    onFinished?: (done: ApiResponse) => Promise<void>,
  ) {
    let lastRunningSentAt = Date.now();
    let done: ApiResponse | undefined;
    const deadline = Date.now() + 20_000;
    for (;;) {
      expect(Date.now()).toBeLessThan(deadline);
      const sentAt = Date.now();
      const response = await getTask(app, id);
      if (response.status === 404) {
        expect(done, "the task was never seen finished").toBeDefined();
        return { done: done!, keptForAtLeastMs: Date.now() - lastRunningSentAt };
      }
      expect(response.status, response.text).toBe(200);
      if (response.body.status === "queued" || response.body.status === "in_progress") {
        lastRunningSentAt = sentAt;
      } else if (!done) {
        done = response;
        await onFinished?.(response);
      }
      await sleep(20);
    }
  }

  it("keeps a finished task and its images retentionSec, then answers 404", async () => {
    const app = await useApp({ imageTasks: { retentionSec: 2 } });
    app.upstream.behave("images", { kind: "ok", delayMs: 200 });
    const id = await submitOk(app, { prompt: "short-lived", response_format: "url" });
    let url = "";
    const { done, keptForAtLeastMs } = await watchUntilGone(app, id, async (finished) => {
      url = finished.body.data![0]!.url!;
      expect((await fetch(url)).status).toBe(200);
    });
    expect(done.body.status).toBe("completed");
    expect(done.body.expires_at! - done.body.completed_at!).toBeGreaterThanOrEqual(2);
    expect(keptForAtLeastMs).toBeGreaterThanOrEqual(2000);

    expectError(await getTask(app, id), 404, "task_not_found");
    const file = await fetch(url);
    expect(file.status).toBe(404);
    expect(((await file.json()) as { error: { code: string } }).error.code).toBe("not_found");
    expectError(await cancelTask(app, id), 404, "task_not_found");
  });

  it("expires failed tasks too, after retentionSec", async () => {
    const app = await useApp({ imageTasks: { retentionSec: 1 } });
    app.upstream.behave("images", { kind: "status", status: 400 });
    const id = await submitOk(app, { prompt: "refused by the channel" });
    const { done, keptForAtLeastMs } = await watchUntilGone(app, id);
    expect(done.body.status).toBe("failed");
    expect(keptForAtLeastMs).toBeGreaterThanOrEqual(1000);
    expectError(await getTask(app, id), 404, "task_not_found");
  });
});
