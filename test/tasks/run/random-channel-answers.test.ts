import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { captureLines } from "../../logging/capture-lines.js";
import { expectNothingLeaked } from "../../http/error-envelope.js";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { UPSTREAM_KEY, type TestAppOptions } from "../../support/start-test-app.js";
import { slow } from "../../support/time-factor.js";
import { STORES } from "../store-places.js";
import {
  call,
  PNG_MAGIC,
  useApp,
  type ApiResponse,
  type Target,
  type TaskJson,
} from "../task-api.js";
import { openEvents, type SseStream } from "../sse-client.js";
import { startChaosChannel, type ChaosAnswer } from "./chaos-channel.js";

/*
 * Tasks against channels that answer at random (see chaos-channel.ts): held calls on two
 * channels, jobs on sub2api, Bifrost and OpenAI background channels, streamed and not, edits
 * and generations. Whatever the channels do, every task ends (completed with an image that is
 * one, or failed with a code and a message) within its timeout, no generation a channel
 * answered whole is asked for again, clients read no 5xx and nothing secret, the service logs
 * no error and still answers. Seeded: `TEST_RANDOM_SEED` runs another mix.
 */

const SEED = Number(process.env.TEST_RANDOM_SEED) || 20261207;
const TASKS = 48;
const TIMEOUT_SEC = 8;
/** One model per kind of channel, so each task's strategy is known. */
const MODELS = ["gpt-image-1", "gpt-image-1-mini", "gpt-image-1.5"] as const;
/** Tasks submitted and polled through sub2api's and Bifrost's routes. */
const DIALECT_TASKS = 24;
/** Background responses, on a channel of their own. */
const RESPONSES = 24;
/** The statuses a task or response ends in. */
const FINAL = ["completed", "failed", "incomplete"];

function channels(base: string) {
  const common = { apiKey: UPSTREAM_KEY, pollSec: 1 };
  return [
    { ...common, name: "held-a", baseUrl: `${base}/a/v1`, models: ["gpt-image-1"] },
    { ...common, name: "held-b", baseUrl: `${base}/b/v1`, models: ["gpt-image-1"], priority: 1 },
    {
      ...common,
      name: "sub2",
      baseUrl: `${base}/s/v1`,
      models: ["gpt-image-1-mini"],
      async: "sub2api" as const,
    },
    {
      ...common,
      name: "bifrost",
      baseUrl: `${base}/f/v1`,
      models: ["gpt-image-1-mini"],
      async: "bifrost" as const,
      priority: 1,
    },
    {
      ...common,
      name: "background",
      baseUrl: `${base}/o/v1`,
      models: ["gpt-image-1.5"],
      async: "openai-background" as const,
      responsesModel: "gpt-4.1-mini",
    },
    { ...common, name: "responder", baseUrl: `${base}/r/v1`, models: ["gpt-4o-mini"] },
  ];
}

/** Submits task `n`: a generation or an edit, streamed partials or not, b64 or url. */
async function submit(app: Target, n: number): Promise<ApiResponse> {
  const model = MODELS[n % MODELS.length]!;
  const prompt = `chaos #${n} a lighthouse`;
  const extra = {
    // Every fourth task, and half the background channel's (streamed, so drafts come as events).
    ...(n % 4 === 0 || n % 6 === 5 ? { partial_images: 2 } : {}),
    response_format: n % 2 === 0 ? "b64_json" : "url",
  };
  if (n % 5 !== 3)
    return call(app, "POST", "/v1/images/tasks", { json: { model, prompt, ...extra } });
  const form = new FormData();
  form.append("model", model);
  form.append("prompt", prompt);
  for (const [name, value] of Object.entries(extra)) form.append(name, String(value));
  form.append(
    "image",
    new Blob([Buffer.from(TINY_PNG_B64, "base64")], { type: "image/png" }),
    "in.png",
  );
  const response = await fetch(`${app.url}/v1/images/edits/tasks`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}` },
    body: form,
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: JSON.parse(text), text };
}

/** Polls `path` until its status is final; every answer read on the way is kept for checks. */
async function outcome(app: Target, path: string, seen: string[]): Promise<ApiResponse> {
  const deadline = Date.now() + slow((TIMEOUT_SEC + 15) * 1000);
  for (;;) {
    const answer = await call(app, "GET", path);
    seen.push(answer.text);
    expect(answer.status, answer.text).toBe(200);
    if (FINAL.includes(answer.body.status)) return answer;
    if (Date.now() > deadline) throw new Error(`${path} still ${answer.body.status}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** A completed task's images, read as a client reads them: each one a PNG. */
async function expectImages(app: Target, answer: ApiResponse): Promise<void> {
  const data = answer.body.data ?? [];
  expect(data.length, answer.text).toBeGreaterThan(0);
  for (const item of data) {
    let bytes: Buffer;
    if (item.b64_json) {
      bytes = Buffer.from(item.b64_json, "base64");
    } else {
      const response = await fetch(new URL(item.url!, app.url), {
        headers: { authorization: `Bearer ${app.key}` },
      });
      expect(response.status, item.url).toBe(200);
      bytes = Buffer.from(await response.arrayBuffer());
    }
    expect(bytes.subarray(0, 8), answer.text).toEqual(PNG_MAGIC);
  }
}

/** The event stream ends, its last event the end (`image.task.completed`, `response.failed`...). */
async function expectEventsEnd(events: SseStream, last: string): Promise<void> {
  expect(events.status).toBe(200);
  await Promise.race([
    events.ended,
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error("events did not end")), slow(5000)),
    ),
  ]);
  expect(events.events.at(-1)?.event).toBe(last);
  for (const event of events.events) expectNothingLeaked(event.data);
}

/**
 * Cancels every seventh task and deletes another, a moment after its submission (while it is
 * queued, running, or already ended): whichever, it must end as it says.
 */
async function stopSome(app: Target, n: number, id: string, seen: string[]) {
  if (n % 7 < 5) return undefined;
  await new Promise((resolve) => setTimeout(resolve, (n * 37) % 900));
  const cancel = n % 7 === 6;
  const answer = cancel
    ? await call(app, "POST", `/v1/images/tasks/${id}/cancel`)
    : await call(app, "DELETE", `/v1/images/tasks/${id}`);
  seen.push(answer.text);
  expect(answer.status, answer.text).toBe(200);
  if (!cancel) return "deleted";
  return answer.body.error?.code === "cancelled" ? "cancelled" : "ended first";
}

/**
 * Once a task ended, its channels hear nothing more of it (but a cancel of its job): no poll,
 * no next channel. A call sent just before the end may still be on its way (the channel shares
 * this process's event loop, which a loaded machine slows), so counting starts a moment later.
 */
async function expectQuiet(answers: ChaosAnswer[], n: number): Promise<void> {
  const calls = () => answers.filter((a) => a.task === n && a.route !== "cancel").length;
  await new Promise((resolve) => setTimeout(resolve, slow(500)));
  const before = calls();
  // Past a poll interval (1 s): a poll still scheduled would have been sent.
  await new Promise((resolve) => setTimeout(resolve, slow(1500)));
  expect(calls(), `calls after the end: ${storyOf(answers, n)}`).toBe(before);
}

/** What the channels answered task `n`, for a failure's message. */
function storyOf(answers: ChaosAnswer[], n: number): string {
  return answers
    .filter((answer) => answer.task === n)
    .map((a) => `${a.route}: ${a.what}${a.paid ? " (paid)" : ""}${a.whole ? "" : " (not whole)"}`)
    .join("; ");
}

/** A service in front of the chaos channels, its log lines kept. */
async function chaosApp(options: TestAppOptions) {
  const channel = await startChaosChannel(SEED);
  onTestFinished(() => channel.close());
  const { lines, stream } = captureLines();
  const app = await useApp({
    ...options,
    logger: pino({ level: "info" }, stream),
    config: { channels: channels(channel.baseUrl) },
    imageTasks: { timeoutSec: TIMEOUT_SEC, maxConcurrent: 64, pollIntervalSec: 1 },
  });
  return { channel, app, lines };
}

/** Each end has a code and message when failed; no answer leaked; the service is well. */
async function expectWell(
  app: Target,
  ends: Array<{ n: number; answer: ApiResponse }>,
  seen: string[],
  lines: string[],
  story: (n: number) => string,
): Promise<void> {
  for (const { n, answer } of ends) {
    if (answer.body.status !== "failed") continue;
    const why = `#${n}: ${answer.text.slice(0, 600)}; channels: ${story(n)}`;
    expect(typeof answer.body.error?.code, why).toBe("string");
    expect(answer.body.error?.message, why).toBeTruthy();
  }
  for (const text of seen) expectNothingLeaked(text);
  const outcomes = ends.map(({ answer }) => answer.body.status);
  // The mix must hold both ends, or the seed tests little.
  expect(outcomes).toContain("completed");
  expect(outcomes).toContain("failed");
  expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${app.url}/metrics`)).status).toBe(200);
  for (const line of lines) expect(line).not.toContain(UPSTREAM_KEY);
  const errors = lines.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
  expect(errors).toEqual([]);
}

/** Runs `one` for 0..count-1 at once, a failure naming what the channels answered. */
function each<T>(count: number, story: (n: number) => string, one: (n: number) => Promise<T>) {
  return Promise.all(
    Array.from({ length: count }, async (_, n) => {
      try {
        return await one(n);
      } catch (err) {
        throw new Error(`#${n}: ${(err as Error).message}; channels: ${story(n)}`);
      }
    }),
  );
}

describe.each(STORES)("random channel answers, on the $name store", ({ options }) => {
  it(`every task ends, once (seed ${SEED})`, { timeout: slow(90_000) }, async () => {
    const { channel, app, lines } = await chaosApp(await options());
    const story = (n: number) => storyOf(channel.answers, n);
    const seen: string[] = [];
    const ends = await each(TASKS, story, async (n) => {
      const submitted = await submit(app, n);
      seen.push(submitted.text);
      expect(submitted.status, submitted.text).toBe(202);
      const { id } = submitted.body;
      // Tasks with partial images are watched too: their event stream ends with their end.
      const events =
        n % 4 === 0 ? await openEvents(app, `/v1/images/tasks/${id}/events`) : undefined;
      const stop = await stopSome(app, n, id, seen);
      if (stop === "deleted") {
        expect((await call(app, "GET", `/v1/images/tasks/${id}`)).status).toBe(404);
        await expectQuiet(channel.answers, n);
        return { n, answer: await call(app, "GET", "/healthz") };
      }
      const answer = await outcome(app, `/v1/images/tasks/${id}`, seen);
      if (events) await expectEventsEnd(events, `image.task.${answer.body.status}`);
      if (answer.body.status === "completed") await expectImages(app, answer);
      // A cancel that said it won stays won: the run's own end came too late to count.
      if (stop === "cancelled") expect(answer.body.error?.code, answer.text).toBe("cancelled");
      const paid = channel.answers.filter((a) => a.task === n && a.paid && a.whole);
      expect(paid.length, `made twice: ${answer.text.slice(0, 300)}`).toBeLessThanOrEqual(1);
      await expectQuiet(channel.answers, n);
      return { n, answer };
    });
    await expectWell(app, ends, seen, lines, story);
  });

  it(`every background response ends, once (seed ${SEED})`, { timeout: slow(90_000) }, async () => {
    const { channel, app, lines } = await chaosApp(await options());
    const story = (n: number) => storyOf(channel.answers, n);
    const seen: string[] = [];
    const ends = await each(RESPONSES, story, async (n) => {
      const created = await call(app, "POST", "/v1/responses", {
        json: { model: "gpt-4o-mini", input: `chaos #${n} a haiku`, background: true },
      });
      seen.push(created.text);
      expect(created.status, created.text).toBe(200);
      const { id } = created.body;
      const events =
        n % 3 === 0 ? await openEvents(app, `/v1/responses/${id}?stream=true`) : undefined;
      const answer = await outcome(app, `/v1/responses/${id}`, seen);
      if (events) await expectEventsEnd(events, `response.${answer.body.status}`);
      // A response object of OpenAI's shape, whatever the channel's was.
      const object = answer.body as unknown as { output?: unknown; id: string; status: string };
      expect(object.id, answer.text).toBe(id);
      if (object.status !== "failed") expect(Array.isArray(object.output), answer.text).toBe(true);
      // One channel, so one call: a response is never sent to a channel twice.
      const calls = channel.answers.filter((a) => a.task === n && a.route === "respond");
      expect(calls.length, answer.text.slice(0, 300)).toBeLessThanOrEqual(1);
      return { n, answer };
    });
    await expectWell(app, ends, seen, lines, story);
  });

  it(
    `every task ends in sub2api's and Bifrost's views too (seed ${SEED})`,
    { timeout: slow(90_000) },
    async () => {
      const { channel, app, lines } = await chaosApp(await options());
      const story = (n: number) => storyOf(channel.answers, n);
      const seen: string[] = [];
      const ends = await each(DIALECT_TASKS, story, async (n) => {
        const sub2api = n % 2 === 0;
        const model = MODELS[n % MODELS.length]!;
        const submitted = await call(
          app,
          "POST",
          sub2api ? "/v1/images/generations/async" : "/v1/async/images/generations",
          {
            json: { model, prompt: `chaos #${n} a lighthouse`, response_format: "url" },
          },
        );
        seen.push(submitted.text);
        expect(submitted.status, submitted.text).toBe(202);
        const path = sub2api
          ? `/v1/images/tasks/${submitted.body.id}`
          : `/v1/async/images/generations/${submitted.body.id}`;
        const deadline = Date.now() + slow((TIMEOUT_SEC + 15) * 1000);
        for (;;) {
          const answer = await call(app, "GET", path);
          seen.push(answer.text);
          const ended = answer.body.status === "completed" || answer.body.status === "failed";
          // sub2api answers 200 whatever the status; Bifrost 202 until the job ended.
          expect(answer.status, answer.text).toBe(sub2api || ended ? 200 : 202);
          if (ended) {
            // Bifrost's error wraps the OpenAI one (`error.error`); the checks read that.
            const inner = (answer.body.error as { error?: TaskJson["error"] } | undefined)?.error;
            return {
              n,
              answer: sub2api ? answer : { ...answer, body: { ...answer.body, error: inner } },
            };
          }
          if (Date.now() > deadline) throw new Error(`${path} still ${answer.body.status}`);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      });
      await expectWell(app, ends, seen, lines, story);
    },
  );
});
