import type { ChannelAnswer } from "../../channels/channel-answer.js";
import { ChannelError } from "../../channels/channel-error.js";
import type { KeyScrubber } from "../../channels/key-scrubber.js";
import { readJsonDocument } from "../../channels/read-json-document.js";
import { base64Length } from "../../images/base64-length.js";
import { EventTooLargeError, parseEventStream } from "../../net/parse-event-stream.js";
import { TaskFailure } from "../core/task-failure.js";
import { invalidResponse } from "./decode-generation.js";
import { isObject, jsonObjectOf } from "./json-object-of.js";
import { nestsDeeperThan } from "./nests-deeper-than.js";
import { isEventStream } from "./read-streamed-answer.js";

type Json = Record<string, unknown>;

/** Room beside the images in one event (a final response holds every output item). */
const EVENT_OVERHEAD_BYTES = 4 * 1024 * 1024;
/** Images one event may hold at most (a final response repeats each result). */
const IMAGES_PER_EVENT = 4;
/** A whole stream may be this many of its largest events. */
const EVENTS_OF_MAX_SIZE = 16;
/**
 * Deepest nesting kept from a channel's answer: the request's own limit (128) with room for
 * what wraps its echo (an event's `response`, its output items).
 */
const MAX_ANSWER_DEPTH = 256;
/** Error bodies are read this far for their message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** The largest event read from a channel's Responses stream, in characters. */
function maxEventBytes(answer: ChannelAnswer): number {
  return IMAGES_PER_EVENT * base64Length(answer.channel.maxImageBytes) + EVENT_OVERHEAD_BYTES;
}

/**
 * A channel's answer to a Responses call that asked for a stream, as the
 * events it holds, in order, each parsed and scrubbed of the channel's key:
 * the events of a `text/event-stream` as they arrive, or a plain JSON answer
 * (a channel that does not stream) as the one Response object it is (no
 * `type`), up to a `data: [DONE]`. What a channel sends is bounded; a stream that breaks off is
 * `invalid_response`, one that goes silent `upstream_timeout` (never a second
 * channel: this one has answered); an abort is rethrown as its reason.
 */
export async function* readResponseEvents(
  answer: ChannelAnswer,
  signal: AbortSignal,
  /** Called with what was skipped: an event that is no JSON object. */
  onSkipped?: (what: string) => void,
): AsyncGenerator<Json> {
  const limit = maxEventBytes(answer);
  try {
    if (!isEventStream(answer)) {
      // Read to the object's end, not the answer's: one held open after it does not cost it.
      yield parseObject((await readJsonDocument(answer, limit)).toString("utf8"), answer.scrubber);
      return;
    }
    const body = answer.chunks({ maxBytes: EVENTS_OF_MAX_SIZE * limit });
    for await (const event of parseEventStream(body, limit)) {
      // The channel's own end (the passthrough's clients stop there too): a stream held open
      // after it, without its final response, fails now, not at the task's timeout.
      if (event.data === "[DONE]") return;
      const parsed = parseEvent(event.data, answer.scrubber);
      // An event that is no JSON object is skipped: the final event holds the whole response,
      // which the channel has made (and billed) whatever came before it.
      if (parsed === undefined) {
        onSkipped?.("an event that is not a JSON object");
        continue;
      }
      if (typeof parsed.type !== "string") parsed.type = event.event;
      yield parsed;
    }
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof EventTooLargeError) throw invalidResponse("has an event too large to keep");
    if (err instanceof ChannelError) throw new TaskFailure(err.code, err.message, "upstream_error");
    throw err;
  }
}

/** A plain answer's JSON, free of the channel's key. */
function parseObject(text: string, scrubber: KeyScrubber): Json {
  let parsed: unknown;
  try {
    parsed = JSON.parse(scrubber.scrubString(text));
  } catch {
    throw invalidResponse("is not valid JSON");
  }
  if (!isObject(parsed)) throw invalidResponse("is not a JSON object");
  return shallowEnough(parsed);
}

/** A stream event's JSON, free of the channel's key; undefined when it is no JSON object. */
function parseEvent(text: string, scrubber: KeyScrubber): Json | undefined {
  const parsed = jsonObjectOf(scrubber.scrubString(text));
  return parsed && shallowEnough(parsed);
}

/** @throws TaskFailure `invalid_response` when it nests deeper than the service keeps */
function shallowEnough(value: Json): Json {
  if (nestsDeeperThan(value, MAX_ANSWER_DEPTH)) {
    throw invalidResponse(`nests JSON deeper than ${MAX_ANSWER_DEPTH} levels`);
  }
  return value;
}

/**
 * The channel's refusal of a Responses call as the task's failure: its own
 * code, message and type (scrubbed of its key), or one made from the status.
 */
export async function responseRefusal(
  answer: ChannelAnswer,
  signal: AbortSignal,
): Promise<TaskFailure> {
  let text = "";
  try {
    text = (await readJsonDocument(answer, MAX_ERROR_BODY_BYTES)).toString("utf8");
  } catch {
    if (signal.aborted) throw signal.reason;
  }
  const scrub = (value: string) => answer.scrubber.scrubString(value);
  let code = answer.status === 429 ? "rate_limit_exceeded" : "upstream_error";
  let message = `The upstream channel answered with status ${answer.status}.`;
  let type = "upstream_error";
  try {
    const error = (JSON.parse(text) as { error?: Record<string, unknown> }).error;
    if (typeof error?.code === "string" && error.code) code = error.code;
    if (typeof error?.message === "string" && error.message) message = error.message;
    if (typeof error?.type === "string" && error.type) type = error.type;
  } catch {
    // Not an OpenAI error body: the status-based message stands.
  }
  return new TaskFailure(
    scrub(code).slice(0, 100),
    scrub(message).slice(0, 2000),
    scrub(type).slice(0, 100),
  );
}
