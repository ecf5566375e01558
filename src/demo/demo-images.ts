import { createHash } from "node:crypto";
import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { estimateTokens } from "./demo-chat-reply.js";
import {
  clientGoneSignal,
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  readObjectBody,
  sendJson,
  wholeNumber,
} from "./demo-http-helpers.js";
import { readImageStream, streamImages, type ImageStreamRequest } from "./demo-image-stream.js";
import type { DemoHandler } from "./demo-route.js";
import {
  drawDemoImage,
  MAX_DEMO_SIDE,
  MIN_DEMO_SIDE,
  parseDemoImageSize,
  type ImageSize,
} from "./draw-demo-image.js";
import { encodePng, type RawImage } from "./png-encoder.js";
import { formField, isMultipartRequest, readDemoForm, readRequiredForm } from "./read-demo-form.js";

/** A prompt starting with this fails like a moderation refusal, to show a failed task. */
export const DEMO_FAIL_PREFIX = "!fail";

/** Tokens an input image counts for in the demo's usage (a low-detail image's count). */
const TOKENS_PER_INPUT_IMAGE = 85;

/** What one image request asks the demo to draw. */
interface DrawRequest {
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

/** `POST /v1/images/generations`: pictures drawn from the prompt after the configured delay. */
export const handleImageGenerations: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const { value: body } = await readObjectBody(req);
  const prompt = requirePrompt(body.prompt);
  await answerImages(res, gone, context.imageDelayMs, {
    model: body.model,
    prompt,
    seed: prompt,
    n: wholeNumber(body.n, "n", 1, 10, 1),
    size: requireSize(body.size, undefined),
    inputImages: 0,
    stream: readImageStream("image_generation", body.stream, body.partial_images),
  });
};

/**
 * `POST /v1/images/edits`: OpenAI's multipart form (`image` or `image[]` files, optional `mask`)
 * or its JSON body (`images: [{image_url}]`). The picture is drawn from the prompt and the input
 * images' bytes, framed to tell it from a generation; `size: auto` takes a PNG input's size.
 */
export const handleImageEdits: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  let request: DrawRequest;
  if (isMultipartRequest(req)) {
    const form = await readDemoForm(req);
    const images = form.files.filter((f) => f.field === "image" || f.field === "image[]");
    const prompt = requirePrompt(formField(form, "prompt"));
    if (images.length === 0) throw new DemoRequestError(400, missingParam("image"));
    request = {
      model: formField(form, "model"),
      prompt,
      seed: `${prompt}\u0000${images.map((f) => f.sha256).join(",")}`,
      n: wholeNumber(formField(form, "n"), "n", 1, 10, 1),
      size: requireSize(formField(form, "size"), pngSize(images[0]?.head)),
      inputImages: images.length,
      stream: readImageStream(
        "image_edit",
        formField(form, "stream"),
        formField(form, "partial_images"),
      ),
    };
  } else {
    const { value: body } = await readObjectBody(req);
    const prompt = requirePrompt(body.prompt);
    const { images } = body;
    if (images === undefined || images === null) {
      throw new DemoRequestError(400, missingParam("images"));
    }
    if (!Array.isArray(images) || images.length === 0 || !images.every(isJsonObject)) {
      throw new DemoRequestError(
        400,
        invalidParam("images", `'images' must be a non-empty list of {"image_url": ...} objects.`),
      );
    }
    const references = images.map((image) => String(image.image_url ?? image.file_id ?? ""));
    const hash = createHash("sha256");
    for (const reference of references) hash.update(reference).update("\u0000");
    request = {
      model: body.model,
      prompt,
      seed: `${prompt}\u0000${hash.digest("hex")}`,
      n: wholeNumber(body.n, "n", 1, 10, 1),
      size: requireSize(body.size, pngSize(dataUrlHead(references[0] ?? ""))),
      inputImages: images.length,
      stream: readImageStream("image_edit", body.stream, body.partial_images),
    };
  }
  await answerImages(res, gone, context.imageDelayMs, request);
};

/** `POST /v1/images/variations` (dall-e-2): pictures drawn from the input image's bytes. */
export const handleImageVariations: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const form = await readRequiredForm(req, "an 'image' file");
  const image = form.files.find((f) => f.field === "image");
  if (!image) throw new DemoRequestError(400, missingParam("image"));
  await answerImages(res, gone, context.imageDelayMs, {
    model: formField(form, "model") ?? "dall-e-2",
    seed: `variation\u0000${image.sha256}`,
    n: wholeNumber(formField(form, "n"), "n", 1, 10, 1),
    size: requireSize(formField(form, "size"), undefined),
    inputImages: 1,
  });
};

function requirePrompt(prompt: unknown): string {
  if (typeof prompt !== "string" || prompt.length === 0) {
    throw new DemoRequestError(400, missingParam("prompt"));
  }
  return prompt;
}

function requireSize(size: unknown, auto: ImageSize | undefined): ImageSize {
  if (auto && (size === undefined || size === null || size === "auto")) return auto;
  const parsed = parseDemoImageSize(size);
  if (!parsed) {
    throw new DemoRequestError(
      400,
      invalidParam("size", "'size' must be 'auto' or 'WIDTHxHEIGHT'."),
    );
  }
  return parsed;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** A PNG's size from its first 24 bytes (the IHDR chunk), clamped like a requested size. */
function pngSize(head: Buffer | undefined): ImageSize | undefined {
  if (!head || head.length < 24 || !head.subarray(0, 8).equals(PNG_SIGNATURE)) return undefined;
  const clamp = (side: number) => Math.min(MAX_DEMO_SIDE, Math.max(MIN_DEMO_SIDE, side));
  return { width: clamp(head.readUInt32BE(16)), height: clamp(head.readUInt32BE(20)) };
}

/** The first bytes of a base64 `data:` URL, without decoding the rest. */
function dataUrlHead(url: string): Buffer | undefined {
  const match = /^data:[^,]*;base64,/i.exec(url);
  if (!match) return undefined;
  return Buffer.from(url.slice(match[0].length, match[0].length + 44), "base64");
}

/**
 * Waits the configured delay (a client that gives up stops the wait), then answers like
 * gpt-image-1: PNG bytes in `b64_json` and token usage. A requested `output_format` of jpeg/webp
 * or `response_format: "url"` still gets PNG bytes in `b64_json`; the service stores and serves
 * image URLs itself.
 */
async function answerImages(
  res: Parameters<DemoHandler>[1],
  gone: AbortSignal,
  delayMs: number,
  request: DrawRequest,
): Promise<void> {
  const { model, prompt, seed, n, size, inputImages } = request;
  // A stream spreads the delay evenly before each of its events.
  const pauseMs = request.stream ? delayMs / (n * (request.stream.partials + 1)) : delayMs;
  try {
    await sleep(pauseMs, undefined, { signal: gone });
  } catch {
    return;
  }
  // Checked after the delay, like a real moderation refusal, so a demo task visibly runs first.
  if (prompt?.trimStart().startsWith(DEMO_FAIL_PREFIX)) {
    throw new DemoRequestError(400, {
      message:
        "Your request was rejected by the demo channel's safety system (the prompt starts with '!fail').",
      type: "invalid_request_error",
      code: "content_policy_violation",
    });
  }

  const textTokens = estimateTokens(prompt ?? "");
  const imageTokens = inputImages * TOKENS_PER_INPUT_IMAGE;
  const tokensPerImage = Math.ceil((size.width * size.height) / 1000);
  const draw = (i: number) => {
    const image = drawDemoImage(seed, size, i);
    if (inputImages > 0) drawFrame(image);
    return image;
  };
  if (request.stream) {
    // The input counts once, with the first picture.
    const pictures = Array.from({ length: n }, (_, i) => ({
      draw: () => draw(i),
      usage: usageOf(i === 0 ? textTokens : 0, i === 0 ? imageTokens : 0, tokensPerImage),
    }));
    await streamImages(res, gone, pauseMs, { ...request.stream, size }, pictures);
    return;
  }

  const data: Array<Record<string, unknown>> = [];
  for (let i = 0; i < n; i++) {
    if (gone.aborted) return;
    const image = draw(i);
    const item: Record<string, unknown> = { b64_json: encodePng(image).toString("base64") };
    if (prompt !== undefined && typeof model === "string" && model.startsWith("dall-e")) {
      item.revised_prompt = prompt;
    }
    data.push(item);
    // Big pictures take tens of milliseconds each; let other requests in between them.
    await nextTurn();
  }
  if (gone.aborted) return;

  sendJson(res, 200, {
    created: Math.floor(Date.now() / 1000),
    data,
    output_format: "png",
    size: `${size.width}x${size.height}`,
    usage: usageOf(textTokens, imageTokens, n * tokensPerImage),
  });
}

/** gpt-image's usage object. */
function usageOf(textTokens: number, imageTokens: number, outputTokens: number) {
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
