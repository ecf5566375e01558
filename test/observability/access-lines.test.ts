import { setTimeout as sleep } from "node:timers/promises";
import OpenAI, { toFile } from "openai";
import { pino } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { accessLineOf } from "../support/access-line-of.js";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";

/*
 * One access line per HTTP request, as an operator reads them with the
 * service's own logger: every kind of request, through real HTTP with the
 * openai SDK as the client.
 */

type Line = Record<string, unknown>;

let app: TestApp;
let client: OpenAI;
const lines: Line[] = [];

/** The access lines written so far. */
const requests = () => lines.filter((line) => line.msg === "request");

/** The access line of the request whose `X-Request-Id` was `id`, once written. */
const lineOf = (id: string): Promise<Line> => accessLineOf(lines, id);

const withId = (id: string) => ({ headers: { "x-request-id": id } });

beforeAll(async () => {
  const logger = pino(
    { level: "debug" },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  app = await startTestApp({ logger, imageTasks: { maxQueued: 1, maxConcurrent: 1 } });
  client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
});
beforeEach(() => app.upstream.reset());
afterAll(() => app.close());

describe("access lines", () => {
  it("a plain chat: the route's template, the caller, the model, the channel and what it answered", async () => {
    const { response } = await client.chat.completions
      .create(
        { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
        withId("chat-1"),
      )
      .withResponse();
    expect(response.headers.get("x-request-id")).toBe("chat-1");
    const line = await lineOf("chat-1");
    expect(line).toMatchObject({
      level: 30,
      msg: "request",
      method: "POST",
      route: "/v1/chat/completions",
      status: 200,
      key_name: expect.stringMatching(/^key_[0-9a-f]{12}$/),
      group: "default",
      model: "gpt-4o-mini",
      channel: "fake",
      upstream_status: 200,
      tries: 1,
    });
    expect(line.duration_ms).toEqual(expect.any(Number));
    expect(line.bytes_in).toBeGreaterThan(50);
    expect(line.bytes_out).toBeGreaterThan(50);
    expect(line).not.toHaveProperty("aborted");
    expect(line).not.toHaveProperty("error_code");
    // The channel got the same id.
    expect(app.upstream.requests.at(-1)?.headers["x-request-id"]).toBe("chat-1");
  });

  it("a stream, written when it ended", async () => {
    const stream = await client.chat.completions.create(
      { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true },
      withId("stream-1"),
    );
    for await (const _chunk of stream) void _chunk;
    expect(await lineOf("stream-1")).toMatchObject({
      route: "/v1/chat/completions",
      status: 200,
      channel: "fake",
      upstream_status: 200,
    });
  });

  it("a form (an image edit passed through)", async () => {
    await client.images.edit(
      {
        model: "gpt-image-1",
        prompt: "a hat",
        image: await toFile(Buffer.from("\x89PNG fake"), "in.png", { type: "image/png" }),
      },
      withId("form-1"),
    );
    expect(await lineOf("form-1")).toMatchObject({
      route: "/v1/images/edits",
      status: 200,
      model: "gpt-image-1",
      channel: "fake",
    });
  });

  it("the task routes, by template: submit, poll, list, cancel", async () => {
    app.upstream.behave("images", { kind: "hang" });
    const task = await client.post<{ id: string }>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "a lighthouse" },
      ...withId("submit-1"),
    });
    await client.get(`/images/tasks/${task.id}`, withId("poll-1"));
    await client.get("/images/tasks", withId("list-1"));
    await client.post(`/images/tasks/${task.id}/cancel`, withId("cancel-1"));
    expect(await lineOf("submit-1")).toMatchObject({
      route: "/v1/images/tasks",
      status: 202,
      model: "gpt-image-1",
      task_id: task.id,
    });
    expect(await lineOf("poll-1")).toMatchObject({
      route: "/v1/images/tasks/:taskId",
      status: 200,
      model: "gpt-image-1",
      task_id: task.id,
    });
    expect(await lineOf("list-1")).toMatchObject({ route: "/v1/images/tasks", status: 200 });
    expect((await lineOf("list-1")).task_id).toBeUndefined();
    expect(await lineOf("cancel-1")).toMatchObject({
      route: "/v1/images/tasks/:taskId/cancel",
      status: 200,
      task_id: task.id,
    });
    // The task's lines name the request that caused each: its submission, then its cancel.
    const taskLines = lines.filter((line) => line.task_id === task.id && line.msg !== "request");
    expect(taskLines.find((line) => line.msg === "task.submitted")).toMatchObject({
      req_id: "submit-1",
    });
    expect(taskLines.find((line) => line.msg === "task.cancelled")).toMatchObject({
      req_id: "cancel-1",
    });
    // Never a raw task id in a route.
    expect(requests().some((line) => String(line.route).includes("task_"))).toBe(false);
  });

  it("the client's address and user agent, and a channel's own error code", async () => {
    const agent = `tester/${"x".repeat(300)}`;
    const answer = await fetch(`${app.baseURL}/models`, {
      headers: { authorization: `Bearer ${app.key}`, "user-agent": agent, "x-request-id": "ua-1" },
    });
    expect(answer.status).toBe(200);
    const line = await lineOf("ua-1");
    expect(line.client_ip).toBe("127.0.0.1");
    expect(line.user_agent).toBe(agent.slice(0, 200));

    app.upstream.behave("chat", {
      kind: "status",
      status: 500,
      body: { error: { message: "it broke", type: "server_error", code: "boom" } },
    });
    await client.chat.completions
      .create(
        { model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }] },
        withId("boom-1"),
      )
      .catch(() => undefined);
    expect(await lineOf("boom-1")).toMatchObject({
      status: 500,
      upstream_status: 500,
      error_code: "boom",
    });
  });

  it("refusals carry their error code: 401, 404, 429", async () => {
    const anonymous = await fetch(`${app.baseURL}/models`, withId("401-1"));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("x-request-id")).toBe("401-1");
    expect(await lineOf("401-1")).toMatchObject({ status: 401, error_code: "missing_api_key" });

    const unknown = await fetch(`${app.baseURL}/nowhere`, {
      headers: { authorization: `Bearer ${app.key}`, "x-request-id": "404-1" },
    });
    expect(unknown.status).toBe(404);
    expect(await lineOf("404-1")).toMatchObject({
      status: 404,
      error_code: "not_found",
      key_name: expect.any(String),
    });

    // maxQueued 1: with the channel hanging, one task runs, one waits, the next is refused.
    app.upstream.behave("images", { kind: "hang" });
    const other = new OpenAI({ apiKey: TEST_KEYS.vip, baseURL: app.baseURL, maxRetries: 0 });
    const submit = (id: string) =>
      other.post("/images/tasks", { body: { model: "gpt-image-1", prompt: "x" }, ...withId(id) });
    await submit("429-a").catch(() => undefined);
    await submit("429-b").catch(() => undefined);
    const refused = await submit("429-c").catch((err: unknown) => err);
    expect((refused as { status?: number }).status).toBe(429);
    expect(await lineOf("429-c")).toMatchObject({ status: 429, error_code: "queue_full" });
  });

  it("a client that leaves first: aborted, and the status it never got is 499", async () => {
    app.upstream.behave("chat", { kind: "hang" });
    const controller = new AbortController();
    const pending = client.chat.completions
      .create(
        { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
        { ...withId("abort-1"), signal: controller.signal },
      )
      .catch(() => undefined);
    await sleep(200);
    controller.abort();
    await pending;
    expect(await lineOf("abort-1")).toMatchObject({
      status: 499,
      aborted: true,
      route: "/v1/chat/completions",
    });
  });

  it("keeps a sane X-Request-Id and replaces any other, on every answer", async () => {
    const insane = "no spaces or newlines allowed\u0007";
    const long = "x".repeat(129);
    for (const sent of [insane, long]) {
      const response = await fetch(`${app.url}/healthz`, {
        headers: { "x-request-id": encodeURIComponent(sent) === sent ? sent : "a b" },
      });
      const id = response.headers.get("x-request-id");
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
    }
    const kept = await fetch(`${app.url}/healthz`, { headers: { "x-request-id": "ok.id:1-2_3" } });
    expect(kept.headers.get("x-request-id")).toBe("ok.id:1-2_3");
  });

  it("logs health and metrics probes at debug only", async () => {
    await fetch(`${app.url}/healthz`, withId("probe-1"));
    expect(await lineOf("probe-1")).toMatchObject({ level: 20, route: "/healthz" });
  });

  it("a browser's CORS preflight: its own route, 204, no caller", async () => {
    const response = await fetch(`${app.baseURL}/chat/completions`, {
      method: "OPTIONS",
      headers: {
        "x-request-id": "preflight-1",
        origin: "https://app.example.com",
        "access-control-request-method": "POST",
      },
    });
    expect(response.status).toBe(204);
    const line = await lineOf("preflight-1");
    expect(line).toMatchObject({ level: 30, method: "OPTIONS", route: "preflight", status: 204 });
    expect(line.key_name).toBeUndefined();
  });
});
