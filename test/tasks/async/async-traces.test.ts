import { describe, expect, it, onTestFinished } from "vitest";
import { tracingFromEnv } from "../../../src/config/tracing-env.js";
import { OTLP_SPAN_KIND, startOtlpReceiver } from "../../support/otlp-receiver.js";
import { deleteKeys, uniquePrefix } from "../../support/redis.js";
import { startTestApp, UPSTREAM_KEY } from "../../support/start-test-app.js";
import { submitOk, waitForStatus, waitUntil } from "../task-api.js";
import { startFakeAsyncChannel } from "./fake-async-channel.js";

/*
 * A job polled by two replicas is one trace: each replica's run span continues
 * the task's trace; the submission is a client span, each poll an event, the
 * hand-over an event, and every call about the job carries a traceparent.
 */

describe("a task on an async channel, across replicas", () => {
  it("is one trace: the submitting run, the hand-over, the run that polls it to its end", async () => {
    const otlp = await startOtlpReceiver();
    onTestFinished(() => otlp.close());
    const channel = await startFakeAsyncChannel();
    onTestFinished(() => channel.close());
    channel.behave({ finishAfterMs: "never" });
    const prefix = uniquePrefix("async-trace");
    onTestFinished(() => deleteKeys(prefix).then(() => undefined));
    const problems: string[] = [];
    const tracing = tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url }, problems)!;
    const replica = (name: string) =>
      startTestApp({
        redis: { prefix },
        tracing,
        imageTasks: { timeoutSec: 60, leaseSec: 30 },
        config: {
          server: { port: 0, host: "127.0.0.1", replicaName: name },
          channels: [
            {
              name: "jobs",
              baseUrl: channel.baseUrl,
              apiKey: UPSTREAM_KEY,
              models: ["gpt-image-1"],
              async: "bifrost",
              pollSec: 1,
            },
          ],
        },
      });
    const a = await replica("replica-a");
    let aClosed = false;
    onTestFinished(() => (aClosed ? undefined : a.close()));
    const id = await submitOk(a, { prompt: "traced job" });
    await waitUntil(() => (channel.jobs[0]?.polls.length ?? 0) >= 1, "a first poll", 20_000);
    const b = await replica("replica-b");
    onTestFinished(() => b.close());
    // The default grace: a stop with only a poll to hand over does not wait for it.
    await a.server.close(60_000);
    aClosed = true;
    const polled = channel.jobs[0]!.polls.length;
    await waitUntil(() => channel.jobs[0]!.polls.length > polled, "replica b's poll", 20_000);
    channel.finish(channel.jobs[0]!.id);
    expect((await waitForStatus(b, id, ["completed", "failed"], 20_000)).body.status).toBe(
      "completed",
    );

    const runOf = (name: string) => (span: { name: string; resource: Record<string, unknown> }) =>
      span.name === "image_task.run" && span.resource["service.instance.id"] === name;
    const spans = await otlp.waitForSpans(
      (all) => all.some(runOf("replica-a")) && all.some(runOf("replica-b")),
      15_000,
    );
    const first = spans.find(runOf("replica-a"))!;
    const second = spans.find(runOf("replica-b"))!;
    expect(second.traceId).toBe(first.traceId);
    expect(second.parentSpanId).toBe(first.parentSpanId);
    expect(first.attributes).toMatchObject({
      "image_task.upstream.dialect": "bifrost",
      "image_task.resumed": false,
    });
    expect(second.attributes).toMatchObject({ "image_task.resumed": true });
    const names = (span: typeof first) => span.events.map((event) => event.name);
    expect(names(first)).toContain("image_task.poll");
    expect(names(first)).toContain("image.task.handover");
    expect(names(second)).toContain("image_task.poll");
    expect(names(second)).toContain("image.task.completed");
    const submission = spans.find(
      (span) => span.kind === OTLP_SPAN_KIND.CLIENT && span.parentSpanId === first.spanId,
    );
    expect(submission?.attributes).toMatchObject({ "gen_ai.operation.name": "image_generation" });
    // The channel saw the trace on every call about the job.
    const [job] = channel.jobs;
    expect(job!.traceparents.length).toBeGreaterThanOrEqual(3);
    for (const traceparent of job!.traceparents) expect(traceparent).toContain(first.traceId);
  });
});
