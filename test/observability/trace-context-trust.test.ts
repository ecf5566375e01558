import OpenAI from "openai";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { tracingFromEnv } from "../../src/config/tracing-env.js";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { OTLP_SPAN_KIND, startOtlpReceiver } from "../support/otlp-receiver.js";
import { startTestApp } from "../support/start-test-app.js";
import { waitForStatus } from "../tasks/task-api.js";

/*
 * A client's `traceparent` is a hint, not an order: with the default
 * `tracing.trustParent: false` a forged one neither forces tracing on (a
 * ratio sampler at 0 exports nothing) nor hides a task (an unsampled one
 * under the default sampler), nor chooses the `trace_id` of the log lines or
 * of what the channel is sent; it is kept as a link. With `trustParent:
 * true` it is continued, as a trusted proxy in front wants.
 */

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const forged = (flags: "00" | "01") => `00-${CLIENT_TRACE}-${CLIENT_SPAN}-${flags}`;

type Line = Record<string, unknown>;

/** The service with tracing to a receiver of the test's own, its log lines kept. */
async function tracedApp(env: Record<string, string>, config: Partial<ConfigInput> = {}) {
  const otlp = await startOtlpReceiver();
  onTestFinished(() => otlp.close());
  const problems: string[] = [];
  const tracing = tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, ...env }, problems);
  expect(problems).toEqual([]);
  const lines: Line[] = [];
  const logger = pino(
    { level: "info" },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  const app = await startTestApp({ tracing, logger, config });
  let closed = false;
  onTestFinished(() => (closed ? undefined : app.close()));
  const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
  /** Stops the service: its tracer sends everything it kept before this resolves. */
  const close = async () => {
    closed = true;
    await app.close();
  };
  return { otlp, app, client, lines, close };
}

/** A chat and a task, both sent with `traceparent`; resolves the task's id once it is done. */
async function chatAndTask(
  client: OpenAI,
  traceparent: string,
  app: Parameters<typeof waitForStatus>[0],
) {
  await client.chat.completions.create(
    { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
    { headers: { traceparent, "x-request-id": "forged-chat" } },
  );
  const task = await client.post<{ id: string }>("/images/tasks", {
    body: { model: "gpt-image-1", prompt: "a forged trace" },
    headers: { traceparent, "x-request-id": "forged-task" },
  });
  await waitForStatus(app, task.id, ["completed"]);
  return task.id;
}

const RATIO_ZERO = {
  OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
  OTEL_TRACES_SAMPLER_ARG: "0",
};

describe("a client's traceparent", () => {
  it("cannot force tracing on: a sampled one under a ratio sampler at 0 exports nothing, and names no trace_id", async () => {
    const { otlp, app, client, lines, close } = await tracedApp(RATIO_ZERO);
    const id = await chatAndTask(client, forged("01"), app);
    const sent = app.upstream.requests.map((request) => request.headers.traceparent);
    await close();

    expect(otlp.spans()).toEqual([]);
    // Neither the access lines, nor the task's lines, nor the channel carry the client's trace.
    const access = lines.filter(
      (line) => line.msg === "request" && String(line.req_id).startsWith("forged"),
    );
    expect(access).toHaveLength(2);
    const taskLines = lines.filter((line) => line.task_id === id);
    expect(taskLines.map((line) => line.msg)).toContain("task.completed");
    for (const line of [...access, ...taskLines]) {
      expect(line.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(line.trace_id).not.toBe(CLIENT_TRACE);
    }
    expect(sent.length).toBeGreaterThanOrEqual(2);
    for (const traceparent of sent) {
      expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
      expect(traceparent).not.toContain(CLIENT_TRACE);
    }
  });

  it("with tracing.trustParent: true is continued, sampling decision included", async () => {
    const { otlp, app, client, lines, close } = await tracedApp(RATIO_ZERO, {
      tracing: { trustParent: true },
    });
    await chatAndTask(client, forged("01"), app);
    await close();
    const spans = otlp.spans();
    expect(spans.find((span) => span.name === "POST /v1/chat/completions")).toMatchObject({
      traceId: CLIENT_TRACE,
      parentSpanId: CLIENT_SPAN,
    });
    expect(spans.find((span) => span.name === "image_task.run")?.traceId).toBe(CLIENT_TRACE);
    expect(lines.find((line) => line.req_id === "forged-chat")?.trace_id).toBe(CLIENT_TRACE);
  });

  it("cannot hide a task: an unsampled one under the default sampler, which traces it in a trace of its own, linked", async () => {
    const { otlp, app, client, lines } = await tracedApp({});
    await chatAndTask(client, forged("00"), app);
    const spans = await otlp.waitForSpans(
      (all) =>
        all.some((span) => span.name === "image_task.run") &&
        all.some((span) => span.name === "POST /v1/images/tasks"),
      10_000,
    );
    const submission = spans.find((span) => span.name === "POST /v1/images/tasks")!;
    expect(submission.kind).toBe(OTLP_SPAN_KIND.SERVER);
    expect(submission.traceId).not.toBe(CLIENT_TRACE);
    expect(submission.parentSpanId).toBeUndefined();
    expect(submission.links).toEqual([
      expect.objectContaining({ traceId: CLIENT_TRACE, spanId: CLIENT_SPAN }),
    ]);
    const run = spans.find((span) => span.name === "image_task.run")!;
    expect(run.traceId).toBe(submission.traceId);
    expect(spans.every((span) => span.traceId !== CLIENT_TRACE)).toBe(true);
    expect(lines.find((line) => line.req_id === "forged-task")?.trace_id).toBe(submission.traceId);
  });
});
