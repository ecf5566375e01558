import type { Channel } from "./channel.js";
import type { ChannelClient } from "./channel-client.js";
import { MAX_MODEL_LIST_BYTES, parseModelList } from "./model-list.js";
import { readJsonDocument } from "./read-json-document.js";
import { redactUrl } from "../logging/redact-url.js";

/** The `User-Agent` of a check's request. */
export const CHECK_USER_AGENT = "image-task-sidecar (model-list check)";

/** Longest one channel check may take. */
const CHECK_TIMEOUT_MS = 10_000;

/** What a channel's `GET <baseUrl>/models` showed. */
export interface ChannelCheck {
  /** The channel as configured: its place in `channels` and its name. */
  index: number;
  name: string;
  /**
   * Models the configuration routes to the channel by name (`channels[].models`
   * without globs) that its list lacks: `check-config --probe` fails on them;
   * a running service reports nothing (a gateway may serve a model it does not list).
   */
  missing?: string[];
  /** `"ok"`, or what was wrong in a few words (for `/readyz`). */
  status: "ok" | string;
  /**
   * The line a person reads (a log warning, `check-config --probe`), naming
   * the field to fix: `channels[0].baseUrl: GET http://host:3000/models
   * answered 404; does baseUrl end in /v1?`. Absent when all is well.
   */
  problem?: string;
  /** The HTTP status the channel answered, when it answered. */
  answered?: number;
}

/**
 * Asks a channel for its model list, as every OpenAI-compatible gateway
 * serves it at `<baseUrl>/models`, with the channel's own key: a list means
 * the base URL and the key are right. A 404 most often means a base URL
 * without its `/v1` (new-api's most common mistake), which the line says; a
 * channel that answered anything is never called unreachable. A channel
 * without a key of its own (a forward-mode gateway that takes its users'
 * keys) that answers 401 or 403 is where it should be. Never throws.
 */
export async function checkChannel(
  client: ChannelClient,
  channel: Channel,
  index: number,
): Promise<ChannelCheck> {
  const url = `${shownUrl(channel.baseUrl)}/models`;
  const base = { index, name: channel.name };
  const field = `channels[${index}]`;
  let answer;
  try {
    answer = await client.send([channel], {
      route: "channel_check",
      method: "GET",
      path: "/models",
      // Says in a gateway's logs what the periodic calls are.
      headers: { accept: "application/json", "user-agent": CHECK_USER_AGENT },
      signal: AbortSignal.timeout(Math.min(channel.timeoutMs, CHECK_TIMEOUT_MS)),
    });
  } catch (err) {
    const reason = failureReason(err);
    return {
      ...base,
      status: `could not be reached (${reason})`,
      problem: `${field}.baseUrl: GET ${url} could not be reached (${reason})`,
    };
  }
  const { status } = answer;
  if (status === 404) {
    answer.discard();
    const hint = /\/v1$/.test(channel.baseUrl) ? "" : "; does baseUrl end in /v1?";
    return {
      ...base,
      answered: status,
      status: `answered 404 to GET /models${hint}`,
      problem: `${field}.baseUrl: GET ${url} answered 404${hint}`,
    };
  }
  if ((status === 401 || status === 403) && !channel.apiKey) {
    answer.discard();
    return { ...base, answered: status, status: "ok" };
  }
  if (status === 401 || status === 403) {
    answer.discard();
    return {
      ...base,
      answered: status,
      status: `answered ${status}: the channel refused its apiKey`,
      problem: `${field}.apiKey: GET ${url} answered ${status}: the channel refused the key`,
    };
  }
  if (status < 200 || status >= 300) {
    answer.discard();
    return {
      ...base,
      answered: status,
      status: `answered ${status} to GET /models`,
      problem: `${field}.baseUrl: GET ${url} answered ${status}`,
    };
  }
  const body = await readJsonDocument(answer, MAX_MODEL_LIST_BYTES).catch(() => undefined);
  const list = body && parseModelList(body, channel.name);
  if (!list) {
    return {
      ...base,
      answered: status,
      status: `answered ${status} without a model list`,
      problem: `${field}.baseUrl: GET ${url} answered ${status} without a model list; is it an OpenAI-compatible /v1 base URL?`,
    };
  }
  // The models the configuration names one by one must be there (globs match what is).
  const missing = channel.patterns.filter((model) => !model.includes("*") && !list.ids.has(model));
  return { ...base, answered: status, status: "ok", ...(missing.length ? { missing } : {}) };
}

/** The base URL with any credentials in it (user part, query) masked, for a line a person reads. */
function shownUrl(baseUrl: string): string {
  return redactUrl(baseUrl).replace(/\/+$/, "");
}

/** A loggable name for a call that got no answer: the client's reason, never a message. */
function failureReason(err: unknown): string {
  const error = err as { name?: unknown; code?: unknown; reason?: unknown } | null;
  if (error?.name === "TimeoutError" || error?.name === "AbortError") return "no answer in time";
  if (error?.code === "upstream_timeout") return "no answer in time";
  if (typeof error?.reason === "string") return error.reason;
  return typeof error?.name === "string" ? error.name : "network error";
}
