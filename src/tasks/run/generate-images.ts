import type { Channel } from "../../channels/channel.js";
import type { CallObserver } from "../../channels/call-observer.js";
import type { ChannelAnswer } from "../../channels/channel-answer.js";
import type { ChannelClient, ChannelRequest } from "../../channels/channel-client.js";
import { ChannelError } from "../../channels/channel-error.js";
import type { KeyScrubber } from "../../channels/key-scrubber.js";
import { readJsonDocument } from "../../channels/read-json-document.js";
import { readToDocumentEnd } from "../../net/read-to-document-end.js";
import { extensionOf } from "../../images/image-type.js";
import type { GeneratedImage } from "../core/generated-image.js";
import { imagesAsked } from "../core/task-record.js";
import { B64Extractor } from "./b64-extractor.js";
import { imageUsageOf } from "../core/image-usage.js";
import { decodeGeneration, invalidResponse } from "./decode-generation.js";
import { isEventStream, readStreamedAnswer, type StreamedRun } from "./read-streamed-answer.js";
import { TaskFailure } from "../core/task-failure.js";
import { base64Length } from "../../images/base64-length.js";

/** An input image of an edit, as it goes to the channel. */
export interface EditFile {
  /** `image`, `image[]` or `mask`. */
  field: string;
  mime: string;
  bytes: Buffer;
}

/** Dependencies and inputs of {@link generateImages}. */
export interface GenerateImagesInput {
  candidates: readonly Channel[];
  /** The generation's JSON body, or an edit's form fields. */
  body: Record<string, unknown>;
  /** An edit's images: the call goes to `/images/edits` as `multipart/form-data`. */
  files?: readonly EditFile[];
  /** Aborted on timeout, cancel or shutdown; its reason says which. */
  signal: AbortSignal;
  /**
   * How long the channel may stay silent: the task's whole timeout, which the
   * signal enforces (a generation sends nothing until it is done).
   */
  idleMs: number;
  /** Makes the call: failover, the channel's image timeout, caps, no redirects. */
  client: ChannelClient;
  /** Hears each try (the task line's channel and status, client spans). */
  observer?: CallObserver;
  /**
   * Partial images asked for: the call asks the channel for a stream
   * (`stream: true`, `partial_images`), whose drafts go to `onPartial` as
   * they come. A channel that answers plain JSON instead is read as JSON.
   */
  stream?: Pick<StreamedRun, "partialImages" | "onPartial" | "onSkipped">;
  /**
   * Hears of the first image of several that could not be had, the others kept: one of a JSON
   * answer, a stream's completed image that was none, or those a stream ended without.
   */
  onSkipped?: (what: string) => void;
}

/** Room in a channel's answer beside the images: revised prompts, usage, envelope. */
const ANSWER_OVERHEAD_BYTES = 256 * 1024;
/** Error bodies are read this far for their message; the rest is not needed. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * Runs one generation (an edit: `/images/edits`) through the channel client,
 * which tries the candidates under its failover rule: the next channel only
 * when the one before provably did not run it. Every failure becomes a
 * {@link TaskFailure} with a code and a message free of channel keys; an
 * abort is rethrown for the caller to name.
 *
 * What a channel sends is bounded while it arrives: the JSON answer to what
 * `n` images of `maxImageBytes` take (see {@link decodeGeneration} for images
 * answered as URLs); a stream, to what they and their partial images take.
 */
export async function generateImages(
  input: GenerateImagesInput,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { signal } = input;
  const answer = await guarded(signal, async () =>
    input.client.send(input.candidates, await requestOf(input)),
  );
  if (answer.status >= 400) {
    const text = await readErrorText(answer, signal);
    throw upstreamFailure(answer.status, text, answer.scrubber);
  }
  if (input.stream && isEventStream(answer)) {
    const result = await readStreamedAnswer(answer, {
      ...input.stream,
      n: imagesAsked(input.body),
      signal,
      ...(input.onSkipped ? { onDropped: input.onSkipped } : {}),
    });
    reportUsage(answer, result.usage);
    return result;
  }
  const limit = answerLimit(input.body, answer.channel.maxImageBytes);
  const extractor = await guarded(signal, () => extractImages(answer, limit));
  return decodeGeneration(extractor.rest, {
    channel: answer.channel,
    scrubber: answer.scrubber,
    requested: imagesAsked(input.body),
    signal,
    downloads: input.client.downloads,
    extracted: extractor.decoded,
    onUsage: (usage) => reportUsage(answer, usage),
    ...(input.onSkipped ? { onSkipped: input.onSkipped } : {}),
  });
}

/** The channel's usage, on its span and in the GenAI metrics, as a synchronous image call's. */
function reportUsage(answer: ChannelAnswer, raw: unknown): void {
  const usage = imageUsageOf(raw);
  if (usage) answer.observer?.usage?.(usage);
}

/** The answer's length as it arrives: its `Content-Length`, unless it is compressed. */
function answerBytes(answer: ChannelAnswer): number | undefined {
  const { headers } = answer;
  const encoding = headers["content-encoding"]?.trim().toLowerCase();
  if (encoding && encoding !== "identity") return undefined;
  const length = Number(headers["content-length"]);
  return Number.isSafeInteger(length) && length > 0 ? length : undefined;
}

/**
 * Reads a JSON answer of at most `limit` bytes, decoding its `b64_json`
 * images as they stream (a 4 MB base64 string is never built, copied or
 * parsed); an image over the channel's limit, or one that is not base64, is
 * the channel's `invalid_response`. Reading stops where the answer's
 * top-level object closes (see `readToDocumentEnd`): a channel that holds its
 * answer open after it, or sends more, does not cost the images it made.
 */
export async function extractImages(
  answer: ChannelAnswer,
  limit: number,
  imageKey?: string,
): Promise<B64Extractor> {
  const extractor = new B64Extractor(answer.channel.maxImageBytes, imageKey, answerBytes(answer));
  try {
    await readToDocumentEnd(answer.chunks({ maxBytes: limit }), (chunk) => {
      extractor.push(chunk);
      return extractor.complete;
    });
  } catch (err) {
    if (err instanceof RangeError) {
      throw invalidResponse(`has an image larger than ${answer.channel.maxImageBytes} bytes`);
    }
    if (err instanceof SyntaxError) throw invalidResponse("is not valid JSON");
    throw err;
  }
  return extractor;
}

/** The call: a generation's JSON, or an edit's form (built once, sent again on failover). */
async function requestOf(input: GenerateImagesInput): Promise<ChannelRequest> {
  const body = input.stream
    ? { ...input.body, stream: true, partial_images: input.stream.partialImages }
    : input.body;
  const encoded = await encodeImageCall(body, input.files);
  return {
    route: input.files ? "image_edit_tasks" : "image_tasks",
    method: "POST",
    path: input.files ? "/images/edits" : "/images/generations",
    headers: { "content-type": encoded.contentType },
    body: encoded.bytes,
    timeout: { idleMs: input.idleMs },
    signal: input.signal,
    ...(input.observer ? { observer: input.observer } : {}),
  };
}

/** An image call's body: a generation's JSON, or an edit's `multipart/form-data` with its images. */
export async function encodeImageCall(
  body: Record<string, unknown>,
  files: readonly EditFile[] | undefined,
): Promise<{ contentType: string; bytes: Buffer }> {
  if (!files) {
    return { contentType: "application/json", bytes: Buffer.from(JSON.stringify(body)) };
  }
  const form = new Request("http://form.invalid/", { method: "POST", body: editForm(body, files) });
  return {
    contentType: form.headers.get("content-type") ?? "multipart/form-data",
    bytes: Buffer.from(await form.arrayBuffer()),
  };
}

/**
 * An edit's form: the fields as text, then the images, named by their place
 * (`image-0.png`, `mask.png`): the client's file names are not passed on.
 */
function editForm(body: Record<string, unknown>, files: readonly EditFile[]): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(body)) form.append(name, String(value));
  files.forEach((file, index) => {
    const name = file.field === "mask" ? "mask" : `image-${index}`;
    form.append(
      file.field,
      new Blob([file.bytes], { type: file.mime }),
      `${name}.${extensionOf(file.mime)}`,
    );
  });
  return form;
}

/** Runs a step of the call: an abort is rethrown as its reason, a channel's error as a task failure. */
export async function guarded<T>(signal: AbortSignal, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof ChannelError) throw new TaskFailure(err.code, err.message, "upstream_error");
    throw err;
  }
}

/** The most a successful answer for this request may hold: `n` images and some room. */
export function answerLimit(body: Record<string, unknown>, maxImageBytes: number): number {
  return imagesAsked(body) * (base64Length(maxImageBytes) + ANSWER_OVERHEAD_BYTES);
}

/** The start of an error body, enough for its message. */
export async function readErrorText(answer: ChannelAnswer, signal: AbortSignal): Promise<string> {
  try {
    // To the error object's end: a channel that holds its answer open fails the run now.
    return (await readJsonDocument(answer, MAX_ERROR_BODY_BYTES)).toString("utf8");
  } catch {
    if (signal.aborted) throw signal.reason;
    // Too long or broken off: the status-based message will do.
    return "";
  }
}

/** The channel's own error, passed on with its code and message, scrubbed of its key. */
export function upstreamFailure(status: number, text: string, scrubber: KeyScrubber): TaskFailure {
  let code = status === 429 ? "rate_limit_exceeded" : "upstream_error";
  let message = `The upstream channel answered with status ${status}.`;
  let type = "upstream_error";
  let envelope = false;
  try {
    const error = (JSON.parse(text) as { error?: Record<string, unknown> } | null)?.error;
    if (error && typeof error === "object") {
      envelope = true;
      if (typeof error.code === "string" && error.code) code = error.code;
      if (typeof error.message === "string" && error.message) message = error.message;
      if (typeof error.type === "string" && error.type) type = error.type;
    }
  } catch {
    // Not an OpenAI error body: the status-based message stands.
  }
  // Every field is the channel's own text, so each is scrubbed, not only the message.
  return new TaskFailure(
    scrubber.scrubString(code).slice(0, 100),
    scrubber.scrubString(message).slice(0, 2000),
    scrubber.scrubString(type).slice(0, 100),
    { status: envelope ? status : bareErrorStatus(status) },
  );
}

/**
 * What the passthrough answers for a channel error without an OpenAI body
 * (`proxy/pass-on-channel-error.ts`): a timeout page 504, a rate limit 429,
 * anything else 502.
 */
function bareErrorStatus(status: number): number {
  if (status === 504 || status === 524 || status === 408) return 504;
  return status === 429 ? 429 : 502;
}
