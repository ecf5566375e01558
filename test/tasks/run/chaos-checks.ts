import { pino } from "pino";
import { expect, onTestFinished } from "vitest";
import type { ConfigInput } from "../../../src/config/config-schema.js";
import { captureLines } from "../../logging/capture-lines.js";
import { expectNothingLeaked } from "../../http/error-envelope.js";
import { UPSTREAM_KEY, type TestAppOptions } from "../../support/start-test-app.js";
import { slow, slowSec } from "../../support/time-factor.js";
import { call, useApp, type ApiResponse, type Target } from "../task-api.js";
import type { SseStream } from "../sse-client.js";
import { startChaosChannel, type ChaosAnswer } from "./chaos-channel.js";

/*
 * What the random-channel tests share: the channels (see chaos-channel.ts) and the service in
 * front of them, and the checks every one of them ends with.
 */

/** The seed every answer is drawn from; `TEST_RANDOM_SEED` runs another mix. */
export const SEED = Number(process.env.TEST_RANDOM_SEED) || 20261207;
/**
 * Every task's timeout (`imageTasks.timeoutSec`): a channel that never answers ends here. 8 s on
 * an idle machine, stretched by the load as every deadline is: the timeout counts wall-clock time
 * from a run's start, and in CI's busiest minutes a control task, answered well at once, timed out
 * before its first poll (seed 20261207), its process starved of the core for seconds.
 */
export function taskTimeoutSec(): number {
  return slowSec(8);
}

/** How long a client waits for a task's end: its timeout, and 15 s for its failure to be written. */
export function endWithinMs(): number {
  return taskTimeoutSec() * 1000 + slow(15_000);
}
/** One model per kind of channel, so each task's strategy is known. */
export const MODELS = ["gpt-image-1", "gpt-image-1-mini", "gpt-image-1.5"] as const;
/** The statuses a task or response ends in. */
export const FINAL = ["completed", "failed", "incomplete"];

/** The channels: two held, one of each async dialect, one for Responses. */
export function channels(base: string) {
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

/** Polls `path` until its status is final; every answer read on the way is kept for checks. */
export async function outcome(app: Target, path: string, seen: string[]): Promise<ApiResponse> {
  const deadline = Date.now() + endWithinMs();
  for (;;) {
    const answer = await call(app, "GET", path);
    seen.push(answer.text);
    expect(answer.status, answer.text).toBe(200);
    if (FINAL.includes(answer.body.status)) return answer;
    if (Date.now() > deadline) throw new Error(`${path} still ${answer.body.status}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The event stream ends, its last event the end (`image.task.completed`, `response.failed`...). */
export async function expectEventsEnd(events: SseStream, last: string): Promise<void> {
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

/** What the channels answered task `n`, for a failure's message. */
export function storyOf(answers: ChaosAnswer[], n: number): string {
  return answers
    .filter((answer) => answer.task === n)
    .map((a) => `${a.route}: ${a.what}${a.paid ? " (paid)" : ""}${a.whole ? "" : " (not whole)"}`)
    .join("; ");
}

/** A service in front of the chaos channels (`config`: more of its settings), its log lines kept. */
export async function chaosApp(options: TestAppOptions, config: Partial<ConfigInput> = {}) {
  const channel = await startChaosChannel(SEED);
  onTestFinished(() => channel.close());
  const { lines, stream } = captureLines();
  const app = await useApp({
    ...options,
    logger: pino({ level: "info" }, stream),
    config: { channels: channels(channel.baseUrl), ...config },
    imageTasks: { timeoutSec: taskTimeoutSec(), maxConcurrent: 64, pollIntervalSec: 1 },
  });
  return { channel, app, lines };
}

/** Each end has a code and message when failed; no answer leaked; the service is well. */
export async function expectWell(
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
  // The mix must hold both kinds of end, or the seed tests little (a response's other end may be
  // `incomplete`: one seed's 24 responses ended so, or failed).
  expect(outcomes).toContain("failed");
  expect(
    outcomes.filter((status) => status !== "failed"),
    "none ended well",
  ).not.toEqual([]);
  expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${app.url}/metrics`)).status).toBe(200);
  expectLogsClean(lines);
}

/** No log line holds the channel's key, and none is an error. */
export function expectLogsClean(lines: string[]): void {
  for (const line of lines) expect(line).not.toContain(UPSTREAM_KEY);
  const errors = lines.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
  expect(errors).toEqual([]);
}

/** Runs `one` for 0..count-1 at once, a failure naming what the channels answered. */
export function each<T>(
  count: number,
  story: (n: number) => string,
  one: (n: number) => Promise<T>,
) {
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
