import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEMO_MODELS,
  startDemoChannel,
  type DemoChannel,
} from "../../src/demo/start-demo-channel.js";
import { inspectPng } from "./inspect-png.js";

const IMAGE_DELAY_MS = 150;

let demo: DemoChannel;
let client: OpenAI;

beforeAll(async () => {
  demo = await startDemoChannel({ imageDelayMs: IMAGE_DELAY_MS });
  client = new OpenAI({ baseURL: demo.baseUrl, apiKey: "unused", maxRetries: 0 });
});

afterAll(async () => {
  await demo.close();
});

describe("demo channel", () => {
  it("listens on 127.0.0.1 under /v1", () => {
    expect(demo.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it("lists its models", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      expect(model.object).toBe("model");
      expect(model.owned_by).toBe("demo");
      expect(typeof model.created).toBe("number");
      ids.push(model.id);
    }
    expect(ids).toEqual([...DEMO_MODELS]);
    expect(ids).toEqual(expect.arrayContaining(["dall-e-3", "gpt-4o-mini", "gpt-image-1"]));
    const one = await client.models.retrieve("gpt-image-1");
    expect(one.id).toBe("gpt-image-1");
  });

  it("answers chat with an echo of the last user message", async () => {
    const completion = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "first" },
        { role: "assistant", content: "ok" },
        { role: "user", content: [{ type: "text", text: "hello demo" }] },
      ],
    });
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe("gpt-4o-mini");
    expect(completion.choices[0]?.message.role).toBe("assistant");
    expect(completion.choices[0]?.message.content).toBe("Demo reply to: hello demo");
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage?.total_tokens).toBe(
      (completion.usage?.prompt_tokens ?? 0) + (completion.usage?.completion_tokens ?? 0),
    );
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it("streams chat word by word and ends with finish_reason stop", async () => {
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "tell me a short story" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const contents: string[] = [];
    const finishReasons: (string | null | undefined)[] = [];
    let usageTotal: number | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe("chat.completion.chunk");
      expect(chunk.model).toBe("gpt-4o-mini");
      const choice = chunk.choices[0];
      if (choice?.delta.content) contents.push(choice.delta.content);
      if (choice) finishReasons.push(choice.finish_reason);
      if (chunk.usage) usageTotal = chunk.usage.total_tokens;
    }
    expect(contents.length).toBeGreaterThan(1);
    expect(contents.join("")).toBe("Demo reply to: tell me a short story");
    expect(finishReasons.at(-1)).toBe("stop");
    expect(finishReasons.slice(0, -1).every((r) => r === null)).toBe(true);
    expect(usageTotal).toBeGreaterThan(0);
  });

  it("sends server-sent events ending in [DONE]", async () => {
    const res = await fetch(`${demo.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "x",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const text = await res.text();
    const events = text.split("\n\n").filter((e) => e.length > 0);
    expect(events.every((e) => e.startsWith("data: "))).toBe(true);
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  it("generates decodable PNGs of the requested size after the delay", async () => {
    const started = performance.now();
    const result = await client.images.generate({
      model: "gpt-image-1",
      prompt: "a lighthouse at dusk",
      size: "1536x1024",
      n: 2,
    });
    const elapsed = performance.now() - started;
    // Timers have millisecond granularity; allow 2 ms of rounding, no upper bound.
    expect(elapsed).toBeGreaterThanOrEqual(IMAGE_DELAY_MS - 2);

    expect(typeof result.created).toBe("number");
    expect(result.data).toHaveLength(2);
    const pngs = (result.data ?? []).map((item) => {
      expect(item.b64_json).toBeTypeOf("string");
      return Buffer.from(item.b64_json ?? "", "base64");
    });
    for (const png of pngs) {
      const info = inspectPng(png);
      expect([info.width, info.height]).toEqual([1536, 1024]);
      expect(info.chunks.every((c) => c.crcValid)).toBe(true);
      expect(info.scanlines.length).toBe((1536 * 3 + 1) * 1024);
    }
    expect(pngs[0]?.equals(pngs[1]!)).toBe(false);
    expect(result.usage?.total_tokens).toBeGreaterThan(0);
  });

  it("answers size auto with 1024x1024 and adds revised_prompt for dall-e", async () => {
    const result = await client.images.generate({ model: "dall-e-3", prompt: "a cat" });
    expect(result.data).toHaveLength(1);
    expect(result.data?.[0]?.revised_prompt).toBe("a cat");
    const info = inspectPng(Buffer.from(result.data?.[0]?.b64_json ?? "", "base64"));
    expect([info.width, info.height]).toEqual([1024, 1024]);
  });

  it("fails a prompt starting with !fail like a content policy refusal", async () => {
    const error = await client.images
      .generate({ model: "gpt-image-1", prompt: "!fail please", size: "64x64" })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const apiError = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(apiError.status).toBe(400);
    expect(apiError.code).toBe("content_policy_violation");
    expect(apiError.type).toBe("invalid_request_error");
    expect(apiError.error).toMatchObject({ param: null, code: "content_policy_violation" });
  });

  it("rejects invalid image parameters naming the parameter", async () => {
    for (const [body, param, code] of [
      [{ model: "gpt-image-1" }, "prompt", "missing_required_parameter"],
      [{ model: "gpt-image-1", prompt: 42 }, "prompt", "invalid_type"],
      [{ model: "gpt-image-1", prompt: "p", n: 11 }, "n", "invalid_value"],
      [{ model: "gpt-image-1", prompt: "p", size: "huge" }, "size", "invalid_value"],
    ] as const) {
      const res = await fetch(`${demo.baseUrl}/images/generations`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        error: { message: expect.any(String), type: "invalid_request_error", param, code },
      });
    }
  });

  it("answers bad JSON with 400 and an unknown route with 404, in the OpenAI envelope", async () => {
    const bad = await fetch(`${demo.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toBe("application/json");
    expect(await bad.json()).toEqual({
      error: {
        message: expect.any(String),
        type: "invalid_request_error",
        param: null,
        code: "invalid_json",
      },
    });

    const unknown = await fetch(`${demo.baseUrl}/nope`, { method: "POST", body: "{}" });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: {
        message: expect.any(String),
        type: "invalid_request_error",
        param: null,
        code: "not_found",
      },
    });
  });
});

describe("demo channel lifecycle", () => {
  it("close() ends a pending image request and frees the port", async () => {
    const slow = await startDemoChannel({ imageDelayMs: 60_000 });
    const pending = fetch(`${slow.baseUrl}/images/generations`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "never" }),
    }).then(
      () => "answered",
      () => "failed",
    );
    // Give the request time to reach the server before closing it.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await slow.close();
    expect(await pending).toBe("failed");
    await expect(fetch(`${slow.baseUrl}/models`)).rejects.toThrow();
  });
});
