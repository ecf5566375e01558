import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { useApp } from "../task-api.js";
import {
  dialectCall,
  expectPngBase64,
  pollSub2api,
  sub2apiUntil,
  submitSub2api,
} from "./dialect-api.js";

/*
 * sub2api's asynchronous image tasks, as its public documentation shows them
 * ("Asynchronous Image Tasks": submit, poll, the processing, completed and
 * failed examples): the routes, status codes, headers, field names and types
 * a sub2api client reads. A change that breaks one of these breaks those
 * clients; it must fail here first.
 */

/** `imgtask_` and at least 128 random bits (22 base64url characters carry 132). */
const IMGTASK_ID = /^imgtask_[A-Za-z0-9_-]{22,}$/;

/** The fields of the documented submit answer, exactly. */
const SUBMIT_FIELDS = ["created_at", "expires_at", "id", "object", "poll_url", "status", "task_id"];

const nowSec = () => Math.floor(Date.now() / 1000);

describe("sub2api's dialect, as its documentation shows it", () => {
  it("submit: 202, Location, Retry-After: 3, no-store, and the documented task", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const before = nowSec();
    // The documentation's own example body.
    const submitted = await submitSub2api(app, {
      prompt: "A lighthouse during a winter storm",
      size: "1536x1024",
    });
    expect(submitted.status, submitted.text).toBe(202);
    expect(submitted.headers.get("content-type")).toMatch(/^application\/json/);
    expect(submitted.headers.get("retry-after")).toBe("3");
    expect(submitted.headers.get("cache-control")).toBe("no-store");
    const task = submitted.body;
    expect(Object.keys(task).sort()).toEqual(SUBMIT_FIELDS);
    expect(task.id).toMatch(IMGTASK_ID);
    expect(task.task_id).toBe(task.id);
    expect(task.object).toBe("image.generation.task");
    expect(task.status).toBe("processing");
    expect(Number.isInteger(task.created_at)).toBe(true);
    expect(task.created_at).toBeGreaterThanOrEqual(before);
    expect(task.created_at).toBeLessThanOrEqual(nowSec());
    expect(Number.isInteger(task.expires_at)).toBe(true);
    expect(task.expires_at).toBeGreaterThan(task.created_at);
    expect(task.poll_url).toBe(`/v1/images/tasks/${task.id}`);
    // "Location contains the polling path".
    const location = submitted.headers.get("location") ?? "";
    expect(new URL(location, app.url).pathname).toBe(task.poll_url);
    expect(new URL(location, app.url).origin).toBe(new URL(app.url).origin);

    // "While work is in progress": processing, the same task, never cached.
    const polled = await pollSub2api(app, task.id);
    expect(polled.status).toBe(200);
    expect(polled.headers.get("cache-control")).toBe("no-store");
    expect(polled.body).toMatchObject({
      id: task.id,
      task_id: task.id,
      object: "image.generation.task",
      status: "processing",
      created_at: task.created_at,
      expires_at: task.expires_at,
    });
    expect(polled.body).not.toHaveProperty("http_status");
    expect(polled.body).not.toHaveProperty("result");
    expect(polled.body).not.toHaveProperty("error");
    expect(polled.body).not.toHaveProperty("completed_at");
  });

  it("poll once completed: http_status 200, result mirrors the synchronous body, image_url its first url", async () => {
    const app = await useApp();
    const id = (await submitSub2api(app, { prompt: "as a link", response_format: "url" })).body
      .id as string;
    const done = await sub2apiUntil(app, id, ["completed", "failed"]);
    expect(done.status).toBe(200);
    expect(done.headers.get("cache-control")).toBe("no-store");
    const task = done.body;
    expect(task).toMatchObject({
      id,
      task_id: id,
      object: "image.generation.task",
      status: "completed",
      http_status: 200,
    });
    expect(Number.isInteger(task.completed_at)).toBe(true);
    expect(task.completed_at).toBeGreaterThanOrEqual(task.created_at);
    expect(task.expires_at).toBeGreaterThan(task.completed_at!);
    // `result` is what POST /v1/images/generations answers: {created, data: [...]}.
    const result = task.result!;
    expect(Number.isInteger(result.created)).toBe(true);
    expect(Array.isArray(result.data)).toBe(true);
    expect(result.data).toHaveLength(1);
    expect(typeof result.data[0]?.url).toBe("string");
    expect(task.image_url).toBe(result.data[0]?.url);
    // The link works without a bearer header, as a stored object's does.
    const image = await fetch(task.image_url!);
    expect(image.status).toBe(200);
    expect(image.headers.get("content-type")).toBe("image/png");
    expect(task).not.toHaveProperty("error");
  });

  it("poll once completed with b64_json: the images in result, no image_url", async () => {
    const app = await useApp();
    const id = (await submitSub2api(app, { prompt: "as base64", n: 2 })).body.id;
    const task = (await sub2apiUntil(app, id, ["completed", "failed"])).body;
    expect(task.status).toBe("completed");
    expect(task.http_status).toBe(200);
    expect(task.result?.data).toHaveLength(2);
    for (const image of task.result?.data ?? []) expectPngBase64(image.b64_json);
    expect(task).not.toHaveProperty("image_url");
  });

  it("poll once failed: still 200, with the synchronous status and {type, code, message}", async () => {
    const app = await useApp();
    app.upstream.behave("images", {
      kind: "status",
      status: 400,
      body: {
        error: {
          message: "Your request was rejected by the safety system.",
          type: "invalid_request_error",
          code: "content_policy_violation",
          param: null,
        },
      },
    });
    const id = (await submitSub2api(app, { prompt: "refused" })).body.id;
    const failed = await sub2apiUntil(app, id, ["completed", "failed"]);
    // "Polling a failed task may still return HTTP 200: check status, http_status and error."
    expect(failed.status).toBe(200);
    expect(failed.headers.get("cache-control")).toBe("no-store");
    expect(failed.body).toMatchObject({
      id,
      task_id: id,
      object: "image.generation.task",
      status: "failed",
      http_status: 400,
    });
    expect(Object.keys(failed.body.error ?? {}).sort()).toEqual(["code", "message", "type"]);
    expect(failed.body.error).toEqual({
      type: "invalid_request_error",
      code: "content_policy_violation",
      message: "Your request was rejected by the safety system.",
    });
    expect(Number.isInteger(failed.body.completed_at)).toBe(true);
    expect(failed.body).not.toHaveProperty("result");
    expect(failed.body).not.toHaveProperty("image_url");
  });

  it("has only the statuses processing, completed and failed", async () => {
    const app = await useApp({ imageTasks: { maxConcurrent: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const running = (await submitSub2api(app, { prompt: "running" })).body.id;
    await arrived;
    const queued = (await submitSub2api(app, { prompt: "queued" })).body.id;
    // Running and waiting alike are "processing".
    expect((await pollSub2api(app, running)).body.status).toBe("processing");
    expect((await pollSub2api(app, queued)).body.status).toBe("processing");
    app.upstream.behave("images", { kind: "ok" });
    await dialectCall(app, "POST", `/v1/images/tasks/${running}/cancel`);
    expect((await sub2apiUntil(app, queued, ["completed", "failed"])).body.status).toBe(
      "completed",
    );
    expect((await pollSub2api(app, running)).body.status).toBe("failed");
  });

  it("answers an unknown id and another key's task with the same 404", async () => {
    const app = await useApp();
    const id = (await submitSub2api(app, { prompt: "mine" })).body.id;
    const other = await pollSub2api(app, id, TEST_KEYS.other);
    const unknown = await pollSub2api(app, "imgtask_0123456789abcdef0123456789");
    for (const response of [other, unknown]) {
      expect(response.status).toBe(404);
      expect(response.body.error?.code).toBe("task_not_found");
    }
    expect(other.body.error?.message).toBe(`No task found with id '${id}'.`);
  });

  it("refuses stream: true (a polled task has one final answer), and takes stream: false", async () => {
    const app = await useApp();
    const refused = await submitSub2api(app, { prompt: "x", stream: true });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_value", param: "stream" });
    const accepted = await submitSub2api(app, { prompt: "x", stream: false });
    expect(accepted.status, accepted.text).toBe(202);
  });
});

describe("sub2api's dialect through the openai SDK's generic methods", () => {
  it("submits with client.post and polls the poll_url with client.get", async () => {
    const app = await useApp();
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = (await client.post("/images/generations/async", {
      body: { model: "gpt-image-1", prompt: "a lighthouse" },
    })) as { id: string; poll_url: string; status: string };
    expect(task.status).toBe("processing");
    let state = task as { status: string; result?: { data: Array<{ b64_json?: string }> } };
    for (let i = 0; i < 200 && state.status === "processing"; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      state = await client.get(task.poll_url.replace(/^\/v1/, ""));
    }
    expect(state.status).toBe("completed");
    expectPngBase64(state.result?.data[0]?.b64_json);
  });
});
