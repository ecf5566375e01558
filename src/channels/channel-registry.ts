import type { Logger } from "pino";
import type { Channel } from "./channel.js";
import type { ChannelClient } from "./channel-client.js";
import { orderCandidates } from "./order-candidates.js";
import { readJsonDocument } from "./read-json-document.js";
import { LISTED_AT, MAX_MODEL_LIST_BYTES, parseModelList, type ModelInfo } from "./model-list.js";

export type { ModelInfo } from "./model-list.js";

/** Routes models to channels and lists what the channels serve. */
export interface ChannelRegistry {
  readonly channels: readonly Channel[];
  /** Channels serving `model`, in the order to try them for this request. */
  candidates(model: string): Channel[];
  /**
   * Every model some channel serves, sorted by id, no duplicates. Glob
   * channels are asked for their own `/v1/models` (cached per channel).
   */
  listModels(): Promise<ModelInfo[]>;
  /**
   * Whether `channel` names `model` itself: an exact id of its config, or one
   * of its last fetched `/v1/models` (for a glob). Synchronous, for bounded
   * metric labels: a client's made-up id that only matches a glob is not.
   */
  lists(channel: Channel, model: string): boolean;
}

/** Dependencies of {@link createChannelRegistry}. */
export interface ChannelRegistryDeps {
  channels: readonly Channel[];
  logger: Logger;
  /** Asks glob channels for their `/models`. */
  client: ChannelClient;
  now?: () => number;
}

/** Longest a model list may take: `GET /v1/models` waits for it. */
const MAX_LIST_WAIT_MS = 10_000;

export function createChannelRegistry(deps: ChannelRegistryDeps): ChannelRegistry {
  const s: RegistryState = {
    deps,
    now: deps.now ?? Date.now,
    cache: new Map(),
    listed: new Map(),
  };
  const { listed } = s;
  const exactIds = new Map(
    deps.channels.map((channel) => [
      channel.name,
      new Set(channel.patterns.filter((pattern) => !pattern.includes("*"))),
    ]),
  );
  return {
    channels: deps.channels,
    candidates(model) {
      return orderCandidates(deps.channels.filter((channel) => channel.serves(model)));
    },
    lists(channel, model) {
      return (
        (exactIds.get(channel.name)?.has(model) ?? false) ||
        (listed.get(channel.name)?.has(model) ?? false)
      );
    },
    listModels: () => listModels(s),
  };
}

/** What the registry's model listing keeps. */
interface RegistryState {
  deps: ChannelRegistryDeps;
  now: () => number;
  /** Each glob channel's model list, as fetched (or being fetched) at `at`. */
  cache: Map<string, { at: number; models: Promise<ModelInfo[]> }>;
  /** Ids each glob channel listed on its last successful fetch. */
  listed: Map<string, ReadonlySet<string>>;
}

async function listModels(s: RegistryState): Promise<ModelInfo[]> {
  const pending: Array<Promise<ModelInfo[]>> = [];
  for (const channel of s.deps.channels) pending.push(channelModels(s, channel));
  const lists = await Promise.all(pending);
  const byId = new Map<string, ModelInfo>();
  for (const model of lists.flat()) if (!byId.has(model.id)) byId.set(model.id, model);
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** A channel's models: its exact ids, and for a glob channel what it lists (cached). */
function channelModels(s: RegistryState, channel: Channel): Promise<ModelInfo[]> {
  const { cache, now } = s;
  const exact = channel.patterns
    .filter((pattern) => !pattern.includes("*"))
    .map((id) => toModelInfo({ id }, channel));
  if (!channel.listsByGlob) return Promise.resolve(exact);
  const hit = cache.get(channel.name);
  if (hit && now() - hit.at < channel.modelsCacheMs) return hit.models;
  const models = fetchChannelModels(s.deps, channel).then(
    (fetched) => {
      s.listed.set(channel.name, new Set(fetched.map((model) => model.id)));
      return [...fetched, ...exact];
    },
    () => {
      // A failed listing is not cached, so the next request tries again.
      cache.delete(channel.name);
      return exact;
    },
  );
  cache.set(channel.name, { at: now(), models });
  return models;
}

/** The channel's own `GET /v1/models`, cut to the ids it serves. */
async function fetchChannelModels(
  deps: ChannelRegistryDeps,
  channel: Channel,
): Promise<ModelInfo[]> {
  try {
    const answer = await deps.client.send([channel], {
      route: "models",
      method: "GET",
      path: "/models",
      headers: { accept: "application/json" },
      signal: AbortSignal.timeout(Math.min(channel.timeoutMs, MAX_LIST_WAIT_MS)),
    });
    if (answer.status < 200 || answer.status >= 300) {
      answer.discard();
      throw new Error(`status ${answer.status}`);
    }
    const listed = parseModelList(
      await readJsonDocument(answer, MAX_MODEL_LIST_BYTES),
      channel.name,
    );
    // Said in the service's words: a parser's message would quote the channel's body.
    if (!listed) throw new Error("not a model list");
    return listed.list.filter((model) => channel.serves(model.id));
  } catch (err) {
    deps.logger.warn(
      { channel: channel.name, err: reasonOf(err) },
      "could not list the channel's models; showing its exact ids only",
    );
    throw err;
  }
}

function toModelInfo(
  item: { id: string; created?: unknown; owned_by?: unknown },
  channel: Channel,
) {
  return {
    id: item.id,
    object: "model" as const,
    created: typeof item.created === "number" ? item.created : LISTED_AT,
    owned_by: typeof item.owned_by === "string" ? item.owned_by : channel.name,
  };
}

/** A loggable reason for a failed listing: the client's reason, or the error's own message. */
function reasonOf(err: unknown): string {
  const reason = (err as { reason?: unknown } | null)?.reason;
  return typeof reason === "string" ? reason : (err as Error).message;
}
