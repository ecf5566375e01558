import { describe, expect, it } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import {
  readImageStream,
  type ImageStreamOptions,
  type StreamedImage,
} from "../../../src/tasks/run/read-image-stream.js";
import { TaskFailure } from "../../../src/tasks/core/task-failure.js";

const png = (shade: number) =>
  encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12).fill(shade) });
const event = (type: string, fields: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
const partial = (index: number) =>
  event("image_generation.partial_image", {
    b64_json: png(index * 10).toString("base64"),
    partial_image_index: index,
  });
const completed = (usage: unknown = { input_tokens: 1, output_tokens: 2, total_tokens: 3 }) =>
  event("image_generation.completed", { b64_json: png(255).toString("base64"), usage });

async function* body(...parts: string[]) {
  for (const part of parts) {
    // Split every event across chunks, as a network would.
    const bytes = Buffer.from(part);
    yield bytes.subarray(0, 7);
    yield bytes.subarray(7);
  }
}

async function read(parts: string[], options: { n?: number; maxPartials?: number } = {}) {
  const partials: Array<[number, StreamedImage]> = [];
  const result = await readImageStream(body(...parts), {
    n: options.n ?? 1,
    maxPartials: options.maxPartials ?? 3,
    maxImageBytes: 1024 * 1024,
    onPartial: async (index, image) => void partials.push([index, image]),
    scrub: (text) => text.replaceAll("sk-secret", "[redacted]"),
  });
  return { result, partials };
}

/** Options for `n` images, no partial images kept, nothing scrubbed. */
const plain = (n: number): ImageStreamOptions => ({
  n,
  maxPartials: 0,
  maxImageBytes: 1024 * 1024,
  onPartial: async () => undefined,
  scrub: (text) => text,
});

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (err: unknown) => err as TaskFailure,
  );

describe("readImageStream", () => {
  it("hands over each partial image in order, then the completed image with its usage", async () => {
    const { result, partials } = await read([partial(0), partial(1), completed()]);
    expect(
      partials.map(([index, image]) => [index, image.mime, image.bytes.equals(png(index * 10))]),
    ).toEqual([
      [0, "image/png", true],
      [1, "image/png", true],
    ]);
    expect(result.images).toHaveLength(1);
    expect(result.images[0]!.bytes.equals(png(255))).toBe(true);
    expect(result.usage).toEqual({ input_tokens: 1, output_tokens: 2, total_tokens: 3 });
  });

  it("keeps no more partial images than asked for, and sums usage over several images", async () => {
    const usage = { input_tokens: 1, input_tokens_details: { text_tokens: 1 }, total_tokens: 1 };
    const { result, partials } = await read(
      [partial(0), partial(1), completed(usage), partial(0), completed(usage)],
      { n: 2, maxPartials: 2 },
    );
    expect(partials.map(([index]) => index)).toEqual([0, 1]);
    expect(result.images).toHaveLength(2);
    expect(result.usage).toEqual({
      input_tokens: 2,
      input_tokens_details: { text_tokens: 2 },
      total_tokens: 2,
    });
  });

  it("skips events that are no JSON object and drafts that are no image, keeping the image after them", async () => {
    const { result, partials } = await read([
      "data: {not json\n\n",
      "data: 42\n\n",
      event("image_generation.partial_image", { b64_json: "%%%" }),
      partial(1),
      completed(),
    ]);
    expect(partials.map(([index, image]) => [index, image.bytes.equals(png(10))])).toEqual([
      [0, true],
    ]);
    expect(result.images).toHaveLength(1);
  });

  it("fails invalid_response on a cut stream, nothing but garbage, or a result that is no image", async () => {
    for (const [parts, message] of [
      [[partial(0)], /ended before the image was completed/],
      [["data: {not json\n\n"], /ended before the image was completed/],
      [
        [
          event("image_generation.completed", {
            b64_json: Buffer.from("GIF89a").toString("base64"),
          }),
        ],
        /not PNG/,
      ],
    ] as const) {
      const err = await failure(read([...parts]));
      expect(err).toBeInstanceOf(TaskFailure);
      expect(err?.code).toBe("invalid_response");
      expect(err?.message).toMatch(message);
    }
  });

  it("stops reading at the n-th completed image, leaving what follows unread", async () => {
    let readAfter = false;
    async function* heldOpen() {
      yield Buffer.from(completed() + completed());
      readAfter = true;
      await new Promise(() => undefined);
    }
    const result = await readImageStream(heldOpen(), plain(2));
    expect(result.images).toHaveLength(2);
    expect(readAfter).toBe(false);
  });

  it("fails with the channel's own error event, its key scrubbed", async () => {
    const err = await failure(
      read([
        partial(0),
        `event: error\ndata: ${JSON.stringify({
          type: "error",
          error: {
            code: "content_policy_violation",
            message: "no (sk-secret)",
            type: "image_generation_user_error",
          },
        })}\n\n`,
      ]),
    );
    expect(err?.toTaskError()).toEqual({
      code: "content_policy_violation",
      message: "no ([redacted])",
      type: "image_generation_user_error",
    });
  });

  it("ends at a [DONE] with the images made, fewer than n, leaving what follows unread", async () => {
    let readAfter = false;
    async function* heldOpen() {
      yield Buffer.from(completed() + "data: [DONE]\n\n");
      readAfter = true;
      await new Promise(() => undefined);
    }
    const result = await readImageStream(heldOpen(), plain(3));
    expect(result.images).toHaveLength(1);
    expect(readAfter).toBe(false);
  });

  describe("a stream that ends badly after the first of two images", () => {
    const errorEvent = `data: ${JSON.stringify({ type: "error", error: { code: "boom" } })}\n\n`;
    const notAnImage = event("image_generation.completed", {
      b64_json: Buffer.from("GIF89a").toString("base64"),
      usage: { input_tokens: 1, output_tokens: 4, total_tokens: 5 },
    });
    async function* cut() {
      yield Buffer.from(completed());
      throw new Error("socket hang up");
    }
    async function* parts(...events: string[]) {
      yield* body(...events);
    }

    it.each([
      ["breaks off", cut, "an error"],
      ["sends an error event", () => parts(completed(), errorEvent), "boom"],
    ])("%s: ends with the first image, and says what ended it", async (_, stream, code) => {
      const dropped: string[] = [];
      const result = await readImageStream(stream(), {
        ...plain(2),
        onDropped: (what) => dropped.push(what),
      });
      expect(result.images).toHaveLength(1);
      expect(dropped).toEqual([`the stream's end after 1 of 2 images (${code})`]);
    });

    it.each([
      ["the second", () => parts(completed(), notAnImage), "image 2 of 2"],
      ["the first", () => parts(notAnImage, completed()), "image 1 of 2"],
    ])("drops %s image when it is none, keeping the other and its usage", async (_, s, which) => {
      const dropped: string[] = [];
      const result = await readImageStream(s(), {
        ...plain(2),
        onDropped: (what) => dropped.push(what),
      });
      expect(result.images.map((image) => image.mime)).toEqual(["image/png"]);
      expect(dropped).toEqual([`${which} (invalid_response)`]);
      // The channel billed both: the usage it reported for the one that was none counts.
      expect(result.usage).toEqual({ input_tokens: 2, output_tokens: 6, total_tokens: 8 });
    });

    it("fails with the first image's reason when none of them is one", async () => {
      // Over the 1 MiB image limit, within what one event may hold.
      const tooLarge = event("image_generation.completed", { b64_json: "A".repeat(1_420_000) });
      const dropped: string[] = [];
      const err = await failure(
        readImageStream(parts(notAnImage, tooLarge), {
          ...plain(2),
          onDropped: (what) => dropped.push(what),
        }),
      );
      expect(err?.code).toBe("invalid_response");
      expect(err?.message).toMatch(/not PNG, JPEG or WebP/);
      expect(dropped).toEqual([]);
      const first = await failure(readImageStream(parts(tooLarge, notAnImage), plain(2)));
      expect(first?.message).toMatch(/larger than 1048576 bytes/);
    });

    it("throws the image away at the run's own end (a cancel, the deadline)", async () => {
      const run = new AbortController();
      run.abort("timeout");
      const err = await failure(readImageStream(cut(), { ...plain(2), signal: run.signal }));
      expect((err as unknown as Error).message).toBe("socket hang up");
    });
  });
});
