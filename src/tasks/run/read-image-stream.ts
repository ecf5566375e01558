import { decodeBase64Image } from "../../images/decode-base64-image.js";
import { EventTooLargeError, parseEventStream } from "../../net/parse-event-stream.js";
import { TaskFailure } from "../core/task-failure.js";
import { base64Length } from "../../images/base64-length.js";
import { jsonObjectOf } from "./json-object-of.js";

/** One image a channel's stream carried, decoded and checked. */
export interface StreamedImage {
  bytes: Buffer;
  mime: string;
}

/** What {@link readImageStream} needs besides the body. */
export interface ImageStreamOptions {
  /** The images asked for (`n`): the stream is read until this many `.completed` events came. */
  n: number;
  /** Partial images to keep at most (`partial_images`); more are read and dropped. */
  maxPartials: number;
  /** The largest image, decoded. */
  maxImageBytes: number;
  /** Called with each partial image, in order, before the stream is read further. */
  onPartial(index: number, image: StreamedImage): Promise<void>;
  /** Removes the channel's key from its own text (error messages). */
  scrub(text: string): string;
  /** Called with what was skipped: an event that is no JSON object, a draft that is no image. */
  onSkipped?(what: string): void;
  /**
   * Called once, when the result stands, with the first image of it lost: a completed image
   * that was none, or the end of the stream after some, not all, of its images.
   */
  onDropped?(what: string): void;
  /** The run's own end (its deadline, a cancel): then the images completed so far are not kept. */
  signal?: AbortSignal;
}

/** A streamed generation's result: the `.completed` events' images and their usage (unscrubbed). */
export interface StreamedResult {
  images: StreamedImage[];
  usage?: unknown;
}

/** Room in one event beside its image: the event's other fields. */
const EVENT_OVERHEAD = 64 * 1024;

function invalid(what: string): TaskFailure {
  return new TaskFailure(
    "invalid_response",
    `The upstream channel's event stream ${what}.`,
    "upstream_error",
  );
}

/**
 * Reads a gpt-image stream (`stream: true`) as it arrives:
 * `image_generation.partial_image` / `image_edit.partial_image` events go to
 * `onPartial` one by one; `.completed` events are the result, with their
 * `usage` (summed over several images); an `error` event fails with the
 * channel's own code and message. A completed image that is not PNG, JPEG or
 * WebP or is too large is dropped, the stream read on: the images after it
 * are made and billed too (as the images of a JSON answer are); only a
 * stream none of whose completed images is one fails, `invalid_response`
 * with the first one's reason, as does a stream that ends before an image
 * was completed (a cut image is never a result). An event that is not a
 * JSON object, or a partial image that is no image, is skipped. Once an
 * image was completed, whatever ends the stream before the `n`-th (a cut, an
 * `error` event) ends it with the images completed so far: each is whole,
 * made and billed. What was dropped is told to `onDropped`, the first of it,
 * once the result stands. Only the run's own end (`signal`: a cancel, or the
 * deadline that also ends a silent stream) throws them away.
 *
 * Reading stops at the `n`-th `.completed` event, the stream then discarded:
 * those images are paid for, and a channel that holds the stream open after
 * them, or sends junk or more images, must not make the task wait out its
 * timeout or fail and throw them away. A `data: [DONE]` ends the stream too
 * (as it does for the passthrough's clients): a channel that made fewer
 * images than `n` (one refused by its moderation, say) and says so, then
 * holds the stream open, completes the task with those it made at once.
 *
 * @throws TaskFailure; the body's own errors (a reset, an abort) are rethrown as they are
 */
export async function readImageStream(
  body: AsyncIterable<Uint8Array>,
  options: ImageStreamOptions,
): Promise<StreamedResult> {
  const images: StreamedImage[] = [];
  const wanted = Math.max(1, options.n);
  let usage: unknown;
  let partials = 0;
  let completed = 0;
  // The first completed image that was none, and the first thing dropped: told once it is known
  // whether any image stands (none: the task fails with that first reason).
  let firstBad: TaskFailure | undefined;
  let dropped: string | undefined;
  const events = parseEventStream(body, base64Length(options.maxImageBytes) + EVENT_OVERHEAD);
  try {
    for await (const event of events) {
      // The channel's own end: whatever it holds open after it is not waited for.
      if (event.data === "[DONE]") break;
      const data = jsonObjectOf(event.data);
      if (event.event === "error") throw channelError(data ?? {}, options);
      // An event that is no JSON object is skipped: the images after it are made and billed.
      if (!data) {
        options.onSkipped?.("an event that is not a JSON object");
        continue;
      }
      const type = typeof data.type === "string" ? data.type : event.event;
      if (type === "error") throw channelError(data, options);
      if (/^image_(generation|edit)\.partial_image$/.test(type)) {
        // A draft that is no image is skipped too: only the result must be one.
        const image = imageOf(data.b64_json, options.maxImageBytes);
        if (!image) {
          options.onSkipped?.("a partial image that is not an image");
          continue;
        }
        if (partials < options.maxPartials) await options.onPartial(partials, image);
        partials += 1;
      } else if (/^image_(generation|edit)\.completed$/.test(type)) {
        completed += 1;
        const image = completedImage(data, options);
        if (image instanceof TaskFailure) {
          firstBad ??= image;
          dropped ??= `image ${completed} of ${wanted} (${image.code})`;
        } else {
          images.push(image);
        }
        // Billed whether or not its image could be had.
        usage = addUsage(usage, data.usage);
        // Leaving the loop returns the body's iterator, which discards the rest of the answer.
        if (completed >= wanted) break;
      }
    }
  } catch (err) {
    const failure =
      err instanceof EventTooLargeError
        ? invalid(`has an event larger than ${err.maxBytes} bytes`)
        : err;
    if (options.signal?.aborted) throw failure;
    if (images.length === 0) throw firstBad ?? failure;
    dropped ??= `the stream's end after ${images.length} of ${wanted} images (${codeOf(failure)})`;
  }
  if (images.length === 0) throw firstBad ?? invalid("ended before the image was completed");
  if (dropped !== undefined) options.onDropped?.(dropped);
  return { images, ...(usage === undefined ? {} : { usage }) };
}

/**
 * A draft's base64 as the image it holds, or undefined when it is none the service keeps (not a
 * string, over `maxImageBytes`, not PNG, JPEG or WebP): drafts are skipped, never fatal.
 */
export function imageOf(b64: unknown, maxImageBytes: number): StreamedImage | undefined {
  if (typeof b64 !== "string" || b64.length === 0) return undefined;
  const image = decodeBase64Image(b64, maxImageBytes);
  return typeof image === "string" ? undefined : image;
}

/** A `.completed` event's image, checked; else the failure that says why it is none. */
function completedImage(
  data: Record<string, unknown>,
  options: ImageStreamOptions,
): StreamedImage | TaskFailure {
  const b64 = data.b64_json;
  if (typeof b64 !== "string" || b64.length === 0) {
    return invalid("has an image event without b64_json");
  }
  const image = decodeBase64Image(b64, options.maxImageBytes);
  if (image === "too_large")
    return invalid(`has an image larger than ${options.maxImageBytes} bytes`);
  if (image === "not_an_image") return invalid("has an image that is not PNG, JPEG or WebP");
  return image;
}

/** An error's code (the channel's own, scrubbed, or the client's), for a log line. */
function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "an error";
}

/** The channel's `error` event, as its answers' errors are: its code and message, scrubbed. */
function channelError(data: Record<string, unknown>, options: ImageStreamOptions): TaskFailure {
  const error = (
    typeof data.error === "object" && data.error !== null ? data.error : data
  ) as Record<string, unknown>;
  const text = (value: unknown, fallback: string, max: number) =>
    options.scrub(typeof value === "string" && value ? value : fallback).slice(0, max);
  return new TaskFailure(
    text(error.code, "upstream_error", 100),
    text(error.message, "The upstream channel reported an error in its event stream.", 2000),
    text(error.type, "upstream_error", 100),
  );
}

/** Sums the numbers of two usage objects (several images), field by field, nested included. */
function addUsage(total: unknown, more: unknown, depth = 0): unknown {
  if (more === undefined || more === null) return total;
  if (total === undefined) return more;
  if (typeof total === "number" && typeof more === "number") return total + more;
  if (depth > 4 || typeof total !== "object" || typeof more !== "object" || total === null) {
    return more;
  }
  const sum: Record<string, unknown> = { ...(total as Record<string, unknown>) };
  for (const [key, value] of Object.entries(more as Record<string, unknown>)) {
    if (key === "__proto__") continue;
    sum[key] = addUsage(sum[key], value, depth + 1);
  }
  return sum;
}
