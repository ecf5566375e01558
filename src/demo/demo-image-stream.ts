import type { ServerResponse } from "node:http";
import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { DemoRequestError, wholeNumber } from "./demo-http-helpers.js";
import { openEventStream } from "./demo-event-stream.js";
import type { ImageSize } from "./draw-demo-image.js";
import { encodePng, type RawImage } from "./png-encoder.js";

/** What a streamed image request asked for: `stream: true` and `partial_images` 0 to 3. */
export interface ImageStreamRequest {
  /** `image_generation` (generations) or `image_edit` (edits): the events' prefix. */
  kind: "image_generation" | "image_edit";
  /** Partial images before each final one. */
  partials: number;
}

/** Reads `stream` and `partial_images` (JSON values, or form text); undefined: not streamed. */
export function readImageStream(
  kind: ImageStreamRequest["kind"],
  stream: unknown,
  partialImages: unknown,
): ImageStreamRequest | undefined {
  const partials = wholeNumber(partialImages, "partial_images", 0, 3, 0);
  if (stream === true || stream === "true") return { kind, partials };
  if (stream !== undefined && stream !== null && stream !== false && stream !== "false") {
    throw new DemoRequestError(400, {
      message: "'stream' must be a boolean.",
      type: "invalid_request_error",
      param: "stream",
      code: "invalid_value",
    });
  }
  return undefined;
}

/** One picture of the answer, drawn when asked, and its share of the token usage. */
export interface StreamedPicture {
  draw(): RawImage;
  usage: Record<string, unknown>;
}

/**
 * Answers as gpt-image models stream: for each picture, `partials` drafts
 * (`<kind>.partial_image`, coarse to fine: blocks of 2^(3 + partials - k)
 * pixels, each the average of the block) and then `<kind>.completed` with
 * the PNG and its usage; `pauseMs` between two events (the caller waited
 * before the first).
 */
export async function streamImages(
  res: ServerResponse,
  gone: AbortSignal,
  pauseMs: number,
  request: ImageStreamRequest & { size: ImageSize },
  pictures: readonly StreamedPicture[],
): Promise<void> {
  const { kind, partials, size } = request;
  let first = true;
  const pause = () => {
    const wasFirst = first;
    first = false;
    return wait(wasFirst ? 0 : pauseMs, gone);
  };
  const stream = openEventStream(res, 0, gone);
  const common = () => ({
    created_at: Math.floor(Date.now() / 1000),
    size: `${size.width}x${size.height}`,
    quality: "auto",
    background: "opaque",
    output_format: "png",
  });
  for (const picture of pictures) {
    const image = picture.draw();
    for (let k = 0; k < partials; k += 1) {
      if (!(await pause())) return;
      const draft = coarse(image, 2 ** (3 + partials - k));
      stream.send(
        {
          type: `${kind}.partial_image`,
          b64_json: encodePng(draft).toString("base64"),
          partial_image_index: k,
          ...common(),
        },
        `${kind}.partial_image`,
      );
    }
    if (!(await pause())) return;
    stream.send(
      {
        type: `${kind}.completed`,
        b64_json: encodePng(image).toString("base64"),
        ...common(),
        usage: picture.usage,
      },
      `${kind}.completed`,
    );
  }
  stream.end();
}

/** Sleeps `ms`, then lets other requests in; false when the client went away meanwhile. */
async function wait(ms: number, gone: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal: gone });
    await nextTurn();
    return !gone.aborted;
  } catch {
    return false;
  }
}

/** The picture in blocks of `block` pixels, each the average of its pixels: a draft of it. */
export function coarse(image: RawImage, block: number): RawImage {
  const { width, height, channels, pixels } = image;
  const out = new Uint8Array(pixels.length);
  const sums = new Float64Array(channels);
  for (let by = 0; by < height; by += block) {
    const y1 = Math.min(height, by + block);
    for (let bx = 0; bx < width; bx += block) {
      const x1 = Math.min(width, bx + block);
      sums.fill(0);
      for (let y = by; y < y1; y++) {
        for (let x = bx; x < x1; x++) {
          const p = (y * width + x) * channels;
          for (let c = 0; c < channels; c++) sums[c]! += pixels[p + c]!;
        }
      }
      const count = (y1 - by) * (x1 - bx);
      for (let y = by; y < y1; y++) {
        for (let x = bx; x < x1; x++) {
          const p = (y * width + x) * channels;
          for (let c = 0; c < channels; c++) out[p + c] = Math.round(sums[c]! / count);
        }
      }
    }
  }
  return { width, height, channels, pixels: out };
}
