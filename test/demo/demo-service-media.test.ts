import { toFile, type OpenAI } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeWav } from "../../src/demo/demo-audio-encoders.js";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { RunningServer } from "../../src/server.js";
import { startDemoService } from "./demo-service.js";
import { inspectPng } from "./inspect-png.js";

// The service as `npm start` runs it (see demo-service.ts): image edits and variations, audio.
let server: RunningServer;
let key: string;
let client: OpenAI;
let baseURL: string;

beforeAll(async () => {
  ({ server, key, client, baseURL } = await startDemoService());
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

describe("a form that ends inside a file", () => {
  // Cut off after its file's first bytes, with no closing boundary: what a client that dies
  // mid-upload behind a buffering proxy sends. The demo channel reads the same body the service
  // passes on; its parser's error reached the file's stream, where nothing heard it, and stopped
  // the whole process (`npm start`'s service with it).
  const cut =
    '--B\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-image-1\r\n' +
    '--B\r\nContent-Disposition: form-data; name="prompt"\r\n\r\na hat\r\n' +
    '--B\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n' +
    "Content-Type: image/png\r\n\r\n\x89PNG";

  it.each(["/images/edits", "/images/variations", "/audio/transcriptions"])(
    "%s: 400 invalid_value, and the service goes on",
    async (path) => {
      const response = await fetch(`${baseURL}${path}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "multipart/form-data; boundary=B",
        },
        body: cut,
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({
        error: { type: "invalid_request_error", code: "invalid_value" },
      });
      // The demo channel's own reading of the body ends after the answer: let it.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const models = await fetch(`${baseURL}/models`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(models.status).toBe(200);
    },
  );
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
