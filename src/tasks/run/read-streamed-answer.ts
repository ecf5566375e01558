import type { ChannelAnswer } from "../../channels/channel-answer.js";
import { ChannelError } from "../../channels/channel-error.js";
import type { GeneratedImage } from "../core/generated-image.js";
import { readImageStream, type StreamedImage } from "./read-image-stream.js";
import { TaskFailure } from "../core/task-failure.js";
import { base64Length } from "../../images/base64-length.js";
import { scrubDeep } from "./decode-generation.js";

/** What a streamed run asks of {@link readStreamedAnswer}. */
export interface StreamedRun {
  /** Images asked for (`n`). */
  n: number;
  /** Partial images asked for per image (`partial_images`). */
  partialImages: number;
  signal: AbortSignal;
  /** Called with each partial image, in order; the stream is read on once it settles. */
  onPartial(index: number, image: StreamedImage): Promise<void>;
  /** Called with what the stream held that was skipped (see {@link readImageStream}). */
  onSkipped?(what: string): void;
  /**
   * Called once the result stands with the first image of it lost (a completed image that was
   * none, the stream's end before its `n`-th image), the others kept.
   */
  onDropped?(what: string): void;
}

/** Room in the whole stream beside its images: the events' other fields. */
const STREAM_OVERHEAD_BYTES = 256 * 1024;

/** Whether a channel answered a stream request with an event stream (else: plain JSON, read as such). */
export function isEventStream(answer: ChannelAnswer): boolean {
  return /^text\/event-stream\b/i.test(answer.headers["content-type"] ?? "");
}

/**
 * A channel's `text/event-stream` answer to a run that asked for partial
 * images, read as it arrives (see {@link readImageStream}), within what `n`
 * images and their partial images take. Its usage and texts are scrubbed of
 * the channel's key. A stream that breaks off before its first image is the
 * channel client's `invalid_response` (never a second channel: this one has
 * answered); one that goes silent, its `upstream_timeout`; after an image, it
 * ends with the images made. An abort (the deadline, a cancel) is rethrown as its reason.
 */
export async function readStreamedAnswer(
  answer: ChannelAnswer,
  run: StreamedRun,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { maxImageBytes } = answer.channel;
  const n = Math.max(1, run.n);
  const images = n * (run.partialImages + 1);
  const maxBytes = images * (base64Length(maxImageBytes) + STREAM_OVERHEAD_BYTES);
  const scrub = (text: string) => answer.scrubber.scrubString(text);
  try {
    const result = await readImageStream(answer.chunks({ maxBytes }), {
      n,
      // At most what was asked for, whatever `n`: a record stays small.
      maxPartials: run.partialImages,
      maxImageBytes,
      onPartial: run.onPartial,
      scrub,
      signal: run.signal,
      ...(run.onSkipped ? { onSkipped: run.onSkipped } : {}),
      ...(run.onDropped ? { onDropped: run.onDropped } : {}),
    });
    const usage = scrubDeep(result.usage, answer.scrubber, 0);
    return {
      images: result.images,
      // Key-free in every string and name, and no deeper than a plain answer's usage is kept.
      ...(usage === undefined ? {} : { usage }),
    };
  } catch (err) {
    if (run.signal.aborted) throw run.signal.reason;
    if (err instanceof ChannelError) throw new TaskFailure(err.code, err.message, "upstream_error");
    throw err;
  }
}
