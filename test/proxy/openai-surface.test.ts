import { createHash } from "node:crypto";
import OpenAI, { toFile } from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectError, sdkError } from "../http/error-envelope.js";
import { FAKE_SPEECH } from "../support/fake-upstream.js";
import { startTestApp, TEST_KEYS, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

let app: TestApp;
let client: OpenAI;

beforeEach(async () => {
  app = await startTestApp();
  client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
});
afterEach(() => app.close());

const clientFor = (key: string) => new OpenAI({ apiKey: key, baseURL: app.baseURL, maxRetries: 0 });
const png = (bytes = 2048) =>
  Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.alloc(bytes - 4, 7)]);

describe("POST /v1/responses", () => {
  it("passes a plain response through the SDK, with the channel's key", async () => {
    const seen = app.upstream.nextRequest("responses");
    const response = await client.responses.create({ model: "gpt-4o-mini", input: "hi" });
    expect(response.object).toBe("response");
    expect(response.output_text).toBe("Hello from fake-upstream!");
    expect(response.usage?.total_tokens).toBe(11);
    const request = await seen;
    expect(request.path).toBe("/v1/responses");
    expect(request.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(request.body).toEqual({ model: "gpt-4o-mini", input: "hi" });
  });

  it("streams a response through the SDK, response.created first, with the proxy headers", async () => {
    const { data: stream, response } = await client.responses
      .create({ model: "gpt-4o-mini", input: "hi", stream: true })
      .withResponse();
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.headers.get("x-accel-buffering")).toBe("no");
    expect(response.headers.get("cache-control")).toBe("no-cache");
    const types: string[] = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(text).toBe("Hello from fake-upstream!");
  });

  it("delivers the first events before the channel has finished", async () => {
    app.upstream.holdStreams();
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      stream: true,
    });
    const iterator = stream[Symbol.asyncIterator]();
    const seen: string[] = [];
    while (!seen.includes("response.output_text.delta")) {
      const next = await iterator.next();
      seen.push((next.value as { type: string }).type);
    }
    app.upstream.release();
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      seen.push(next.value.type);
    }
    expect(seen.at(-1)).toBe("response.completed");
  });

  it("answers 404 model_not_found for a model outside the key's group, without calling the channel", async () => {
    const error = await sdkError(client.responses.create({ model: "gpt-4o", input: "hi" }));
    expect(error.status).toBe(404);
    expect(error.code).toBe("model_not_found");
    expect(app.upstream.requests).toHaveLength(0);
  });
});

describe("routes on a stored response", () => {
  it("reach the channel that created the response, for the key that created it", async () => {
    // A response the channel made (a background one would be the service's own).
    const created = await client.responses.create({ model: "gpt-4o-mini", input: "remember me" });
    expect(created.status).toBe("completed");
    const fetched = await client.responses.retrieve(created.id);
    expect(fetched.id).toBe(created.id);
    const items = await client.responses.inputItems.list(created.id, { limit: 5 });
    expect(items.data[0]?.type).toBe("message");
    const getItems = app.upstream.requests.find((r) => r.path.includes("/input_items"));
    expect(getItems?.path).toBe(`/v1/responses/${created.id}/input_items?limit=5`);
    expect(getItems?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    const cancelled = await client.responses.cancel(created.id);
    expect(cancelled.status).toBe("cancelled");
    await client.responses.delete(created.id);
    await expectError(
      await fetch(`${app.baseURL}/responses/${created.id}`, {
        headers: { authorization: `Bearer ${app.key}` },
      }),
      404,
      "response_not_found",
    );
  });

  it("answers 404 for another key's response and for an unknown id, without calling the channel", async () => {
    const created = await client.responses.create({ model: "gpt-4o-mini", input: "mine" });
    const before = app.upstream.requests.length;
    const other = clientFor(TEST_KEYS.other);
    for (const call of [
      () => other.responses.retrieve(created.id),
      () => other.responses.delete(created.id),
      () => other.responses.cancel(created.id),
      () => other.responses.inputItems.list(created.id),
      () => client.responses.retrieve("resp_unknown"),
    ]) {
      const error = await sdkError(call());
      expect(error.status).toBe(404);
      expect(error.code).toBe("response_not_found");
    }
    // Nor may another key continue it.
    const error = await sdkError(
      other.responses.create({
        model: "gpt-4o-mini",
        input: "and?",
        previous_response_id: created.id,
      }),
    );
    expect(error.status).toBe(404);
    expect(error.param).toBe("previous_response_id");
    expect(app.upstream.requests).toHaveLength(before);
    const followUp = await client.responses.create({
      model: "gpt-4o-mini",
      input: "and?",
      previous_response_id: created.id,
    });
    expect(followUp.output_text).toBe("Hello from fake-upstream!");
  });

  it("records a streamed response too", async () => {
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      stream: true,
    });
    let id = "";
    for await (const event of stream) if (event.type === "response.created") id = event.response.id;
    expect((await client.responses.retrieve(id)).status).toBe("completed");
  });
});

describe("other JSON routes", () => {
  it("passes embeddings through the SDK (base64 by default)", async () => {
    const seen = app.upstream.nextRequest("embeddings");
    const result = await client.embeddings.create({ model: "gpt-4o-mini", input: ["a", "b"] });
    expect(result.data).toHaveLength(2);
    expect(result.data[0]?.embedding).toEqual([0.25, -0.5, 0.125]);
    expect((await seen).headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
  });

  it("passes completions and moderations through the SDK", async () => {
    const completion = await client.completions.create({ model: "gpt-4o-mini", prompt: "Say hi" });
    expect(completion.choices[0]?.text).toBe("Hello from fake-upstream!");
    const moderation = await client.moderations.create({ model: "gpt-4o-mini", input: "hello" });
    expect(moderation.results[0]?.flagged).toBe(false);
  });

  it("streams audio/speech as binary, byte for byte", async () => {
    const speech = await client.audio.speech.create({
      model: "gpt-4o-mini",
      voice: "alloy",
      input: "Hello",
    });
    expect(speech.headers.get("content-type")).toBe("audio/mpeg");
    expect(Buffer.from(await speech.arrayBuffer()).equals(FAKE_SPEECH)).toBe(true);
  });
});

describe("multipart routes", () => {
  it("passes images.edit with a file, the form streamed on unchanged", async () => {
    const image = png(300 * 1024);
    const seen = app.upstream.nextRequest("edits");
    const result = await client.images.edit({
      model: "gpt-image-1",
      image: await toFile(image, "cat.png", { type: "image/png" }),
      prompt: "add a hat",
    });
    expect(result.data?.[0]?.b64_json).toBeTruthy();
    const request = await seen;
    expect(request.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(request.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/);
    expect(request.form?.fields).toMatchObject({ model: "gpt-image-1", prompt: "add a hat" });
    expect(request.form?.files.image).toEqual({
      filename: "cat.png",
      size: image.length,
      sha256: createHash("sha256").update(image).digest("hex"),
    });
  });

  it("passes images.edit with JSON image URLs", async () => {
    const seen = app.upstream.nextRequest("edits");
    const response = await fetch(`${app.baseURL}/images/edits`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "gpt-image-1",
        prompt: "add a hat",
        images: [{ image_url: "data:image/png;base64,iVBORw0KGgo=" }],
      }),
    });
    expect(response.status).toBe(200);
    expect((await seen).body).toMatchObject({ model: "gpt-image-1" });
  });

  it("passes audio transcriptions and translations through the SDK", async () => {
    const audio = await toFile(Buffer.alloc(64 * 1024, 3), "hello.mp3", { type: "audio/mpeg" });
    const transcription = await client.audio.transcriptions.create({
      model: "gpt-4o-mini",
      file: audio,
    });
    expect(transcription.text).toBe("transcribed by fake-upstream");
    const asText = await client.audio.transcriptions.create({
      model: "gpt-4o-mini",
      file: await toFile(Buffer.alloc(1024, 3), "hello.mp3"),
      response_format: "text",
    });
    expect(asText).toBe("transcribed by fake-upstream");
    const translation = await client.audio.translations.create({
      model: "gpt-4o-mini",
      file: await toFile(Buffer.alloc(1024, 3), "hallo.mp3"),
    });
    expect(translation.text).toBe("translated by fake-upstream");
  });

  it("answers 404 for a model outside the group before any byte goes upstream", async () => {
    const error = await sdkError(
      client.images.edit({
        model: "dall-e-3",
        image: await toFile(png(), "cat.png", { type: "image/png" }),
        prompt: "add a hat",
      }),
    );
    expect(error.status).toBe(404);
    expect(error.code).toBe("model_not_found");
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("answers 400 missing_required_parameter for a form without model", async () => {
    const form = new FormData();
    form.set("prompt", "add a hat");
    form.set("image", new Blob([png()], { type: "image/png" }), "cat.png");
    await expectError(
      await fetch(`${app.baseURL}/images/edits`, {
        method: "POST",
        headers: { authorization: `Bearer ${app.key}` },
        body: form,
      }),
      400,
      "missing_required_parameter",
      "model",
    );
    expect(app.upstream.requests).toHaveLength(0);
  });
});
