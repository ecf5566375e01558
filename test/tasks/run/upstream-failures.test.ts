import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type Behavior } from "../../support/fake-upstream.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { expectNoLeak, submitOk, upstreamPrompts, useApp, waitForStatus } from "../task-api.js";

const TINY_TEXT_B64 = Buffer.from("this is not an image").toString("base64");

interface FailureCase {
  name: string;
  behavior: Behavior;
  code: string;
  /** Text the task's error message must carry (the channel's own message, scrubbed). */
  message?: string | RegExp;
}

const cases: FailureCase[] = [
  {
    name: "a 400 content_policy_violation, with its message, scrubbed of the channel key",
    behavior: {
      kind: "status",
      status: 400,
      body: {
        error: {
          message: `Your request was rejected by the safety system (key ${UPSTREAM_KEY}).`,
          type: "invalid_request_error",
          param: null,
          code: "content_policy_violation",
        },
      },
    },
    code: "content_policy_violation",
    message: /^Your request was rejected by the safety system \(key .*\)\.$/,
  },
  {
    name: "a 500, as upstream_error with the channel's message",
    behavior: { kind: "status", status: 500 },
    code: "upstream_error",
    message: "fake upstream answered 500",
  },
  {
    name: "a 503 whose body is not an OpenAI error",
    behavior: { kind: "status", status: 503, body: "Service Unavailable" },
    code: "upstream_error",
    message: /503/,
  },
  {
    name: "an error that echoes the key in every field",
    behavior: {
      kind: "status",
      status: 401,
      body: {
        error: {
          message: `Incorrect API key provided: ${UPSTREAM_KEY}.`,
          type: `auth ${UPSTREAM_KEY}`,
          code: UPSTREAM_KEY,
        },
      },
    },
    code: expect.any(String) as unknown as string,
    message: /^Incorrect API key provided: /,
  },
  {
    name: "a 200 that is not JSON, as invalid_response",
    behavior: { kind: "garbage" },
    code: "invalid_response",
  },
  {
    name: "a 200 with no images, as invalid_response",
    behavior: { kind: "status", status: 200, body: { created: 1, data: [] } },
    code: "invalid_response",
  },
  {
    name: "a 200 whose image is not an image, as invalid_response",
    behavior: {
      kind: "status",
      status: 200,
      body: { created: 1, data: [{ b64_json: TINY_TEXT_B64 }] },
    },
    code: "invalid_response",
  },
  {
    // gpt-image models make PNG, JPEG or WebP; the MCP tools save nothing else.
    name: "a 200 whose image is a GIF, as invalid_response",
    behavior: {
      kind: "status",
      status: 200,
      body: {
        created: 1,
        data: [{ b64_json: Buffer.from("GIF89a\x01\x00\x01\x00").toString("base64") }],
      },
    },
    code: "invalid_response",
  },
  {
    // After the whole request went out: the channel may be running it, so no other one is.
    name: "a connection reset after the request, as invalid_response",
    behavior: { kind: "reset" },
    code: "invalid_response",
  },
];

describe("a channel failure fails the task with a clear error", () => {
  it.each(cases)("$name", async ({ behavior, code, message }) => {
    const app = await useApp();
    app.upstream.behave("images", behavior);
    const id = await submitOk(app, { prompt: "fails upstream" });

    const done = await waitForStatus(app, id, ["completed", "failed"]);

    expect(done.status).toBe(200);
    expect(done.body.status).toBe("failed");
    expect(done.headers.get("retry-after")).toBeNull();
    expect(done.body).not.toHaveProperty("data");
    expect(done.body.completed_at).toEqual(expect.any(Number));
    const error = done.body.error!;
    expect(Object.keys(error).sort()).toEqual(["code", "message", "type"]);
    expect(error.code).toEqual(code);
    expect(error.message.length).toBeGreaterThan(0);
    expect(error.type.length).toBeGreaterThan(0);
    if (message !== undefined) expect(error.message).toMatch(message);
    expectNoLeak(done.text);
    expect(app.upstream.requests).toHaveLength(1);
  });

  it("keeps serving after a failure: the next task completes", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "reset" });
    const failed = await submitOk(app, { prompt: "reset" });
    expect((await waitForStatus(app, failed, ["completed", "failed"])).body.status).toBe("failed");
    app.upstream.behave("images", { kind: "ok" });
    const ok = await submitOk(app, { prompt: "fine" });
    expect((await waitForStatus(app, ok, ["completed", "failed"])).body.status).toBe("completed");
  });
});

describe("several channels", () => {
  async function twoChannels() {
    const first = await startFakeUpstream({ name: "first" });
    const second = await startFakeUpstream({ name: "second" });
    onTestFinished(async () => {
      await Promise.all([first.close(), second.close()]);
    });
    const channel = (name: string, baseUrl: string, priority: number) => ({
      name,
      baseUrl,
      apiKey: UPSTREAM_KEY,
      models: ["gpt-image-1"],
      priority,
    });
    const app = await useApp({
      upstream: first,
      config: {
        channels: [channel("first", first.baseUrl, 0), channel("second", second.baseUrl, 1)],
      },
    });
    return { app, first, second };
  }

  it("moves on to the next channel when the first answers 5xx", async () => {
    const { app, first, second } = await twoChannels();
    first.behave("images", { kind: "status", status: 502 });
    const id = await submitOk(app, { prompt: "fail over" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(upstreamPrompts(first)).toEqual(["fail over"]);
    expect(upstreamPrompts(second)).toEqual(["fail over"]);
  });

  it("moves on to the next channel when the first cannot be reached", async () => {
    const { app, first, second } = await twoChannels();
    await first.close();
    const id = await submitOk(app, { prompt: "first is down" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(upstreamPrompts(second)).toEqual(["first is down"]);
  });

  it("does not retry a 4xx elsewhere, and fails with the last channel's error when all fail", async () => {
    const { app, first, second } = await twoChannels();
    first.behave("images", { kind: "status", status: 400 });
    const refused = await submitOk(app, { prompt: "bad request" });
    expect((await waitForStatus(app, refused, ["completed", "failed"])).body.status).toBe("failed");
    expect(upstreamPrompts(second)).toEqual([]);

    first.behave("images", { kind: "status", status: 500 });
    second.behave("images", { kind: "status", status: 503 });
    const id = await submitOk(app, { prompt: "all down" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status).toBe("failed");
    expect(done.body.error?.message).toContain("503");
    expectNoLeak(done.text);
  });
});

describe("a long generation", () => {
  it("waits on a silent channel up to the task's own timeout, not the synchronous route's", async () => {
    // The channel says nothing for 2 s, past its 1 s image timeout; the task may take 30 s.
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const app = await useApp({
      upstream,
      imageTasks: { timeoutSec: 30 },
      config: {
        channels: [
          {
            name: "fake",
            baseUrl: upstream.baseUrl,
            apiKey: UPSTREAM_KEY,
            models: ["gpt-image-1"],
            imageTimeoutSec: 1,
          },
        ],
      },
    });
    app.upstream.behave("images", { kind: "ok", delayMs: 2_000 });
    const id = await submitOk(app, { prompt: "slow but fine" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(app.upstream.requests).toHaveLength(1);
  });
});
