import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { join } from "node:path";
import { startTestApp, UPSTREAM_KEY } from "../../support/start-test-app.js";
import { slow } from "../../support/time-factor.js";
import {
  call,
  cancelTask,
  expectNoLeak,
  PNG_MAGIC,
  submitOk,
  useApp,
  useTempDir,
  waitForStatus,
  waitUntil,
} from "../task-api.js";
import {
  startFakeAsyncChannel,
  type Dialect,
  type FakeAsyncChannel,
} from "./fake-async-channel.js";

/*
 * Channels with an async API, one service in front of a fake channel that
 * speaks all three dialects: the generation is submitted once, its job polled
 * (every pollSec, never sooner than a Retry-After), its end kept as the task's.
 */

let channel: FakeAsyncChannel;
beforeAll(async () => {
  channel = await startFakeAsyncChannel();
});
afterAll(() => channel.close());
beforeEach(() => channel.reset());

const DIALECTS: Dialect[] = ["sub2api", "bifrost", "openai-background"];

function asyncChannel(dialect: Dialect, name = "jobs", extra: Record<string, unknown> = {}) {
  return {
    name,
    baseUrl: channel.baseUrl,
    apiKey: UPSTREAM_KEY,
    models: ["gpt-image-1"],
    async: dialect,
    pollSec: 1,
    ...(dialect === "openai-background" ? { responsesModel: "gpt-4.1-mini" } : {}),
    ...extra,
  };
}

function appOn(dialect: Dialect, imageTasks: Record<string, unknown> = {}) {
  return useApp({
    config: { channels: [asyncChannel(dialect)] },
    imageTasks: { timeoutSec: 60, ...imageTasks },
  });
}

/** A Prometheus counter's value in `text`, by name and labels. */
function counter(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(`image_task_sidecar_${name}{`)) continue;
    if (wanted.every((pair) => line.includes(pair))) return Number(line.split(" ").at(-1));
  }
  return NaN;
}

describe.each(DIALECTS)("a channel with async: %s", (dialect) => {
  it("submits once, polls the job, keeps its images and usage", async () => {
    const app = await appOn(dialect);
    const id = await submitOk(app, { prompt: `poll me ${dialect}`, response_format: "b64_json" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64").subarray(0, 8)).toEqual(PNG_MAGIC);
    expect(done.body.usage).toBeDefined();
    expect(channel.submissions[dialect]).toBe(1);
    const [job] = channel.jobs;
    expect(job!.polls.length).toBeGreaterThanOrEqual(1);
    // Every call about the job carries the channel's key, and no answer shows the job's id.
    expect(new Set(job!.authorizations)).toEqual(new Set([`Bearer ${UPSTREAM_KEY}`]));
    expect(done.text).not.toContain(job!.id);
    expectNoLeak(done.text);
    if (dialect === "openai-background") {
      expect(job!.body).toMatchObject({
        model: "gpt-4.1-mini",
        background: true,
        input: `poll me ${dialect}`,
        tools: [{ type: "image_generation", model: "gpt-image-1" }],
      });
    } else {
      expect(job!.body).toMatchObject({ prompt: `poll me ${dialect}`, model: "gpt-image-1" });
    }
    const metrics = (await call(app, "GET", "/metrics", { key: null })).text;
    expect(
      counter(metrics, "upstream_async_submissions_total", {
        channel: "jobs",
        outcome: "accepted",
      }),
    ).toBe(1);
    expect(
      counter(metrics, "upstream_async_polls_total", { channel: "jobs", outcome: "completed" }),
    ).toBe(1);
    expect(
      counter(metrics, "upstream_async_submissions_total", { channel: "jobs", outcome: "refused" }),
    ).toBe(0);
    // The job's tokens reach the GenAI token metric, as a held call's do.
    const usage = done.body.usage as { input_tokens: number; output_tokens: number };
    for (const [type, tokens] of [
      ["input", usage.input_tokens],
      ["output", usage.output_tokens],
    ] as const) {
      const series = { operation: "image_generation", model: "gpt-image-1", token_type: type };
      expect(counter(metrics, "gen_ai_client_token_usage_sum", series), type).toBe(tokens);
      expect(counter(metrics, "gen_ai_client_token_usage_count", series), type).toBe(1);
    }
    // The generation's duration is the job's (submitted, then polled after pollSec: 1 s), once;
    // not the submission call's few milliseconds.
    const operation = { operation: "image_generation", model: "gpt-image-1" };
    expect(counter(metrics, "gen_ai_client_operation_duration_seconds_count", operation)).toBe(1);
    expect(
      counter(metrics, "gen_ai_client_operation_duration_seconds_sum", operation),
    ).toBeGreaterThanOrEqual(0.9);
  });

  it("fails the task with the job's error, scrubbed of the channel's key", async () => {
    const app = await appOn(dialect);
    channel.behave({
      fail: { code: "content_policy_violation", message: "rejected for key {key}", status: 400 },
    });
    const id = await submitOk(app, { prompt: "fail me" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status).toBe("failed");
    expect(done.body.error!.message).toMatch(/^rejected for key /);
    expectNoLeak(done.text);
    expect(channel.submissions[dialect]).toBe(1);
  });

  it("fails `timeout` from the task's start when the job never finishes, and stops polling", async () => {
    const app = await appOn(dialect, { timeoutSec: 3 });
    channel.behave({ finishAfterMs: "never" });
    const id = await submitOk(app, { prompt: "never" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.error?.code).toBe("timeout");
    expect(done.body.completed_at! - done.body.started_at!).toBeLessThanOrEqual(7);
    const [job] = channel.jobs;
    const polls = job!.polls.length;
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(job!.polls.length).toBe(polls);
    expect(channel.submissions[dialect]).toBe(1);
    // Where the dialect has a cancel, the timed-out job is cancelled on the channel too.
    if (dialect === "openai-background") expect(channel.cancels).toEqual([job!.id]);
  });
});

describe("polling", () => {
  it("counts any status but the finished ones as running", async () => {
    const app = await appOn("sub2api");
    // Finished well after the first poll (1 s in), also when a loaded machine makes that poll
    // late: at 1.5 s flat, a late first poll already found the job finished.
    channel.behave({ runningStatus: "queued_for_gpu", finishAfterMs: slow(2500) });
    const id = await submitOk(app, { prompt: "odd status" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(channel.jobs[0]!.polls.length).toBeGreaterThanOrEqual(2);
  });

  it("never polls sooner than the channel's Retry-After", async () => {
    const app = await appOn("bifrost");
    channel.behave({ retryAfterSec: 2, finishAfterMs: 4500 });
    const id = await submitOk(app, { prompt: "slow down" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    const { polls } = channel.jobs[0]!;
    for (let i = 1; i < polls.length; i++) {
      expect(polls[i]! - polls[i - 1]!).toBeGreaterThanOrEqual(1950);
    }
  });

  it("polls on through a channel's 5xx, and fails a job the channel no longer knows", async () => {
    const app = await appOn("sub2api");
    channel.behave({ pollStatuses: [503, 500], finishAfterMs: 0 });
    const id = await submitOk(app, { prompt: "flaky" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(channel.jobs[0]!.polls.length).toBe(3);

    channel.reset();
    channel.behave({ pollStatuses: [404] });
    const lost = await submitOk(app, { prompt: "forgotten" });
    const failed = await waitForStatus(app, lost, ["completed", "failed"], 30_000);
    expect(failed.body.error?.code).toBe("upstream_error");
    expect(failed.body.error?.message).toMatch(/no longer knows the job/);
  });

  it("sends a client's cancel on (openai-background), and stops polling", async () => {
    const app = await appOn("openai-background");
    channel.behave({ finishAfterMs: "never" });
    const id = await submitOk(app, { prompt: "cancel me" });
    await waitUntil(() => (channel.jobs[0]?.polls.length ?? 0) >= 1, "a first poll");
    expect((await cancelTask(app, id)).status).toBe(200);
    await waitUntil(() => channel.cancels.length === 1, "the cancel sent on");
    expect(channel.cancels).toEqual([channel.jobs[0]!.id]);
    const polls = channel.jobs[0]!.polls.length;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(channel.jobs[0]!.polls.length).toBe(polls);
  });

  it("keeps the partial images of openai-background's event stream (the demo channel's)", async () => {
    const app = await useApp({
      config: {
        channels: [
          {
            name: "demo",
            type: "demo",
            models: ["gpt-image-1"],
            imageDelayMs: 1500,
            async: "openai-background",
            responsesModel: "gpt-4.1-mini",
            pollSec: 1,
          },
        ],
      },
      imageTasks: { timeoutSec: 60 },
    });
    const id = await submitOk(app, { prompt: "drafts", size: "64x64", partial_images: 2 });
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    const metrics = (await call(app, "GET", "/metrics", { key: null })).text;
    expect(counter(metrics, "task_partial_images_total", { outcome: "stored" })).toBe(2);
    expect(
      counter(metrics, "upstream_async_submissions_total", {
        channel: "demo",
        outcome: "accepted",
      }),
    ).toBe(1);
    // The stream brought the end: no poll was needed.
    expect(
      counter(metrics, "upstream_async_polls_total", { channel: "demo", outcome: "completed" }),
    ).toBe(0);
  });

  it("a stop while the event stream runs hands the job over; the next start polls it (SQLite)", async () => {
    const dir = await useTempDir();
    const demoChannel = {
      name: "demo",
      type: "demo" as const,
      models: ["gpt-image-1"],
      imageDelayMs: 10_000,
      async: "openai-background" as const,
      responsesModel: "gpt-4.1-mini",
      pollSec: 1,
    };
    const options = {
      storeUrl: `sqlite://${join(dir, "tasks.db")}`,
      config: { channels: [demoChannel] },
      imageTasks: { timeoutSec: 60 },
    };
    const first = await startTestApp(options);
    const id = await submitOk(first, { prompt: "streamed then stopped", partial_images: 3 });
    await waitUntil(async () => {
      const metrics = (await call(first, "GET", "/metrics", { key: null })).text;
      return counter(metrics, "task_partial_images_total", { outcome: "stored" }) >= 1;
    }, "a first partial image");
    const stopping = Date.now();
    await first.close();
    // A stop with only a job to follow does not wait for it.
    expect(Date.now() - stopping).toBeLessThan(6000);

    const second = await useApp(options);
    const done = await waitForStatus(second, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    const metrics = (await call(second, "GET", "/metrics", { key: null })).text;
    expect(
      counter(metrics, "upstream_async_submissions_total", {
        channel: "demo",
        outcome: "accepted",
      }),
    ).toBe(0);
    expect(
      counter(metrics, "upstream_async_polls_total", { channel: "demo", outcome: "completed" }),
    ).toBe(1);
  });

  it("fails over a submission the first channel refused, to the next async channel", async () => {
    const refusing = await startFakeAsyncChannel();
    try {
      refusing.behave({ submitStatus: 503 });
      const app = await useApp({
        config: {
          channels: [
            { ...asyncChannel("bifrost", "first"), baseUrl: refusing.baseUrl, priority: 0 },
            { ...asyncChannel("sub2api", "second"), priority: 1 },
          ],
        },
        imageTasks: { timeoutSec: 60 },
      });
      const id = await submitOk(app, { prompt: "fail over" });
      const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(refusing.submissions.bifrost).toBe(1);
      expect(channel.submissions.sub2api).toBe(1);
      expect(refusing.jobs).toHaveLength(0);
    } finally {
      await refusing.close();
    }
  });
});
