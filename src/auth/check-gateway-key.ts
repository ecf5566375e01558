import type { Channel } from "../channels/channel.js";
import type { ChannelClient } from "../channels/channel-client.js";
import type { ModelInfo } from "../channels/channel-registry.js";
import type { GatewayModels } from "./principal.js";

/** Largest model list read from a gateway; real ones are tens of KiB. */
const MAX_MODEL_LIST_BYTES = 4 * 1024 * 1024;

/** `created` for a listed model the gateway gave no date for. */
const LISTED_AT = Math.floor(Date.UTC(2024, 0, 1) / 1000);

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
  | { kind: "unavailable"; reason: string };

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
    return { kind: "unavailable", reason: `status ${status}` };
  }
  let body: Buffer;
  try {
    body = await answer.read(MAX_MODEL_LIST_BYTES);
  } catch (err) {
    return { kind: "unavailable", reason: failureReason(err) };
  }
  const models = parseModelList(body, channel.name);
  return models
    ? { kind: "accepted", models }
    : { kind: "unavailable", reason: "answer is not a model list" };
}

/**
 * An OpenAI model list (`{data: [{id, created?, owned_by?}]}`) as
 * {@link GatewayModels}: sorted by id, first of each id kept, entries without
 * a string id skipped. `undefined` when the body is not such a list.
 */
export function parseModelList(body: Buffer, channelName: string): GatewayModels | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return undefined;
  const byId = new Map<string, ModelInfo>();
  for (const item of data as unknown[]) {
    if (typeof item !== "object" || item === null) continue;
    const { id, created, owned_by: ownedBy } = item as Record<string, unknown>;
    if (typeof id !== "string" || id === "" || byId.has(id)) continue;
    byId.set(id, {
      id,
      object: "model",
      created: typeof created === "number" && Number.isFinite(created) ? created : LISTED_AT,
      owned_by: typeof ownedBy === "string" ? ownedBy : channelName,
    });
  }
  const list = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { ids: new Set(byId.keys()), list };
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
