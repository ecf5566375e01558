import { setTimeout as delay } from "node:timers/promises";
import { fetch as undiciFetch } from "undici";
import type { Channel } from "../../channels/channel.js";
import type { DownloadAgents } from "../../channels/download-agents.js";
import type { KeyScrubber } from "../../channels/key-scrubber.js";
import { sniffImageType } from "../../images/image-type.js";
import { assertUrlAllowed, ForbiddenAddressError } from "../../net/address-policy.js";
import { BodyTooLargeError } from "../../net/read-capped-body.js";
import { readBodyToEnd } from "../../net/read-body-to-end.js";
import { ImageEnd } from "../../images/image-end.js";
import { TaskFailure } from "../core/task-failure.js";
import { base64Length } from "../../images/base64-length.js";
import { extractedIndex } from "./b64-extractor.js";

import type { GeneratedImage } from "../core/generated-image.js";

/** Where an answer came from, for {@link decodeGeneration}. */
export interface GenerationSource {
  channel: Channel;
  /** Finds the credential the call sent. */
  scrubber: KeyScrubber;
  /** The images the request asks for (`imagesAsked`). */
  requested: number;
  /** The task's signal: downloads of image URLs stop with it. */
  signal: AbortSignal;
  /** Where image URLs are downloaded from: the runs' channel client's agents. */
  downloads: DownloadAgents;
  /**
   * The images taken out of the answer as it streamed (see `B64Extractor`),
   * which `bytes` names by their markers.
   */
  extracted?: readonly Buffer[];
  /**
   * Hears the answer's usage (scrubbed) before any image URL is downloaded:
   * the call's span ends once its body is read, so a usage told after the
   * downloads would miss it.
   */
  onUsage?: (usage: unknown) => void;
  /** Hears what was dropped: an image of several that could not be had (see {@link decodeGenerationBody}). */
  onSkipped?: (what: string) => void;
}

/** Objects nested deeper than this in `usage` are dropped rather than walked. */
const MAX_USAGE_DEPTH = 16;

/**
 * A channel's generation answer as images: each `b64_json` decoded, each
 * `url` downloaded, each checked to be a PNG, JPEG or WebP of at most the
 * channel's `maxImageBytes`, `revised_prompt` and `usage` scrubbed of the key.
 *
 * Image URLs are fetched only from the channel's own origin or its
 * `imageUrlOrigins` (those never on loopback, private or metadata addresses),
 * and no redirect is followed.
 * @throws TaskFailure `invalid_response` for anything else
 */
export async function decodeGeneration(
  bytes: Buffer,
  source: GenerationSource,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw invalidResponse("is not valid JSON");
  }
  return decodeGenerationBody(parsed, source);
}

/**
 * {@link decodeGeneration} of an answer parsed already (an async job's
 * result, inside the poll's answer).
 *
 * An answer of several images keeps those it could have when one of them
 * cannot be (a download failed for good, one that is no image or too large):
 * the others are made and billed, so the task completes with them, and
 * `onSkipped` hears of the one dropped. An answer none of whose images can
 * be had fails with the first one's failure; an abort is rethrown.
 */
export async function decodeGenerationBody(
  parsed: unknown,
  source: GenerationSource,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { scrubber } = source;
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data) || data.length === 0) throw invalidResponse("holds no images");
  const { requested } = source;
  if (data.length > requested) {
    throw invalidResponse(`holds ${data.length} images where ${requested} were asked for`);
  }
  const usage = scrubDeep((parsed as { usage?: unknown }).usage, scrubber, 0);
  if (usage !== undefined) source.onUsage?.(usage);
  const items = data as Array<Record<string, unknown> | null>;
  const images = await decodeEach(items, (item) => decodeItem(item, source), source);
  return { images, ...(usage === undefined ? {} : { usage }) };
}

/**
 * Each of an answer's images, by `decodeOne` (undefined: the item holds none). One that cannot
 * be had (a `TaskFailure`) is dropped, the others kept: they were made and billed; `onSkipped`
 * hears of the first one dropped once some stand. Answers none of whose images can be had fail
 * with the first one's failure (nothing was skipped: the task fails); an abort, or another
 * error, is rethrown.
 */
export async function decodeEach<T>(
  items: readonly T[],
  decodeOne: (item: T) => Promise<GeneratedImage | undefined> | GeneratedImage | undefined,
  source: Pick<GenerationSource, "signal" | "onSkipped">,
): Promise<GeneratedImage[]> {
  const images: GeneratedImage[] = [];
  let failure: TaskFailure | undefined;
  let skipped: string | undefined;
  for (const [index, item] of items.entries()) {
    try {
      const image = await decodeOne(item);
      if (image) images.push(image);
    } catch (err) {
      if (!(err instanceof TaskFailure) || source.signal.aborted) throw err;
      failure ??= err;
      skipped ??= `image ${index + 1} of ${items.length} (${err.code})`;
    }
  }
  if (images.length === 0 && failure) throw failure;
  if (skipped !== undefined) source.onSkipped?.(skipped);
  return images;
}

/** One image of an answer: its `b64_json` decoded, or its `url` downloaded, and checked. */
async function decodeItem(
  item: Record<string, unknown> | null,
  source: GenerationSource,
): Promise<GeneratedImage> {
  let bytes = base64Image(item?.b64_json, source);
  if (!bytes) {
    if (typeof item?.url !== "string") {
      throw invalidResponse("has an image with neither b64_json nor url");
    }
    bytes = await download(item.url, source);
  }
  const revised = item?.revised_prompt;
  return checkedImage(bytes, typeof revised === "string" ? revised : undefined, source);
}

/**
 * The bytes of an answer's base64 image `value`: taken out of the answer as it streamed (its
 * marker, see `B64Extractor`) or decoded now; undefined when it holds none.
 * @throws TaskFailure `invalid_response` when it is larger than the channel's `maxImageBytes`
 */
export function base64Image(value: unknown, source: GenerationSource): Buffer | undefined {
  const marker = extractedIndex(value);
  const kept = marker === undefined ? undefined : source.extracted?.[marker];
  if (kept) return kept;
  if (typeof value !== "string" || value.length === 0) return undefined;
  const { maxImageBytes } = source.channel;
  if (value.length > base64Length(maxImageBytes) + 4) {
    throw invalidResponse(`has an image larger than ${maxImageBytes} bytes`);
  }
  return Buffer.from(value, "base64");
}

/**
 * `bytes` as one of the answer's images, with its revised prompt scrubbed of the key.
 * @throws TaskFailure `invalid_response` when it is larger than the channel's `maxImageBytes`,
 *   or no PNG, JPEG or WebP
 */
export function checkedImage(
  bytes: Buffer,
  revisedPrompt: string | undefined,
  source: GenerationSource,
): GeneratedImage {
  const { maxImageBytes } = source.channel;
  if (bytes.length > maxImageBytes) {
    throw invalidResponse(`has an image larger than ${maxImageBytes} bytes`);
  }
  const type = sniffImageType(bytes);
  if (!type) throw invalidResponse("has an image that is not PNG, JPEG or WebP");
  return {
    bytes,
    mime: type.mimeType,
    ...(revisedPrompt !== undefined
      ? { revised_prompt: source.scrubber.scrubString(revisedPrompt) }
      : {}),
  };
}

/**
 * Downloads an image a channel answered as a URL. Its own origin is trusted as
 * the operator configured it; an `imageUrlOrigins` origin goes through the
 * address guard; anything else is refused without a request. No key is sent.
 * The image is paid for already: a download that fails the way a blip does
 * (no connection, a 5xx, a 404 before the file is there, a cut) is tried
 * {@link DOWNLOAD_TRIES} times before the task fails.
 */
async function download(url: string, source: GenerationSource): Promise<Buffer> {
  const { channel, signal, scrubber } = source;
  const channelOrigin = new URL(channel.baseUrl).origin;
  let target: URL;
  try {
    target = new URL(url, `${channelOrigin}/`);
  } catch {
    throw invalidResponse("has an image URL that is not a URL");
  }
  if (target.protocol !== "https:" && target.protocol !== "http:") {
    throw invalidResponse("has an image URL that is not http(s)");
  }
  const own = target.origin === channelOrigin;
  if (!own && !channel.imageUrlOrigins.includes(target.origin)) {
    throw invalidResponse(
      `has an image URL on ${scrubber.scrubString(target.origin)}, which is neither the ` +
        `channel's origin nor in its imageUrlOrigins`,
    );
  }
  for (let tries = 1; ; tries += 1) {
    try {
      return await downloadOnce(target, own, source);
    } catch (err) {
      if (!(err instanceof DownloadBlip)) throw err;
      if (tries >= DOWNLOAD_TRIES) throw err.failure;
      await pause(DOWNLOAD_RETRY_MS * 2 ** (tries - 1), signal);
    }
  }
}

/** Tries of one image download, the first included. */
const DOWNLOAD_TRIES = 3;
/** The pause before a download's second try, doubled before each next one. */
const DOWNLOAD_RETRY_MS = 500;
/** Statuses of an image download worth another try: the file not there yet, or a blip. */
const RETRIED_STATUSES = new Set([404, 408, 425, 429]);

/** A download that failed the way a blip does: worth another try; `failure` if none is left. */
class DownloadBlip extends Error {
  constructor(readonly failure: TaskFailure) {
    super(failure.message);
  }
}

/** Waits `ms`, or throws the abort's reason when `signal` aborts first. */
async function pause(ms: number, signal: AbortSignal): Promise<void> {
  try {
    await delay(ms, undefined, { signal });
  } catch {
    throw signal.reason;
  }
}

/** One try of {@link download}. @throws DownloadBlip, or TaskFailure when another try would not help */
async function downloadOnce(target: URL, own: boolean, source: GenerationSource): Promise<Buffer> {
  const { channel, signal, scrubber } = source;
  try {
    if (!own) assertUrlAllowed(target);
    const dispatcher = source.downloads.agentOf(channel, own);
    const response = await undiciFetch(target, { signal, dispatcher, redirect: "manual" });
    const { status } = response;
    if (status >= 300 && status < 400) {
      await response.body?.cancel().catch(() => undefined);
      throw invalidResponse(
        `has an image URL that redirects (status ${status}); redirects are not followed`,
      );
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      const failure = downloadFailure(`status ${status}`, scrubber);
      throw status >= 500 || RETRIED_STATUSES.has(status) ? new DownloadBlip(failure) : failure;
    }
    return await readCapped(response, channel.maxImageBytes, signal);
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof TaskFailure || err instanceof DownloadBlip) throw err;
    const refusal = forbiddenAddress(err);
    if (refusal) {
      const { message } = downloadFailure(refusal.message, scrubber);
      throw new TaskFailure("invalid_response", message, "upstream_error");
    }
    // No connection, a reset, silence past the channel's imageTimeoutSec.
    throw new DownloadBlip(downloadFailure((err as Error).message, scrubber));
  }
}

/** The task's failure when an image could not be downloaded, for `why`. */
function downloadFailure(why: string, scrubber: KeyScrubber): TaskFailure {
  return new TaskFailure(
    "upstream_error",
    `Could not download the image the upstream channel produced (${scrubber.scrubString(why)}).`,
    "upstream_error",
  );
}

/**
 * An image download within `limit` bytes, up to the image's last byte; over
 * the limit is the channel's `invalid_response`.
 */
async function readCapped(
  response: Awaited<ReturnType<typeof undiciFetch>>,
  limit: number,
  signal: AbortSignal,
): Promise<Buffer> {
  try {
    return await readBodyToEnd(response, limit, new ImageEnd());
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof BodyTooLargeError) {
      throw invalidResponse(`has an image larger than ${limit} bytes`);
    }
    throw new DownloadBlip(
      new TaskFailure(
        "upstream_error",
        "The download of an image the upstream channel produced broke off.",
        "upstream_error",
      ),
    );
  }
}

/** The guard's refusal, thrown directly or wrapped by fetch in `cause`. */
function forbiddenAddress(err: unknown): ForbiddenAddressError | undefined {
  if (err instanceof ForbiddenAddressError) return err;
  const cause = (err as { cause?: unknown } | null)?.cause;
  return cause instanceof ForbiddenAddressError ? cause : undefined;
}

/** A channel's answer that is not what a generation answers. */
export function invalidResponse(what: string): TaskFailure {
  return new TaskFailure(
    "invalid_response",
    `The upstream channel's answer ${what}.`,
    "upstream_error",
  );
}

/** The scrub on every string (keys included) of a parsed JSON value. */
export function scrubDeep(value: unknown, scrubber: KeyScrubber, depth: number): unknown {
  if (typeof value === "string") return scrubber.scrubString(value);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_USAGE_DEPTH) return undefined;
  if (Array.isArray(value)) return value.map((item) => scrubDeep(item, scrubber, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    // defineProperty, so a "__proto__" key stays data and never reaches the prototype.
    Object.defineProperty(out, scrubber.scrubString(key), {
      value: scrubDeep(item, scrubber, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
