import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import type { ChannelConfig, ConfigInput } from "../../src/config/config-schema.js";
import { expectError, sdkError } from "../http/error-envelope.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const messages = [{ role: "user" as const, content: "hi" }];
const MODELS = ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"];

async function upstream(name: string): Promise<FakeUpstream> {
  const fake = await startFakeUpstream({ name });
  cleanups.push(() => fake.close());
  return fake;
}

/** A fake that is closed again: its port refuses connections. */
async function refusingBaseUrl(): Promise<string> {
  const fake = await startFakeUpstream({ name: "gone" });
  await fake.close();
  return fake.baseUrl;
}

type ChannelInput = Partial<ChannelConfig> & { name: string; baseUrl: string };

async function appWith(channels: ChannelInput[]): Promise<TestApp> {
  const fallback = await upstream("unused");
  const app = await startTestApp({
    upstream: fallback,
    config: {
      channels: channels.map((channel) => ({
        apiKey: UPSTREAM_KEY,
        models: MODELS,
        ...channel,
      })) as ConfigInput["channels"],
    },
  });
  cleanups.push(() => app.close());
  return app;
}

function clientOf(app: TestApp): OpenAI {
  return new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
}

function postChat(app: TestApp, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}

/** A bare channel answering every request with `handler`: for answers the fake cannot give. */
async function rawChannel(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.once("end", () => handler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("failover between channels", () => {
  it("skips a channel answering 503 for the next priority", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    first.behave("chat", { kind: "status", status: 503 });
    const app = await appWith([
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
    ]);
    const completion = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from second!");
    expect(first.requests.map((request) => request.path)).toEqual(["/v1/chat/completions"]);
    expect(second.requests).toHaveLength(1);
    expect(second.requests[0]?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(second.requests[0]?.body).toEqual({ model: "gpt-4o-mini", messages });
  });

  it("tries the lowest priority first while it answers", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    const app = await appWith([
      { name: "second", baseUrl: second.baseUrl, priority: 5 },
      { name: "first", baseUrl: first.baseUrl, priority: -1 },
    ]);
    for (let i = 0; i < 5; i++) {
      const completion = await clientOf(app).chat.completions.create({
        model: "gpt-4o-mini",
        messages,
      });
      expect(completion.choices[0]?.message.content).toBe("Hello from first!");
    }
    expect(second.requests).toHaveLength(0);
  });

  it("skips a channel that refuses the connection, also for a stream", async () => {
    const second = await upstream("second");
    const app = await appWith([
      { name: "first", baseUrl: await refusingBaseUrl(), priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const completion = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from second!");

    const stream = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("Hello from second!");
  });

  it("sends a multipart form to the next channel when the first cannot be connected to", async () => {
    const second = await upstream("second");
    const app = await appWith([
      { name: "first", baseUrl: await refusingBaseUrl(), priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const form = new FormData();
    form.set("file", new Blob([Buffer.alloc(512 * 1024, 1)]), "a.mp3");
    form.set("model", "gpt-4o-mini");
    const response = await fetch(`${app.baseURL}/audio/transcriptions`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}` },
      body: form,
    });
    expect(await response.json()).toEqual({
      text: "transcribed by second",
      usage: { type: "tokens", input_tokens: 11, output_tokens: 3, total_tokens: 14 },
    });
    expect(second.requests[0]?.form?.files.file?.size).toBe(512 * 1024);
  });

  it("skips a streaming channel answering 502 before any byte", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    first.behave("chat", { kind: "status", status: 502 });
    const app = await appWith([
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const stream = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("Hello from second!");
  });

  it("passes the last channel's 5xx on as it is, status and body", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    first.behave("chat", { kind: "status", status: 503 });
    const body = {
      error: {
        message: "The engine is overloaded",
        type: "server_error",
        param: null,
        code: "overloaded",
      },
    };
    second.behave("chat", { kind: "status", status: 500, body });
    const app = await appWith([
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    expect(response.status).toBe(500);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await response.json()).toEqual(body);
    expect(first.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(1);

    const error = await sdkError(
      clientOf(app).chat.completions.create({ model: "gpt-4o-mini", messages }),
    );
    expect(error.status).toBe(500);
    expect(error.code).toBe("overloaded");
  });

  it("passes a channel's 400 on as it is, without trying another channel", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    const body = {
      error: {
        message: "Invalid value for 'temperature': must be <= 2.",
        type: "invalid_request_error",
        param: "temperature",
        code: "invalid_value",
      },
    };
    first.behave("chat", { kind: "status", status: 400, body });
    const app = await appWith([
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages, temperature: 9 });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(body);
    expect(second.requests).toHaveLength(0);

    const error = await sdkError(
      clientOf(app).chat.completions.create({ model: "gpt-4o-mini", messages, temperature: 9 }),
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.param).toBe("temperature");
  });

  it("answers 502 upstream_unavailable when no channel can be reached", async () => {
    const app = await appWith([
      { name: "first", baseUrl: await refusingBaseUrl(), priority: 0 },
      { name: "second", baseUrl: await refusingBaseUrl(), priority: 1 },
    ]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "upstream_unavailable",
    );
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages, stream: true }),
      502,
      "upstream_unavailable",
    );
    const error = await sdkError(
      clientOf(app).chat.completions.create({ model: "gpt-4o-mini", messages }),
    );
    expect(error.status).toBe(502);
    expect(error.code).toBe("upstream_unavailable");
  });

  it("answers 502 invalid_response when the only channel resets the connection after the request", async () => {
    const only = await upstream("only");
    only.behave("chat", { kind: "reset" });
    const app = await appWith([{ name: "only", baseUrl: only.baseUrl }]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "invalid_response",
    );
    expect(only.requests).toHaveLength(1);
  });

  it("answers 504 upstream_timeout when the channel hangs past its timeoutSec", async () => {
    const slow = await upstream("slow");
    const spare = await upstream("spare");
    slow.behave("chat", { kind: "hang" });
    const app = await appWith([
      { name: "slow", baseUrl: slow.baseUrl, timeoutSec: 1, priority: 0 },
      { name: "spare", baseUrl: spare.baseUrl, priority: 1 },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    await expectError(response, 504, "upstream_timeout");
    // The channel may still be working on it: not retried elsewhere, and the hung call is cut.
    expect(spare.requests).toHaveLength(0);
    await until(() => slow.aborted >= 1);
  });

  it("cuts a stream whose channel goes silent past timeoutSec, so it never looks complete", async () => {
    const slow = await upstream("slow");
    slow.holdStreams();
    const app = await appWith([{ name: "slow", baseUrl: slow.baseUrl, timeoutSec: 1 }]);
    const stream = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    const received: string[] = [];
    const consume = async () => {
      for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? "");
    };
    await expect(consume()).rejects.toThrow();
    expect(received.join("")).toBe("Hello ");
    await until(() => slow.aborted >= 1);
  });

  it("aborts a hung upstream call when the client goes away", async () => {
    const only = await upstream("only");
    only.behave("chat", { kind: "hang" });
    const app = await appWith([{ name: "only", baseUrl: only.baseUrl }]);
    const controller = new AbortController();
    const arrived = only.nextRequest("chat");
    const call = postChat(app, { model: "gpt-4o-mini", messages }, controller.signal);
    await arrived;
    controller.abort();
    await expect(call).rejects.toThrow();
    await until(() => only.aborted >= 1);
  });

  it("spreads requests over the channels of one priority by weight", async () => {
    const left = await upstream("left");
    const right = await upstream("right");
    const app = await appWith([
      { name: "left", baseUrl: left.baseUrl, weight: 1 },
      { name: "right", baseUrl: right.baseUrl, weight: 1 },
    ]);
    const client = clientOf(app);
    for (let batch = 0; batch < 6; batch++) {
      await Promise.all(
        Array.from({ length: 10 }, () =>
          client.chat.completions.create({ model: "gpt-4o-mini", messages }),
        ),
      );
    }
    expect(left.requests.length + right.requests.length).toBe(60);
    expect(left.requests.length).toBeGreaterThan(0);
    expect(right.requests.length).toBeGreaterThan(0);
  });

  it("keeps a lower priority idle while a higher one answers, whatever its weight", async () => {
    const main = await upstream("main");
    const backup = await upstream("backup");
    const app = await appWith([
      { name: "main", baseUrl: main.baseUrl, priority: 0, weight: 1 },
      { name: "backup", baseUrl: backup.baseUrl, priority: 1, weight: 100 },
    ]);
    const client = clientOf(app);
    await Promise.all(
      Array.from({ length: 10 }, () =>
        client.chat.completions.create({ model: "gpt-4o-mini", messages }),
      ),
    );
    expect(main.requests).toHaveLength(10);
    expect(backup.requests).toHaveLength(0);
  });

  it("routes by model to the channel that serves it", async () => {
    const chat = await upstream("chat");
    const images = await upstream("images");
    const app = await appWith([
      { name: "chat", baseUrl: chat.baseUrl, models: ["gpt-4o-mini"] },
      { name: "images", baseUrl: images.baseUrl, models: ["gpt-image-1"] },
    ]);
    const completion = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from chat!");
    await clientOf(app).images.generate({ model: "gpt-image-1", prompt: "a cat" });
    expect(images.requests.map((request) => request.path)).toEqual(["/v1/images/generations"]);
    expect(chat.requests.map((request) => request.path)).toEqual(["/v1/chat/completions"]);
  });
});

describe("channel error bodies", () => {
  const html = (status: number) => (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!DOCTYPE html><html><body><h1>Error ${status}</h1><p>cloudflare</p></body></html>`);
  };

  it("turns a channel's HTML 5xx page into a 502 upstream_unavailable envelope", async () => {
    const app = await appWith([{ name: "cdn", baseUrl: await rawChannel(html(502)) }]);
    const error = await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "upstream_unavailable",
    );
    expect(error.message).toContain("502");
  });

  it("turns a CDN's HTML 524 timeout page into a 504 upstream_timeout envelope", async () => {
    const app = await appWith([{ name: "cdn", baseUrl: await rawChannel(html(524)) }]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages, stream: true }),
      504,
      "upstream_timeout",
    );
  });

  it("keeps a channel's HTML 429 a 429, with its Retry-After, for the SDK to back off", async () => {
    const app = await appWith([
      {
        name: "cdn",
        baseUrl: await rawChannel((_req, res) => {
          res.writeHead(429, { "content-type": "text/html", "retry-after": "7" });
          res.end("<html><body>Too Many Requests</body></html>");
        }),
      },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    expect(response.headers.get("retry-after")).toBe("7");
    await expectError(response, 429, "upstream_rate_limited");
  });

  it("turns a channel's non-OpenAI 4xx body into a 502 upstream_unavailable envelope", async () => {
    const app = await appWith([
      {
        name: "wrong-path",
        baseUrl: await rawChannel((_req, res) => {
          res.writeHead(404, { "content-type": "text/plain" });
          res.end("404 page not found");
        }),
      },
    ]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "upstream_unavailable",
    );
  });

  it("removes the channel's key from an error body that echoes it, keeping status and code", async () => {
    const only = await upstream("only");
    only.behave("chat", {
      kind: "status",
      status: 401,
      body: {
        error: {
          message: `Incorrect API key provided: ${UPSTREAM_KEY}.`,
          type: "invalid_request_error",
          param: null,
          code: "invalid_api_key",
        },
      },
    });
    const app = await appWith([{ name: "only", baseUrl: only.baseUrl }]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    const error = await expectError(response, 401, "invalid_api_key");
    expect(error.message).toMatch(/^Incorrect API key provided: /);
  });

  it("removes the key from a gzip-compressed error body too", async () => {
    const body = JSON.stringify({
      error: { message: `bad key ${UPSTREAM_KEY}`, type: "server_error", param: null, code: "x" },
    });
    const app = await appWith([
      {
        name: "gzip",
        baseUrl: await rawChannel((_req, res) => {
          res.writeHead(500, { "content-type": "application/json", "content-encoding": "gzip" });
          res.end(gzipSync(body));
        }),
      },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    const error = await expectError(response, 500, "x");
    expect(error.message).toMatch(/^bad key /);
  });
});
