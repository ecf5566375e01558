import { randomBytes } from "node:crypto";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type TestS3Server } from "../support/s3-server.js";
import type { TestAppOptions } from "../support/start-test-app.js";
import { STORES } from "../tasks/store-places.js";
import { call, expectError, getTask, submitOk, useApp, waitForStatus } from "../tasks/task-api.js";

/*
 * The image store (S3, s3rver on a free port) goes away and comes back, on
 * every task store: what clients see meanwhile, and that tasks recover.
 */

let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

const withS3 = async (options: TestAppOptions, more: TestAppOptions = {}) => ({
  ...options,
  ...more,
  config: { ...more.config, images: s3.imagesConfig(`outage-${randomBytes(4).toString("hex")}`) },
});

describe.each(STORES)("image store away ($name)", ({ options }) => {
  it("answers 503 storage_unavailable for images and /readyz, keeps passthrough, recovers", async () => {
    const app = await useApp(await withS3(await options()));
    const urlTask = await submitOk(app, { prompt: "before", response_format: "url" });
    const b64Task = await submitOk(app, { prompt: "before", response_format: "b64_json" });
    await waitForStatus(app, urlTask, ["completed"]);
    await waitForStatus(app, b64Task, ["completed"]);
    const link = (await getTask(app, urlTask)).body.data![0]!.url!;
    expect((await fetch(link)).status).toBe(200);

    await s3.stop();
    try {
      const ready = await call(app, "GET", "/readyz", { key: null });
      expectError(ready, 503, "storage_unavailable");
      const image = await call(app, "GET", link.slice(app.url.length), { key: null });
      expectError(image, 503, "storage_unavailable");
      expect(image.headers.get("retry-after")).toBe("5");
      expectError(await getTask(app, b64Task), 503, "storage_unavailable");
      // A url task's answer needs no bytes; passthrough needs no image store at all.
      expect((await getTask(app, urlTask)).status).toBe(200);
      const openai = new OpenAI({ apiKey: app.key, baseURL: app.baseURL });
      const chat = await openai.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(chat.choices[0]?.message.content).toBeTruthy();
      // A task finishing now waits for the store, retrying, rather than failing at once.
      const during = await submitOk(app, { prompt: "during", response_format: "b64_json" });
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect((await getTask(app, during)).body.status).toBe("in_progress");
      await s3.start();
      const done = await waitForStatus(app, during, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(done.body.data![0]!.b64_json!.length).toBeGreaterThan(0);
    } finally {
      await s3.start();
    }
    expect((await call(app, "GET", "/readyz", { key: null })).status).toBe(200);
    expect((await fetch(link)).status).toBe(200);
  }, 40_000);
});

describe("image store away for longer than the task's timeout", () => {
  it("fails the task with storage_unavailable, never completed without its bytes", async () => {
    const app = await useApp(
      await withS3({ storeUrl: "memory://" }, { imageTasks: { timeoutSec: 2 } }),
    );
    await s3.stop();
    try {
      const id = await submitOk(app, { prompt: "never stored" });
      const done = await waitForStatus(app, id, ["completed", "failed"], 15_000);
      expect(done.body.status).toBe("failed");
      expect(done.body.error).toMatchObject({ code: "storage_unavailable" });
      expect(done.body.data).toBeUndefined();
    } finally {
      await s3.start();
    }
  }, 30_000);
});
