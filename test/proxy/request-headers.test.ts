import { request } from "node:http";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

let app: TestApp;
beforeEach(async () => {
  app = await startTestApp();
});
afterEach(() => app.close());

const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });

/** A raw request, so headers the SDK never sends (Expect, chunked bodies) can be tried. */
function send(
  headers: Record<string, string>,
  payload: Buffer | string,
  options: { chunked?: boolean; waitForContinue?: boolean } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${app.baseURL}/chat/completions`,
      { method: "POST", headers: { authorization: `Bearer ${app.key}`, ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("error", reject);
    if (options.waitForContinue) {
      req.on("continue", () => req.end(payload));
      return;
    }
    if (options.chunked) {
      const half = Math.floor(payload.length / 2);
      req.write(payload.slice(0, half));
      setTimeout(() => req.end(payload.slice(half)), 20);
      return;
    }
    req.end(payload);
  });
}

describe("request headers on the way to the channel", () => {
  it("with Expect: 100-continue (curl's default for large bodies) swaps the key and sends the body", async () => {
    const seen = app.upstream.nextRequest("chat");
    const answer = await send(
      { expect: "100-continue", "content-type": "application/json" },
      body,
      { waitForContinue: true },
    );
    expect(answer.status).toBe(200);
    const upstream = await seen;
    expect(upstream.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(upstream.headers.expect).toBeUndefined();
    expect(upstream.body).toEqual(JSON.parse(body));
  });

  it("sends a chunked client body on with a Content-Length and no Transfer-Encoding", async () => {
    const seen = app.upstream.nextRequest("chat");
    const answer = await send({ "transfer-encoding": "chunked" }, body, { chunked: true });
    expect(answer.status).toBe(200);
    const upstream = await seen;
    expect(upstream.headers["transfer-encoding"]).toBeUndefined();
    expect(upstream.headers["content-length"]).toBe(String(Buffer.byteLength(body)));
    expect(upstream.body).toEqual(JSON.parse(body));
  });

  it("sends a gzip-encoded client body on decoded, without its Content-Encoding", async () => {
    const seen = app.upstream.nextRequest("chat");
    const answer = await send({ "content-encoding": "gzip" }, gzipSync(body));
    expect(answer.status).toBe(200);
    const upstream = await seen;
    expect(upstream.headers["content-encoding"]).toBeUndefined();
    expect(upstream.body).toEqual(JSON.parse(body));
  });

  it("never forwards Proxy-Authorization", async () => {
    const seen = app.upstream.nextRequest("chat");
    await send({ "proxy-authorization": "Basic c2VjcmV0OnNlY3JldA==" }, body);
    expect((await seen).headers["proxy-authorization"]).toBeUndefined();
  });
});

describe("the header allow-list on the way to the channel", () => {
  it("forwards only headers OpenAI-compatible APIs read, and the query minus credentials and model", async () => {
    const seen = app.upstream.nextRequest("chat");
    const response = await fetch(
      `${app.baseURL}/chat/completions?model=gpt-4o&api-version=2025-01-01&api-key=${app.key}&KEY=${app.key}&access_token=${app.key}&x=a%20b`,
      {
        method: "POST",
        headers: {
          Authorization: `Bearer ${app.key}`,
          "Content-Type": "application/json",
          "OpenAI-Organization": "org-someone-else",
          "OpenAI-Project": "proj_someone_else",
          "X-Goog-Api-Key": app.key,
          "X-API-KEY": app.key,
          "Api-Key": app.key,
          Cookie: `session=${app.key}`,
          "X-Forwarded-For": "10.0.0.1",
          "X-Forwarded-Host": "evil.example",
          "X-Forwarded-Proto": "https",
          Forwarded: "for=10.0.0.1",
          "X-Real-IP": "10.0.0.1",
          "OpenAI-Beta": "responses=v1",
          "Idempotency-Key": "idem-1",
          "X-Client-Request-Id": "client-1",
          "User-Agent": "test-agent/1",
          Accept: "application/json",
        },
        body,
      },
    );
    expect(response.status).toBe(200);
    const upstream = await seen;
    expect(upstream.path).toBe("/v1/chat/completions?api-version=2025-01-01&x=a%20b");
    expect(JSON.stringify(upstream.headers)).not.toContain(app.key);
    for (const dropped of [
      "openai-organization",
      "openai-project",
      "x-goog-api-key",
      "x-api-key",
      "api-key",
      "cookie",
      "x-forwarded-for",
      "x-forwarded-host",
      "x-forwarded-proto",
      "forwarded",
      "x-real-ip",
    ]) {
      expect(upstream.headers[dropped], dropped).toBeUndefined();
    }
    expect(upstream.headers).toMatchObject({
      authorization: `Bearer ${UPSTREAM_KEY}`,
      "openai-beta": "responses=v1",
      "idempotency-key": "idem-1",
      "x-client-request-id": "client-1",
      "user-agent": "test-agent/1",
      accept: "application/json",
    });
  });

  it("strips the client's credentials in every casing", async () => {
    const seen = app.upstream.nextRequest("chat");
    await send(
      { AUTHORIZATION: `bearer ${app.key}`, "aPi-KeY": app.key, "X-Api-Key": app.key },
      body,
    );
    const upstream = await seen;
    expect(upstream.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(JSON.stringify(upstream.headers)).not.toContain(app.key);
  });

  it("never forwards a header the client's Connection header names", async () => {
    const seen = app.upstream.nextRequest("chat");
    await send({ connection: "keep-alive, OpenAI-Beta", "openai-beta": "assistants=v2" }, body);
    expect((await seen).headers["openai-beta"]).toBeUndefined();
  });
});
