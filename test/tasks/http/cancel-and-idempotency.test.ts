import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import {
  cancelTask,
  expectError,
  getTask,
  submit,
  submitOk,
  upstreamPrompts,
  useApp,
  waitForStatus,
  waitUntil,
} from "../task-api.js";

describe("POST /v1/images/tasks/{id}/cancel", () => {
  it("fails a queued task with cancelled, and it never reaches the upstream", async () => {
    const app = await useApp({ imageTasks: { maxConcurrent: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const running = await submitOk(app, { prompt: "running" });
    await arrived;
    const queued = await submitOk(app, { prompt: "queued" });
    expect((await getTask(app, queued)).body.status).toBe("queued");

    const cancelled = await cancelTask(app, queued);
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers.get("retry-after")).toBeNull();
    expect(cancelled.body).toMatchObject({
      id: queued,
      object: "image.task",
      status: "failed",
      error: { code: "cancelled", message: expect.any(String), type: expect.any(String) },
    });
    expect(cancelled.body.completed_at).toEqual(expect.any(Number));
    expect(cancelled.body).not.toHaveProperty("started_at");
    expect((await getTask(app, queued)).body).toEqual(cancelled.body);

    // Free the slot; the next task runs, the cancelled one never does.
    app.upstream.behave("images", { kind: "ok" });
    await cancelTask(app, running);
    const next = await submitOk(app, { prompt: "next" });
    expect((await waitForStatus(app, next, ["completed", "failed"])).body.status).toBe("completed");
    expect(upstreamPrompts(app.upstream)).toEqual(["running", "next"]);
    expect((await getTask(app, queued)).body.status).toBe("failed");
  });

  it("fails a running task with cancelled and aborts its upstream call", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const id = await submitOk(app, { prompt: "running" });
    await arrived;
    expect((await getTask(app, id)).body.status).toBe("in_progress");

    const cancelled = await cancelTask(app, id);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({
      id,
      status: "failed",
      started_at: expect.any(Number),
      error: { code: "cancelled" },
    });
    await waitUntil(() => app.upstream.aborted >= 1, "the upstream call to be aborted");
    const later = await getTask(app, id);
    expect(later.body.status).toBe("failed");
    expect(later.body.error?.code).toBe("cancelled");
    expect(later.headers.get("retry-after")).toBeNull();
  });

  it("returns a finished task as it is", async () => {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "done" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status).toBe("completed");

    const cancelled = await cancelTask(app, id);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual(done.body);
    expect((await getTask(app, id)).body).toEqual(done.body);

    // A cancelled task cancelled again stays as it was.
    app.upstream.behave("images", { kind: "hang" });
    const other = await submitOk(app, { prompt: "cancel twice" });
    const first = await cancelTask(app, other);
    expect(first.body.error?.code).toBe("cancelled");
    const second = await cancelTask(app, other);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
  });

  it("answers 404 task_not_found for another key's task and leaves it running", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const id = await submitOk(app, { prompt: "mine" });
    await arrived;
    expectError(await cancelTask(app, id, TEST_KEYS.other), 404, "task_not_found");
    expectError(await cancelTask(app, id, TEST_KEYS.vip), 404, "task_not_found");
    expect((await getTask(app, id)).body.status).toBe("in_progress");
    expect(app.upstream.aborted).toBe(0);
  });
});

describe("Idempotency-Key", () => {
  it("answers a retried submission with the same task", async () => {
    const app = await useApp();
    const headers = { "Idempotency-Key": "retry-me-1" };
    const body = { prompt: "only once", size: "1024x1024" };
    const first = await submit(app, body, { headers });
    expect(first.status).toBe(202);
    const second = await submit(app, body, { headers });
    const third = await submit(app, { size: "1024x1024", prompt: "only once" }, { headers });
    for (const retry of [second, third]) {
      expect(retry.status).toBe(202);
      expect(retry.body.id).toBe(first.body.id);
      expect(retry.headers.get("location")).toBe(first.headers.get("location"));
    }

    const done = await waitForStatus(app, first.body.id, ["completed", "failed"]);
    expect(done.body.status).toBe("completed");
    const late = await submit(app, body, { headers });
    expect(late.status).toBe(202);
    expect(late.body.id).toBe(first.body.id);
    expect(late.body.status).toBe("completed");
    expect(upstreamPrompts(app.upstream)).toEqual(["only once"]);
  });

  it("makes concurrent retries one task", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const headers = { "Idempotency-Key": "parallel" };
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => submit(app, { prompt: "parallel" }, { headers })),
    );
    for (const answer of answers) expect(answer.status).toBe(202);
    expect(new Set(answers.map((answer) => answer.body.id)).size).toBe(1);
  });

  it("answers 409 idempotency_key_conflict for the same key with another body", async () => {
    const app = await useApp();
    const headers = { "Idempotency-Key": "conflict-key" };
    const first = await submit(app, { prompt: "first body" }, { headers });
    expect(first.status).toBe(202);
    expectError(
      await submit(app, { prompt: "second body" }, { headers }),
      409,
      "idempotency_key_conflict",
    );
    expectError(
      await submit(app, { prompt: "first body", n: 2 }, { headers }),
      409,
      "idempotency_key_conflict",
    );
    // The first task is untouched by the refused ones.
    expect((await submit(app, { prompt: "first body" }, { headers })).body.id).toBe(first.body.id);
  });

  it("keeps the keys of different owners apart", async () => {
    const app = await useApp();
    const headers = { "Idempotency-Key": "shared-key" };
    const mine = await submit(app, { prompt: "same" }, { headers });
    const theirs = await submit(app, { prompt: "same" }, { headers, key: TEST_KEYS.other });
    const theirsOther = await submit(app, { prompt: "other" }, { headers, key: TEST_KEYS.vip });
    expect(mine.status).toBe(202);
    expect(theirs.status).toBe(202);
    expect(theirsOther.status).toBe(202);
    expect(new Set([mine.body.id, theirs.body.id, theirsOther.body.id]).size).toBe(3);
    expectError(await getTask(app, mine.body.id, TEST_KEYS.other), 404, "task_not_found");
    expect((await getTask(app, theirs.body.id, TEST_KEYS.other)).status).toBe(200);
  });

  it("without the header, every submission is a new task", async () => {
    const app = await useApp();
    const a = await submitOk(app, { prompt: "same" });
    const b = await submitOk(app, { prompt: "same" });
    expect(a).not.toBe(b);
  });

  it("refuses an empty or overlong key with 400 invalid_value", async () => {
    const app = await useApp();
    for (const key of ["", "k".repeat(256)]) {
      expectError(
        await submit(app, { prompt: "x" }, { headers: { "Idempotency-Key": key } }),
        400,
        "invalid_value",
        "Idempotency-Key",
      );
    }
    expect(app.upstream.requests).toHaveLength(0);
  });
});
