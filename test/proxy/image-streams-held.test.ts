import type { ServerResponse } from "node:http";
import OpenAI, { toFile } from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { encodePng } from "../../src/demo/png-encoder.js";
import { startFakeUpstream, type FakeRoute, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

/*
 * An image stream (`stream: true` on /v1/images/generations or /edits) passed through from a
 * channel, or a proxy or CDN before it, that holds it open after its last image: the openai SDK
 * reads a stream to its end, so the client waited for the channel's timeout (1 s here) and was
 * then cut, after having every image. The stream ends for the client at its `n`-th
 * `image_generation.completed` (or `image_edit.completed`) event, n read from the body or form.
 */

const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });
const B64 = PNG.toString("base64");
const usage = { input_tokens: 1, output_tokens: 1, total_tokens: 2 };

let upstream: FakeUpstream;
let app: TestApp;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  app = await startTestApp({
    upstream,
    config: {
      channels: [
        {
          name: "held",
          baseUrl: upstream.baseUrl,
          apiKey: UPSTREAM_KEY,
          models: ["gpt-image-1"],
          timeoutSec: 1,
          imageTimeoutSec: 1,
        },
      ],
    },
  });
  client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
});
afterEach(() => upstream.reset());
afterAll(async () => {
  await app.close();
  await upstream.close();
});

/** One server-sent event: `data` as JSON (its keys in the order given), with an `event:` line. */
const sse = (data: Record<string, unknown>, name?: string) =>
  `${name ? `event: ${name}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

/**
 * A channel that writes `events` (a pause between the first and the rest, as between images),
 * then holds the stream open; the response is kept to tell whether the service dropped it.
 */
function holdStreamOpen(route: FakeRoute, events: string[]): { held?: ServerResponse } {
  const seen: { held?: ServerResponse } = {};
  upstream.behave(route, {
    kind: "custom",
    respond: (_req, res) => {
      seen.held = res;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(events[0]);
      setTimeout(() => {
        if (!res.destroyed) res.write(events.slice(1).join(""));
      }, 200);
    },
  });
  return seen;
}

const partial = (kind: string) => ({ type: `${kind}.partial_image`, b64_json: B64 });
const completed = (kind: string) => ({ type: `${kind}.completed`, b64_json: B64, usage });

describe("an image stream held open after its last image", () => {
  it("ends for the SDK at its one completed image (n not given)", async () => {
    const events = [sse(partial("image_generation")), sse(completed("image_generation"))];
    holdStreamOpen("images", events);
    const stream = await client.images.generate({
      model: "gpt-image-1",
      prompt: "held",
      stream: true,
    });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types).toEqual(["image_generation.partial_image", "image_generation.completed"]);
  });

  it("ends at the n-th image, not the first: n = 2 in the body", async () => {
    // The first image comes before the pause, the second after it: ending at the first cuts it.
    // The second has no usage (not parsed) and names its type after its image.
    const last = { b64_json: "A".repeat(4096), type: "image_generation.completed" };
    const events = [sse(completed("image_generation")), sse(last)];
    holdStreamOpen("images", events);
    const stream = await client.images.generate({
      model: "gpt-image-1",
      prompt: "held",
      n: 2,
      stream: true,
    });
    let images = 0;
    for await (const event of stream) if (event.type === "image_generation.completed") images += 1;
    expect(images).toBe(2);
  });

  it("ends an edit's stream (a form, n = 3) at its third image, two too large to be read whole", async () => {
    // Past the 4 MiB an event is read whole for: told by its event line, or by its type at its
    // end without one.
    const large = { b64_json: "A".repeat(5 * 1024 * 1024), type: "image_edit.completed" };
    const events = [sse(completed("image_edit")), sse(large, "image_edit.completed"), sse(large)];
    holdStreamOpen("edits", events);
    const stream = await client.images.edit({
      model: "gpt-image-1",
      prompt: "held",
      image: await toFile(PNG, "a.png", { type: "image/png" }),
      n: 3,
      stream: true,
    });
    let images = 0;
    for await (const event of stream) if (event.type === "image_edit.completed") images += 1;
    expect(images).toBe(3);
  });

  it("drops the held stream's connection a second after its last image", async () => {
    const seen = holdStreamOpen("images", ["", sse(completed("image_generation"))]);
    const stream = await client.images.generate({
      model: "gpt-image-1",
      prompt: "held",
      stream: true,
    });
    for await (const event of stream) expect(event.type).toBe("image_generation.completed");
    await expect.poll(() => seen.held?.destroyed, { timeout: 5_000 }).toBe(true);
  });

  it("is not ended early when n is no count the service reads: passed as it comes, then cut", async () => {
    const events = [sse(completed("image_generation"))];
    holdStreamOpen("images", events);
    const response = await fetch(`${app.baseURL}/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "held", n: "one", stream: true }),
    });
    expect(response.status).toBe(200);
    // The channel's timeout (1 s) cuts it: the stream never looks complete.
    await expect(response.text()).rejects.toThrow();
  });
});
