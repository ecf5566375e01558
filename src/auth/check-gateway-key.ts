import type { Channel } from "../channels/channel.js";
import type { ChannelClient } from "../channels/channel-client.js";
import { MAX_MODEL_LIST_BYTES, parseModelList } from "../channels/model-list.js";
import { readJsonDocument } from "../channels/read-json-document.js";
import type { GatewayModels } from "./principal.js";

/** What the gateway said about a key. */
export type GatewayVerdict =
  /** 2xx with a model list: the key is good and may use these. */
  | { kind: "accepted"; models: GatewayModels }
  /** 401 or 403: the gateway does not take this key. */
  | { kind: "refused"; status: number }
  /** 429: the key is good or not, the gateway will not say now. */
  | { kind: "rate_limited"; retryAfter?: string }
  /**
   * The gateway could not be asked or gave no usable answer. `reason` is
   * safe to log: an error code or a status, never a message or body that
   * could echo the request (and with it the key).
   */
  | {
      kind: "unavailable";
      reason: string;
      /** The HTTP status, when the gateway answered (a 404: its baseUrl lacks `/v1`?). */
      answered?: number;
    };

/** Options of {@link checkGatewayKey}. */
export interface CheckGatewayKeyOptions {
  channel: Channel;
  /** The client's key, sent as the bearer of this one request and nowhere else. */
  key: string;
  timeoutMs: number;
  client: ChannelClient;
}

/**
 * Asks the gateway's `GET <baseUrl>/models` with the client's key, through
 * the channel client (no redirect followed, the list read up to 4 MiB): what
 * new-api and one-api answer there is exactly the models that key's group
 * may use. Never throws; every outcome is a {@link GatewayVerdict}.
 */
export async function checkGatewayKey(options: CheckGatewayKeyOptions): Promise<GatewayVerdict> {
  const { channel, key } = options;
  let answer;
  try {
    // The gateway bound to this key for one call: the key is the only credential sent.
    answer = await options.client.send([{ ...channel, apiKey: key }], {
      route: "forward_key_check",
      method: "GET",
      path: "/models",
      headers: { accept: "application/json" },
      signal: AbortSignal.timeout(options.timeoutMs),
    });
  } catch (err) {
    return { kind: "unavailable", reason: failureReason(err) };
  }
  const { status } = answer;
  if (status < 200 || status >= 300) {
    answer.discard();
    if (status === 401 || status === 403) return { kind: "refused", status };
    if (status === 429) {
      const retryAfter = answer.headers["retry-after"];
      return {
        kind: "rate_limited",
        retryAfter: typeof retryAfter === "string" ? retryAfter : undefined,
      };
    }
    return { kind: "unavailable", reason: `status ${status}`, answered: status };
  }
  let body: Buffer;
  try {
    body = await readJsonDocument(answer, MAX_MODEL_LIST_BYTES);
  } catch (err) {
    return { kind: "unavailable", reason: failureReason(err) };
  }
  const models = parseModelList(body, channel.name);
  return models
    ? { kind: "accepted", models }
    : { kind: "unavailable", reason: "answer is not a model list", answered: status };
}

/** A loggable name for a failed call: the client's reason, an error code or name, never a message. */
function failureReason(err: unknown): string {
  const error = err as { name?: unknown; code?: unknown; reason?: unknown } | null;
  if (error?.name === "TimeoutError" || error?.name === "AbortError") return "timeout";
  if (error?.code === "upstream_timeout") return "timeout";
  if (typeof error?.reason === "string")
    return error.reason === "too_large" ? "model list too large" : error.reason;
  return typeof error?.name === "string" ? error.name : "network error";
}
