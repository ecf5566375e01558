import { setImmediate as nextTurn } from "node:timers/promises";
import { estimateTokens } from "./demo-chat-reply.js";
import { DemoRequestError } from "./demo-http-helpers.js";
import type { ImageStreamRequest } from "./demo-image-stream.js";
import { drawDemoImage, type ImageSize } from "./draw-demo-image.js";
import { encodePng, type RawImage } from "./png-encoder.js";

/** A prompt starting with this fails like a moderation refusal, to show a failed task. */
export const DEMO_FAIL_PREFIX = "!fail";

/** Tokens an input image counts for in the demo's usage (a low-detail image's count). */
export const TOKENS_PER_INPUT_IMAGE = 85;

/** What one image request asks the demo to draw. */
export interface DrawRequest {
  model: unknown;
  /** The prompt, when the route has one (variations have none). */
  prompt?: string;
  /** What the pictures are drawn from: the prompt, and for edits the input images' hashes. */
  seed: string;
  n: number;
  size: ImageSize;
  /** Input images (edits, variations): the pictures get a frame, and usage counts them. */
  inputImages: number;
  /** `stream: true`: answered as server-sent events, with partial images if asked. */
  stream?: ImageStreamRequest;
}

/**
 * The synchronous route's answer to `request`, drawn now (after any delay):
 * gpt-image-1's, PNG bytes in `b64_json` and token usage; undefined when
 * `gone` aborted meanwhile.
 */
export async function drawImages(
  request: DrawRequest,
  gone?: AbortSignal,
): Promise<Record<string, unknown> | undefined> {
  const { model, prompt, n, size, inputImages } = request;
  const data: Array<Record<string, unknown>> = [];
  for (let i = 0; i < n; i++) {
    if (gone?.aborted) return undefined;
    const item: Record<string, unknown> = {
      b64_json: encodePng(drawPicture(request, i)).toString("base64"),
    };
    if (prompt !== undefined && typeof model === "string" && model.startsWith("dall-e")) {
      item.revised_prompt = prompt;
    }
    data.push(item);
    // Big pictures take tens of milliseconds each; let other requests in between them.
    await nextTurn();
  }
  if (gone?.aborted) return undefined;
  const textTokens = estimateTokens(prompt ?? "");
  const imageTokens = inputImages * TOKENS_PER_INPUT_IMAGE;
  const tokensPerImage = Math.ceil((size.width * size.height) / 1000);
  return {
    created: Math.floor(Date.now() / 1000),
    data,
    output_format: "png",
    size: `${size.width}x${size.height}`,
    usage: usageOf(textTokens, imageTokens, n * tokensPerImage),
  };
}

/** Picture `i` of `request` (framed when drawn from input images). */
export function drawPicture(request: DrawRequest, i: number): RawImage {
  const image = drawDemoImage(request.seed, request.size, i);
  if (request.inputImages > 0) drawFrame(image);
  return image;
}

/** A prompt starting with {@link DEMO_FAIL_PREFIX} is refused, as a moderation refusal. */
export function refuseFailPrompt(prompt: string | undefined): void {
  if (prompt?.trimStart().startsWith(DEMO_FAIL_PREFIX)) {
    throw new DemoRequestError(400, {
      message:
        "Your request was rejected by the demo channel's safety system (the prompt starts with '!fail').",
      type: "invalid_request_error",
      code: "content_policy_violation",
    });
  }
}

/** gpt-image's usage object. */
export function usageOf(textTokens: number, imageTokens: number, outputTokens: number) {
  return {
    input_tokens: textTokens + imageTokens,
    input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens },
    output_tokens: outputTokens,
    total_tokens: textTokens + imageTokens + outputTokens,
  };
}

/** A white frame, a thirty-second of the short side wide: marks a picture made from an input. */
function drawFrame(image: RawImage): void {
  const { width, height, channels, pixels } = image;
  const border = Math.max(1, Math.round(Math.min(width, height) / 32));
  for (let y = 0; y < height; y++) {
    const edgeRow = y < border || y >= height - border;
    for (let x = 0; x < width; x++) {
      if (edgeRow || x < border || x >= width - border) {
        pixels.fill(255, (y * width + x) * channels, (y * width + x + 1) * channels);
      } else {
        x = width - border - 1; // skip the inside of the row
      }
    }
  }
}
