import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, streamText } from "ai";
import OpenAI, { toFile } from "openai";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { loadConfig } from "../../src/config/load-config.js";
import { encodeWav } from "../../src/demo/demo-audio-encoders.js";
import { DEMO_MODELS } from "../../src/demo/demo-models.js";
import { encodePng } from "../../src/demo/png-encoder.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { inspectPng } from "./inspect-png.js";

// The service as `npm start` runs it (config/default.yaml), on a free port, in memory, with a
// short image delay: every route a user can try with no account.
let server: RunningServer;
let key: string;
let client: OpenAI;
let baseURL: string;

beforeAll(async () => {
  const { config } = loadConfig({ env: { PORT: "0", STORE_URL: "memory://" } });
  config.channels = config.channels.map((channel) => ({ ...channel, imageDelayMs: 20 }));
  server = await startServer({ config, logger: pino({ level: "silent" }), defaultMetrics: false });
  key = config.auth.keys[0]!.key;
  baseURL = `${server.url}/v1`;
  client = new OpenAI({ apiKey: key, baseURL, maxRetries: 0 });
});
afterAll(() => server.close(500));

const smallPng = (width: number, height: number, seed = 1) =>
  encodePng({
    width,
    height,
    channels: 3,
    pixels: Uint8Array.from({ length: width * height * 3 }, (_, i) => (i * seed) & 0xff),
  });

/** Each picture's [width, height], decoded from its `b64_json`. */
const sizesOf = (result: OpenAI.ImagesResponse) =>
  (result.data ?? []).map((item) => {
    const info = inspectPng(Buffer.from(item.b64_json ?? "", "base64"));
    return [info.width, info.height];
  });

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

describe("image edits and variations", () => {
  it("edits an uploaded PNG through the SDK: its size for size auto, n pictures", async () => {
    const result = await client.images.edit({
      model: "gpt-image-1",
      image: await toFile(smallPng(40, 30), "in.png", { type: "image/png" }),
      prompt: "add a hat",
      n: 2,
    });
    expect(sizesOf(result)).toEqual([
      [40, 30],
      [40, 30],
    ]);
    expect(result.data?.[0]?.b64_json).not.toBe(result.data?.[1]?.b64_json);
    expect(result.usage?.input_tokens_details.image_tokens).toBeGreaterThan(0);

    // Another input image, another picture.
    const other = await client.images.edit({
      model: "gpt-image-1",
      image: await toFile(smallPng(40, 30, 7), "in.png", { type: "image/png" }),
      prompt: "add a hat",
    });
    expect(other.data?.[0]?.b64_json).not.toBe(result.data?.[0]?.b64_json);
  });

  it("edits from OpenAI's JSON body, and makes variations", async () => {
    const res = await fetch(`${baseURL}/images/edits`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "gpt-image-1",
        prompt: "make it blue",
        size: "64x48",
        images: [{ image_url: `data:image/png;base64,${smallPng(8, 8).toString("base64")}` }],
      }),
    });
    expect(res.status).toBe(200);
    expect(sizesOf((await res.json()) as OpenAI.ImagesResponse)).toEqual([[64, 48]]);

    const variations = await client.images.createVariation({
      model: "dall-e-2",
      image: await toFile(smallPng(16, 16), "in.png", { type: "image/png" }),
      size: "256x256",
      n: 2,
    });
    expect(sizesOf(variations)).toEqual([
      [256, 256],
      [256, 256],
    ]);
  });

  it("runs an edit task (multipart) to a completed task with a real PNG", async () => {
    const form = new FormData();
    form.append("model", "gpt-image-1");
    form.append("prompt", "a hat on the cat");
    form.append("size", "96x64");
    form.append("image", new Blob([smallPng(20, 20)], { type: "image/png" }), "cat.png");
    const submitted = await fetch(`${baseURL}/images/edits/tasks`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(submitted.status).toBe(202);
    const task = (await submitted.json()) as { id: string };
    const polled = await fetch(`${baseURL}/images/tasks/${task.id}?wait=30`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const done = (await polled.json()) as OpenAI.ImagesResponse & { status: string };
    expect(done.status).toBe("completed");
    expect(sizesOf(done)).toEqual([[96, 64]]);
  });
});

describe("audio", () => {
  it("speaks WAV, PCM and MP3 with their content types", async () => {
    const wav = await client.audio.speech.create({
      model: "tts-1",
      voice: "alloy",
      input: "Hello from the demo channel",
      response_format: "wav",
    });
    expect(wav.headers.get("content-type")).toBe("audio/wav");
    const wavBytes = Buffer.from(await wav.arrayBuffer());
    expect(wavBytes.toString("latin1", 0, 4)).toBe("RIFF");
    expect(wavBytes.toString("latin1", 8, 12)).toBe("WAVE");
    expect(wavBytes.readUInt32LE(24)).toBe(24_000);
    expect(wavBytes.readUInt32LE(40)).toBe(wavBytes.length - 44);
    // Beeps, not silence.
    const samples = new Int16Array(wavBytes.buffer, wavBytes.byteOffset + 44, 1000 * 24);
    expect(Math.max(...samples)).toBeGreaterThan(1000);

    const pcm = await client.audio.speech.create({
      model: "gpt-4o-mini-tts",
      voice: "coral",
      input: "Hello from the demo channel",
      response_format: "pcm",
    });
    expect(pcm.headers.get("content-type")).toBe("audio/pcm");
    expect((await pcm.arrayBuffer()).byteLength).toBeGreaterThan(24_000);

    // The SDK's default format.
    const mp3 = await client.audio.speech.create({ model: "tts-1", voice: "alloy", input: "Hi" });
    expect(mp3.headers.get("content-type")).toBe("audio/mpeg");
    const mp3Bytes = Buffer.from(await mp3.arrayBuffer());
    expect([...mp3Bytes.subarray(0, 2)]).toEqual([0xff, 0xfb]);
  });

  it("transcribes and translates an upload, in json, text and verbose_json", async () => {
    const oneSecond = encodeWav(new Int16Array(16_000), 16_000);
    const file = () => toFile(oneSecond, "talk.wav", { type: "audio/wav" });
    const json = await client.audio.transcriptions.create({
      model: "gpt-4o-transcribe",
      file: await file(),
    });
    expect(json.text).toMatch(/^Demo transcript of talk\.wav \(1 seconds of audio\)/);
    expect(json.usage).toMatchObject({ type: "tokens" });

    const text = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await file(),
      response_format: "text",
    });
    expect(text).toBe(json.text);

    const verbose = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await file(),
      response_format: "verbose_json",
      timestamp_granularities: ["word"],
    });
    expect(verbose.duration).toBe(1);
    expect(verbose.words?.at(-1)?.end).toBe(1);
    expect(verbose.segments?.length).toBeGreaterThan(0);

    const translation = await client.audio.translations.create({
      model: "whisper-1",
      file: await file(),
    });
    expect(translation.text).toMatch(/^Demo translation of talk\.wav/);
  });
});
