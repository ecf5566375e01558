import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { TASK_ID, useApp } from "../task-api.js";
import {
  bifrostUntil,
  dialectCall,
  editForm,
  type BifrostBody,
  expectPngBase64,
  pollBifrost,
  submitBifrost,
} from "./dialect-api.js";

/*
 * Bifrost's async inference API for images, as its public documentation and
 * its own end-to-end suite define it: `POST /v1/async/images/generations`
 * (and `/edits`) answer 202 with an `AsyncJobResponse {id, status, created_at,
 * completed_at?, expires_at?, status_code?, result?, error?}` (times RFC 3339,
 * `error` a `BifrostError`); `GET .../{job_id}` answers 202 while the job is
 * pending or processing and 200 once it is completed or failed;
 * `x-bf-async-job-result-ttl` sets how long a result is kept. What a Bifrost
 * client reads must fail here first if it changes.
 */

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
/** The fields an `AsyncJobResponse` may have (its Go struct's JSON names). */
const JOB_FIELDS = [
  "id",
  "status",
  "created_at",
  "completed_at",
  "expires_at",
  "status_code",
  "result",
  "error",
];

/** An RFC 3339 time in Unix seconds (NaN when there is none, which no check passes). */
const seconds = (time: string | undefined) => Date.parse(time ?? "") / 1000;

/**
 * `expires_at` is `ttlSec` after `completed_at` (as Bifrost computes it), give
 * or take the second the service rounds the expiry up to.
 */
function expectKeptFor(job: BifrostBody, ttlSec: number): void {
  const kept = seconds(job.expires_at) - seconds(job.completed_at);
  expect(kept).toBeGreaterThanOrEqual(ttlSec);
  expect(kept).toBeLessThanOrEqual(ttlSec + 1);
}

/** Every field is one Bifrost's `AsyncJobResponse` has, with its type. */
function expectJob(job: BifrostBody): void {
  for (const field of Object.keys(job)) expect(JOB_FIELDS).toContain(field);
  expect(typeof job.id).toBe("string");
  expect(["pending", "processing", "completed", "failed"]).toContain(job.status);
  expect(job.created_at).toMatch(RFC3339);
  if (job.completed_at !== undefined) expect(job.completed_at).toMatch(RFC3339);
  if (job.expires_at !== undefined) expect(job.expires_at).toMatch(RFC3339);
  if (job.status_code !== undefined) expect(Number.isInteger(job.status_code)).toBe(true);
}

describe("Bifrost's async dialect, as its documentation defines it", () => {
  it("submit answers 202 with a pending job; polls answer 202 until it ends, then 200 with result", async () => {
    const app = await useApp({ imageTasks: { maxConcurrent: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const before = Date.now();
    const running = await submitBifrost(app, { prompt: "running" });
    await arrived;
    const submitted = await submitBifrost(app, { prompt: "a lighthouse" });
    expect(submitted.status, submitted.text).toBe(202);
    expect(submitted.headers.get("content-type")).toMatch(/^application\/json/);
    const job = submitted.body;
    expectJob(job);
    expect(job.status).toBe("pending");
    // A job is a native task: its id is a task id.
    expect(job.id).toMatch(TASK_ID);
    expect(seconds(job.created_at)).toBeGreaterThanOrEqual(Math.floor(before / 1000) - 1);
    expect(seconds(job.created_at)).toBeLessThanOrEqual(Date.now() / 1000);
    // omitempty: nothing of an end before there is one.
    for (const field of ["completed_at", "expires_at", "status_code", "result", "error"]) {
      expect(job).not.toHaveProperty(field);
    }

    const pending = await pollBifrost(app, job.id);
    expect(pending.status).toBe(202);
    expect(pending.body).toMatchObject({ id: job.id, status: "pending" });
    const processing = await pollBifrost(app, running.body.id);
    expect(processing.status).toBe(202);
    expectJob(processing.body);
    expect(processing.body.status).toBe("processing");

    app.upstream.behave("images", { kind: "ok" });
    await dialectCall(app, "POST", `/v1/images/tasks/${running.body.id}/cancel`);
    const done = await bifrostUntil(app, job.id, ["completed", "failed"]);
    expect(done.status).toBe(200);
    expectJob(done.body);
    expect(done.body).toMatchObject({ id: job.id, status: "completed", status_code: 200 });
    expect(done.body.created_at).toBe(job.created_at);
    expect(seconds(done.body.completed_at)).toBeGreaterThanOrEqual(
      Math.floor(seconds(job.created_at)),
    );
    // The synchronous route's body, as POST /v1/images/generations answers it.
    expect(Number.isInteger(done.body.result?.created)).toBe(true);
    expect(done.body.result?.data).toHaveLength(1);
    expectPngBase64(done.body.result?.data[0]?.b64_json);
    expect(done.body).not.toHaveProperty("error");
    // The default retention: imageTasks.retentionSec after the end (rounded up to the second).
    expectKeptFor(done.body, app.config.imageTasks.retentionSec);
  });

  it("a failed job answers 200 with status_code and a BifrostError", async () => {
    const app = await useApp();
    app.upstream.behave("images", {
      kind: "status",
      status: 429,
      body: {
        error: { message: "Rate limit reached.", type: "requests", code: "rate_limit_exceeded" },
      },
    });
    const id = (await submitBifrost(app, { prompt: "limited" })).body.id;
    const failed = await bifrostUntil(app, id, ["completed", "failed"]);
    expect(failed.status).toBe(200);
    expectJob(failed.body);
    expect(failed.body).toMatchObject({ id, status: "failed", status_code: 429 });
    expect(failed.body.completed_at).toMatch(RFC3339);
    expect(failed.body.expires_at).toMatch(RFC3339);
    expect(failed.body).not.toHaveProperty("result");
    // BifrostError: {is_bifrost_error, status_code, error: {type, code, message}}.
    expect(failed.body.error).toEqual({
      is_bifrost_error: false,
      status_code: 429,
      error: { type: "requests", code: "rate_limit_exceeded", message: "Rate limit reached." },
    });
  });

  it("takes an edit as multipart on /v1/async/images/edits and polls it there", async () => {
    const app = await useApp();
    const submitted = await dialectCall<BifrostBody>(app, "POST", "/v1/async/images/edits", {
      form: editForm({ model: "gpt-image-1", prompt: "add a moon" }),
    });
    expect(submitted.status, submitted.text).toBe(202);
    expectJob(submitted.body);
    expect(submitted.body.status).toBe("pending");
    const done = await bifrostUntil(app, submitted.body.id!, ["completed", "failed"], "edits");
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: "completed", status_code: 200 });
    expectPngBase64(done.body.result?.data[0]?.b64_json);
    expect(app.upstream.requests.some((request) => request.path.endsWith("/images/edits"))).toBe(
      true,
    );
  });

  it("x-bf-async-job-result-ttl sets expires_at from completed_at; a value that is not one is ignored", async () => {
    const app = await useApp();
    const custom = (
      await submitBifrost(
        app,
        { prompt: "ttl" },
        {
          headers: { "x-bf-async-job-result-ttl": "120" },
        },
      )
    ).body.id;
    const invalid = (
      await submitBifrost(
        app,
        { prompt: "bad ttl" },
        {
          headers: { "x-bf-async-job-result-ttl": "not-a-number" },
        },
      )
    ).body.id;
    expectKeptFor((await bifrostUntil(app, custom, ["completed"])).body, 120);
    expectKeptFor(
      (await bifrostUntil(app, invalid, ["completed"])).body,
      app.config.imageTasks.retentionSec,
    );
  });

  it("answers an unknown job and another key's job 404", async () => {
    const app = await useApp();
    const id = (await submitBifrost(app, { prompt: "mine" })).body.id;
    for (const response of [
      await pollBifrost(app, id, "generations", TEST_KEYS.other),
      await pollBifrost(app, "task_0123456789abcdefghijklmn"),
    ]) {
      expect(response.status).toBe(404);
      expect(response.body.error?.code).toBe("task_not_found");
    }
  });

  it("refuses stream: true on both submit routes, and takes stream: false", async () => {
    const app = await useApp();
    const refused = await submitBifrost(app, { prompt: "x", stream: true });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_value", param: "stream" });
    const edit = await dialectCall(app, "POST", "/v1/async/images/edits", {
      form: editForm({ model: "gpt-image-1", prompt: "x", stream: "true" }),
    });
    expect(edit.status).toBe(400);
    expect(edit.body.error).toMatchObject({ code: "invalid_value", param: "stream" });
    expect((await submitBifrost(app, { prompt: "x", stream: false })).status).toBe(202);
  });
});

describe("Bifrost's dialect through the openai SDK's generic methods", () => {
  it("submits with client.post and polls with client.get until the job is completed", async () => {
    const app = await useApp();
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const job = (await client.post("/async/images/generations", {
      body: { model: "gpt-image-1", prompt: "a lighthouse" },
    })) as { id: string; status: string };
    expect(job.status).toBe("pending");
    let state = job as { status: string; result?: { data: Array<{ b64_json?: string }> } };
    for (let i = 0; i < 200 && !["completed", "failed"].includes(state.status); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      state = await client.get(`/async/images/generations/${job.id}`);
    }
    expect(state.status).toBe("completed");
    expectPngBase64(state.result?.data[0]?.b64_json);
  });
});
