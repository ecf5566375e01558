import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, streamText } from "ai";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { loadConfig } from "../../src/config/load-config.js";
import { DEMO_MODELS } from "../../src/demo/demo-models.js";
import type { RunningServer } from "../../src/server.js";
import { startDemoService } from "./demo-service.js";

// The service as `npm start` runs it (see demo-service.ts): models, Responses, the AI SDK,
// embeddings, completions and moderations. Images and audio: demo-service-media.test.ts.
let server: RunningServer;
let key: string;
let client: OpenAI;
let baseURL: string;

beforeAll(async () => {
  ({ server, key, client, baseURL } = await startDemoService());
});
afterAll(() => server.close(500));

const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot; // the demo's vectors have unit length
};

describe("models", () => {
  it("lists a model for every route, the same in config/default.yaml and the demo", async () => {
    const { config } = loadConfig({ env: {} });
    expect([...(config.channels[0]?.models ?? [])].sort()).toEqual([...DEMO_MODELS]);
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual([...DEMO_MODELS]);
    expect(ids).toEqual(
      expect.arrayContaining([
        "text-embedding-3-small",
        "omni-moderation-latest",
        "tts-1",
        "gpt-4o-mini-tts",
        "whisper-1",
        "gpt-4o-transcribe",
        "gpt-3.5-turbo-instruct",
        "dall-e-2",
      ]),
    );
  });
});

describe("Responses API", () => {
  it("answers a plain response with the user's input quoted, and usage", async () => {
    const response = await client.responses.create({ model: "gpt-4o-mini", input: "hello demo" });
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe("response");
    expect(response.status).toBe("completed");
    expect(response.model).toBe("gpt-4o-mini");
    expect(response.output_text).toBe("Demo reply to: hello demo");
    expect(response.output[0]).toMatchObject({ type: "message", role: "assistant" });
    expect(response.usage?.total_tokens).toBe(
      (response.usage?.input_tokens ?? 0) + (response.usage?.output_tokens ?? 0),
    );
    expect(response.usage?.output_tokens).toBeGreaterThan(0);
  });

  it("streams OpenAI's event sequence, which the SDK's stream helper accepts", async () => {
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: [{ role: "user", content: [{ type: "input_text", text: "tell me a story" }] }],
      stream: true,
    });
    const types: string[] = [];
    const sequence: number[] = [];
    let text = "";
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      sequence.push(event.sequence_number);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") completed = event.response;
    }
    const deltas = types.filter((t) => t === "response.output_text.delta").length;
    expect(deltas).toBeGreaterThan(1);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...Array<string>(deltas).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(sequence).toEqual(types.map((_, i) => i));
    expect(text).toBe("Demo reply to: tell me a story");
    expect(completed?.status).toBe("completed");
    expect(completed?.usage?.output_tokens).toBeGreaterThan(0);

    // The SDK's helper rebuilds the response from the events and checks they fit together.
    const final = await client.responses
      .stream({ model: "gpt-4o-mini", input: "again" })
      .finalResponse();
    expect(final.output_text).toBe("Demo reply to: again");
  });

  it("keeps a response for retrieve, input_items and delete, and chains previous_response_id", async () => {
    const created = await client.responses.create({
      model: "gpt-4o-mini",
      input: [
        { role: "system", content: "be brief" },
        { role: "user", content: "first question" },
      ],
    });
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved.id).toBe(created.id);
    expect(retrieved.output_text).toBe("Demo reply to: first question");

    const items: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of client.responses.inputItems.list(created.id, { limit: 1 })) {
      items.push(item);
    }
    // Newest first, paged one by one through the SDK's cursor.
    expect(items).toHaveLength(2);
    expect(items.map((item) => (item as { role?: string }).role)).toEqual(["user", "system"]);
    expect(items[0]).toMatchObject({
      type: "message",
      content: [{ type: "input_text", text: "first question" }],
    });

    const next = await client.responses.create({
      model: "gpt-4o-mini",
      input: "second question",
      previous_response_id: created.id,
    });
    expect(next.previous_response_id).toBe(created.id);
    expect(next.output_text).toBe("Demo reply to: second question");

    await client.responses.delete(created.id);
    const gone = await client.responses.retrieve(created.id).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("runs a background response to completion, or cancels it", async () => {
    const quick = await client.responses.create({
      model: "gpt-4o-mini",
      input: "in the background",
      background: true,
    });
    expect(quick.status).toBe("queued");
    expect(quick.background).toBe(true);
    let polled = quick;
    while (polled.status === "queued" || polled.status === "in_progress") {
      await new Promise((resolve) => setTimeout(resolve, 20));
      polled = await client.responses.retrieve(quick.id);
    }
    expect(polled.status).toBe("completed");
    expect(polled.output_text).toBe("Demo reply to: in the background");

    // 300 words are paced over seconds: plenty of time to cancel first.
    const slow = await client.responses.create({
      model: "gpt-4o-mini",
      input: "word ".repeat(300),
      background: true,
    });
    const cancelled = await client.responses.cancel(slow.id);
    expect(cancelled.status).toBe("cancelled");
    expect((await client.responses.retrieve(slow.id)).status).toBe("cancelled");

    // A response not made in the background cannot be cancelled, as on OpenAI.
    const plain = await client.responses.create({ model: "gpt-4o-mini", input: "x" });
    const refused = await client.responses.cancel(plain.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
  });
});

describe("Vercel AI SDK (Responses API by default)", () => {
  const model = () => createOpenAI({ baseURL, apiKey: key })("gpt-4o-mini");

  it("generateText", async () => {
    const { text, usage } = await generateText({ model: model(), prompt: "Say hi" });
    expect(text).toBe("Demo reply to: Say hi");
    expect(usage.outputTokens).toBeGreaterThan(0);
  });

  it("streamText", async () => {
    const result = streamText({ model: model(), prompt: "Say hi slowly" });
    const deltas: string[] = [];
    for await (const delta of result.textStream) deltas.push(delta);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("Demo reply to: Say hi slowly");
    expect((await result.usage).inputTokens).toBeGreaterThan(0);
  });

  it("generateObject gets an object that fits its schema", async () => {
    const { object } = await generateObject({
      model: model(),
      schema: z.object({
        title: z.string(),
        rating: z.number().min(1).max(5),
        tags: z.array(z.enum(["a", "b"])),
        done: z.boolean(),
      }),
      prompt: "Review the demo",
    });
    expect(object).toEqual({
      title: "Demo reply to: Review the demo",
      rating: 1,
      tags: ["a"],
      done: true,
    });
  });
});

describe("embeddings", () => {
  it("answers deterministic unit vectors as floats and as the SDK's default base64", async () => {
    const input = ["a red fox jumps", "a red fox jumps high", "quarterly tax report"];
    const floats = await client.embeddings.create({
      model: "text-embedding-3-small",
      input,
      encoding_format: "float",
    });
    expect(floats.object).toBe("list");
    expect(floats.model).toBe("text-embedding-3-small");
    expect(floats.data.map((d) => d.index)).toEqual([0, 1, 2]);
    const [fox, foxHigh, tax] = floats.data.map((d) => d.embedding);
    expect(fox).toHaveLength(1536);
    expect(cosine(fox!, fox!)).toBeCloseTo(1, 5);
    // Texts that share words are closer than texts that do not.
    expect(cosine(fox!, foxHigh!)).toBeGreaterThan(cosine(fox!, tax!) + 0.3);
    expect(floats.usage.prompt_tokens).toBeGreaterThan(0);

    // No encoding_format: the SDK asks for base64 and decodes it; the numbers are the same.
    const base64 = await client.embeddings.create({ model: "text-embedding-3-small", input });
    expect(base64.data.map((d) => d.embedding)).toEqual([fox, foxHigh, tax]);

    const short = await client.embeddings.create({
      model: "text-embedding-3-large",
      input: "a red fox jumps",
      dimensions: 256,
    });
    expect(short.data[0]?.embedding).toHaveLength(256);
  });
});

describe("completions and moderations", () => {
  it("completes a prompt, plain and streamed", async () => {
    const completion = await client.completions.create({
      model: "gpt-3.5-turbo-instruct",
      prompt: "Once upon a time",
    });
    expect(completion.object).toBe("text_completion");
    expect(completion.choices[0]?.text).toBe(" Demo completion of: Once upon a time");
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);

    const cut = await client.completions.create({
      model: "gpt-3.5-turbo-instruct",
      prompt: "Once upon a time",
      max_tokens: 3,
    });
    expect(cut.choices[0]?.finish_reason).toBe("length");
    expect(cut.usage?.completion_tokens).toBeLessThanOrEqual(3);

    const stream = await client.completions.create({
      model: "gpt-3.5-turbo-instruct",
      prompt: "Once upon a time",
      stream: true,
      stream_options: { include_usage: true },
    });
    const pieces: string[] = [];
    const finishes: Array<string | null | undefined> = [];
    let total: number | undefined;
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        pieces.push(choice.text);
        finishes.push(choice.finish_reason);
      }
      if (chunk.usage) total = chunk.usage.total_tokens;
    }
    expect(pieces.join("")).toBe(" Demo completion of: Once upon a time");
    expect(finishes.at(-1)).toBe("stop");
    expect(total).toBeGreaterThan(0);
  });

  it("moderates: a text starting with !fail is flagged, others are not", async () => {
    const result = await client.moderations.create({
      model: "omni-moderation-latest",
      input: ["a kind word", "!fail something awful"],
    });
    expect(result.model).toBe("omni-moderation-latest");
    expect(result.results.map((r) => r.flagged)).toEqual([false, true]);
    expect(result.results[1]?.categories.violence).toBe(true);
    expect(result.results[0]?.category_scores.violence).toBeLessThan(0.01);
    expect(Object.keys(result.results[0]?.categories ?? {})).toHaveLength(13);
  });
});
