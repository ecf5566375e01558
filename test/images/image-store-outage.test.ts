import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type TestS3Server } from "../support/s3-server.js";
import type { TestApp, TestAppOptions } from "../support/start-test-app.js";
import { STORES } from "../tasks/store-places.js";
import {
  call,
  expectError,
  getTask,
  submit,
  submitOk,
  upstreamPrompts,
  useApp,
  waitForStatus,
  waitUntil,
} from "../tasks/task-api.js";

/*
 * The image store (S3, s3rver on a free port) goes away and comes back, on
 * every task store: what clients see meanwhile (readiness degraded with its reason,
 * submissions refused before any channel is called), and that everything
 * recovers.
 */

let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

const withS3 = async (
  options: TestAppOptions,
  more: TestAppOptions = {},
  images: Record<string, unknown> = {},
) => ({
  ...options,
  ...more,
  config: {
    ...more.config,
    images: {
      ...s3.imagesConfig(`outage-${randomBytes(4).toString("hex")}`),
      checkIntervalSec: 1,
      ...images,
    },
  },
});

/** `/readyz` as a probe reads it. */
async function readyz(app: TestApp) {
  const answer = await call(app, "GET", "/readyz", { key: null });
  return { status: answer.status, body: JSON.parse(answer.text) as Record<string, unknown> };
}

/** A counter's value from a scrape, by its labels. */
async function refusedCount(app: TestApp, reason: string): Promise<number> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  const line = new RegExp(
    `^image_task_sidecar_task_submissions_refused_total\\{reason="${reason}"\\} (\\S+)$`,
    "m",
  ).exec(text);
  return line ? Number(line[1]) : 0;
}

describe.each(STORES)("image store away ($name)", ({ options }) => {
  it(
    "is degraded with its reason, refuses submissions before any channel call, keeps passthrough, recovers",
    async () => {
      const app = await useApp(await withS3(await options()));
      const urlTask = await submitOk(app, { prompt: "before", response_format: "url" });
      const b64Task = await submitOk(app, { prompt: "before", response_format: "b64_json" });
      // Never polled by id: its answer is not among the replica's kept ones.
      const unseenTask = await submitOk(app, { prompt: "before", response_format: "b64_json" });
      await waitForStatus(app, urlTask, ["completed"]);
      const b64Answer = await waitForStatus(app, b64Task, ["completed"]);
      await waitUntil(async () => {
        const list = await call(app, "GET", "/v1/images/tasks?limit=100");
        const tasks = (list.body as unknown as { data: Array<{ id: string; status: string }> })
          .data;
        return tasks.some((task) => task.id === unseenTask && task.status === "completed");
      }, "the unseen task's end");
      const link = (await getTask(app, urlTask)).body.data![0]!.url!;
      expect((await fetch(link)).status).toBe(200);
      // Ready once the channel's first check is in (and the image store's one-second check has
      // not missed its deadline on a loaded machine, which reads degraded until the next).
      let ready: Awaited<ReturnType<typeof readyz>> | undefined;
      await waitUntil(async () => {
        ready = await readyz(app);
        const { channels } = ready.body.checks as { channels: Record<string, string> };
        return channels.fake === "ok" && ready.body.status === "ready";
      }, "the channel's first check");
      // Nothing else, on any task store (where a Redis primary is: on the metrics listener).
      expect(ready).toEqual({
        status: 200,
        body: { status: "ready", checks: { store: "ok", images: "ok", channels: { fake: "ok" } } },
      });

      await s3.stop();
      try {
        // The periodic check finds it away (`/readyz` itself never checks a store).
        await waitUntil(
          async () => (await readyz(app)).body.status === "degraded",
          "the image store's check",
        );
        const ready = await call(app, "GET", "/readyz", { key: null });
        // Degraded, not unavailable: passthrough still works on this replica.
        expect(ready.status).toBe(200);
        expect(JSON.parse(ready.text)).toEqual({
          status: "degraded",
          checks: {
            store: "ok",
            // Whichever step of the check the stop met first.
            images: expect.stringMatching(
              /^the image store did not answer \(ECONNREFUSED, on (HeadBucket|PutObject|GetObject|DeleteObject)\)$/,
            ),
            channels: { fake: "ok" },
          },
        });
        const image = await call(app, "GET", link.slice(app.url.length), { key: null });
        expectError(image, 503, "storage_unavailable");
        expect(image.headers.get("retry-after")).toBe("5");
        expectError(await getTask(app, unseenTask), 503, "storage_unavailable");
        // A finished task this replica answered lately is answered again as it was.
        const again = await getTask(app, b64Task);
        expect(again.status).toBe(200);
        expect(again.text).toBe(b64Answer.text);
        // A url task's answer needs no bytes; passthrough needs no image store at all.
        expect((await getTask(app, urlTask)).status).toBe(200);
        const openai = new OpenAI({ apiKey: app.key, baseURL: app.baseURL });
        const chat = await openai.chat.completions.create({
          model: "gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
        });
        expect(chat.choices[0]?.message.content).toBeTruthy();

        // A task that could not be kept is never sent to a channel (nor billed there).
        const refused = await submit(app, { prompt: "during", response_format: "b64_json" });
        expectError(refused, 503, "storage_unavailable");
        expect(refused.headers.get("retry-after")).toBe("5");
        expect(upstreamPrompts(app.upstream)).not.toContain("during");
        expect(await refusedCount(app, "storage_unavailable")).toBe(1);
      } finally {
        await s3.start();
      }
      await waitUntil(async () => (await readyz(app)).body.status === "ready", "ready again");
      const after = await submitOk(app, { prompt: "after", response_format: "b64_json" });
      const done = await waitForStatus(app, after, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
      expect((await fetch(link)).status).toBe(200);
    },
    slow(40_000),
  );
});

describe("image store away while a task runs", () => {
  it(
    "retries the write for images.writeRetrySec, then fails storage_unavailable",
    async () => {
      const app = await useApp(
        await withS3(
          { storeUrl: "memory://" },
          { imageTasks: { timeoutSec: 120 } },
          {
            writeRetrySec: 2,
          },
        ),
      );
      app.upstream.behave("images", { kind: "ok", delayMs: 1_500 });
      const asked = app.upstream.nextRequest("images");
      const id = await submitOk(app, { prompt: "never stored" });
      await asked;
      await s3.stop();
      try {
        // Within the write retries (2 s), long before the task's own timeout (120 s).
        const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
        expect(done.body.status).toBe("failed");
        expect(done.body.error).toMatchObject({
          code: "storage_unavailable",
          message: "The image store could not be written for 2 seconds.",
        });
        expect(done.body.data).toBeUndefined();
      } finally {
        await s3.start();
      }
    },
    slow(40_000),
  );

  it(
    "a task that waits the store out completes once it is back",
    async () => {
      const app = await useApp(await withS3({ storeUrl: "memory://" }, {}, { writeRetrySec: 30 }));
      app.upstream.behave("images", { kind: "ok", delayMs: 1_000 });
      const asked = app.upstream.nextRequest("images");
      const id = await submitOk(app, { prompt: "kept later", response_format: "b64_json" });
      await asked;
      await s3.stop();
      try {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        expect((await getTask(app, id)).body.status).toBe("in_progress");
      } finally {
        await s3.start();
      }
      const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(done.body.data![0]!.b64_json!.length).toBeGreaterThan(0);
    },
    slow(40_000),
  );
});
