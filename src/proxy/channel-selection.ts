import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import type { GroupAccess } from "../models/group-access.js";

/**
 * The channels that may serve `model` for `principal`, in the order to try
 * them; empty when the key's group does not allow the model. The one place
 * that decides it (a forward mode narrows it to its own channel here).
 */
export function candidateChannels(
  deps: { registry: ChannelRegistry; access: GroupAccess },
  principal: Principal,
  model: string,
): Channel[] {
  return deps.access.allows(principal.group, model) ? deps.registry.candidates(model) : [];
}

/**
 * The `Authorization` a channel gets for `principal`'s request: the
 * channel's own key, never the client's. The one place that decides it (a
 * forward mode sends the client's own gateway key here).
 */
export function upstreamAuthorization(channel: Channel, _principal: Principal): string | undefined {
  return channel.apiKey ? `Bearer ${channel.apiKey}` : undefined;
}
