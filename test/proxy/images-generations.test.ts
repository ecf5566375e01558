import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { expectError, sdkError } from "../http/error-envelope.js";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

let app: TestApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

function clientOf(test: TestApp, apiKey = test.key): OpenAI {
  return new OpenAI({ apiKey, baseURL: test.baseURL, maxRetries: 0 });
}

describe("POST /v1/images/generations", () => {
  it("passes a generation through the SDK with the channel's key", async () => {
    app = await startTestApp();
    const seen = app.upstream.nextRequest("images");
    const result = await clientOf(app).images.generate({
      model: "gpt-image-1",
      prompt: "a lighthouse at dawn",
      n: 2,
      size: "1024x1024",
      quality: "low",
    });
    expect(result.data).toHaveLength(2);
    const png = Buffer.from(result.data?.[0]?.b64_json ?? "", "base64");
    expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
    expect(result.usage?.output_tokens).toBe(200);

    const request = await seen;
    expect(request.path).toBe("/v1/images/generations");
    expect(request.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(request.body).toEqual({
      model: "gpt-image-1",
      prompt: "a lighthouse at dawn",
      n: 2,
      size: "1024x1024",
      quality: "low",
    });
  });

  it("answers 404 model_not_found for an image model outside the key's group", async () => {
    app = await startTestApp();
    const error = await sdkError(
      clientOf(app).images.generate({ model: "dall-e-3", prompt: "a cat" }),
    );
    expect(error.status).toBe(404);
    expect(error.code).toBe("model_not_found");
    expect(app.upstream.requests).toHaveLength(0);

    const vip = await clientOf(app, app.vipKey).images.generate({
      model: "dall-e-3",
      prompt: "a cat",
    });
    expect(vip.data).toHaveLength(1);
  });

  it("passes a channel's content-policy 400 on as it is", async () => {
    app = await startTestApp();
    const body = {
      error: {
        message: "Your request was rejected by the safety system.",
        type: "image_generation_user_error",
        param: null,
        code: "content_policy_violation",
      },
    };
    app.upstream.behave("images", { kind: "status", status: 400, body });
    const response = await fetch(`${app.baseURL}/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "something" }),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(body);
  });

  it("waits for a slow generation past the chat timeout, up to imageTimeoutSec, then 504", async () => {
    const upstream = await startFakeUpstream();
    try {
      app = await startTestApp({
        upstream,
        config: {
          channels: [
            {
              name: "slow",
              baseUrl: upstream.baseUrl,
              apiKey: UPSTREAM_KEY,
              models: ["gpt-image-1"],
              timeoutSec: 1,
              imageTimeoutSec: 3,
            },
          ],
        },
      });
      // Slower than the chat timeout: the image route must apply its own, longer one.
      upstream.behave("images", { kind: "ok", delayMs: 1500 });
      const slow = await clientOf(app).images.generate({ model: "gpt-image-1", prompt: "slow" });
      expect(slow.data).toHaveLength(1);

      upstream.behave("images", { kind: "hang" });
      const response = await fetch(`${app.baseURL}/images/generations`, {
        method: "POST",
        headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-image-1", prompt: "never" }),
      });
      await expectError(response, 504, "upstream_timeout");
      while (upstream.aborted < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      await app?.close();
      app = undefined;
      await upstream.close();
    }
  });
});
