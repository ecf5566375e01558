import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeWav } from "../../src/demo/demo-audio-encoders.js";
import { startDemoChannel, type DemoChannel } from "../../src/demo/start-demo-channel.js";

// The demo channel on its own: the edges of its routes, which the service passes on as they are.
let demo: DemoChannel;
let client: OpenAI;

beforeAll(async () => {
  demo = await startDemoChannel({ imageDelayMs: 10 });
  client = new OpenAI({ baseURL: demo.baseUrl, apiKey: "unused", maxRetries: 0 });
});
afterAll(() => demo.close());

async function post(path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${demo.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const refusal = (param: string | null, code: string) => ({
  error: { message: expect.any(String), type: "invalid_request_error", param, code },
});

describe("bad requests get OpenAI's envelope, naming the parameter", () => {
  it.each([
    ["/responses", { input: "x" }, "model", "missing_required_parameter"],
    ["/responses", { model: "m", input: 5 }, "input", "invalid_value"],
    ["/responses", { model: "m", background: true, store: false }, "store", "invalid_value"],
    [
      "/responses",
      { model: "m", input: "x", previous_response_id: "resp_nope" },
      "previous_response_id",
      "previous_response_not_found",
    ],
    ["/embeddings", { model: "m" }, "input", "missing_required_parameter"],
    ["/embeddings", { model: "m", input: "" }, "input", "invalid_value"],
    ["/embeddings", { model: "m", input: "x", dimensions: 5000 }, "dimensions", "invalid_value"],
    [
      "/embeddings",
      { model: "m", input: "x", encoding_format: "hex" },
      "encoding_format",
      "invalid_value",
    ],
    ["/completions", { model: "m" }, "prompt", "missing_required_parameter"],
    ["/moderations", { model: "m", input: 3 }, "input", "invalid_value"],
    ["/audio/speech", { model: "m", voice: "alloy" }, "input", "missing_required_parameter"],
    ["/audio/speech", { model: "m", input: "hi" }, "voice", "missing_required_parameter"],
    ["/audio/speech", { model: "m", input: "hi", voice: "a", speed: 9 }, "speed", "invalid_value"],
    ["/images/edits", { model: "m", prompt: "p" }, "images", "missing_required_parameter"],
    ["/images/edits", { model: "m", prompt: "p", images: [] }, "images", "invalid_value"],
  ])("POST %s %j", async (path, body, param, code) => {
    const { status, json } = await post(path, body);
    expect(status).toBe(400);
    expect(json).toEqual(refusal(param, code));
  });

  it("refuses forms without their file", async () => {
    const form = new FormData();
    form.append("model", "whisper-1");
    const res = await fetch(`${demo.baseUrl}/audio/transcriptions`, { method: "POST", body: form });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(refusal("file", "missing_required_parameter"));

    const edit = new FormData();
    edit.append("model", "gpt-image-1");
    edit.append("prompt", "p");
    const res2 = await fetch(`${demo.baseUrl}/images/edits`, { method: "POST", body: edit });
    expect(await res2.json()).toEqual(refusal("image", "missing_required_parameter"));
  });

  it("answers 404 for a response it does not have", async () => {
    for (const [method, suffix] of [
      ["GET", ""],
      ["DELETE", ""],
      ["POST", "/cancel"],
      ["GET", "/input_items"],
    ] as const) {
      const res = await fetch(`${demo.baseUrl}/responses/resp_unknown${suffix}`, { method });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual(refusal(null, "not_found"));
    }
  });
});

describe("stored responses", () => {
  it("pages input items in both orders, and keeps nothing for store: false", async () => {
    const input = ["one", "two", "three"].map((text) => ({ role: "user" as const, content: text }));
    const created = await client.responses.create({ model: "m", input });
    const page = async (query: string) => {
      const res = await fetch(`${demo.baseUrl}/responses/${created.id}/input_items?${query}`);
      return (await res.json()) as {
        data: Array<{ id: string; content: Array<{ text: string }> }>;
        has_more: boolean;
        first_id: string;
        last_id: string;
      };
    };
    const texts = (list: { data: Array<{ content: Array<{ text: string }> }> }) =>
      list.data.map((item) => item.content[0]?.text);
    const asc = await page("order=asc&limit=2");
    expect(texts(asc)).toEqual(["one", "two"]);
    expect(asc.has_more).toBe(true);
    expect(asc.last_id).toBe(asc.data[1]?.id);
    const rest = await page(`order=asc&after=${asc.last_id}`);
    expect(texts(rest)).toEqual(["three"]);
    expect(rest.has_more).toBe(false);
    expect(texts(await page(""))).toEqual(["three", "two", "one"]);

    const unstored = await client.responses.create({ model: "m", input: "x", store: false });
    const res = await fetch(`${demo.baseUrl}/responses/${unstored.id}`);
    expect(res.status).toBe(404);
  });
});

describe("streams of the audio routes", () => {
  it("sends speech as speech.audio.delta events when stream_format is sse", async () => {
    const res = await fetch(`${demo.baseUrl}/audio/speech`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "gpt-4o-mini-tts",
        voice: "alloy",
        input: "a few words to speak, enough for more than one chunk of audio",
        response_format: "wav",
        stream_format: "sse",
      }),
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const events = (await res.text())
      .split("\n\n")
      .filter((e) => e.length > 0)
      .map((e) => JSON.parse(e.slice("data: ".length)) as Record<string, unknown>);
    const deltas = events.filter((e) => e.type === "speech.audio.delta");
    expect(deltas.length).toBeGreaterThan(1);
    const audio = Buffer.concat(deltas.map((e) => Buffer.from(String(e.audio), "base64")));
    expect(audio.toString("latin1", 0, 4)).toBe("RIFF");
    expect(audio.readUInt32LE(40)).toBe(audio.length - 44);
    expect(events.at(-1)).toMatchObject({ type: "speech.audio.done", usage: expect.any(Object) });
  });

  it("streams a transcription, and writes srt and vtt", async () => {
    const file = () => toFile(encodeWav(new Int16Array(8000), 8000), "a.wav");
    const stream = await client.audio.transcriptions.create({
      model: "gpt-4o-transcribe",
      file: await file(),
      stream: true,
    });
    let text = "";
    let done: string | undefined;
    for await (const event of stream) {
      if (event.type === "transcript.text.delta") text += event.delta;
      if (event.type === "transcript.text.done") done = event.text;
    }
    expect(text).toMatch(/^Demo transcript of a\.wav \(1 seconds of audio\)/);
    expect(done).toBe(text);

    const srt = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await file(),
      response_format: "srt",
    });
    expect(srt).toMatch(/^1\n00:00:00,000 --> 00:00:00,\d{3}\nDemo transcript/);
    const vtt = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await file(),
      response_format: "vtt",
    });
    expect(vtt).toMatch(/^WEBVTT\n\n00:00:00\.000 --> /);
  });
});

describe("chat structured outputs", () => {
  it("answers response_format json_schema with JSON that fits", async () => {
    const completion = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "name a city" }],
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "city",
          schema: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    });
    expect(JSON.parse(completion.choices[0]?.message.content ?? "")).toEqual({
      city: "Demo reply to: name a city",
    });
  });
});
