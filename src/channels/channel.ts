import type { ChannelConfig } from "../config/config-schema.js";
import type { AsyncDialect } from "../config/schema/channel-schema.js";
import { compileModelPatterns, hasGlob } from "./model-pattern.js";

/** A configured channel, ready to route to. */
export interface Channel {
  name: string;
  /** The channel's `/v1` base, no trailing slash. */
  baseUrl: string;
  /**
   * The credential the channel client sends as the bearer: the channel's own
   * key, or on a forward key's per-call copy that key. Never logged or returned.
   */
  apiKey?: string;
  patterns: readonly string[];
  serves: (model: string) => boolean;
  /** Whether `patterns` holds a glob (its model list must be fetched). */
  listsByGlob: boolean;
  priority: number;
  weight: number;
  timeoutMs: number;
  imageTimeoutMs: number;
  modelsCacheMs: number;
  /** Origins, besides its own, that its image URLs may be downloaded from (`channels[].imageUrlOrigins`). */
  imageUrlOrigins: readonly string[];
  /** Largest image accepted from it, in bytes (`channels[].maxImageBytes`). */
  maxImageBytes: number;
  /** The async image API an image task's generation runs on (`channels[].async`); none: held. */
  async?: AsyncDialect | undefined;
  /** With {@link async}: the pause between two polls of a job, in ms (`channels[].pollSec`). */
  pollMs: number;
  /** With `async: openai-background`: the Responses model that calls the image tool. */
  responsesModel?: string | undefined;
  /** `channels[].responses.background: native`: `background: true` is sent on to it. */
  nativeBackground: boolean;
}

/** `channels[].pollSec`'s default, for channels built from a config object of earlier releases. */
const DEFAULT_POLL_SEC = 3;

/**
 * Builds a {@link Channel} from its config. `baseUrl` must already be set
 * (demo channels get theirs when the demo server starts).
 */
export function createChannel(
  config: Omit<ChannelConfig, "pollSec" | "responses"> &
    Partial<Pick<ChannelConfig, "responses">> & { baseUrl: string; pollSec?: number },
): Channel {
  return {
    name: config.name,
    baseUrl: config.baseUrl.replace(/\/+$/, ""),
    apiKey: config.apiKey || undefined,
    patterns: config.models,
    serves: compileModelPatterns(config.models),
    listsByGlob: hasGlob(config.models),
    priority: config.priority,
    weight: config.weight,
    timeoutMs: config.timeoutSec * 1000,
    imageTimeoutMs: config.imageTimeoutSec * 1000,
    modelsCacheMs: config.modelsCacheSec * 1000,
    imageUrlOrigins: config.imageUrlOrigins,
    maxImageBytes: config.maxImageBytes,
    async: config.async,
    pollMs: (config.pollSec ?? DEFAULT_POLL_SEC) * 1000,
    responsesModel: config.responsesModel,
    nativeBackground: config.responses?.background === "native",
  };
}
