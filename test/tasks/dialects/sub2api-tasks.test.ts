import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished } from "vitest";
import type { Behavior } from "../../support/fake-upstream.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { headerRecord, startWebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { scriptImageStream } from "../scripted-image-stream.js";
import { openEvents } from "../sse-client.js";
import { TASK_ID, submitOk, useApp, waitUntil } from "../task-api.js";
import {
  bifrostUntil,
  dialectCall,
  editForm,
  expectPngBase64,
  inputPng,
  pollSub2api,
  sub2apiUntil,
  submitBifrost,
  submitSub2api,
  submitSub2apiOk,
  type Sub2apiBody,
} from "./dialect-api.js";

/*
 * A task submitted in sub2api's dialect is an image task like any other: the
 * task API's routes wait for it, watch it, list it and cancel it, each
 * showing it in sub2api's shape; limits, groups, ownership and idempotency
 * hold as on native submissions.
 */

describe("a sub2api task on the task API's routes", () => {
  it("?wait= answers with the task in sub2api's shape once it finished", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "ok", delayMs: 300 });
    const id = await submitSub2apiOk(app, { prompt: "waited for" });
    const waited = await dialectCall<Sub2apiBody>(app, "GET", `/v1/images/tasks/${id}?wait=10`);
    expect(waited.status).toBe(200);
    expect(waited.body).toMatchObject({
      id,
      task_id: id,
      object: "image.generation.task",
      status: "completed",
      http_status: 200,
    });
    expectPngBase64(waited.body.result?.data[0]?.b64_json);
  });

  it("its events carry it in sub2api's shape, partial images included; a cancel is http_status 499", async () => {
    const app = await useApp();
    const channel = scriptImageStream(app.upstream);
    const id = await submitSub2apiOk(app, { prompt: "watched", partial_images: 1 });
    const stream = await openEvents(app, `/v1/images/tasks/${id}/events`);
    expect(stream.status).toBe(200);
    const request = await channel.next();
    const started = await stream.event(0);
    expect(started.event).toMatch(/^image\.task\.(queued|in_progress)$/);
    const inProgress = started.event === "image.task.in_progress" ? started : await stream.event(1);
    expect(inProgress.json).toMatchObject({
      id,
      object: "image.generation.task",
      status: "processing",
    });

    request.partial(0, 60);
    const partial = await stream.event(stream.events.indexOf(inProgress) + 1);
    expect(partial.event).toBe("image.task.partial_image");
    expect(partial.json).toMatchObject({
      id,
      task_id: id,
      object: "image.generation.task",
      status: "processing",
      partial_image_index: 0,
    });
    const partials = partial.json.partial_images as Array<{ index: number; b64_json: string }>;
    expect(partials.map((image) => image.index)).toEqual([0]);
    expectPngBase64(partials[0]!.b64_json);

    const cancelled = await dialectCall(app, "POST", `/v1/images/tasks/${id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers.get("cache-control")).toBe("no-store");
    expect(cancelled.body).toMatchObject({
      id,
      object: "image.generation.task",
      status: "failed",
      http_status: 499,
      error: { code: "cancelled", type: expect.any(String), message: expect.any(String) },
    });
    await stream.ended;
    const last = stream.events.at(-1)!;
    expect(last.event).toBe("image.task.failed");
    expect(last.json).toEqual(cancelled.body);
    expect((await pollSub2api(app, id)).body).toEqual(cancelled.body);
  });

  it("the list shows sub2api tasks in sub2api's shape and native ones natively, and pages after an imgtask_ id", async () => {
    const app = await useApp();
    const native = await submitOk(app, { prompt: "native" });
    const dialect = await submitSub2apiOk(app, { prompt: "sub2api", response_format: "url" });
    await sub2apiUntil(app, dialect, ["completed"]);
    const page = await dialectCall(app, "GET", "/v1/images/tasks?limit=1");
    expect(page.status).toBe(200);
    expect(page.body.data).toHaveLength(1);
    expect(page.body.data?.[0]).toMatchObject({
      id: dialect,
      object: "image.generation.task",
      status: "completed",
      image_url: expect.any(String),
    });
    expect(page.body).toMatchObject({ first_id: dialect, last_id: dialect, has_more: true });
    const next = await dialectCall(app, "GET", `/v1/images/tasks?after=${dialect}`);
    expect(next.status, next.text).toBe(200);
    expect(next.body.data?.map((task) => task.id)).toEqual([native]);
    expect(next.body.data?.[0]?.object).toBe("image.task");
  });

  it("another key's task is the same 404 as an unknown one on every route", async () => {
    const app = await useApp();
    const id = await submitSub2apiOk(app, { prompt: "mine" });
    const other = { key: TEST_KEYS.other };
    for (const [method, path] of [
      ["GET", `/v1/images/tasks/${id}`],
      ["GET", `/v1/images/tasks/${id}?wait=1`],
      ["GET", `/v1/images/tasks/${id}/events`],
      ["POST", `/v1/images/tasks/${id}/cancel`],
    ] as const) {
      const theirs = await dialectCall(app, method, path, other);
      const unknown = await dialectCall(app, method, path.replace(id, `imgtask_${"A".repeat(22)}`));
      expect(theirs.status, `${method} ${path}`).toBe(404);
      expect(theirs.body.error?.code).toBe("task_not_found");
      expect(unknown.status).toBe(404);
      expect(unknown.body.error?.code).toBe("task_not_found");
    }
    const theirList = await dialectCall(app, "GET", "/v1/images/tasks", other);
    expect(theirList.body.data).toEqual([]);
    expect((await sub2apiUntil(app, id, ["completed"])).body.status).toBe("completed");
  });
});

describe("sub2api's submissions", () => {
  it("take an edit as multipart, and as JSON with data: URLs", async () => {
    const app = await useApp();
    const multipart = await dialectCall(app, "POST", "/v1/images/edits/async", {
      form: editForm({ model: "gpt-image-1", prompt: "add a moon", stream: "false" }),
    });
    expect(multipart.status, multipart.text).toBe(202);
    expect(multipart.headers.get("retry-after")).toBe("3");
    expect(multipart.body).toMatchObject({ object: "image.generation.task", status: "processing" });
    const json = await dialectCall(app, "POST", "/v1/images/edits/async", {
      json: {
        model: "gpt-image-1",
        prompt: "add a sun",
        images: [{ image_url: `data:image/png;base64,${inputPng(2).toString("base64")}` }],
      },
    });
    expect(json.status, json.text).toBe(202);
    for (const id of [multipart.body.id!, json.body.id!]) {
      const done = await sub2apiUntil(app, id, ["completed", "failed"]);
      expect(done.body).toMatchObject({ status: "completed", http_status: 200 });
      expectPngBase64(done.body.result?.data[0]?.b64_json);
    }
    const edits = app.upstream.requests.filter((request) => request.path.endsWith("/images/edits"));
    expect(edits.map((request) => request.form?.fields.prompt).sort()).toEqual([
      "add a moon",
      "add a sun",
    ]);
    // `stream: false` was the client's, not the channel's.
    expect(edits.every((request) => request.form?.fields.stream === undefined)).toBe(true);
  });

  it("refuse stream: true on the edits route, as a form field and in JSON", async () => {
    const app = await useApp();
    const form = await dialectCall(app, "POST", "/v1/images/edits/async", {
      form: editForm({ model: "gpt-image-1", prompt: "x", stream: "true" }),
    });
    const json = await dialectCall(app, "POST", "/v1/images/edits/async", {
      json: {
        model: "gpt-image-1",
        prompt: "x",
        stream: true,
        images: [{ image_url: `data:image/png;base64,${inputPng().toString("base64")}` }],
      },
    });
    for (const refused of [form, json]) {
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: "invalid_value", param: "stream" });
    }
    expect(app.upstream.requests).toEqual([]);
  });

  it("replay an Idempotency-Key's task; another body, or the key on another dialect, is a conflict", async () => {
    const app = await useApp();
    const headers = { "Idempotency-Key": "retry-1" };
    const first = await submitSub2api(app, { prompt: "once" }, { headers });
    const again = await submitSub2api(app, { prompt: "once" }, { headers });
    expect(again.status).toBe(202);
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    for (const conflict of [
      await submitSub2api(app, { prompt: "other" }, { headers }),
      await dialectCall(app, "POST", "/v1/images/tasks", {
        json: { model: "gpt-image-1", prompt: "once" },
        headers,
      }),
      await submitBifrost(app, { prompt: "once" }, { headers }),
    ]) {
      expect(conflict.status).toBe(409);
      expect(conflict.body.error?.code).toBe("idempotency_key_conflict");
    }
    const done = await sub2apiUntil(app, first.body.id, ["completed"]);
    const replayed = await submitSub2api(app, { prompt: "once" }, { headers });
    expect(replayed.status).toBe(202);
    expect(replayed.body).toEqual(done.body);
    expect(app.upstream.requests).toHaveLength(1);
  });

  it("hold the groups, the task models and the queue's limit as native submissions do", async () => {
    const app = await useApp({ imageTasks: { maxConcurrent: 1, maxQueued: 1 } });
    const unsupported = await submitSub2api(app, { model: "gpt-4o-mini", prompt: "x" });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body.error?.code).toBe("unsupported_model");
    const notInGroup = await submitSub2api(app, { prompt: "x" }, { key: TEST_KEYS.chat });
    expect(notInGroup.status).toBe(404);
    expect(notInGroup.body.error?.code).toBe("model_not_found");

    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    await submitSub2apiOk(app, { prompt: "running" });
    await arrived;
    await submitSub2apiOk(app, { prompt: "waiting" });
    const full = await submitSub2api(app, { prompt: "one too many" });
    expect(full.status).toBe(429);
    expect(full.body.error?.code).toBe("queue_full");
    expect(full.headers.get("retry-after")).toMatch(/^\d+$/);
  });

  it("are counted and logged by dialect", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(line) });
    const app = await useApp({ logger });
    await submitOk(app, { prompt: "native" });
    const id = await submitSub2apiOk(app, { prompt: "sub2api" });
    await sub2apiUntil(app, id, ["completed"]);
    const job = (await submitBifrost(app, { prompt: "bifrost" })).body.id;
    expect(job).toMatch(TASK_ID);
    await waitUntil(async () => {
      const text = await (await fetch(`${app.url}/metrics`)).text();
      return /tasks_finished_total\{[^}]*dialect="bifrost"[^}]*\} 1/.test(text);
    }, "the Bifrost job's finish counted");
    const text = await (await fetch(`${app.url}/metrics`)).text();
    for (const dialect of ["native", "sub2api", "bifrost"]) {
      expect(text).toContain(`image_task_sidecar_tasks_submitted_total{dialect="${dialect}"} 1`);
    }
    expect(text).toMatch(
      /image_task_sidecar_tasks_finished_total\{status="completed",reason="ok",dialect="sub2api"\} 1/,
    );
    const submitted = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === "task.submitted");
    expect(submitted.map((line) => [line.task_id, line.dialect])).toEqual([
      [expect.stringMatching(TASK_ID), "native"],
      [id, "sub2api"],
      [job, "bifrost"],
    ]);
  });
});

describe("a failed sub2api task's http_status", () => {
  // Channel failures, each answered by POST /v1/images/generations and by a task alike.
  const FAILURES: Array<[string, Behavior]> = [
    [
      "a content policy refusal",
      {
        kind: "status",
        status: 400,
        body: {
          error: {
            message: "Refused.",
            type: "invalid_request_error",
            code: "content_policy_violation",
          },
        },
      },
    ],
    ["a server error", { kind: "status", status: 500 }],
    ["a rate limit", { kind: "status", status: 429 }],
    ["a 401 of the channel's key", { kind: "status", status: 401 }],
    ["an error without an OpenAI body", { kind: "status", status: 503, body: "overloaded" }],
    ["a gateway timeout page", { kind: "status", status: 504, body: "<html>timeout</html>" }],
    ["a broken answer", { kind: "garbage" }],
    ["a reset after the request went out", { kind: "reset" }],
  ];

  it.each(FAILURES)(
    "equals what the synchronous route answers for %s (and Bifrost's status_code too)",
    async (_what, behavior) => {
      const app = await useApp();
      app.upstream.behave("images", behavior);
      const sync = await dialectCall(app, "POST", "/v1/images/generations", {
        json: { model: "gpt-image-1", prompt: "the same failure" },
      });
      expect(sync.status).toBeGreaterThanOrEqual(400);
      const id = await submitSub2apiOk(app, { prompt: "the same failure" });
      const failed = (await sub2apiUntil(app, id, ["completed", "failed"])).body;
      expect(failed.status).toBe("failed");
      expect(failed.http_status).toBe(sync.status);
      const job = (await submitBifrost(app, { prompt: "the same failure" })).body.id;
      const ended = await bifrostUntil(app, job, ["completed", "failed"]);
      expect(ended.status).toBe(200);
      expect(ended.body.status).toBe("failed");
      expect(ended.body.status_code).toBe(sync.status);
      expect(ended.body.error?.status_code).toBe(sync.status);
    },
  );

  it("is 504 for a task that ran past its timeout, as upstream_timeout is", async () => {
    const app = await useApp({ imageTasks: { timeoutSec: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    const id = await submitSub2apiOk(app, { prompt: "too slow" });
    const failed = (await sub2apiUntil(app, id, ["failed"], 10_000)).body;
    expect(failed).toMatchObject({ http_status: 504, error: { code: "timeout" } });
  });
});

describe("a sub2api task's webhook", () => {
  it("carries the task in sub2api's shape, signed", async () => {
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    const receiver = await startWebhookReceiver((res) => res.writeHead(204).end());
    onTestFinished(() => receiver.close());
    const app = await useApp({
      config: { webhooks: { secret, allowPrivateNetworks: true, retryScheduleSec: [1] } },
    });
    const id = await submitSub2apiOk(app, {
      prompt: "announced",
      response_format: "url",
      webhook_url: `${receiver.url}/hook`,
    });
    const polled = (await sub2apiUntil(app, id, ["completed"])).body;
    await receiver.received(1);
    const event = new Webhook(secret).verify(
      receiver.requests[0]!.body,
      headerRecord(receiver.requests[0]!.headers),
    ) as { type: string; data: Record<string, unknown> };
    expect(event.type).toBe("image.task.completed");
    expect(event.data).toEqual(polled);
    expect(event.data).toMatchObject({ object: "image.generation.task", task_id: id });
  });
});
