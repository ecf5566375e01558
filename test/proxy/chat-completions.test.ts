import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectError, sdkError } from "../http/error-envelope.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

let app: TestApp;
let client: OpenAI;

beforeEach(async () => {
  app = await startTestApp();
  client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
});
afterEach(() => app.close());

const messages = [{ role: "user" as const, content: "hi" }];

/** Polls `condition` until it holds (or the test's own timeout ends it). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("POST /v1/chat/completions", () => {
  it("passes a plain completion through the SDK", async () => {
    const completion = await client.chat.completions.create({ model: "gpt-4o-mini", messages });
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe("gpt-4o-mini");
    expect(completion.choices[0]?.message.content).toBe("Hello from fake-upstream!");
    expect(completion.usage?.total_tokens).toBe(9);
  });

  it("sends the channel's key upstream, never the client's, and the client's body as sent", async () => {
    const seen = app.upstream.nextRequest("chat");
    await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      temperature: 0.25,
      user: "u-1",
    });
    const request = await seen;
    expect(request.path).toBe("/v1/chat/completions");
    expect(request.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(JSON.stringify(request.headers)).not.toContain(app.key);
    expect(request.body).toEqual({
      model: "gpt-4o-mini",
      messages,
      temperature: 0.25,
      user: "u-1",
    });
  });

  it("drops other client credential headers on the way upstream", async () => {
    const seen = app.upstream.nextRequest("chat");
    const response = await fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app.key}`,
        "content-type": "application/json",
        "x-api-key": app.key,
        "api-key": app.key,
      },
      body: JSON.stringify({ model: "gpt-4o-mini", messages }),
    });
    expect(response.status).toBe(200);
    const request = await seen;
    expect(JSON.stringify(request.headers)).not.toContain(app.key);
  });

  it("answers 404 model_not_found for a model outside the key's group, without calling upstream", async () => {
    for (const model of ["gpt-4o", "no-such-model"]) {
      const error = await sdkError(client.chat.completions.create({ model, messages }));
      expect(error.status).toBe(404);
      expect(error.code).toBe("model_not_found");
    }
    expect(app.upstream.requests).toHaveLength(0);
  });
});

describe("POST /v1/chat/completions with stream: true", () => {
  it("streams several chunks through the SDK as text/event-stream", async () => {
    const { data: stream, response } = await client.chat.completions
      .create({ model: "gpt-4o-mini", messages, stream: true })
      .withResponse();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThanOrEqual(4);
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk")).toBe(true);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe(
      "Hello from fake-upstream!",
    );
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
  });

  it("delivers the first chunks before the channel has finished (no buffering)", async () => {
    app.upstream.holdStreams();
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    const iterator = stream[Symbol.asyncIterator]();
    // The channel is held after its first two chunks: these can only arrive unbuffered.
    const first = await iterator.next();
    expect(first.done).toBe(false);
    expect(first.value.choices[0]?.delta.role).toBe("assistant");
    const second = await iterator.next();
    expect(second.value.choices[0]?.delta.content).toBe("Hello ");

    app.upstream.release();
    const rest: string[] = [];
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      rest.push(next.value.choices[0]?.delta.content ?? "");
    }
    expect(rest.join("")).toBe("from fake-upstream!");
  });

  it("passes the channel's SSE bytes on unchanged, [DONE] included", async () => {
    const response = await fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages, stream: true }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await response.text();
    const events = text.split("\n\n").filter(Boolean);
    expect(events.length).toBeGreaterThanOrEqual(5);
    expect(events.every((event) => event.startsWith("data: "))).toBe(true);
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  it("aborts the upstream request when the client goes away mid-stream", async () => {
    app.upstream.holdStreams();
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "gpt-4o-mini", messages, stream: true },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    expect((await iterator.next()).done).toBe(false);
    expect((await iterator.next()).done).toBe(false);
    expect(app.upstream.aborted).toBe(0);
    controller.abort();
    await until(() => app.upstream.aborted >= 1);
    expect(app.upstream.aborted).toBe(1);
  });
});

describe("POST /v1/chat/completions request errors", () => {
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app.key}`,
        "content-type": "application/json",
        ...headers,
      },
      body,
    });

  it("answers 400 invalid_json for a body that is not JSON", async () => {
    await expectError(await post('{"model": "gpt-4o-mini",'), 400, "invalid_json");
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("answers 400 missing_required_parameter with param model when model is missing", async () => {
    await expectError(
      await post(JSON.stringify({ messages })),
      400,
      "missing_required_parameter",
      "model",
    );
    const error = await sdkError(
      client.chat.completions.create({
        messages,
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(error.status).toBe(400);
    expect(error.code).toBe("missing_required_parameter");
    expect(error.param).toBe("model");
  });

  it("answers 400 invalid_value for a model that is not a string, or a body that is not an object", async () => {
    await expectError(
      await post(JSON.stringify({ model: 42, messages })),
      400,
      "invalid_value",
      "model",
    );
    await expectError(await post(JSON.stringify(["gpt-4o-mini"])), 400, "invalid_value");
    expect(app.upstream.requests).toHaveLength(0);
  });
});
