import type { ChannelAnswer } from "../../channels/channel-answer.js";
import type { DownloadAgents } from "../../channels/download-agents.js";
import { base64Length } from "../../images/base64-length.js";
import { parseEventStream, type ServerSentEvent } from "../../net/parse-event-stream.js";
import type { TaskRecord } from "../core/task-record.js";
import { invalidResponse } from "./decode-generation.js";
import type { JobDialect, JobState } from "./job-dialect.js";
import { jsonObjectOf } from "./json-object-of.js";
import { imageOf, type StreamedImage } from "./read-image-stream.js";

/** Room in one event, and in the whole stream per image, beside its image. */
const EVENT_OVERHEAD_BYTES = 256 * 1024;

/**
 * A background response's event stream (`background: true` with `stream:
 * true`, asked for when the task wants partial images), once its first events
 * named the response: its id, and the events still to come.
 */
export interface BackgroundStream {
  id: string;
  events: AsyncIterator<ServerSentEvent>;
}

/**
 * Reads a streamed submission's answer until an event names the response
 * (`response.created`, `response.queued`): the id to keep before anything else.
 * @throws TaskFailure `invalid_response` when the stream ends naming none
 */
export async function openBackgroundStream(
  answer: ChannelAnswer,
  task: TaskRecord,
): Promise<BackgroundStream> {
  const { maxImageBytes } = answer.channel;
  const inputs = (task.inputs ?? []).reduce((sum, input) => sum + base64Length(input.bytes), 0);
  const perImage = base64Length(maxImageBytes) + EVENT_OVERHEAD_BYTES;
  const maxBytes = ((task.partialImages ?? 0) + 2) * perImage + inputs;
  const events = parseEventStream(answer.chunks({ maxBytes }), perImage + inputs)[
    Symbol.asyncIterator
  ]();
  for (;;) {
    const next = await events.next();
    if (next.done) throw invalidResponse("to a submission names no job id");
    const response = jsonObjectOf(next.value.data)?.response as Record<string, unknown> | undefined;
    if (typeof response?.id === "string" && response.id.length > 0) {
      return { id: response.id, events };
    }
  }
}

/**
 * Reads the rest of a background response's stream: each partial image to
 * `onPartial` (decoded and checked; at most `maxPartials`), then its end (`response.completed`,
 * `.failed`, `.incomplete`, `.cancelled`) as the job's state. Undefined when
 * the stream ended or broke first (an `error` event, a cut): the job runs on
 * at the channel, and is polled.
 */
export async function readBackgroundStream(
  stream: BackgroundStream,
  dialect: JobDialect,
  answer: ChannelAnswer,
  options: {
    signal: AbortSignal;
    /** Where image URLs in the final response are downloaded from. */
    downloads: DownloadAgents;
    /** Hears an image of the final response that could not be had, the others kept. */
    onSkipped?: (what: string) => void;
    onPartial?: (index: number, image: StreamedImage) => Promise<void>;
    /** Partial images kept at most (the task's `partial_images`); later ones are read and dropped. */
    maxPartials?: number;
  },
): Promise<JobState | undefined> {
  const { channel, scrubber } = answer;
  let kept = 0;
  for (;;) {
    let next: IteratorResult<ServerSentEvent>;
    try {
      next = await stream.events.next();
    } catch {
      if (options.signal.aborted) throw options.signal.reason;
      return undefined;
    }
    if (next.done) return undefined;
    const data = jsonObjectOf(next.value.data);
    const type = typeof data?.type === "string" ? data.type : next.value.event;
    if (!data || type === "error") return undefined;
    if (type === "response.image_generation_call.partial_image") {
      const image = imageOf(data.partial_image_b64, channel.maxImageBytes);
      const index = typeof data.partial_image_index === "number" ? data.partial_image_index : 0;
      // As many as were asked for, whatever the channel sends: a record stays small.
      if (image && options.onPartial && kept < (options.maxPartials ?? Infinity)) {
        kept += 1;
        await options.onPartial(index, image);
      }
      continue;
    }
    const response = data.response as Record<string, unknown> | undefined;
    if (!/^response\.(completed|failed|incomplete|cancelled)$/.test(type) || !response) continue;
    const state = await dialect.stateOf({
      status: 200,
      body: response,
      source: {
        channel,
        scrubber,
        requested: 1,
        signal: options.signal,
        downloads: options.downloads,
        ...(options.onSkipped ? { onSkipped: options.onSkipped } : {}),
      },
    });
    if (state.kind !== "running") return state;
  }
}
