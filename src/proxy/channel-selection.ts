import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { ModelAccess } from "../models/model-access.js";

/**
 * The channels that may serve `model` for `principal`, in the order to try
 * them; empty when the principal may not use the model. The one place the
 * passthrough decides it: a forward key gets its gateway, bound to its key.
 */
export function candidateChannels(
  deps: { access: ModelAccess },
  principal: Principal,
  model: string,
): Channel[] {
  return deps.access.candidates(principal, model);
}

/**
 * The `Authorization` a channel gets for `principal`'s request: the
 * candidate's `apiKey`, which is the channel's own key, or for a forward key
 * the client's own gateway key (`ModelAccess.candidates` bound it), never a
 * configured client's key.
 */
export function upstreamAuthorization(channel: Channel, _principal: Principal): string | undefined {
  return channel.apiKey ? `Bearer ${channel.apiKey}` : undefined;
}
