import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { ChannelRegistry, ModelInfo } from "../channels/channel-registry.js";
import type { Config } from "../config/config-schema.js";
import { createGroupAccess } from "./group-access.js";

/**
 * Which models a principal may see and use, and which channels (with which
 * credential) serve it. The one place that knows a forward key from a
 * configured one: routes ask it and never read `principal.group`.
 */
export interface ModelAccess {
  /**
   * Whether the principal may use `model`: its group's patterns, or for a
   * forward key the gateway's list for that key. Says nothing about whether
   * a channel serves it (see {@link candidates}).
   */
  allows(principal: Principal, model: string): boolean;
  /**
   * The channels to try for the principal's call to `model`, in order, each
   * carrying the credential to send as its `apiKey`: the channel's own key,
   * or for a forward key the gateway bound to the client's key. Empty when
   * the model is not the principal's or no channel serves it: answer
   * `model_not_found`.
   */
  candidates(principal: Principal, model: string): Channel[];
  /**
   * Channels for a call made later on someone's behalf (a task run), access
   * already checked: with `credential` (the unsealed forward key) the
   * gateway bound to it, else the channels serving `model` with their own keys.
   */
  route(model: string, credential?: string): Channel[];
  /**
   * The channel named `name`, as the principal calls it, for a follow-up on
   * an object that channel created (`GET /v1/responses/{id}`): the gateway
   * bound to a forward key, or a channel with its own key. `undefined` when
   * the principal cannot call that channel.
   */
  channelFor(principal: Principal, name: string): Channel | undefined;
  /** `GET /v1/models`: what the principal may see, sorted by id, no duplicates. */
  list(principal: Principal): Promise<ModelInfo[]>;
}

/** Dependencies of {@link createModelAccess}. */
export interface ModelAccessDeps {
  groups: Config["groups"];
  /** The channels configured keys and JWTs use (`channelsForOwnKeys`). */
  registry: ChannelRegistry;
  /** Forward mode's gateway (`auth.forward.channel`), when on. */
  forwardChannel?: Channel;
}

export function createModelAccess(deps: ModelAccessDeps): ModelAccess {
  const groups = createGroupAccess(deps.groups);
  const { registry, forwardChannel } = deps;

  /** The gateway with the client's key in place of its own, for this one call. */
  const bound = (model: string, credential: string): Channel[] =>
    forwardChannel?.serves(model) ? [withCredential(forwardChannel, credential)] : [];

  const allows = (principal: Principal, model: string): boolean =>
    principal.upstream
      ? principal.upstream.models.ids.has(model)
      : groups.allows(principal.group, model);

  return {
    allows,
    candidates(principal, model) {
      if (!allows(principal, model)) return [];
      return principal.upstream
        ? bound(model, principal.upstream.credential.reveal())
        : registry.candidates(model);
    },
    route(model, credential) {
      return credential === undefined ? registry.candidates(model) : bound(model, credential);
    },
    channelFor(principal, name) {
      if (principal.upstream) {
        return forwardChannel?.name === name
          ? withCredential(forwardChannel, principal.upstream.credential.reveal())
          : undefined;
      }
      return registry.channels.find((channel) => channel.name === name);
    },
    async list(principal) {
      const { upstream } = principal;
      if (upstream) {
        // The gateway's list, narrowed by the forward channel's own `models` (`["*"]`: all).
        return upstream.models.list.filter((model) => forwardChannel?.serves(model.id) ?? false);
      }
      const all = await registry.listModels();
      return all.filter((model) => groups.allows(principal.group, model.id));
    },
  };
}

/**
 * A per-call copy of `channel` whose `apiKey` is the client's key: the
 * channel client then sends (as the bearer) and hides (the scrub of echoed
 * keys) the right key unchanged.
 */
function withCredential(channel: Channel, credential: string): Channel {
  return { ...channel, apiKey: credential };
}
