import OpenAI, { toFile } from "openai";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { encodePng } from "../../src/demo/png-encoder.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { openEvents } from "../tasks/sse-client.js";
import { inspectPng } from "./inspect-png.js";

// The service as `npm start` runs it, its demo channel taking 600 ms per image: streamed
// image events pass through the synchronous routes as the channel sends them.
const DELAY_MS = 600;
let server: RunningServer;
let client: OpenAI;
let key: string;

beforeAll(async () => {
  const { config } = loadConfig({ env: { PORT: "0", STORE_URL: "memory://" } });
  config.channels = config.channels.map((channel) => ({ ...channel, imageDelayMs: DELAY_MS }));
  server = await startServer({ config, logger: pino({ level: "silent" }), defaultMetrics: false });
  key = config.auth.keys[0]!.key;
  client = new OpenAI({
    apiKey: key,
    baseURL: `${server.url}/v1`,
    maxRetries: 0,
  });
});
afterAll(() => server.close(500));

interface Arrived {
  type: string;
  at: number;
  png: Buffer;
  partial_image_index?: number;
  usage?: unknown;
}

async function collect(stream: AsyncIterable<Record<string, unknown>>): Promise<Arrived[]> {
  const arrived: Arrived[] = [];
  for await (const event of stream) {
    arrived.push({
      type: event.type as string,
      at: performance.now(),
      png: Buffer.from(event.b64_json as string, "base64"),
      partial_image_index: event.partial_image_index as number | undefined,
      usage: event.usage,
    });
  }
  return arrived;
}

/** The RGB of pixel `x` on row `y` (the demo writes unfiltered 8-bit RGB rows). */
function pixel(png: Buffer, x: number, y: number): string {
  const info = inspectPng(png);
  const row = info.scanlines.subarray(y * (info.width * 3 + 1) + 1);
  return row.subarray(x * 3, x * 3 + 3).toString("hex");
}

/** Whether the first `n` pixels of row `y` are one colour. */
const flat = (png: Buffer, n: number, y = 0) =>
  new Set(Array.from({ length: n }, (_, x) => pixel(png, x, y))).size === 1;

describe("the demo channel's streamed images, through the passthrough", () => {
  it("streams coarse drafts, then the image with usage, each event as it is made", async () => {
    const stream = await client.images.generate({
      model: "gpt-image-1",
      prompt: "a lighthouse at dusk",
      size: "256x256",
      stream: true,
      partial_images: 2,
    });
    const events = await collect(stream as unknown as AsyncIterable<Record<string, unknown>>);
    expect(events.map((event) => [event.type, event.partial_image_index])).toEqual([
      ["image_generation.partial_image", 0],
      ["image_generation.partial_image", 1],
      ["image_generation.completed", undefined],
    ]);
    for (const event of events) {
      expect(inspectPng(event.png)).toMatchObject({ width: 256, height: 256 });
    }
    const [first, second, done] = events as [Arrived, Arrived, Arrived];
    // Coarse to fine: 32-pixel blocks, then 16, then the picture itself.
    expect(flat(first.png, 32)).toBe(true);
    expect(flat(first.png, 33)).toBe(false);
    expect(flat(second.png, 16)).toBe(true);
    expect(flat(second.png, 32)).toBe(false);
    expect(flat(done.png, 16)).toBe(false);
    expect(done.usage).toMatchObject({ output_tokens: 66, total_tokens: expect.any(Number) });
    // Nothing held back: the drafts arrive a pause (DELAY_MS / 3) apart, not all at the end.
    expect(done.at - first.at).toBeGreaterThan(DELAY_MS / 3);

    // The same picture as without a stream.
    const plain = await client.images.generate({
      model: "gpt-image-1",
      prompt: "a lighthouse at dusk",
      size: "256x256",
    });
    expect(Buffer.from(plain.data![0]!.b64_json!, "base64").equals(done.png)).toBe(true);
  });

  it("streams an edit's drafts as image_edit events, and only the result without partial_images", async () => {
    const image = await toFile(
      encodePng({ width: 64, height: 64, channels: 3, pixels: new Uint8Array(64 * 64 * 3) }),
      "input.png",
      { type: "image/png" },
    );
    const edit = await client.images.edit({
      model: "gpt-image-1",
      image,
      prompt: "paint it",
      stream: true,
      partial_images: 1,
    });
    const events = await collect(edit as unknown as AsyncIterable<Record<string, unknown>>);
    expect(events.map((event) => event.type)).toEqual([
      "image_edit.partial_image",
      "image_edit.completed",
    ]);
    expect(inspectPng(events[1]!.png)).toMatchObject({ width: 64, height: 64 });

    const only = await client.images.generate({
      model: "gpt-image-1",
      prompt: "no drafts",
      size: "64x64",
      stream: true,
    });
    const types = (await collect(only as unknown as AsyncIterable<Record<string, unknown>>)).map(
      (event) => event.type,
    );
    expect(types).toEqual(["image_generation.completed"]);
  });

  it("answers an event stream that nginx and CDNs pass on as it comes", async () => {
    const response = await fetch(`${client.baseURL}/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${client.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "x", size: "32x32", stream: true }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.headers.get("x-accel-buffering")).toBe("no");
    expect(response.headers.get("cache-control")).toBe("no-cache");
    expect(await response.text()).toContain("event: image_generation.completed\n");
  });

  it("refuses partial_images outside 0 to 3 as OpenAI does", async () => {
    const refused = await client.images
      .generate({ model: "gpt-image-1", prompt: "x", stream: true, partial_images: 4 })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("partial_images");
  });
});

describe("a task with partial images on the demo channel, as npm start runs it", () => {
  it("streams the task's coarse drafts, then its image, with links to each", async () => {
    const stream = await openEvents({ url: server.url, key }, "/v1/images/tasks", {
      json: {
        model: "gpt-image-1",
        prompt: "a lighthouse at dusk",
        size: "256x256",
        partial_images: 2,
        response_format: "url",
      },
    });
    await stream.ended;
    expect(stream.events.map((event) => [event.id, event.event])).toEqual([
      ["0", "image.task.queued"],
      ["1.0", "image.task.in_progress"],
      ["1.1", "image.task.partial_image"],
      ["1.2", "image.task.partial_image"],
      ["final", "image.task.completed"],
    ]);
    const drafts = stream.events[3]!.json.partial_images as Array<{ index: number; url: string }>;
    expect(drafts.map((draft) => draft.index)).toEqual([0, 1]);
    const [first, second] = await Promise.all(
      drafts.map(async (draft) => Buffer.from(await (await fetch(draft.url)).arrayBuffer())),
    );
    expect(flat(first!, 32)).toBe(true);
    expect(flat(second!, 16)).toBe(true);
    expect(flat(second!, 32)).toBe(false);
    const done = stream.events[4]!.json as { data: Array<{ url: string }>; usage: unknown };
    const image = Buffer.from(await (await fetch(done.data[0]!.url)).arrayBuffer());
    expect(inspectPng(image)).toMatchObject({ width: 256, height: 256 });
    expect(flat(image, 16)).toBe(false);
    expect(done.usage).toMatchObject({ output_tokens: 66 });
  });
});
