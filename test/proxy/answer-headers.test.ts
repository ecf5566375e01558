import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FAKE_SPEECH } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

// An answer's status, body and the headers a client needs (its type, a binary answer's
// length, request ids, rate-limit state) reach the client as the channel sent them.
const CHANNEL_HEADERS = {
  "x-request-id": "req_0123456789",
  "x-ratelimit-remaining-requests": "42",
  "x-ratelimit-reset-tokens": "1s",
  "openai-processing-ms": "12",
};
let app: TestApp;
let client: OpenAI;

beforeAll(async () => {
  app = await startTestApp();
  client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
});
beforeEach(() => app.upstream.reset());
afterAll(() => app.close());

describe("a channel's answer", () => {
  it("keeps its status, type, request id and rate-limit headers (JSON)", async () => {
    app.upstream.behave("chat", {
      kind: "custom",
      respond(_req, res) {
        const body = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", choices: [] });
        res.writeHead(201, { ...CHANNEL_HEADERS, "content-type": "application/json" });
        res.end(body);
      },
    });
    const { response } = await client.chat.completions
      .create({ model: "gpt-4o-mini", messages: [] })
      .withResponse();
    expect(response.status).toBe(201);
    expect(response.headers.get("content-type")).toBe("application/json");
    for (const [name, value] of Object.entries(CHANNEL_HEADERS)) {
      // The channel's request id under a name of its own: X-Request-Id is the service's.
      const passed = name === "x-request-id" ? "x-upstream-request-id" : name;
      expect(response.headers.get(passed), name).toBe(value);
    }
    expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("keeps a binary answer's type and length, byte for byte", async () => {
    const { data, response } = await client.audio.speech
      .create({ model: "gpt-4o-mini", input: "hi", voice: "alloy" })
      .withResponse();
    expect(response.headers.get("content-type")).toBe("audio/mpeg");
    expect(response.headers.get("content-length")).toBe(String(FAKE_SPEECH.length));
    expect(Buffer.from(await data.arrayBuffer()).equals(FAKE_SPEECH)).toBe(true);
  });

  it("keeps that length when it masks the channel key in a binary answer", async () => {
    const audio = Buffer.concat([
      Buffer.alloc(100, 1),
      Buffer.from(UPSTREAM_KEY),
      Buffer.alloc(100, 2),
    ]);
    app.upstream.behave("speech", {
      kind: "custom",
      respond(_req, res) {
        res.writeHead(200, { "content-type": "audio/mpeg", "content-length": audio.length });
        res.write(audio.subarray(0, 110));
        res.end(audio.subarray(110));
      },
    });
    const response = await fetch(`${app.baseURL}/audio/speech`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", input: "hi", voice: "alloy" }),
    });
    const body = Buffer.from(await response.arrayBuffer());
    expect(response.headers.get("content-length")).toBe(String(audio.length));
    expect(body.length).toBe(audio.length);
    expect(body.includes(UPSTREAM_KEY)).toBe(false);
    expect(body.subarray(100, 100 + UPSTREAM_KEY.length).toString()).toBe(
      "*".repeat(UPSTREAM_KEY.length),
    );
  });
});
