import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
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
import { readImageStream, streamImages } from "./demo-image-stream.js";
import type { DemoHandler } from "./demo-route.js";
import {
  MAX_DEMO_SIDE,
  MIN_DEMO_SIDE,
  parseDemoImageSize,
  type ImageSize,
} from "./draw-demo-image.js";
import { formField, isMultipartRequest, readDemoForm, readRequiredForm } from "./read-demo-form.js";
import {
  drawImages,
  drawPicture,
  refuseFailPrompt,
  TOKENS_PER_INPUT_IMAGE,
  usageOf,
  type DrawRequest,
} from "./draw-demo-images.js";

export { DEMO_FAIL_PREFIX } from "./draw-demo-images.js";
export type { DrawRequest } from "./draw-demo-images.js";

/** `POST /v1/images/generations`: pictures drawn from the prompt after the configured delay. */
export const handleImageGenerations: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const { value: body } = await readObjectBody(req);
  await answerImages(res, gone, context.imageDelayMs, generationRequest(body));
};

/** What a generation's JSON body asks to draw. */
export function generationRequest(body: Record<string, unknown>): DrawRequest {
  const prompt = requirePrompt(body.prompt);
  return {
    model: body.model,
    prompt,
    seed: prompt,
    n: wholeNumber(body.n, "n", 1, 10, 1),
    size: requireSize(body.size, undefined),
    inputImages: 0,
    stream: readImageStream("image_generation", body.stream, body.partial_images),
  };
}

/**
 * `POST /v1/images/edits`: OpenAI's multipart form (`image` or `image[]` files, optional `mask`)
 * or its JSON body (`images: [{image_url}]`). The picture is drawn from the prompt and the input
 * images' bytes, framed to tell it from a generation; `size: auto` takes a PNG input's size.
 */
export const handleImageEdits: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  await answerImages(res, gone, context.imageDelayMs, await readEditRequest(req));
};

/** What an edit (its form or its JSON body) asks to draw. */
export async function readEditRequest(req: Parameters<DemoHandler>[0]): Promise<DrawRequest> {
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
  return request;
}

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
  if (prompt === undefined || prompt === null || prompt === "") {
    throw new DemoRequestError(400, missingParam("prompt"));
  }
  // As OpenAI answers a prompt of another type: code invalid_type, naming what was sent.
  if (typeof prompt !== "string") {
    throw new DemoRequestError(400, {
      message: `Invalid type for 'prompt': expected a string, but got ${jsonTypeName(prompt)} instead.`,
      type: "invalid_request_error",
      param: "prompt",
      code: "invalid_type",
    });
  }
  return prompt;
}

function jsonTypeName(value: unknown): string {
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer" : "a decimal";
  if (typeof value === "boolean") return "a boolean";
  return "an object";
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
  const { prompt, n, size, inputImages } = request;
  // A stream spreads the delay evenly before each of its events.
  const pauseMs = request.stream ? delayMs / (n * (request.stream.partials + 1)) : delayMs;
  try {
    await sleep(pauseMs, undefined, { signal: gone });
  } catch {
    return;
  }
  // Checked after the delay, like a real moderation refusal, so a demo task visibly runs first.
  refuseFailPrompt(prompt);
  const textTokens = estimateTokens(prompt ?? "");
  const imageTokens = inputImages * TOKENS_PER_INPUT_IMAGE;
  const tokensPerImage = Math.ceil((size.width * size.height) / 1000);
  const draw = (i: number) => drawPicture(request, i);
  if (request.stream) {
    // The input counts once, with the first picture.
    const pictures = Array.from({ length: n }, (_, i) => ({
      draw: () => draw(i),
      usage: usageOf(i === 0 ? textTokens : 0, i === 0 ? imageTokens : 0, tokensPerImage),
    }));
    await streamImages(res, gone, pauseMs, { ...request.stream, size }, pictures);
    return;
  }

  const body = await drawImages(request, gone);
  if (body) sendJson(res, 200, body);
}
