import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";
import { expectError } from "./error-envelope.js";

let app: TestApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const authorized = (key: string) => ({
  authorization: `Bearer ${key}`,
  "content-type": "application/json",
});

describe("JSON nesting", () => {
  it("refuses a 20 MB body of nested arrays at once, while /healthz keeps answering", async () => {
    app = await startTestApp();
    const depth = 9 * 1024 * 1024;
    const nested = `{"model":"gpt-4o-mini","messages":${"[".repeat(depth)}${"]".repeat(depth)}}`;
    let slowest = 0;
    let done = false;
    const probe = (async () => {
      while (!done) {
        const started = performance.now();
        await (await fetch(`${app!.url}/healthz`)).arrayBuffer();
        slowest = Math.max(slowest, performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const response = await fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      headers: authorized(app.key),
      body: nested,
    });
    done = true;
    await probe;
    const error = await expectError(response, 400, "invalid_value");
    expect(error.message).toContain("deeper than");
    // JSON.parse alone spent seconds on such a body; the check before it takes milliseconds.
    expect(slowest).toBeLessThan(slow(2000));
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("refuses deep nesting in a task submission too", async () => {
    app = await startTestApp();
    const nested = `{"model":"gpt-image-1","prompt":"x","background":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    const error = await expectError(
      await fetch(`${app.baseURL}/images/tasks`, {
        method: "POST",
        headers: authorized(app.key),
        body: nested,
      }),
      400,
      "invalid_value",
    );
    expect(error.message).toContain("deeper than");
  });
});

describe("body limits per route", () => {
  it("takes 1 MiB for a task submission or an image generation, maxBodyBytes for chat", async () => {
    app = await startTestApp();
    const prompt = "x".repeat(1100 * 1024);
    for (const path of ["/images/tasks", "/images/generations", "/audio/speech"]) {
      await expectError(
        await fetch(`${app.baseURL}${path}`, {
          method: "POST",
          headers: authorized(app.key),
          body: JSON.stringify({ model: "gpt-image-1", prompt, input: prompt }),
        }),
        413,
        "request_too_large",
      );
    }
    const chat = await fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      headers: authorized(app.key),
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: prompt }] }),
    });
    expect(chat.status).toBe(200);
    await chat.arrayBuffer();
  });

  it("takes maxUploadBytes for a multipart form", async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", maxUploadBytes: 64 * 1024 } },
    });
    const form = new FormData();
    form.set("model", "gpt-4o-mini");
    form.set("file", new Blob([Buffer.alloc(128 * 1024)]), "a.mp3");
    await expectError(
      await fetch(`${app.baseURL}/audio/transcriptions`, {
        method: "POST",
        headers: { authorization: `Bearer ${app.key}` },
        body: form,
      }),
      413,
      "request_too_large",
    );
  });
});

describe("a body that never ends", () => {
  /** Sends headers and part of a body, then nothing; resolves what the service answers. */
  const trickle = (
    path: string,
    headers: Record<string, string>,
    part: string,
    base: string = app!.baseURL,
  ) =>
    new Promise<{ status: number; body: string; closed: boolean }>((resolve, reject) => {
      const req = request(`${base}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${app!.key}`, "content-length": "100000", ...headers },
      });
      req.on("response", (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: text,
            closed: res.headers.connection === "close",
          }),
        );
      });
      req.on("error", reject);
      req.write(part);
    });

  it("is cut after server.bodyTimeoutSec with 408 request_timeout, on JSON and form routes", async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", bodyTimeoutSec: 1 } },
    });
    const json = await trickle(
      "/chat/completions",
      { "content-type": "application/json" },
      '{"model":',
    );
    expect(json.status).toBe(408);
    expect(JSON.parse(json.body)).toMatchObject({ error: { code: "request_timeout" } });
    expect(json.closed).toBe(true);
    const boundary = "b0undary";
    const form = await trickle(
      "/audio/transcriptions",
      { "content-type": `multipart/form-data; boundary=${boundary}` },
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\n\r\nabc`,
    );
    expect(form.status).toBe(408);
    const task = await trickle(
      "/images/tasks",
      { "content-type": "application/json" },
      '{"model":',
    );
    expect(task.status).toBe(408);
    const mcp = await trickle(
      "/mcp",
      { "content-type": "application/json", accept: "application/json, text/event-stream" },
      '{"jsonrpc":"2.0",',
      app.url,
    );
    expect(mcp.status).toBe(408);
    expect(app.upstream.requests).toHaveLength(0);
  });
});

describe("values echoed in errors", () => {
  it("are shortened to at most 100 characters", async () => {
    app = await startTestApp();
    const long = "m".repeat(1024 * 1024);
    const model = await expectError(
      await fetch(`${app.baseURL}/chat/completions`, {
        method: "POST",
        headers: authorized(app.key),
        body: JSON.stringify({ model: long, messages: [] }),
      }),
      404,
      "model_not_found",
    );
    expect(model.message.length).toBeLessThan(200);
    const route = await expectError(
      await fetch(`${app.baseURL}/${"r".repeat(5000)}`, { headers: authorized(app.key) }),
      404,
      "not_found",
    );
    expect(route.message.length).toBeLessThan(150);
    const field = await expectError(
      await fetch(`${app.baseURL}/images/tasks`, {
        method: "POST",
        headers: authorized(app.key),
        body: JSON.stringify({ model: "gpt-image-1", prompt: "x", ["f".repeat(5000)]: 1 }),
      }),
      400,
      "invalid_value",
    );
    expect(field.message.length).toBeLessThan(200);
    expect(field.param?.length).toBeLessThanOrEqual(100);
    const response = await expectError(
      await fetch(`${app.baseURL}/responses/resp_${"x".repeat(150)}`, {
        headers: authorized(app.key),
      }),
      404,
      "response_not_found",
    );
    expect(response.message.length).toBeLessThan(150);
  });
});
