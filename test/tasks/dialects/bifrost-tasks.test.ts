import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { headerRecord, startWebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { openEvents } from "../sse-client.js";
import { submitOk, useApp } from "../task-api.js";
import {
  bifrostUntil,
  dialectCall,
  editForm,
  pollBifrost,
  submitBifrost,
  submitBifrostOk,
  submitSub2apiOk,
  type BifrostBody,
} from "./dialect-api.js";

/*
 * A Bifrost job is a native task with a native id: the task API's routes
 * answer it natively (wait, events, cancel, list), Bifrost's poll routes in
 * Bifrost's shape; its result is kept as long as its submission asked
 * (`x-bf-async-job-result-ttl`), within `imageTasks.retentionSec`.
 */

const TTL = "x-bf-async-job-result-ttl";
/** An RFC 3339 time in Unix seconds (NaN when there is none, which no check passes). */
const seconds = (time: string | undefined) => Date.parse(time ?? "") / 1000;

describe("a Bifrost job", () => {
  it("is waited for, watched and cancelled natively on the task API, and polled in Bifrost's shape", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const id = await submitBifrostOk(app, { prompt: "a job" });
    await arrived;
    const native = await dialectCall(app, "GET", `/v1/images/tasks/${id}?wait=0.2`);
    expect(native.body).toMatchObject({ id, object: "image.task", status: "in_progress" });
    const stream = await openEvents(app, `/v1/images/tasks/${id}/events`);
    expect((await stream.event(0)).json).toMatchObject({ id, object: "image.task" });

    const cancelled = await dialectCall(app, "POST", `/v1/images/tasks/${id}/cancel`);
    expect(cancelled.body).toMatchObject({ id, object: "image.task", status: "failed" });
    await stream.ended;
    expect(stream.events.at(-1)!.event).toBe("image.task.failed");
    expect(stream.events.at(-1)!.json).toMatchObject({ object: "image.task", status: "failed" });

    const polled = await pollBifrost(app, id);
    expect(polled.status).toBe(200);
    expect(polled.body).toMatchObject({
      id,
      status: "failed",
      status_code: 499,
      error: { is_bifrost_error: false, status_code: 499, error: { code: "cancelled" } },
    });
    const listed = await dialectCall(app, "GET", "/v1/images/tasks");
    expect(listed.body.data?.[0]).toMatchObject({ id, object: "image.task" });
  });

  it("?wait= on Bifrost's poll answers 200 once the job ended, 202 with it running after the wait", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "ok", delayMs: 300 });
    const quick = await submitBifrostOk(app, { prompt: "quick" });
    const waited = await dialectCall(app, "GET", `/v1/async/images/generations/${quick}?wait=10`);
    expect(waited.status).toBe(200);
    expect(waited.body).toMatchObject({ id: quick, status: "completed", status_code: 200 });

    app.upstream.behave("images", { kind: "hang" });
    const slow = await submitBifrostOk(app, { prompt: "slow" });
    const started = Date.now();
    const still = await dialectCall(app, "GET", `/v1/async/images/generations/${slow}?wait=0.5`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(still.status).toBe(202);
    expect(["pending", "processing"]).toContain(still.body.status);
    expect(still.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(still.headers.get("cache-control")).toBe("no-store");
  });

  it("is found only on its own kind's poll route: other tasks and the other kind are 404", async () => {
    const app = await useApp();
    const generation = await submitBifrostOk(app, { prompt: "a generation" });
    const edit = await dialectCall<BifrostBody>(app, "POST", "/v1/async/images/edits", {
      form: editForm({ model: "gpt-image-1", prompt: "an edit" }),
    });
    expect(edit.status, edit.text).toBe(202);
    const native = await submitOk(app, { prompt: "native" });
    const sub2api = await submitSub2apiOk(app, { prompt: "sub2api" });
    expect((await bifrostUntil(app, generation, ["completed"])).status).toBe(200);
    expect((await bifrostUntil(app, edit.body.id, ["completed"], "edits")).status).toBe(200);
    for (const [id, kind] of [
      [generation, "edits"],
      [edit.body.id, "generations"],
      [native, "generations"],
      [sub2api, "generations"],
    ] as const) {
      const response = await pollBifrost(app, id, kind);
      expect(response.status, `${id} on ${kind}`).toBe(404);
      expect(response.body.error?.code).toBe("task_not_found");
    }
    // Another key's job, with a wait: the same 404, at once.
    const started = Date.now();
    const theirs = await dialectCall(
      app,
      "GET",
      `/v1/async/images/generations/${generation}?wait=5`,
      { key: TEST_KEYS.other },
    );
    expect(theirs.status).toBe(404);
    // Not after the 5 s wait: a margin for a loaded CI machine.
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(
      (await dialectCall(app, "GET", `/v1/images/tasks/${generation}`, { key: TEST_KEYS.other }))
        .status,
    ).toBe(404);
  });

  it("expires its result after a short x-bf-async-job-result-ttl, on every route", async () => {
    const app = await useApp();
    const id = await submitBifrostOk(app, { prompt: "short-lived" }, { headers: { [TTL]: "1" } });
    const done = await bifrostUntil(app, id, ["completed"]);
    expect(seconds(done.body.expires_at) - seconds(done.body.completed_at)).toBeLessThanOrEqual(2);
    await sleep((seconds(done.body.expires_at) + 0.2) * 1000 - Date.now());
    const gone = await pollBifrost(app, id);
    expect(gone.status).toBe(404);
    expect(gone.body.error?.code).toBe("task_not_found");
    expect((await dialectCall(app, "GET", `/v1/images/tasks/${id}`)).status).toBe(404);
  });

  it("keeps a huge TTL to imageTasks.retentionSec, and ignores one that is not a positive integer", async () => {
    const app = await useApp({ imageTasks: { retentionSec: 600 } });
    const kept = async (ttl: string) => {
      const id = await submitBifrostOk(app, { prompt: `ttl ${ttl}` }, { headers: { [TTL]: ttl } });
      const job = (await bifrostUntil(app, id, ["completed"])).body;
      return seconds(job.expires_at) - seconds(job.completed_at);
    };
    for (const ttl of ["999999999999", "0", "-5", "1.5", "abc", "60, 60"]) {
      const keptFor = await kept(ttl);
      expect(keptFor, ttl).toBeGreaterThanOrEqual(600);
      expect(keptFor, ttl).toBeLessThanOrEqual(601);
    }
    const short = await kept("60");
    expect(short).toBeGreaterThanOrEqual(60);
    expect(short).toBeLessThanOrEqual(61);
  });

  it("replays an Idempotency-Key's job; the same key with another TTL is a conflict", async () => {
    const app = await useApp();
    const headers = { "Idempotency-Key": "job-1", [TTL]: "300" };
    const first = await submitBifrost(app, { prompt: "once" }, { headers });
    const again = await submitBifrost(app, { prompt: "once" }, { headers });
    expect(again.status).toBe(202);
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const conflict = await submitBifrost(
      app,
      { prompt: "once" },
      { headers: { ...headers, [TTL]: "400" } },
    );
    expect(conflict.status).toBe(409);
    expect(conflict.body.error?.code).toBe("idempotency_key_conflict");
  });

  it("sends its webhook event in Bifrost's shape", async () => {
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    const receiver = await startWebhookReceiver((res) => res.writeHead(204).end());
    onTestFinished(() => receiver.close());
    const app = await useApp({
      config: { webhooks: { secret, allowPrivateNetworks: true, retryScheduleSec: [1] } },
    });
    app.upstream.behave("images", { kind: "status", status: 500 });
    const id = await submitBifrostOk(app, { prompt: "hooked", webhook_url: `${receiver.url}/h` });
    const polled = (await bifrostUntil(app, id, ["failed"])).body;
    await receiver.received(1);
    const event = new Webhook(secret).verify(
      receiver.requests[0]!.body,
      headerRecord(receiver.requests[0]!.headers),
    ) as { type: string; data: Record<string, unknown> };
    expect(event.type).toBe("image.task.failed");
    expect(event.data).toEqual(polled);
    expect(event.data).toMatchObject({ status: "failed", status_code: 500 });
  });
});
