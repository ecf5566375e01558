import { gzipSync } from "node:zlib";
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { expectError, sdkError } from "./error-envelope.js";

const MAX_BODY_BYTES = 2048;

let app: TestApp;

beforeEach(async () => {
  app = await startTestApp({
    config: { server: { port: 0, host: "127.0.0.1", maxBodyBytes: MAX_BODY_BYTES } },
  });
});
afterEach(() => app.close());

function request(
  path: string,
  init: {
    method?: string;
    body?: string | Uint8Array;
    headers?: Record<string, string>;
    auth?: boolean;
  } = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.auth !== false) headers.authorization = `Bearer ${app.key}`;
  if (init.body !== undefined) headers["content-type"] ??= "application/json";
  return fetch(`${app.url}${path}`, { method: init.method ?? "GET", headers, body: init.body });
}

const chat = (content: string) =>
  JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content }] });

describe("the error envelope", () => {
  it("answers an unknown route under /v1 with 404 not_found", async () => {
    const error = await expectError(await request("/v1/no-such-route"), 404, "not_found");
    // A client's bytes are never echoed back: not even the path it asked for.
    expect(error.message).not.toContain("no-such-route");
    await expectError(await request("/v1/chat/completions", { method: "GET" }), 404, "not_found");
    await expectError(await request("/v1/models", { method: "DELETE" }), 404, "not_found");
  });

  it("answers an unknown route outside /v1 with 404 not_found, also without a key", async () => {
    await expectError(await request("/no-such-page", { auth: false }), 404, "not_found");
    await expectError(await request("/", { auth: false }), 404, "not_found");
  });

  it("answers 400 invalid_json for a body that is not JSON, on each JSON route", async () => {
    for (const path of ["/v1/chat/completions", "/v1/images/generations"]) {
      await expectError(
        await request(path, { method: "POST", body: "{not json" }),
        400,
        "invalid_json",
      );
    }
    await expectError(
      await request("/v1/chat/completions", {
        method: "POST",
        body: "model=gpt-4o-mini",
        headers: { "content-type": "text/plain" },
      }),
      400,
      "invalid_json",
    );
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("answers 413 request_too_large for a body over server.maxBodyBytes", async () => {
    const small = await request("/v1/chat/completions", { method: "POST", body: chat("hi") });
    expect(small.status).toBe(200);
    await small.arrayBuffer();

    const big = chat("x".repeat(MAX_BODY_BYTES * 2));
    await expectError(
      await request("/v1/chat/completions", { method: "POST", body: big }),
      413,
      "request_too_large",
    );
    await expectError(
      await request("/v1/images/generations", {
        method: "POST",
        body: JSON.stringify({ model: "gpt-image-1", prompt: "x".repeat(MAX_BODY_BYTES * 2) }),
      }),
      413,
      "request_too_large",
    );
    expect(app.upstream.requests).toHaveLength(1);

    const error = await sdkError(
      new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 }).chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "x".repeat(MAX_BODY_BYTES * 2) }],
      }),
    );
    expect(error.status).toBe(413);
    expect(error.code).toBe("request_too_large");
  });

  it("answers 400 missing_required_parameter with param model on both passthrough routes", async () => {
    await expectError(
      await request("/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      }),
      400,
      "missing_required_parameter",
      "model",
    );
    await expectError(
      await request("/v1/images/generations", {
        method: "POST",
        body: JSON.stringify({ prompt: "a cat" }),
      }),
      400,
      "missing_required_parameter",
      "model",
    );
  });

  it("answers 400 for an empty body instead of passing it on", async () => {
    await expectError(
      await request("/v1/chat/completions", { method: "POST", body: "" }),
      400,
      "invalid_json",
    );
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("answers a body whose gzip encoding is corrupt with a 4xx envelope, not a 500", async () => {
    const response = await request("/v1/chat/completions", {
      method: "POST",
      body: Buffer.from("definitely not gzip"),
      headers: { "content-encoding": "gzip" },
    });
    await expectError(response, 400, "invalid_value");

    const good = await request("/v1/chat/completions", {
      method: "POST",
      body: gzipSync(chat("hi")),
      headers: { "content-encoding": "gzip" },
    });
    expect(good.status).toBe(200);
    await good.arrayBuffer();
  });

  it("answers a path with a broken percent-escape with a 4xx envelope, not a 500", async () => {
    await expectError(await request("/v1/models/%E0%A4%A"), 400, "invalid_value");
  });

  it("checks the key before reading the body", async () => {
    await expectError(
      await request("/v1/chat/completions", { method: "POST", body: "{not json", auth: false }),
      401,
      "missing_api_key",
    );
  });
});
