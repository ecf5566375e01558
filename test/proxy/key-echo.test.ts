import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { keySpellings, startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

// Security review, Medium: a channel that echoes its key (in an error, a success body, a
// stream or a header) must not hand it to the client, in any spelling.
const CHANNEL_KEY = "sk-proj/Echo+Key=0123456789abcdefXYZ";
const SPELLINGS = keySpellings(CHANNEL_KEY);

let upstream: FakeUpstream;
let app: TestApp;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  app = await startTestApp({
    upstream,
    config: {
      channels: [
        {
          name: "echo",
          baseUrl: upstream.baseUrl,
          apiKey: CHANNEL_KEY,
          models: ["gpt-4o-mini", "gpt-image-1"],
        },
      ] as ConfigInput["channels"],
    },
  });
});
afterEach(() => upstream.reset());
afterAll(async () => {
  await app.close();
  await upstream.close();
});

const chat = (stream = false) =>
  fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [], stream }),
  });

/** Neither the body nor any header holds a spelling of the key (or its distinctive middle). */
function expectNoKey(response: Response, text: string): void {
  const everything = [text, ...[...response.headers].map(([name, value]) => `${name}: ${value}`)];
  for (const spelling of SPELLINGS) {
    for (const part of everything) expect(part).not.toContain(spelling);
  }
  for (const part of everything) expect(part).not.toContain("Echo+Key");
}

describe("a channel that echoes its key", () => {
  it("in a JSON answer and its headers: scrubbed, and only allowed headers pass", async () => {
    upstream.behave("chat", { kind: "echo-key" });
    const response = await chat();
    const text = await response.text();
    expect(response.status).toBe(200);
    expectNoKey(response, text);
    const body = JSON.parse(text) as { echo: string[] };
    expect(body.echo).toEqual(SPELLINGS.map(() => "[redacted]"));
    expect(response.headers.get("x-upstream-request-id")).toBe("req_[redacted]");
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("[redacted]");
    for (const dropped of [
      "x-echo-authorization",
      "openai-organization",
      "set-cookie",
      "x-fake-upstream",
    ]) {
      expect(response.headers.get(dropped), dropped).toBeNull();
    }
  });

  it("in a stream, even split across chunks", async () => {
    upstream.behave("chat", { kind: "echo-key" });
    const response = await chat(true);
    const text = await response.text();
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expectNoKey(response, text);
    expect(text.match(/\[redacted\]/g)).toHaveLength(SPELLINGS.length);
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
  });

  it.each(["gzip", "br", "deflate"] as const)(
    "in a %s-compressed error body: scrubbed, status and code kept",
    async (encoding) => {
      upstream.behave("chat", { kind: "echo-key", status: 401, encoding });
      const response = await chat();
      const text = await response.text();
      expect(response.status).toBe(401);
      expect(response.headers.get("content-encoding")).toBeNull();
      expectNoKey(response, text);
      expect((JSON.parse(text) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    },
  );

  it.each(["gzip", "br"] as const)(
    "in a %s-compressed success body: decoded and scrubbed",
    async (encoding) => {
      upstream.behave("chat", { kind: "echo-key", encoding });
      const response = await chat();
      const text = await response.text();
      expect(response.status).toBe(200);
      expectNoKey(response, text);
      expect(JSON.parse(text)).toMatchObject({ id: "echo" });
    },
  );

  it("asks the channel for an identity encoding", async () => {
    const seen = upstream.nextRequest("chat");
    await (await chat()).arrayBuffer();
    expect((await seen).headers["accept-encoding"]).toBe("identity");
  });
});
